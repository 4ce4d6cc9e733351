// SshHost: one remote host's SSH connection, shared by every rank etrun runs there. A thread of
// its own opens one libssh2 session (more only when the server's MaxSessions refuses another
// channel), runs each rank's command on a channel of it, and writes the channel's stdout and
// stderr straight into that rank's output pipes.
//
// A remote rank is still a local process to RankSet: a tiny stub (`etrun __ssh_rank`, see
// ssh_rank.h) that connects to its host's SshHost over a unix socket, hands over its remote
// command and its own stdout/stderr, and exits with the remote exit status once the SshHost
// sends it. Signals, process groups, the guardian and exit codes work as for local ranks:
//   SIGTERM/SIGINT to the stub  -> the channel gets EOF -> the remote wrapper stops the command;
//   the stub killed (SIGKILL)   -> the SshHost closes the channel, with the same effect;
//   etrun killed                -> the TCP connection drops, sshd closes every channel.
// The socket is abstract (nothing on disk to leave behind) and refuses peers of other users.
// A host that stops answering is declared lost after TCP_USER_TIMEOUT (keepalives keep data in
// flight), so its ranks fail instead of hanging.
#ifndef ETRUN_LAUNCHER_SSH_SSH_HOST_H_
#define ETRUN_LAUNCHER_SSH_SSH_HOST_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "launcher/ssh/ssh_rank.h"

namespace etrun::launcher {

class SshHost {
 public:
  // Creates the unix socket stubs connect to and starts the host's thread. The SSH connection
  // itself is made when the first rank asks for it. Returns null and sets *err when the socket
  // cannot be created.
  static std::unique_ptr<SshHost> Create(SshTarget target, std::string* err);
  // Closes every channel (their remote commands are stopped) and the sessions, then joins.
  ~SshHost();
  SshHost(const SshHost&) = delete;
  SshHost& operator=(const SshHost&) = delete;

  // The abstract socket name (without the leading NUL) for the stubs.
  const std::string& socket_name() const { return socket_name_; }

  // True from a failed connection attempt or a lost connection until the next one succeeds:
  // the host's ranks failed because it cannot be reached, not because they crashed.
  bool unreachable() const { return unreachable_->load(); }

  // Runs `command` on the host over its connection, its output discarded; not waited for, best
  // effort (fencing: ElasticPolicy). Any thread.
  void RunDetached(const std::string& command);

 private:
  explicit SshHost(SshTarget target);
  struct State;  // owned by the thread while it runs
  std::shared_ptr<std::atomic<bool>> unreachable_ = std::make_shared<std::atomic<bool>>(false);
  SshTarget target_;
  std::string socket_name_;
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // on [1]: 'q' asks the thread to stop, 'c' to take `detached_`
  std::shared_ptr<std::mutex> detached_mutex_ = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<std::string>> detached_ = std::make_shared<std::vector<std::string>>();
  std::unique_ptr<State> state_;
  std::thread thread_;
};

// The SshHosts of one job, one per (host, port): ranks on the same host share its connection.
class SshHosts {
 public:
  // Sets *socket to the socket for `target`'s host, starting its SshHost on first use. Returns
  // false and sets *err when it cannot be started.
  bool SocketFor(const SshTarget& target, std::string* socket, std::string* err);

  // Whether `host` (any port) is currently unreachable; see SshHost::unreachable.
  bool Unreachable(const std::string& host) const;

  // SshHost::RunDetached on `host`'s connections (any port) that exist; false when none does.
  bool RunDetached(const std::string& host, const std::string& command);

 private:
  std::map<std::string, std::unique_ptr<SshHost>> hosts_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_SSH_HOST_H_
