#include "launcher/ssh/ssh_host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include <libssh2.h>
#include <spdlog/spdlog.h>

#include "launcher/ssh/ssh_connect.h"

namespace etrun::launcher {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 32 << 10;

// Writes what it can of `pending` to non-blocking `fd`; false when the reader is gone.
bool Drain(int fd, std::string* pending) {
  while (!pending->empty()) {
    ssize_t n = write(fd, pending->data(), pending->size());
    if (n > 0) {
      pending->erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    pending->clear();
    return false;
  }
  return true;
}

}  // namespace

// The thread's state: the connection, the channel and the bytes in flight each way.
struct SshHost::Bridge {
  SshTarget target;
  std::string command;
  int data = -1;    // the thread's end of the socket pair
  int errors = -1;  // the stderr pipe's write end
  int wake = -1;
  std::shared_ptr<std::atomic<bool>> failed;
  std::shared_ptr<Socket> socket;  // c.sock, for PeerAcking, while it is open
  SshConnection c;
  LIBSSH2_CHANNEL* channel = nullptr;
  std::string to_channel;   // read from `data`, not yet written to the channel
  std::string to_data;      // the channel's stdout, not yet written to `data`
  std::string to_errors;    // its stderr
  bool data_eof = false;    // the launcher closed its end
  char buffer[kChunk];

  std::string Label() const { return SshLabel(target); }

  void Fail(const std::string& why) {
    failed->store(true);
    to_errors += "etrun: error: " + Label() + ": " + why + "\n";
    int flags = fcntl(errors, F_GETFL);
    fcntl(errors, F_SETFL, flags & ~O_NONBLOCK);
    Drain(errors, &to_errors);
  }

  // Connects and starts the command. False (after Fail) when it could not.
  bool Open() {
    std::string err;
    if (!OpenSshConnection(target, &c, &err)) {
      Fail(err);
      return false;
    }
    int interval = std::max(1, target.connect_timeout_s / 2);
    libssh2_keepalive_config(c.ssh, 0, static_cast<unsigned>(interval));
    int timeout_ms = target.connect_timeout_s * 1000;
    int rc = AwaitSsh(&c, [&] {
      channel = libssh2_channel_open_session(c.ssh);
      return channel != nullptr ? 0 : libssh2_session_last_errno(c.ssh);
    }, timeout_ms);
    if (rc == 0) rc = AwaitSsh(&c, [&] { return libssh2_channel_exec(channel, command.c_str()); }, timeout_ms);
    if (rc != 0) {
      Fail("cannot run etrun's agent: " + SshSessionError(c.ssh));
      return false;
    }
    spdlog::debug("{}: agent channel open", Label());
    std::lock_guard<std::mutex> lock(socket->mutex);
    socket->fd = c.sock;
    return true;
  }

