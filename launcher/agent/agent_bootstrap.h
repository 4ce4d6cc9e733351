// The command that starts a host's agent (POSIX sh, run by the host's login shell over the host's
// connection; busybox's sh and applets are enough, and it needs no /dev/null). It runs nothing it has not verified: a
// candidate — the agent beside the launcher's etrun at the same path on the host, the agent in
// the per-user cache, etrun-agent on PATH — runs only when its SHA-256 (the host's openssl dgst,
// else sha256sum) is the launcher's agent's, and when it and every directory above it are owned by the user or root
// and writable by nobody else (a sticky directory such as /tmp excepted for the directories);
// symlinks are resolved first. When none will do, it says so with kNeedLine on stdout, receives the
// agent's bytes from its stdin (exactly `size`) into a new file of its own in the cache
// (${XDG_CACHE_HOME:-$HOME/.cache}/etrun/agent, made 0700, under a name unique across hosts that
// share it), checks them, names the file by its hash without ever replacing a verified file another
// host may be running (a hard link), checks it again and runs it. What cannot be used or written
// safely is one line on stderr, naming it and the fix, and exit 255.
#ifndef ETRUN_LAUNCHER_AGENT_AGENT_BOOTSTRAP_H_
#define ETRUN_LAUNCHER_AGENT_AGENT_BOOTSTRAP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/agent/agent.h"

namespace etrun::launcher::agent {

// The agent the launcher brings: its bytes' SHA-256 (hex), their size, and the path of the agent
// beside the launcher's own etrun, where a host that shares the launcher's files has it too.
struct AgentRef {
  std::string sha256;
  size_t size = 0;
  std::string beside;
};

// The bootstrap for `agent`, running it with `options`. `env` ("K=V") is set for the agent (and
// so its ranks) over the login's: the sanitizers' options of a sanitized build, so that its agents
// report where its tests look. One line: `sh -s` reads it whole before running any of it.
std::string BootstrapCommand(const AgentRef& agent, const AgentOptions& options,
                             const std::vector<std::string>& env = {});

// The variables of `environment` that BootstrapCommand passes on: *SAN_OPTIONS.
std::vector<std::string> AgentEnvironment(const std::vector<std::string>& environment);

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_AGENT_BOOTSTRAP_H_
