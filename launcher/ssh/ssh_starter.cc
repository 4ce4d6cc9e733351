#include "launcher/ssh/ssh_starter.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/child.h"
#include "launcher/ssh/remote_shell.h"
#include "launcher/ssh/ssh_rank.h"

namespace etrun::launcher {

namespace {

// etrun itself, re-executed as the stub.
std::string SelfPath() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("etrun");
}

// Runs `command` under /bin/sh with no input or output, not waited for: a grandchild in its own
// session, adopted by init once its parent (waited for here, at once) has exited.
bool RunInBackground(const std::string& command) {
  pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    if (fork() == 0) {
      setsid();
      int null = open("/dev/null", O_RDWR);
      if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
      }
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    _exit(0);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

bool SshStarter::StubArgv(const RemoteRank& rank, std::vector<std::string>* argv, std::string* err) {
  const std::string& shell = rank.remote_shell.empty() ? config_.remote_shell : rank.remote_shell;
  if (!rank.remote_shell.empty()) own_templates_[rank.host] = rank.remote_shell;
  // Over libssh2 the wrapper can read the launcher address from SSH_CONNECTION; a remote shell
  // may pass through other machines (ssh -J, kubectl), so its ranks are told the address.
  // Through srun the exit status comes as a record (remote_shell.h): srun exits 0 when its node
  // fails.
  bool record = !shell.empty() && UsesExitRecord(shell);
  std::string command;
  if (record) {
    RemoteRank recorded = rank;
    recorded.exit_record = true;
    command = RemoteCommand(recorded, /*ssh_connection=*/false);
  } else {
    command = RemoteCommand(rank, /*ssh_connection=*/shell.empty());
  }
  *argv = {SelfPath()};
  if (!shell.empty()) {  // through a command such as kubectl exec
    for (std::string& a : RemoteShellRankArgs(rank.host, RemoteShellCommand(shell, rank.host, command),
                                              record, config_.host_timeout_s,
                                              /*pass_term=*/rank.remote_shell.empty())) {
      argv->push_back(std::move(a));
    }
    return true;
  }
  SshTarget target;
  target.host = rank.host;
  target.port = config_.ssh_port.value_or(22);
  target.identity_file = config_.ssh_identity_file;
  target.strict_host_keys = config_.ssh_strict_host_keys;
  target.connect_timeout_s = config_.ssh_connect_timeout_s;
  target.host_timeout_s = config_.host_timeout_s;
  std::string socket;
  if (!hosts_.SocketFor(target, &socket, err)) return false;
  std::string label = target.host + ":" + std::to_string(target.port);
  for (std::string& a : SshRankArgs(socket, label, command)) argv->push_back(std::move(a));
  return true;
}

bool SshStarter::RunDetached(const std::string& host, const std::string& command) {
  if (config_.remote_shell.empty() && own_templates_.count(host) == 0) {
    return hosts_.RunDetached(host, command);
  }
  // Through srun only (a step ends by itself; another remote shell may need more supervision
  // than a detached process has): the template of the host's ranks, bounded by a timeout.
  auto own = own_templates_.find(host);
  const std::string& shell = own != own_templates_.end() ? own->second : config_.remote_shell;
  if (!UsesExitRecord(shell)) return false;
  return RunInBackground("exec timeout -s KILL " + std::to_string(kDetachedTimeoutS) + " sh -c " +
                         ShellQuote(RemoteShellCommand(shell, host, command)));
}

bool SshStarter::Unreachable(const std::string& host, const ExitStatus& status) const {
  if (!config_.remote_shell.empty() || own_templates_.count(host) != 0) {
    // The remote shell died or failed (ssh's 255), not the rank.
    return status.kind == ExitStatus::Kind::kExited && status.code == kRemoteShellFailure;
  }
  return hosts_.Unreachable(host);
}

}  // namespace etrun::launcher
