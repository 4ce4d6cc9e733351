#include "discovery/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace etrun::discovery {

std::vector<Interface> LocalInterfaces() {
  std::vector<Interface> out;
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (struct ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<struct sockaddr_in*>(it->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) continue;
    auto found = std::find_if(out.begin(), out.end(),
                              [it](const Interface& i) { return i.name == it->ifa_name; });
    if (found == out.end()) {
      out.push_back({it->ifa_name, {}});
      found = out.end() - 1;
    }
    found->ipv4.push_back(buf);
  }
  freeifaddrs(list);
  return out;
}

std::string Ipv4Text(uint32_t address) {
  struct in_addr a;
  a.s_addr = htonl(address);
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, buf, sizeof(buf)) != nullptr ? buf : "";
}

bool FirstNonLoopback(const std::vector<Interface>& interfaces, std::string* nic,
                      std::string* address) {
  for (const Interface& i : interfaces) {
    for (const std::string& a : i.ipv4) {
      if (a.rfind("127.", 0) == 0) continue;
      *nic = i.name;
      *address = a;
      return true;
    }
  }
  return false;
}

bool RouteTowardIpv4(const std::string& ipv4, const std::vector<Interface>& interfaces,
                     std::string* nic, std::string* source_ip) {
  struct sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  if (inet_pton(AF_INET, ipv4.c_str(), &to.sin_addr) != 1) return false;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && connect(fd, reinterpret_cast<struct sockaddr*>(&to), sizeof(to)) == 0;
  struct sockaddr_in local = {};
  socklen_t len = sizeof(local);
  ok = ok && getsockname(fd, reinterpret_cast<struct sockaddr*>(&local), &len) == 0;
  if (fd >= 0) close(fd);
  char buf[INET_ADDRSTRLEN];
  if (!ok || inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf)) == nullptr) return false;
  *source_ip = buf;
  for (const Interface& i : interfaces) {
    if (std::find(i.ipv4.begin(), i.ipv4.end(), buf) != i.ipv4.end()) {
      *nic = i.name;
      return true;
    }
  }
  return false;
}

}  // namespace etrun::discovery
