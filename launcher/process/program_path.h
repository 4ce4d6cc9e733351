// Finding a program the way execvp would, before anything is started: so a command that
// cannot run is one line for the user, not a failure of every rank. Thread-compatible.
#ifndef ETRUN_LAUNCHER_PROCESS_PROGRAM_PATH_H_
#define ETRUN_LAUNCHER_PROCESS_PROGRAM_PATH_H_

#include <string>
#include <vector>

namespace etrun::launcher {

// Resolves a command name through `path_env` (a PATH value; empty: /usr/local/bin:/usr/bin:/bin)
// as execvp would; a name with '/' is checked as is. Relative paths (the name's, PATH's) are from
// `cwd`, the child's directory, when it is one ("": this process's). Returns "" and sets *err
// ("command not found in PATH", "no such file", "not an executable file") when there is no
// executable of that name.
std::string FindProgram(const std::string& name, const std::string& path_env, std::string* err,
                        const std::string& cwd = "");

// Whether `command` can run on this machine: its program is found on the PATH of `environment`
// (or is an executable path). Returns "" when it can, else the job's one-line cause:
// "cannot run 'X': <why>: check the command and PATH" (exit code kExitCommandNotFound).
std::string CommandCannotRun(const std::vector<std::string>& command,
                             const std::vector<std::string>& environment);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_PROGRAM_PATH_H_
