// Remote ranks through a command instead of SSH (--remote-shell), as Open MPI's plm_rsh_agent:
// `--remote-shell 'kubectl exec -i {host} -n ns --'` starts each remote rank by running that
// command, {host} replaced by the host's name, followed by `sh -c '<the rank's remote command>'`
// (the same wrapper, environment and working directory as over SSH: ssh_rank.h).
//
// Each such rank is a local stub process (etrun re-executed as `etrun __remote_shell_rank ...`)
// that runs the command with a pipe as its stdin and holds the pipe's other end: RankSet treats
// it like any rank (pipes, process group, signals, guardian). SIGTERM/SIGINT/SIGHUP to the stub
// close that pipe: the remote wrapper sees EOF and stops the command (SIGTERM, SIGKILL after the
// grace period); if the stub, the command or etrun dies, the channel closes with the same effect.
// The stub exits with the command's exit code; 255 (ssh's convention) when the remote shell
// itself was killed or failed with 255, which etrun reads as the host being unreachable.
#ifndef ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
#define ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_

#include <string>
#include <vector>

namespace etrun::launcher {

// argv[1] that selects the stub mode.
inline constexpr char kRemoteShellRankMode[] = "__remote_shell_rank";

// The exit code that means "the remote shell failed, not the rank" (as ssh's).
inline constexpr int kRemoteShellFailure = 255;

// Whether `remote_shell` names the host with {host}. Returns false and sets *err otherwise.
bool CheckRemoteShell(const std::string& remote_shell, std::string* err);

// The shell command line that runs `remote_command` on `host` through `remote_shell`.
std::string RemoteShellCommand(const std::string& remote_shell, const std::string& host,
                               const std::string& remote_command);

// The stub's argv after the program path: the mode, the host (for messages) and the command line.
std::vector<std::string> RemoteShellRankArgs(const std::string& host, const std::string& command_line);

// The stub (RemoteShellRankArgs, parsed by cli/stub_main.h): runs `command_line` (which reaches
// `host`) with a pipe as its stdin; returns the exit code to exit with.
int RunRemoteShellRank(const std::string& host, const std::string& command_line);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
