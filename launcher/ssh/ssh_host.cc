#include "launcher/ssh/ssh_host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <libssh2.h>
#include <spdlog/spdlog.h>

#include "launcher/ssh/ssh_connect.h"

namespace etrun::launcher {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSshFailure = 255;
constexpr size_t kReadChunk = 32 << 10;

int SignalNumber(const std::string& name) {
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && name == abbrev) return sig;
  }
  return 0;
}

// A connection and the channels the host's ranks run on it.
struct Session : SshConnection {
  int channels = 0;
  int max_channels = INT_MAX;  // lowered when the server refuses one more (sshd's MaxSessions)
  Clock::time_point next_keepalive;
  // A command on the host that prints a byte every second: while it runs, silence means the
  // link is cut or the host frozen (TCP keepalives are answered by a frozen host's kernel, and
  // libssh2 keeps SSH keepalive answers forever). Null: not started, or ended.
  LIBSSH2_CHANNEL* heartbeat = nullptr;
  bool heartbeat_tried = false;
  Clock::time_point opened = Clock::now();
  Clock::time_point last_heard;  // the heartbeat's last byte
};

// Runs on the host for Session::heartbeat; ends with the channel (echo fails once it closes).
// Through sh: the login shell that runs it may be csh or fish.
constexpr char kHeartbeatCommand[] = "exec sh -c 'while echo; do sleep 1; done'";
// A session's heartbeat starts once it has carried ranks this long: a short job never pays for
// the extra remote shell (its login scripts run too), and until then TCP finds a cut link.
constexpr std::chrono::seconds kHeartbeatAfter{1};

struct Client {
  int sock = -1;  // the stub's connection
  bool requested = false;
  std::string command;
  int fds[2] = {-1, -1};  // the rank's stdout and stderr pipes
  Session* session = nullptr;
  LIBSSH2_CHANNEL* channel = nullptr;
  std::string pending[2];  // output the pipe would not take yet
  bool done = false;
};

}  // namespace

struct SshHost::State {
  State(const SshTarget& t, std::shared_ptr<std::atomic<bool>> flag,
        std::shared_ptr<std::mutex> mutex, std::shared_ptr<std::vector<std::string>> queue)
      : target(t), unreachable(std::move(flag)), detached_mutex(std::move(mutex)),
        detached(std::move(queue)) {}
  ~State();

  void Run(int listen_fd, int wake_fd);
  void Accept(int listen_fd);
  void ReadClient(Client* c);
  void Start(Client* c);
  Session* OpenSession(std::string* err);
  bool Pump(Client* c);
  void Finish(Client* c);
  void Fail(Client* c, const std::string& what);
  void Reply(Client* c, int code, const std::string& line);
  void Drop(Client* c);
  void LoseSession(Session* s, const std::string& why);
  void CloseSession(Session* s);
  std::string Label() const { return SshLabel(target); }
  // Starts the host's heartbeat on `s` unless a session has one (tried once per session; a
  // refusal leaves the host watched by TCP only). False when the host did not answer in time.
  bool StartHeartbeat(Session* s);
  // Reads the heartbeat; loses every session once it was silent --lost-host-timeout with ranks running.
  void CheckLiveness();

  // Drains the wake pipe: false when asked to stop; queued detached commands become clients.
  bool Wake(int wake_fd);

  SshTarget target;
  std::shared_ptr<std::atomic<bool>> unreachable;
  std::shared_ptr<std::mutex> detached_mutex;
  std::shared_ptr<std::vector<std::string>> detached;  // guarded by *detached_mutex
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::unique_ptr<Client>> clients;
  std::string last_failure;
  Clock::time_point last_failure_time;
  char buffer[kReadChunk];
};

SshHost::State::~State() {
  for (auto& c : clients) Drop(c.get());
  while (!sessions.empty()) CloseSession(sessions.back().get());  // erases it
}

