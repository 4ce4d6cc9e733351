// Remote ranks over SSH, through libssh2 inside etrun. Each remote rank is a local stub process
// (etrun re-executed as `etrun __ssh_rank ...`) that hands its remote command and its stdout and
// stderr to its host's SshHost (ssh_host.h: one SSH connection per host, in etrun) and exits with
// the remote exit status; so RankSet treats it like any local rank: pipes, process group,
// SIGTERM/SIGKILL, parent-death signal and the guardian all apply.
// On the remote side a small POSIX sh wrapper runs the command in its own session (setsid) and
// kills that process group when the channel's stdin closes: when etrun stops the rank (the
// channel gets EOF), when etrun or the stub dies, or when the connection drops, no remote
// process is left behind (horovodrun's ssh leaves them running, spec §9.14).
#ifndef ETRUN_LAUNCHER_SSH_SSH_RANK_H_
#define ETRUN_LAUNCHER_SSH_SSH_RANK_H_

#include <string>
#include <vector>

#include "launcher/remote_starter.h"

namespace etrun::launcher {

// argv[1] that selects the helper mode.
inline constexpr char kSshRankMode[] = "__ssh_rank";

struct SshTarget {
  std::string host;
  int port = 22;
  std::string identity_file;   // -i; empty: ssh-agent, then ~/.ssh/id_{ed25519,ecdsa,rsa}
  bool strict_host_keys = false;
  int connect_timeout_s = 10;
  // While ranks run on it, a connection silent this long (no keepalive answered) is lost.
  double host_timeout_s = 3;
};

// The exit code of a rank whose host cannot serve it (no route to the launcher, the named
// interface missing there): one line on its stderr says which host and what fixes it.
inline constexpr int kHostNetworkFailure = 255;

// The remote shell command for `rank`: cd to its cwd, then the wrapper, which exports its env
// ("K=V", quoted here) and runs its argv in its own session, killing it grace_s seconds after
// SIGTERM once stdin closes. Every piece is single-quoted: nothing is re-parsed remotely.
// With rank.network.resolve, the wrapper first finds the launcher address the host reaches (the
// client address of the SSH connection it runs under when `ssh_connection`, else the one given)
// and the host's interface toward it (the longest-prefix route in /proc/net/route, read with
// awk: nothing beyond POSIX sh and awk is needed there; 127/8 is "lo"), and sets the named
// variables to them; with require_interface, it checks that interface exists there. Either
// failing exits kHostNetworkFailure with one line.
std::string RemoteCommand(const RemoteRank& rank, bool ssh_connection);

// The awk program RemoteCommand runs over /proc/net/route (`awk -v a=<IPv4>`): prints the
// interface to reach `a` on, or nothing. Exposed for tests.
const char* RouteAwkProgram();

// The stub's argv (after the program path): the mode, its host's SshHost socket, a label for
// messages ("host:port") and the remote command.
std::vector<std::string> SshRankArgs(const std::string& socket_name, const std::string& label,
                                     const std::string& remote_command);

// The stub (SshRankArgs, parsed by cli/stub_main.h): runs `remote_command` through the SshHost
// at `socket_name`; returns the exit code to exit with (the remote command's, 128+N for signal N,
// or 255 for an SSH failure, reported as one line on stderr naming `label`). SIGTERM, SIGINT and
// SIGHUP ask the SshHost to stop the remote command (EOF on its stdin).
int RunSshRank(const std::string& socket_name, const std::string& label,
               const std::string& remote_command);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_SSH_RANK_H_
