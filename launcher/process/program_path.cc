#include "launcher/process/program_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include "launcher/process/environment.h"

namespace etrun::launcher {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string CommandCannotRun(const std::vector<std::string>& command,
                             const std::vector<std::string>& environment) {
  std::string err;
  if (!FindProgram(command.at(0), EnvValue(environment, "PATH"), &err).empty()) return "";
  return "cannot run '" + command[0] + "': " + err + ": check the command and PATH";
}

std::string FindProgram(const std::string& name, const std::string& path_env, std::string* err,
                        const std::string& cwd) {
  if (name.empty()) {
    *err = "the command is empty";
    return "";
  }
  // A relative path is the child's: from `cwd` when it has one to enter.
  struct stat st;
  std::string base = !cwd.empty() && stat(cwd.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? cwd : "";
  if (!base.empty() && base.back() != '/') base += '/';
  if (name.find('/') != std::string::npos) {
    std::string file = name.front() == '/' ? name : base + name;
    if (IsExecutableFile(file)) return file;
    *err = stat(file.c_str(), &st) != 0 ? "no such file" : "not an executable file";
    return "";
  }
  std::string path = path_env.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_env;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    std::string dir = path.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    // Built by appends: GCC 12 misreports `dir = "."` and `dir + "/" + name` under -Wrestrict.
    if (dir.empty()) dir.push_back('.');
    std::string candidate = dir.front() == '/' ? std::string() : base;
    candidate += dir;
    candidate += '/';
    candidate += name;
    if (IsExecutableFile(candidate)) return candidate;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  *err = "command not found in PATH";
  return "";
}

}  // namespace etrun::launcher
