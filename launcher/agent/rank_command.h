// The command a host's agent runs for one rank (POSIX sh, run by the agent's /bin/sh -c in the
// rank's own process group): cd to the rank's directory, set its environment over the login's
// the agent inherited, find its network facts there, and exec its command. Nothing beyond POSIX sh
// and awk is needed on the host. Pure.
#ifndef ETRUN_LAUNCHER_AGENT_RANK_COMMAND_H_
#define ETRUN_LAUNCHER_AGENT_RANK_COMMAND_H_

#include <string>
#include <vector>

#include "launcher/remote_starter.h"

namespace etrun::launcher::agent {

// The exit code of a rank whose host cannot serve it (no route to the launcher, the named
// interface missing there): one line on its stderr says which host and what fixes it.
inline constexpr int kHostNetworkFailure = 255;

// The agent's command for `rank`: cd to its cwd, export its env ("K=V", quoted here) and exec its
// argv. Every piece is single-quoted: nothing is re-parsed remotely.
// With rank.network.resolve, it first finds the launcher address the host reaches (the client
// address of the SSH connection the agent runs under when `ssh_connection`, else the one given)
// and the host's interface toward it (the longest-prefix route in /proc/net/route, read with
// awk; 127/8 is "lo"), and sets the named variables to them; with require_interface, it checks
// that interface exists there. Either failing exits kHostNetworkFailure with one line.
std::string RankCommand(const RemoteRank& rank, bool ssh_connection);

// The awk program RankCommand runs over /proc/net/route (`awk -v a=<IPv4>`): prints the
// interface to reach `a` on, or nothing. Exposed for tests.
const char* RouteAwkProgram();

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_RANK_COMMAND_H_
