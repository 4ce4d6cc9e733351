// A host's own part of a pre-flight (--preflight): what a rank of the job needs there, checked
// with the environment the rank would get: its program (and, for an interpreter, its script), the
// launcher's rendezvous port, and the address its peers should probe (the one Gloo will use).
// The agent runs it on its host; the launcher on its own machine. Blocks up to `timeout` (the
// connect to the store); any thread.
#ifndef ETRUN_LAUNCHER_PREFLIGHT_SELF_CHECK_H_
#define ETRUN_LAUNCHER_PREFLIGHT_SELF_CHECK_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::launcher::preflight {

struct SelfCheck {
  std::vector<std::string> problems;  // one phrase each, "" none
  std::string probe_ip;               // where peers probe this host ("" when none was found)
  int probe_port = 0;
};

// `argv`, `env` ("K=V") and `cwd` as the rank would run. The store is the env's
// HOROVOD_GLOO_RENDEZVOUS_ADDR and _PORT, etrun's (a name there is not checked: the agent cannot
// look names up). The probe address is that of the interface the env
// names for Gloo (HOROVOD_GLOO_IFACE, GLOO_SOCKET_IFNAME), else the one this machine reaches the
// store from, else its first that is not loopback.
SelfCheck CheckSelf(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::string& cwd, std::chrono::milliseconds timeout);

// "problem <text>" lines and a "probe <ip>:<port>" line, and back (false for a line it cannot read).
std::string SelfCheckText(const SelfCheck& check);
bool ParseSelfCheckText(std::string_view text, SelfCheck* check);

}  // namespace etrun::launcher::preflight

#endif  // ETRUN_LAUNCHER_PREFLIGHT_SELF_CHECK_H_