Session* SshHost::State::OpenSession(std::string* err) {
  auto s = std::make_unique<Session>();
  if (!OpenSshConnection(target, s.get(), err)) return nullptr;
  int interval = std::max(1, target.connect_timeout_s / 2);
  libssh2_keepalive_config(s->ssh, 0, static_cast<unsigned>(interval));
  s->next_keepalive = Clock::now() + std::chrono::seconds(interval);
  spdlog::debug("{}: connected", Label());
  unreachable->store(false);
  sessions.push_back(std::move(s));
  return sessions.back().get();
}

bool SshHost::State::StartHeartbeat(Session* s) {
  // One per host: a cut link or a frozen host silences every connection to it.
  for (const auto& other : sessions) {
    if (other->heartbeat != nullptr) return true;
  }
  if (s->heartbeat_tried) return true;
  s->heartbeat_tried = true;
  // A host running ranks that cannot open a channel within --lost-host-timeout is lost, as one
  // whose heartbeat went silent (the session is unusable after a timed-out call anyway).
  int timeout_ms = static_cast<int>(target.host_timeout_s * 1000);
  LIBSSH2_CHANNEL* channel = nullptr;
  int rc = AwaitSsh(s, [&] {
    channel = libssh2_channel_open_session(s->ssh);
    return channel != nullptr ? 0 : libssh2_session_last_errno(s->ssh);
  }, timeout_ms);
  if (rc == 0) rc = AwaitSsh(s, [&] { return libssh2_channel_exec(channel, kHeartbeatCommand); }, timeout_ms);
  if (rc == LIBSSH2_ERROR_TIMEOUT) return false;
  if (rc != 0) {
    if (channel != nullptr) AwaitSsh(s, [&] { return libssh2_channel_free(channel); }, 1000);
    spdlog::debug("{}: no heartbeat ({}): a silent host is found by TCP only", Label(),
                  SshSessionError(s->ssh));
    return true;
  }
  s->heartbeat = channel;
  s->last_heard = Clock::now();
  return true;
}

void SshHost::State::CheckLiveness() {
  auto now = Clock::now();
  // Formatted only when a connection is lost (this runs on every turn of the host's loop).
  auto lose_all = [this] {
    std::string why = fmt::format("no answer for {:g} s (--lost-host-timeout)", target.host_timeout_s);
    while (!sessions.empty()) LoseSession(sessions.back().get(), why);  // erases it
  };
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session* s = sessions[i].get();
    if (s->channels > 0 && now - s->opened >= kHeartbeatAfter && !StartHeartbeat(s)) {
      lose_all();
      return;
    }
    while (s->heartbeat != nullptr) {
      ssize_t n = libssh2_channel_read(s->heartbeat, buffer, sizeof(buffer));
      if (n > 0) {
        s->last_heard = now;
        continue;
      }
      if (n == LIBSSH2_ERROR_EAGAIN) break;
      if (n < 0) {
        LoseSession(s, SshSessionError(s->ssh));
        return;  // sessions changed; the others are checked on the next turn
      }
      if (libssh2_channel_eof(s->heartbeat)) {  // its command ended: stop listening to it
        AwaitSsh(s, [&] { return libssh2_channel_free(s->heartbeat); }, 1000);
        s->heartbeat = nullptr;
      }
      break;
    }
    int ranks = 0;
    for (const auto& any : sessions) ranks += any->channels;
    if (s->heartbeat == nullptr || ranks == 0 ||
        now - s->last_heard < std::chrono::duration<double>(target.host_timeout_s)) {
      continue;
    }
    lose_all();
    return;
  }
}

void SshHost::State::CloseSession(Session* s) {
  if (s->heartbeat != nullptr) {
    AwaitSsh(s, [&] { return libssh2_channel_free(s->heartbeat); }, 200);
    s->heartbeat = nullptr;
  }
  CloseSshConnection(s);
  std::erase_if(sessions, [s](const std::unique_ptr<Session>& x) { return x.get() == s; });
}

