#include "launcher/fence.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>

#include "launcher/child.h"

extern char** environ;

namespace etrun::launcher {

std::string FenceCommand(const std::vector<std::string>& addresses) {
  std::string command;
  for (const std::string& a : addresses) {
    command += (command.empty() ? "" : "; ") + std::string("ss -K dst ") + ShellQuote(a) + " >/dev/null 2>&1";
  }
  return command;
}

bool FenceHere(const std::vector<std::string>& addresses) {
  std::string command = FenceCommand(addresses);
  if (command.empty()) return false;
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

}  // namespace etrun::launcher
