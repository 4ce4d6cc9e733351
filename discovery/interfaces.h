// This machine's IPv4 interfaces and the routes out of it, read from the kernel with no name
// lookup (getifaddrs, a UDP connect that sends nothing): what a statically linked agent may use
// on any host (launcher/agent/host_network.h), and what the launcher's own network view builds on
// (network.h). Thread-safe.
#ifndef ETRUN_DISCOVERY_INTERFACES_H_
#define ETRUN_DISCOVERY_INTERFACES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace etrun::discovery {

struct Interface {
  std::string name;               // e.g. "lo", "eth0"
  std::vector<std::string> ipv4;  // dotted quads, in the order the OS lists them
};

// This machine's interfaces that carry at least one IPv4 address, in the OS's order.
std::vector<Interface> LocalInterfaces();

// An IPv4 address in host byte order as a dotted quad.
std::string Ipv4Text(uint32_t address);

// The first interface carrying an IPv4 address outside 127.0.0.0/8, and that address. Returns
// false when there is none.
bool FirstNonLoopback(const std::vector<Interface>& interfaces, std::string* nic,
                      std::string* address);

// The local interface and address the kernel would use to reach the dotted quad `ipv4` (a UDP
// connect; nothing is sent). Returns false when it is no address, no route exists (*source_ip
// then empty), or the route leaves from an address no interface of `interfaces` carries
// (*source_ip then that address).
bool RouteTowardIpv4(const std::string& ipv4, const std::vector<Interface>& interfaces,
                     std::string* nic, std::string* source_ip);

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_INTERFACES_H_
