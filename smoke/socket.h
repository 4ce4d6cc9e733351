// Blocking-style TCP over non-blocking sockets with deadlines, for etrun-smoke's store client and
// ring: every wait is a poll() with a timeout, so a vanished peer is an error, never a hang.
// IPv4 only, as etrun's rendezvous store. Errors name the peer and the errno text. Fd is a
// move-only owner; the functions are thread-safe on distinct sockets.
#ifndef ETRUN_SMOKE_SOCKET_H_
#define ETRUN_SMOKE_SOCKET_H_

#include <netinet/in.h>

#include <chrono>
#include <string>
#include <string_view>

namespace etrun::smoke {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset();

 private:
  int fd_ = -1;
};

// Connects to host:port (a dotted quad or a name) before `deadline`; *out is non-blocking with
// TCP_NODELAY. On failure *err says "cannot connect to <host>:<port>: <why>". In connect.cc, as it
// resolves names (getaddrinfo): not for statically linked programs.
bool Connect(const std::string& host, int port, Clock::time_point deadline, Fd* out,
             std::string* err);
// The same for a dotted quad only (no name lookup), and for an address already made.
bool ConnectIpv4(const std::string& ip, int port, Clock::time_point deadline, Fd* out,
                 std::string* err);
bool ConnectTo(const sockaddr_in& addr, Clock::time_point deadline, Fd* out, std::string* err);

// Listens on 0.0.0.0 on a free port, returned in *port, with `backlog` connections queued at
// most (a pre-flight's listener takes every peer's connect at once: SOMAXCONN).
bool Listen(Fd* out, int* port, std::string* err, int backlog = 16);

// Takes one connection from `listener` before `deadline`; non-blocking with TCP_NODELAY.
bool Accept(const Fd& listener, Clock::time_point deadline, Fd* out, std::string* err);

// The local IPv4 address of a connected socket (the address the peer sees), e.g. "10.0.0.5".
std::string LocalAddress(const Fd& fd);

// Writes all of `data` / reads exactly `size` bytes before `deadline`. A peer that closes
// first is an error ("connection closed by peer").
bool WriteAll(const Fd& fd, std::string_view data, Clock::time_point deadline, std::string* err);
bool ReadExact(const Fd& fd, char* data, size_t size, Clock::time_point deadline,
               std::string* err);

// Reads what is available (waiting until `deadline` for the first byte) and appends it to
// *data. Returns false with *err empty at end of stream, false with *err set on errors.
bool ReadSome(const Fd& fd, std::string* data, Clock::time_point deadline, std::string* err);

// Waits until `fd` is ready for `events` (POLLIN/POLLOUT) or `deadline` passes (false, *err
// "timed out").
bool WaitReady(const Fd& fd, short events, Clock::time_point deadline, std::string* err);

// Milliseconds from now to `deadline` for poll(): 0 when past, capped to fit an int.
int PollTimeoutMs(Clock::time_point deadline);

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_SOCKET_H_
