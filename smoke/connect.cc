// Connect() by name: kept apart from socket.cc, whose users include the statically linked
// etrun-agent, where getaddrinfo cannot be used (it needs glibc's shared NSS modules).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string_view>

#include "smoke/socket.h"

namespace etrun::smoke {
namespace {

bool Resolve(const std::string& host, int port, sockaddr_in* addr, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr) {
    *err = "cannot resolve " + host + ": " + gai_strerror(rc);
    return false;
  }
  *addr = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  addr->sin_port = htons(static_cast<uint16_t>(port));
  freeaddrinfo(found);
  return true;
}

}  // namespace

bool Connect(const std::string& host, int port, Clock::time_point deadline, Fd* out,
             std::string* err) {
  sockaddr_in addr{};
  if (!Resolve(host, port, &addr, err)) return false;
  if (ConnectTo(addr, deadline, out, err)) return true;
  // Name the host as the caller did: "cannot connect to store-host:4321: ...".
  std::string shown = host + ":" + std::to_string(port);
  constexpr std::string_view kPrefix = "cannot connect to ";
  size_t colon = err->find(": ", kPrefix.size());  // after "<ip>:<port>", which holds no space
  if (err->starts_with(kPrefix) && colon != std::string::npos) {
    *err = "cannot connect to " + shown + err->substr(colon);
  }
  return false;
}

}  // namespace etrun::smoke
