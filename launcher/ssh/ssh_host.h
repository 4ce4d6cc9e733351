// SshHost: one remote host's SSH connection (libssh2), carrying one exec channel: the command that
// starts the host's agent (launcher/agent/agent.h), which runs every rank etrun puts there. A
// thread of its own connects, runs the command and moves bytes between the channel and local
// descriptors the launcher's loop reads and writes like any other stream:
//   the channel's stdin and stdout <-> one end of a socket pair (SshStreams::data),
//   the channel's stderr            --> a pipe (SshStreams::errors), where a failure to connect
//                                       is written too, as one line.
// When the launcher closes its end, the channel gets EOF (the agent stops its ranks and exits)
// and the connection is closed; when the channel ends, the launcher's end reads EOF. SSH
// keepalives keep data in flight, and TCP_USER_TIMEOUT ends a connection whose peer stopped
// acknowledging; whether the host is alive is the agent's heartbeat's to say (agent_link.h), and
// when it is silent, the kernel's word on the connection tells a busy host from a gone one
// (PeerAcking).
// Thread-safe: the owner's calls and the thread share only descriptors.
#ifndef ETRUN_LAUNCHER_SSH_SSH_HOST_H_
#define ETRUN_LAUNCHER_SSH_SSH_HOST_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace etrun::launcher {

struct SshTarget {
  std::string host;
  int port = 22;
  std::string identity_file;   // -i; empty: ssh-agent, then ~/.ssh/id_{ed25519,ecdsa,rsa}
  bool strict_host_keys = false;
  int connect_timeout_s = 10;
};

// "ssh HOST:PORT": how messages name the target.
std::string SshLabel(const SshTarget& target);

// The launcher's ends of an SshHost's streams; the caller owns them.
struct SshStreams {
  int data = -1;    // read: the command's stdout; write: its stdin; close: EOF to it
  int errors = -1;  // read: its stderr, and one line if the connection fails
};

class SshHost {
 public:
  // Starts the thread that connects to `target` and runs `command`. Returns null and sets *err
  // when the local descriptors cannot be made.
  static std::unique_ptr<SshHost> Start(const SshTarget& target, const std::string& command,
                                        SshStreams* streams, std::string* err);
  // Stops the thread: the channel gets EOF and the connection is closed.
  ~SshHost();
  SshHost(const SshHost&) = delete;
  SshHost& operator=(const SshHost&) = delete;

  // True once connecting failed or the connection was lost.
  bool failed() const { return failed_->load(); }

  // The kernel's word on the connection's far end (TCP_INFO): true when it has acknowledged
  // everything sent to it, or something within `window`; false when data sent to it has waited
  // longer than that, or the connection is no longer established; nullopt before the connection
  // is up and after it closed. Any thread.
  std::optional<bool> PeerAcking(std::chrono::milliseconds window) const;

  // The connection's socket, while it is open (-1 otherwise); guarded by its mutex.
  struct Socket {
    std::mutex mutex;
    int fd = -1;
  };

 private:
  SshHost() = default;
  struct Bridge;
  std::shared_ptr<std::atomic<bool>> failed_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<Socket> socket_ = std::make_shared<Socket>();
  int wake_fd_[2] = {-1, -1};  // a byte on [1] stops the thread
  std::thread thread_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_SSH_HOST_H_
