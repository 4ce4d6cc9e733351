// Raw-socket HTTP helpers for tests of the rendezvous server: they send exactly the bytes a
// Horovod client sends and read responses as Horovod's C++ client does (by Content-Length).
#ifndef ETRUN_TESTS_RENDEZVOUS_HTTP_TEST_UTIL_H_
#define ETRUN_TESTS_RENDEZVOUS_HTTP_TEST_UTIL_H_

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <doctest/doctest.h>

namespace etrun::testing {


// Sends raw bytes on a new connection and reads responses as Horovod's C++ client does: by
// Content-Length. Returns once `responses` complete responses arrived, the server closed, or
// nothing came for 30 s (so that a test whose server never answers fails instead of hanging).
inline std::string Exchange(int port, const std::string& request, bool half_close = false, int responses = 1) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval receive_timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) == 0);
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (half_close) shutdown(fd, SHUT_WR);
  auto complete = [responses](const std::string& r) {
    size_t pos = 0;
    for (int i = 0; i < responses; ++i) {
      size_t end = r.find("\r\n\r\n", pos);
      if (end == std::string::npos) return false;
      size_t cl = r.find("Content-Length: ", pos);
      if (cl == std::string::npos || cl > end) return false;
      pos = end + 4 + std::stoul(r.substr(cl + 16));
      if (r.size() < pos) return false;
    }
    return true;
  };
  std::string response;
  char buf[65536];
  ssize_t n;
  while (!complete(response) && (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

// Sends `request` to 127.0.0.1:port from a child process running as `uid` (its group too) and
// returns what it read until the server closed (at most 30 s). REQUIRES: root.
inline std::string ExchangeAs(uint32_t uid, int port, const std::string& request) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // no doctest here: plain calls, then _exit
    close(out[0]);
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(2);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    timeval receive_timeout{30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(static_cast<uint16_t>(port));
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) _exit(3);
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) _exit(4);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
      if (write(out[1], buf, static_cast<size_t>(n)) != n) _exit(5);
    }
    _exit(0);
  }
  close(out[1]);
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return response;
}

// A connection to 127.0.0.1:port from `source` that sends nothing (until the caller does); -1
// when connect fails.
inline int Connect(int port, const char* source = "127.0.0.1") {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends on `fd` until it closes (or 30 s pass).
inline std::string ReadAll(int fd) {
  timeval receive_timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
  return response;
}

// Horovod's C++ client (HTTPRequest): Host without port, Content-Length always.
inline std::string CppClient(const std::string& method, const std::string& path, const std::string& body = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline int Status(const std::string& response) { return std::stoi(response.substr(9, 3)); }

inline std::string Body(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

}  // namespace etrun::testing

#endif  // ETRUN_TESTS_RENDEZVOUS_HTTP_TEST_UTIL_H_
