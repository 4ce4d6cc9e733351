// Raw-socket HTTP helpers for tests of the rendezvous server: they send exactly the bytes a
// Horovod client sends and read responses as Horovod's C++ client does (by Content-Length).
#ifndef ETRUN_TESTS_RENDEZVOUS_HTTP_TEST_UTIL_H_
#define ETRUN_TESTS_RENDEZVOUS_HTTP_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
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

// Horovod's C++ client (HTTPRequest): Host without port, Content-Length always.
inline std::string CppClient(const std::string& method, const std::string& path, const std::string& body = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline int Status(const std::string& response) { return std::stoi(response.substr(9, 3)); }

inline std::string Body(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

}  // namespace etrun::testing

#endif  // ETRUN_TESTS_RENDEZVOUS_HTTP_TEST_UTIL_H_
