#include "discovery/network.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace etrun::discovery {

bool IsLocalHost(const std::string& host, const std::vector<Interface>& interfaces) {
  if (host == "localhost") return true;
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) == 0 && host == hostname) return true;
  auto is_local_address = [&interfaces](const std::string& address) {
    for (const Interface& i : interfaces) {
      if (std::find(i.ipv4.begin(), i.ipv4.end(), address) != i.ipv4.end()) return true;
    }
    return false;
  };
  // A literal address needs no resolver round trip.
  struct in_addr literal;
  if (inet_pton(AF_INET, host.c_str(), &literal) == 1) return is_local_address(host);

  struct addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return false;
  bool local = false;
  for (struct addrinfo* it = result; it != nullptr && !local; it = it->ai_next) {
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<struct sockaddr_in*>(it->ai_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) != nullptr) local = is_local_address(buf);
  }
  freeaddrinfo(result);
  return local;
}

std::vector<uint32_t> ResolveIPv4(const std::string& host) {
  std::vector<uint32_t> out;
  struct in_addr literal;
  if (inet_pton(AF_INET, host.c_str(), &literal) == 1) return {ntohl(literal.s_addr)};
  struct addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return out;
  for (struct addrinfo* r = result; r != nullptr; r = r->ai_next) {
    uint32_t a = ntohl(reinterpret_cast<struct sockaddr_in*>(r->ai_addr)->sin_addr.s_addr);
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  freeaddrinfo(result);
  return out;
}

HostDirectory::HostDirectory(std::vector<Interface> interfaces)
    : interfaces_(std::move(interfaces)) {}

void HostDirectory::Resolve(const std::vector<std::string>& hosts) {
  for (const std::string& host : hosts) {
    auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = cache_.find(host);
      if (it != cache_.end() &&
          (!it->second.ipv4.empty() || now - it->second.resolved_at < kRetryUnresolved)) {
        continue;
      }
      ++lookups_;
    }
    HostInfo info{IsLocalHost(host, interfaces_), ResolveIPv4(host), now};  // unlocked: may block
    std::lock_guard<std::mutex> lock(mutex_);
    cache_[host] = std::move(info);
  }
}

HostInfo HostDirectory::Lookup(const std::string& host) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(host);
    if (it != cache_.end()) return it->second;
    ++misses_;
  }
  Resolve({host});
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.at(host);
}

int HostDirectory::lookups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lookups_;
}

int HostDirectory::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

bool ChooseLocalNics(const std::vector<std::string>& requested,
                     const std::vector<Interface>& interfaces, std::vector<std::string>* nics,
                     std::string* driver_ip, std::string* err) {
  std::vector<const Interface*> chosen;
  if (requested.empty()) {
    for (const Interface& i : interfaces) {
      if (std::find(i.ipv4.begin(), i.ipv4.end(), "127.0.0.1") != i.ipv4.end()) chosen.push_back(&i);
    }
    if (chosen.empty()) {
      *err = "no network interface carries 127.0.0.1: name one with --network-interface";
      return false;
    }
  } else {
    for (const std::string& name : requested) {
      auto found = std::find_if(interfaces.begin(), interfaces.end(),
                                [&name](const Interface& i) { return i.name == name; });
      if (found == interfaces.end()) {
        std::string names;
        for (const Interface& i : interfaces) names += (names.empty() ? "" : ", ") + i.name;
        *err = "--network-interface " + name +
               ": no such interface with an IPv4 address on this machine: choose one of " + names;
        return false;
      }
      chosen.push_back(&*found);
    }
  }
  nics->clear();
  for (const Interface* i : chosen) nics->push_back(i->name);
  *driver_ip = chosen.front()->ipv4.back();
  return true;
}

bool RouteToward(const std::string& host, const std::vector<Interface>& interfaces,
                 std::string* nic, std::string* source_ip, std::string* err) {
  struct addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  struct addrinfo* result = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &result); rc != 0) {
    *err = "cannot resolve host '" + host + "': " + gai_strerror(rc);
    return false;
  }
  char ip[INET_ADDRSTRLEN];
  bool resolved = inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in*>(result->ai_addr)->sin_addr,
                            ip, sizeof(ip)) != nullptr;
  freeaddrinfo(result);
  std::string source;
  if (resolved && RouteTowardIpv4(ip, interfaces, nic, &source)) {
    *source_ip = source;
    return true;
  }
  *err = source.empty() ? "no route to host '" + host + "': name the interface with --network-interface"
                        : "the route to host '" + host + "' leaves from " + source +
                              ", which no interface carries: name the interface with --network-interface";
  return false;
}

bool ChooseListenAddress(const std::vector<std::string>& requested, bool hosts_known,
                         const std::vector<std::string>& remote_hosts, bool remote_shell,
                         const std::vector<Interface>& interfaces, ListenChoice* choice,
                         std::string* err) {
  ListenChoice c;
  if (!requested.empty() || (hosts_known && remote_hosts.empty())) {
    if (!ChooseLocalNics(requested, interfaces, &c.nics, &c.address, err)) return false;
    c.listen = c.address;
    *choice = std::move(c);
    return true;
  }
  c.per_host = true;
  c.listen = "0.0.0.0";
  if (remote_hosts.empty()) {  // none known yet: this machine's ranks talk over the loopback
    if (!ChooseLocalNics({}, interfaces, &c.nics, &c.address, err)) return false;
    *choice = std::move(c);
    return true;
  }
  // This machine's ranks meet the remote ones where the route toward them leaves.
  std::string nic;
  if (!RouteToward(remote_hosts.front(), interfaces, &nic, &c.address, err) &&
      (!remote_shell || !FirstNonLoopback(interfaces, &nic, &c.address))) {
    if (remote_shell) *err += ": name the interface workers reach this machine on with --network-interface";
    return false;
  }
  c.nics = {nic};
  *choice = std::move(c);
  return true;
}

bool RouteTowardAddress(uint32_t address, const std::vector<Interface>& interfaces,
                        std::string* nic, std::string* source_ip) {
  std::string text = Ipv4Text(address);
  std::string unused;
  return !text.empty() && RouteToward(text, interfaces, nic, source_ip, &unused);
}

std::string LauncherAddressToward(const std::vector<uint32_t>& host_ipv4,
                                  const std::vector<Interface>& interfaces) {
  std::string nic, address;
  if (!host_ipv4.empty() && RouteTowardAddress(host_ipv4.front(), interfaces, &nic, &address)) {
    return address;
  }
  return FirstNonLoopback(interfaces, &nic, &address) ? address : "";
}

int FindFreePort(const std::string& address, std::string* err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = std::string("cannot create a socket: ") + strerror(errno);
    return 0;
  }
  struct sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_port = 0;
  if (inet_pton(AF_INET, address.c_str(), &sin.sin_addr) != 1) sin.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(sin);
  int port = 0;
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&sin), sizeof(sin)) == 0 &&
      getsockname(fd, reinterpret_cast<struct sockaddr*>(&sin), &len) == 0) {
    port = ntohs(sin.sin_port);
  } else {
    *err = "cannot find a free port on " + address + ": " + strerror(errno);
  }
  close(fd);
  return port;
}

}  // namespace etrun::discovery
