#include "events/exit_status.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

namespace etrun {

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) return Signaled(WTERMSIG(wait_status));
  return Exited(WEXITSTATUS(wait_status));
}

std::string ExitStatus::Describe() const {
  if (kind == Kind::kExited) return "exited with code " + std::to_string(code);
  return "was killed by signal " + std::to_string(signal) + " (" + SignalName(signal) + ")";
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace etrun
