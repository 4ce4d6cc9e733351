#include "smoke/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace etrun::smoke {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// Non-blocking, close-on-exec, no Nagle delay: the ring sends small segments back to back.
void Configure(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Fd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int PollTimeoutMs(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(left)>(left, 0, 1 << 30));
}

bool WaitReady(const Fd& fd, short events, Clock::time_point deadline, std::string* err) {
  for (;;) {
    pollfd p{fd.get(), events, 0};
    int rc = poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return true;  // errors and hang-ups show in the next read or write
    if (rc == 0) {
      *err = "timed out";
      return false;
    }
    if (errno != EINTR) {
      *err = "poll: " + ErrnoText(errno);
      return false;
    }
  }
}

bool ConnectTo(const sockaddr_in& addr, Clock::time_point deadline, Fd* out, std::string* err) {
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
  const std::string where = std::string(ip) + ":" + std::to_string(ntohs(addr.sin_port));
  // Close-on-exec from the start: ranks may be forked on another thread meanwhile.
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *err = "cannot connect to " + where + ": socket: " + ErrnoText(errno);
    return false;
  }
  Configure(fd.get());
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      *err = "cannot connect to " + where + ": " + ErrnoText(errno);
      return false;
    }
    std::string why;
    if (!WaitReady(fd, POLLOUT, deadline, &why)) {
      *err = "cannot connect to " + where + ": " + why;
      return false;
    }
    int error = 0;
    socklen_t len = sizeof(error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      *err = "cannot connect to " + where + ": " + ErrnoText(error);
      return false;
    }
  }
  *out = std::move(fd);
  return true;
}

bool ConnectIpv4(const std::string& ip, int port, Clock::time_point deadline, Fd* out,
                 std::string* err) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    *err = "cannot connect to " + ip + ":" + std::to_string(port) + ": not an IPv4 address and port";
    return false;
  }
  return ConnectTo(addr, deadline, out, err);
}

bool Listen(Fd* out, int* port, std::string* err, int backlog) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd.get(), backlog) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *err = "cannot listen on a TCP port: " + ErrnoText(errno);
    return false;
  }
  Configure(fd.get());
  *port = ntohs(addr.sin_port);
  *out = std::move(fd);
  return true;
}

bool Accept(const Fd& listener, Clock::time_point deadline, Fd* out, std::string* err) {
  for (;;) {
    Fd fd(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      Configure(fd.get());
      *out = std::move(fd);
      return true;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      *err = "accept: " + ErrnoText(errno);
      return false;
    }
    if (!WaitReady(listener, POLLIN, deadline, err)) return false;
  }
}

std::string LocalAddress(const Fd& fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = "";
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) == nullptr) {
    return "";
  }
  return text;
}

bool WriteAll(const Fd& fd, std::string_view data, Clock::time_point deadline, std::string* err) {
  while (!data.empty()) {
    ssize_t n = send(fd.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!WaitReady(fd, POLLOUT, deadline, err)) return false;
    } else {
      *err = errno == EPIPE ? "connection closed by peer" : "send: " + ErrnoText(errno);
      return false;
    }
  }
  return true;
}

bool ReadExact(const Fd& fd, char* data, size_t size, Clock::time_point deadline,
               std::string* err) {
  while (size > 0) {
    ssize_t n = recv(fd.get(), data, size, 0);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0) {
      *err = "connection closed by peer";
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!WaitReady(fd, POLLIN, deadline, err)) return false;
    } else {
      *err = "recv: " + ErrnoText(errno);
      return false;
    }
  }
  return true;
}

bool ReadSome(const Fd& fd, std::string* data, Clock::time_point deadline, std::string* err) {
  char buffer[16 << 10];
  for (;;) {
    ssize_t n = recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n > 0) {
      data->append(buffer, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) {
      err->clear();
      return false;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *err = "recv: " + ErrnoText(errno);
      return false;
    }
    if (!WaitReady(fd, POLLIN, deadline, err)) return false;
  }
}

}  // namespace etrun::smoke
