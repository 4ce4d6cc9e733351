#include "launcher/ssh/ssh_starter.h"

#include <unistd.h>

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

}  // namespace

bool SshStarter::StubArgv(const RemoteRank& rank, std::vector<std::string>* argv, std::string* err) {
  const std::string& shell = rank.remote_shell.empty() ? config_.remote_shell : rank.remote_shell;
  if (!rank.remote_shell.empty()) own_shell_hosts_.insert(rank.host);
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
                                              record, config_.host_timeout_s)) {
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
  return config_.remote_shell.empty() && own_shell_hosts_.count(host) == 0 &&
         hosts_.RunDetached(host, command);
}

bool SshStarter::Unreachable(const std::string& host, const ExitStatus& status) const {
  if (!config_.remote_shell.empty() || own_shell_hosts_.count(host) != 0) {
    // The remote shell died or failed (ssh's 255), not the rank.
    return status.kind == ExitStatus::Kind::kExited && status.code == kRemoteShellFailure;
  }
  return hosts_.Unreachable(host);
}

}  // namespace etrun::launcher