  // Moves bytes every way it can. Returns false when the bridge is over: the channel ended
  // (EOF passed on), the launcher closed its end, or the connection failed.
  bool Pump(bool* progress) {
    // launcher -> channel
    while (!data_eof && to_channel.size() < kChunk) {
      ssize_t n = read(data, buffer, sizeof(buffer));
      if (n > 0) {
        to_channel.append(buffer, static_cast<size_t>(n));
        *progress = true;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      data_eof = true;  // EOF or the launcher's end is gone
    }
    while (!to_channel.empty()) {
      ssize_t n = libssh2_channel_write(channel, to_channel.data(), to_channel.size());
      if (n == LIBSSH2_ERROR_EAGAIN) break;
      if (n < 0) return Lost(SshSessionError(c.ssh));
      to_channel.erase(0, static_cast<size_t>(n));
      *progress = true;
    }
    if (data_eof && to_channel.empty()) return false;
    // channel -> launcher (while the launcher keeps up: the channel's window stops the agent)
    for (int stream = 0; stream < 2; ++stream) {
      std::string& pending = stream == 0 ? to_data : to_errors;
      int fd = stream == 0 ? data : errors;
      if (fd >= 0 && !Drain(fd, &pending) && stream == 0) return false;  // the launcher is gone
      while (pending.empty()) {
        ssize_t n = libssh2_channel_read_ex(channel, stream == 0 ? 0 : SSH_EXTENDED_DATA_STDERR,
                                            buffer, sizeof(buffer));
        if (n == LIBSSH2_ERROR_EAGAIN || n == 0) break;
        if (n < 0) return Lost(SshSessionError(c.ssh));
        *progress = true;
        pending.append(buffer, static_cast<size_t>(n));
        if (fd >= 0) Drain(fd, &pending);
        if (fd < 0) pending.clear();
      }
    }
    if (to_data.empty() && libssh2_channel_eof(channel)) return false;  // the agent exited
    int next = 0;
    int rc = libssh2_keepalive_send(c.ssh, &next);
    if (rc != 0 && rc != LIBSSH2_ERROR_EAGAIN) return Lost(SshSessionError(c.ssh));
    return true;
  }

  bool Lost(const std::string& why) {
    Fail("connection lost: " + why);
    if (c.sock >= 0) shutdown(c.sock, SHUT_RDWR);  // goodbyes fail at once instead of waiting
    return false;
  }

  void Run() {
    if (Open()) {
      std::vector<struct pollfd> polls;
      bool progress = true;
      while (true) {
        if (!Pump(&progress)) break;
        polls.clear();
        polls.push_back({wake, POLLIN, 0});
        short events = POLLIN;
        if (libssh2_session_block_directions(c.ssh) & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
        polls.push_back({c.sock, events, 0});
        short data_events = 0;
        if (!data_eof && to_channel.size() < kChunk) data_events |= POLLIN;
        if (!to_data.empty()) data_events |= POLLOUT;
        polls.push_back({data, data_events, 0});
        if (!to_errors.empty()) polls.push_back({errors, POLLOUT, 0});
        int timeout_ms = progress ? 0 : 1000;
        progress = false;
        poll(polls.data(), polls.size(), timeout_ms);
        if (polls[0].revents != 0) break;
      }
      if (channel != nullptr) {
        // EOF lets the agent stop its ranks; a peer that does not take it (a cut link) gets its
        // socket shut, so that freeing fails at once instead of waiting, and frees anyway.
        int rc = AwaitSsh(&c, [&] { return libssh2_channel_send_eof(channel); }, 200);
        if (rc == 0) rc = AwaitSsh(&c, [&] { return libssh2_channel_close(channel); }, 200);
        if (rc != 0 && c.sock >= 0) shutdown(c.sock, SHUT_RDWR);
        AwaitSsh(&c, [&] { return libssh2_channel_free(channel); }, 200);
        channel = nullptr;
      }
      {
        std::lock_guard<std::mutex> lock(socket->mutex);
        socket->fd = -1;
      }
      CloseSshConnection(&c);
    }
    // The launcher reads EOF on both.
    close(data);
    close(errors);
    data = errors = -1;
  }
};

std::unique_ptr<SshHost> SshHost::Start(const SshTarget& target, const std::string& command,
                                        SshStreams* streams, std::string* err) {
  static std::once_flag init;
  std::call_once(init, [] { libssh2_init(0); });
  int pair[2] = {-1, -1}, errors[2] = {-1, -1};
  std::unique_ptr<SshHost> host(new SshHost());
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0 ||
      pipe2(errors, O_CLOEXEC) != 0 || pipe2(host->wake_fd_, O_CLOEXEC) != 0) {
    *err = std::string("cannot create the SSH connection's descriptors: ") + strerror(errno);
    for (int fd : {pair[0], pair[1], errors[0], errors[1]}) {
      if (fd >= 0) close(fd);
    }
    return nullptr;  // the destructor closes the wake pipe; no thread runs yet
  }
  for (int fd : {pair[1], errors[1]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto bridge = std::make_shared<Bridge>();
  bridge->target = target;
  bridge->command = command;
  bridge->data = pair[1];
  bridge->errors = errors[1];
  bridge->wake = host->wake_fd_[0];
  bridge->failed = host->failed_;
  bridge->socket = host->socket_;
  host->thread_ = std::thread([bridge] { bridge->Run(); });
  streams->data = pair[0];
  streams->errors = errors[0];
  return host;
}

std::optional<bool> SshHost::PeerAcking(std::chrono::milliseconds window) const {
  std::lock_guard<std::mutex> lock(socket_->mutex);
  if (socket_->fd < 0) return std::nullopt;
  struct tcp_info info = {};
  socklen_t len = sizeof(info);
  if (getsockopt(socket_->fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  if (info.tcpi_state != TCP_ESTABLISHED) return false;
  // Nothing waits for an acknowledgement: all that was sent (a ping a second) was acknowledged.
  if (info.tcpi_unacked == 0) return true;
  return info.tcpi_last_ack_recv <= static_cast<uint32_t>(window.count());
}

SshHost::~SshHost() {
  if (thread_.joinable()) {
    char stop = 'q';
    [[maybe_unused]] ssize_t n = write(wake_fd_[1], &stop, 1);
    thread_.join();
  }
  for (int fd : wake_fd_) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace etrun::launcher