void SshHost::State::Reply(Client* c, int code, const std::string& line) {
  for (int& fd : c->fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  std::string message = "X" + std::to_string(code) + "\n" + line;
  send(c->sock, message.data(), message.size(), MSG_NOSIGNAL);
  c->done = true;
}

void SshHost::State::Fail(Client* c, const std::string& what) {
  Reply(c, kSshFailure, "etrun: error: " + Label() + ": " + what);
}

// The stub is gone (killed, or etrun is shutting down): stop its remote command.
void SshHost::State::Drop(Client* c) {
  if (c->channel != nullptr) {
    Session* s = c->session;
    AwaitSsh(s, [&] { return libssh2_channel_close(c->channel); }, 1000);
    AwaitSsh(s, [&] { return libssh2_channel_free(c->channel); }, 1000);
    c->channel = nullptr;
    --s->channels;
  }
  for (int& fd : c->fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (c->sock >= 0) close(c->sock);
  c->sock = -1;
  c->done = true;
}

void SshHost::State::LoseSession(Session* s, const std::string& why) {
  for (auto& c : clients) {
    if (c->session != s || c->done) continue;
    c->channel = nullptr;  // freed with the session
    c->session = nullptr;
    // Output already received is kept; what was in flight is lost with the connection.
    for (int stream = 0; stream < 2; ++stream) {
      if (!c->pending[stream].empty() && c->fds[stream] >= 0) {
        int flags = fcntl(c->fds[stream], F_GETFL);
        fcntl(c->fds[stream], F_SETFL, flags & ~O_NONBLOCK);
        [[maybe_unused]] ssize_t n = write(c->fds[stream], c->pending[stream].data(), c->pending[stream].size());
      }
    }
    Fail(c.get(), "connection lost: " + why);
  }
  spdlog::debug("{}: connection lost: {}", Label(), why);
  unreachable->store(true);
  // Nothing more goes over a lost connection: with the socket shut, libssh2's goodbyes fail at
  // once instead of waiting for room to send (EAGAIN), so the session and its channels are freed.
  if (s->sock >= 0) shutdown(s->sock, SHUT_RDWR);
  CloseSession(s);
}

void SshHost::State::Accept(int listen_fd) {
  while (true) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct ucred cred = {};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != getuid() && cred.uid != 0)) {
      close(fd);  // another user's process: it may not run commands as us
      continue;
    }
    auto c = std::make_unique<Client>();
    c->sock = fd;
    clients.push_back(std::move(c));
  }
}

