// This machine's network view: its IPv4 interfaces (interfaces.h), whether a host name means this machine
// (spec §2.3), the NICs and driver address workers are told (spec §3.5), free ports. Reads the
// OS (getifaddrs, getaddrinfo) but never sends a packet. Thread-safe.
#ifndef ETRUN_DISCOVERY_NETWORK_H_
#define ETRUN_DISCOVERY_NETWORK_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "discovery/interfaces.h"

namespace etrun::discovery {

// True when `host` names this machine: "localhost", this machine's hostname, or a name whose IPv4
// addresses include one assigned to a local interface. 127.0.0.2 is *not* local unless an
// interface carries exactly that address (tests use such addresses as separate hosts).
// Unresolvable names are not local.
bool IsLocalHost(const std::string& host, const std::vector<Interface>& interfaces);

// The IPv4 addresses `host` resolves to, host byte order (a dotted quad needs no lookup); empty
// when it does not resolve. Blocking (getaddrinfo).
std::vector<uint32_t> ResolveIPv4(const std::string& host);

// What etrun needs to know of a host name, found once.
struct HostInfo {
  bool local = false;          // names this machine (IsLocalHost)
  std::vector<uint32_t> ipv4;  // ResolveIPv4
  std::chrono::steady_clock::time_point resolved_at;
};

// A cache of HostInfo, so that name lookups, which may block for seconds on a slow resolver,
// happen off the event loop: Resolve() on the discovery thread, the runtime's blocking-work
// thread or before the loop starts; Lookup() on the loop answers from the cache. Thread-safe.
class HostDirectory {
 public:
  explicit HostDirectory(std::vector<Interface> interfaces);

  // A name that did not resolve is looked up again after this long (a host's DNS record may
  // appear after the host is listed; names only a --remote-shell knows never do).
  static constexpr std::chrono::seconds kRetryUnresolved{10};

  // Looks up the hosts not cached yet, and those that did not resolve kRetryUnresolved ago or
  // more. Blocking.
  void Resolve(const std::vector<std::string>& hosts);

  // The facts about `host`, as last resolved (an unresolvable name: not local, no address). One
  // never resolved is resolved now, blocking the caller, and counted in misses().
  HostInfo Lookup(const std::string& host);

  const std::vector<Interface>& interfaces() const { return interfaces_; }
  int misses() const;
  int lookups() const;  // name lookups made so far (tests)

 private:
  const std::vector<Interface> interfaces_;
  mutable std::mutex mutex_;
  std::map<std::string, HostInfo> cache_;  // guarded by mutex_
  int misses_ = 0;                         // guarded by mutex_
  int lookups_ = 0;                        // guarded by mutex_
};

// Chooses the NICs for a job whose hosts are all local. With no `requested` names: every
// interface carrying 127.0.0.1 (normally just "lo"), as horovodrun. With names: exactly those,
// in the order given, each of which must exist here with an IPv4 address (unlike horovodrun,
// which insists on the loopback interface). *driver_ip = the last IPv4 address of the first NIC.
// Returns false and sets *err when no usable interface results.
bool ChooseLocalNics(const std::vector<std::string>& requested,
                     const std::vector<Interface>& interfaces, std::vector<std::string>* nics,
                     std::string* driver_ip, std::string* err);

// The local interface and address the kernel would use to reach `host` (a UDP connect; nothing
// is sent). Returns false and sets *err when the host does not resolve or no route exists.
bool RouteToward(const std::string& host, const std::vector<Interface>& interfaces,
                 std::string* nic, std::string* source_ip, std::string* err);

// RouteToward for an address (host byte order): no name lookup, so the loop may call it.
bool RouteTowardAddress(uint32_t address, const std::vector<Interface>& interfaces,
                        std::string* nic, std::string* source_ip);

// Where etrun listens for its workers and what they are told, for every mode (one choice:
// static, elastic and --mpi jobs call ChooseListenAddress).
struct ListenChoice {
  std::string listen;             // the rendezvous server's address; "0.0.0.0": every address
  std::string address;            // the launcher address this machine's ranks are told
  std::vector<std::string> nics;  // this machine's ranks' interfaces (everyone's, when named)
  // Ranks on other hosts find there, as they start, the launcher address they reach and their
  // own interface toward it (launcher/ssh/ssh_rank.h's RemoteCommand); `address`/`nics` are
  // only this machine's. False: every rank is told `address` and `nics`.
  bool per_host = false;
};

// With `requested` names (--network-interface): exactly those, everywhere, as horovodrun
// (ChooseLocalNics: each must exist here; listen on the first one's address). Without names,
// when every host is this machine: the loopback (ChooseLocalNics). Without names, when hosts may
// be elsewhere (`remote_hosts` not empty, or `hosts_known` false: an elastic job's hosts come
// from its source later): per host, listening on every address (the access list still admits
// only the job's hosts, this machine and --rendezvous-allow). Then this machine's own ranks use
// the interface and address the route toward the first remote host leaves from (the loopback
// while no remote host is known); where no such route exists: with `remote_shell` (hosts may be
// names only the remote shell knows: pods) the first non-loopback interface, else an error.
// Returns false and sets *err (with the flag that fixes it where one does).
bool ChooseListenAddress(const std::vector<std::string>& requested, bool hosts_known,
                         const std::vector<std::string>& remote_hosts, bool remote_shell,
                         const std::vector<Interface>& interfaces, ListenChoice* choice,
                         std::string* err);

// The launcher address to tell a host that has no better way to find it (ranks through a remote
// shell): the source address of the route toward the host's first address (`host_ipv4`, host
// byte order: no name lookup), else the first non-loopback address; "" when there is none.
std::string LauncherAddressToward(const std::vector<uint32_t>& host_ipv4,
                                  const std::vector<Interface>& interfaces);

// Asks the kernel for a free TCP port on `address` (bind to port 0, read it, close). Another
// process may take it before it is used; callers that can bind and keep the socket should.
// Returns 0 and sets *err on failure.
int FindFreePort(const std::string& address, std::string* err);

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_NETWORK_H_
