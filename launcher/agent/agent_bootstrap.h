// The command that starts a host's agent (POSIX sh, run by the host's login shell over the
// host's connection). It looks for an etrun of this very build (AgentId) at the launcher's own
// path, then in the per-user cache, then on PATH, and runs the first it finds as the agent. When
// there is none, nothing is installed by hand: it says so with kNeedLine on stdout, reads the
// launcher's binary from its stdin (exactly `size` bytes), stores it in the cache,
// ${XDG_CACHE_HOME:-$HOME/.cache}/etrun/agent/<id>/etrun, and runs that. A cache it cannot write
// is one line on stderr and exit 255.
#ifndef ETRUN_LAUNCHER_AGENT_AGENT_BOOTSTRAP_H_
#define ETRUN_LAUNCHER_AGENT_AGENT_BOOTSTRAP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/agent/agent.h"

namespace etrun::launcher::agent {

// `path`: the launcher's binary; `id`: its AgentId(); `size`: its size in bytes. `env` ("K=V")
// is set for the agent (and so its ranks) over the login's: the sanitizers' options of a
// sanitized build, so that its agents report where its tests look.
std::string BootstrapCommand(const std::string& path, const std::string& id, size_t size,
                             const AgentOptions& options, const std::vector<std::string>& env = {});

// The variables of `environment` that BootstrapCommand passes on: *SAN_OPTIONS.
std::vector<std::string> AgentEnvironment(const std::vector<std::string>& environment);

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_AGENT_BOOTSTRAP_H_