void SshHost::State::ReadClient(Client* c) {
  while (!c->done) {
    // The request may be large (the whole remote command): size it first.
    char first;
    struct iovec peek_iov = {&first, 1};
    struct msghdr peek = {};
    peek.msg_iov = &peek_iov;
    peek.msg_iovlen = 1;
    ssize_t size = recvmsg(c->sock, &peek, MSG_PEEK | MSG_TRUNC);
    if (size < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (size <= 0) {  // the stub exited or was killed
      Drop(c);
      return;
    }
    std::string data(static_cast<size_t>(size), '\0');
    struct iovec iov = {data.data(), data.size()};
    alignas(struct cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(c->sock, &msg, MSG_CMSG_CLOEXEC);
    if (n <= 0) {
      Drop(c);
      return;
    }
    int fds[2] = {-1, -1};
    for (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int received[2] = {-1, -1};
        memcpy(received, CMSG_DATA(cm), std::min<size_t>(count, 2) * sizeof(int));
        for (size_t i = 0; i < count && i < 2; ++i) fds[i] = received[i];
      }
    }
    if (data[0] == 'R' && !c->requested && fds[0] >= 0 && fds[1] >= 0) {
      c->requested = true;
      c->command = data.substr(1);
      for (int i = 0; i < 2; ++i) {
        c->fds[i] = fds[i];
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
      }
      continue;
    }
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
    if (data[0] == 'T' && c->channel != nullptr) {
      // Stop: EOF on the remote command's stdin makes the wrapper stop it (ssh_rank.h).
      if (AwaitSsh(c->session, [&] { return libssh2_channel_send_eof(c->channel); }, 1000) != 0) {
        LoseSession(c->session, "cannot send EOF: " + SshSessionError(c->session->ssh));
        return;
      }
    }
  }
}

void SshHost::State::Start(Client* c) {
  // Ranks that asked together share one connection attempt's fate: a host that just failed is
  // not tried again for each of them (each try may cost the whole connect timeout).
  if (!last_failure.empty() && Clock::now() - last_failure_time < std::chrono::seconds(1)) {
    Fail(c, last_failure);
    return;
  }
  int timeout_ms = target.connect_timeout_s * 1000;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Session* s = nullptr;
    for (auto& candidate : sessions) {
      if (candidate->channels < candidate->max_channels) s = candidate.get();
    }
    std::string err;
    if (s == nullptr && (s = OpenSession(&err)) == nullptr) {
      last_failure = err;
      last_failure_time = Clock::now();
      unreachable->store(true);
      Fail(c, err);
      return;
    }
    LIBSSH2_CHANNEL* channel = nullptr;
    int rc = AwaitSsh(s, [&] {
      channel = libssh2_channel_open_session(s->ssh);
      return channel != nullptr ? 0 : libssh2_session_last_errno(s->ssh);
    }, timeout_ms);
    if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && s->channels > 0) {
      s->max_channels = s->channels;  // the server's MaxSessions: use another connection
      spdlog::debug("{}: the server allows {} channels per connection", Label(), s->channels);
      continue;
    }
    if (rc != 0) {
      LoseSession(s, "cannot open a channel: " + SshSessionError(s->ssh));
      if (!c->done) Fail(c, "cannot open a channel");
      return;
    }
    rc = AwaitSsh(s, [&] { return libssh2_channel_exec(channel, c->command.c_str()); }, timeout_ms);
    if (rc != 0) {
      std::string why = SshSessionError(s->ssh);
      AwaitSsh(s, [&] { return libssh2_channel_free(channel); }, 1000);
      Fail(c, "cannot run the command: " + why);
      return;
    }
    ++s->channels;
    c->session = s;
    c->channel = channel;
    return;
  }
  Fail(c, "the server refused another channel");
}

// Moves what the channel has into the rank's pipes. Returns true when anything moved.
bool SshHost::State::Pump(Client* c) {
  bool progress = false;
  for (int stream = 0; stream < 2; ++stream) {
    std::string& pending = c->pending[stream];
    if (!pending.empty()) {
      ssize_t n = write(c->fds[stream], pending.data(), pending.size());
      if (n > 0) {
        pending.erase(0, static_cast<size_t>(n));
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        pending.clear();  // the reader is gone (etrun gave up on this rank's output)
        close(c->fds[stream]);
        c->fds[stream] = -1;
      }
      if (!pending.empty()) continue;  // back-pressure: the channel's window fills and stops it
    }
    while (c->channel != nullptr) {
      ssize_t n = libssh2_channel_read_ex(c->channel, stream == 0 ? 0 : SSH_EXTENDED_DATA_STDERR,
                                          buffer, sizeof(buffer));
      if (n == LIBSSH2_ERROR_EAGAIN || n == 0) break;
      if (n < 0) {
        LoseSession(c->session, SshSessionError(c->session->ssh));
        return true;
      }
      progress = true;
      if (c->fds[stream] < 0) continue;  // nobody reads it any more: discard
      ssize_t w = write(c->fds[stream], buffer, static_cast<size_t>(n));
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) w = 0;
      if (w < 0) {
        close(c->fds[stream]);
        c->fds[stream] = -1;
        continue;
      }
      if (w < n) {
        pending.assign(buffer + w, static_cast<size_t>(n - w));
        break;
      }
    }
  }
  if (c->channel != nullptr && c->pending[0].empty() && c->pending[1].empty() &&
      libssh2_channel_eof(c->channel)) {
    Finish(c);
    progress = true;
  }
  return progress;
}

