#include "launcher/fence.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "launcher/process/shell_words.h"

extern char** environ;

namespace etrun::launcher {

std::string FenceCommand(const std::vector<std::string>& addresses,
                         const std::vector<std::string>& mesh_terms, size_t per_command) {
  std::string command;
  auto add = [&command](const std::string& filter) {
    command += (command.empty() ? "" : "; ") + std::string("ss -K ") + ShellQuote(filter) + " >/dev/null 2>&1";
  };
  for (const std::string& a : addresses) add("dst " + a);
  for (size_t at = 0; at < mesh_terms.size(); at += per_command) {
    std::string filter = "(";
    for (size_t i = at; i < std::min(mesh_terms.size(), at + per_command); ++i) {
      filter += (i == at ? " " : " or ") + mesh_terms[i];
    }
    add(filter + " )");
  }
  return command;
}

bool FenceHere(const std::string& command) {
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