void SshHost::State::Finish(Client* c) {
  Session* s = c->session;
  int timeout_ms = target.connect_timeout_s * 1000;
  int rc = AwaitSsh(s, [&] { return libssh2_channel_close(c->channel); }, timeout_ms);
  if (rc == 0) rc = AwaitSsh(s, [&] { return libssh2_channel_wait_closed(c->channel); }, timeout_ms);
  if (rc != 0) {
    // Without the close, the exit status may be missing (libssh2 then reports 0): never guess.
    LoseSession(s, "closing a channel: " + SshSessionError(s->ssh));
    return;
  }
  char* signal_name = nullptr;
  size_t signal_len = 0;
  libssh2_channel_get_exit_signal(c->channel, &signal_name, &signal_len, nullptr, nullptr, nullptr,
                                  nullptr);
  int code;
  if (signal_name != nullptr) {
    int sig = SignalNumber(std::string(signal_name, signal_len));
    code = 128 + (sig != 0 ? sig : SIGTERM);
    free(signal_name);
  } else {
    code = libssh2_channel_get_exit_status(c->channel);
  }
  AwaitSsh(s, [&] { return libssh2_channel_free(c->channel); }, 1000);
  c->channel = nullptr;
  c->session = nullptr;
  --s->channels;
  Reply(c, code, "");
}

bool SshHost::State::Wake(int wake_fd) {
  char bytes[64];
  ssize_t n = read(wake_fd, bytes, sizeof(bytes));
  if (n <= 0 || memchr(bytes, 'q', static_cast<size_t>(n)) != nullptr) return false;
  std::vector<std::string> commands;
  {
    std::lock_guard<std::mutex> lock(*detached_mutex);
    commands.swap(*detached);
  }
  for (std::string& command : commands) {
    auto c = std::make_unique<Client>();  // no stub: no socket, output discarded
    c->requested = true;
    c->command = std::move(command);
    clients.push_back(std::move(c));
  }
  return true;
}

void SshHost::State::Run(int listen_fd, int wake_fd) {
  std::vector<struct pollfd> polls;
  bool progress = false;
  while (true) {
    polls.clear();
    polls.push_back({wake_fd, POLLIN, 0});
    polls.push_back({listen_fd, POLLIN, 0});
    for (auto& c : clients) {
      polls.push_back({c->sock, POLLIN, 0});
      for (int stream = 0; stream < 2; ++stream) {
        if (!c->pending[stream].empty()) polls.push_back({c->fds[stream], POLLOUT, 0});
      }
    }
    auto now = Clock::now();
    int timeout_ms = progress ? 0 : 1000;
    for (auto& s : sessions) {
      short events = POLLIN;
      if (libssh2_session_block_directions(s->ssh) & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
      polls.push_back({s->sock, events, 0});
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(s->next_keepalive - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(until, 0, timeout_ms));
    }
    poll(polls.data(), polls.size(), timeout_ms);
    if (polls[0].revents != 0 && !Wake(wake_fd)) return;

    if (polls[1].revents & POLLIN) Accept(listen_fd);
    for (size_t i = 0; i < clients.size(); ++i) {
      Client* c = clients[i].get();
      if (!c->done && c->sock >= 0) ReadClient(c);
      if (!c->done && c->requested && c->channel == nullptr && c->session == nullptr) Start(c);
    }
    progress = false;
    for (size_t i = 0; i < clients.size(); ++i) {
      Client* c = clients[i].get();
      if (!c->done && c->channel != nullptr) progress = Pump(c) || progress;
    }
    std::erase_if(clients, [](const std::unique_ptr<Client>& c) {
      if (c->done && c->sock >= 0) close(c->sock);
      return c->done;
    });
    CheckLiveness();
    now = Clock::now();
    for (size_t i = 0; i < sessions.size(); ++i) {
      Session* s = sessions[i].get();
      if (now < s->next_keepalive) continue;
      int next = 0;
      int rc = libssh2_keepalive_send(s->ssh, &next);
      if (rc != 0 && rc != LIBSSH2_ERROR_EAGAIN) {
        LoseSession(s, SshSessionError(s->ssh));
        break;  // sessions changed
      }
      s->next_keepalive = now + std::chrono::seconds(std::max(next, 1));
    }
  }
}

SshHost::SshHost(SshTarget target) : target_(std::move(target)) {}

std::unique_ptr<SshHost> SshHost::Create(SshTarget target, std::string* err) {
  static std::once_flag init;
  std::call_once(init, [] { libssh2_init(0); });
  std::unique_ptr<SshHost> host(new SshHost(std::move(target)));
  std::random_device random;
  host->socket_name_ = fmt::format("etrun-ssh/{}/{:08x}{:08x}", getpid(), random(), random());
  host->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path + 1, host->socket_name_.data(), host->socket_name_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 +
                                         host->socket_name_.size());
  if (host->listen_fd_ < 0 ||
      bind(host->listen_fd_, reinterpret_cast<struct sockaddr*>(&addr), len) != 0 ||
      listen(host->listen_fd_, SOMAXCONN) != 0 || pipe2(host->wake_fd_, O_CLOEXEC) != 0) {
    *err = std::string("cannot create the SSH helper socket: ") + strerror(errno);
    return nullptr;  // the destructor closes what was opened; no thread runs yet
  }
  host->state_ = std::make_unique<State>(host->target_, host->unreachable_,
                                         host->detached_mutex_, host->detached_);
  SshHost* raw = host.get();
  host->thread_ = std::thread([raw] { raw->state_->Run(raw->listen_fd_, raw->wake_fd_[0]); });
  return host;
}

SshHost::~SshHost() {
  if (thread_.joinable()) {
    char stop = 'q';
    [[maybe_unused]] ssize_t n = write(wake_fd_[1], &stop, 1);
    thread_.join();
  }
  state_.reset();  // closes channels and sessions
  for (int fd : {listen_fd_, wake_fd_[0], wake_fd_[1]}) {
    if (fd >= 0) close(fd);
  }
}

bool SshHosts::SocketFor(const SshTarget& target, std::string* socket, std::string* err) {
  std::string key = target.host + ":" + std::to_string(target.port);
  auto& host = hosts_[key];
  if (host == nullptr) host = SshHost::Create(target, err);
  if (host == nullptr) {
    hosts_.erase(key);
    return false;
  }
  *socket = host->socket_name();
  return true;
}

}  // namespace etrun::launcher

namespace etrun::launcher {

void SshHost::RunDetached(const std::string& command) {
  {
    std::lock_guard<std::mutex> lock(*detached_mutex_);
    detached_->push_back(command);
  }
  char wake = 'c';
  [[maybe_unused]] ssize_t n = write(wake_fd_[1], &wake, 1);
}

bool SshHosts::RunDetached(const std::string& host, const std::string& command) {
  bool any = false;
  for (const auto& [key, ssh_host] : hosts_) {
    if (key.substr(0, key.rfind(':')) != host) continue;
    ssh_host->RunDetached(command);
    any = true;
    break;  // one connection per host runs it
  }
  return any;
}

bool SshHosts::Unreachable(const std::string& host) const {
  for (const auto& [key, ssh_host] : hosts_) {
    if (key.substr(0, key.rfind(':')) == host && ssh_host->unreachable()) return true;
  }
  return false;
}

}  // namespace etrun::launcher
