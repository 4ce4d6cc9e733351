// AccessList: which peers may talk to the rendezvous server. Horovod's and torchrun's servers
// answer anyone who can reach the port; etrun's answers this machine (127.0.0.1 and the
// addresses of its interfaces), the job's hosts (every address their names resolve to, for every
// host the job has used) and the networks given with --rendezvous-allow; others get 403.
// An address admits every user of the machine behind it: a peer on this machine (IsThisMachine)
// is further checked for its owner by the server (HttpServer::set_local_user).
// Names are resolved by the caller (discovery::HostDirectory, off the event loop): the list
// only holds addresses. Thread-safe: the driver admits hosts while the store's threads ask.
// Movable only before it is shared.
#ifndef ETRUN_RENDEZVOUS_ACCESS_LIST_H_
#define ETRUN_RENDEZVOUS_ACCESS_LIST_H_

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace etrun::rendezvous {

struct Cidr {
  uint32_t network = 0;  // host byte order, masked
  int prefix = 32;
  bool Contains(uint32_t address) const;
  bool operator==(const Cidr&) const = default;
};

// Parses "a.b.c.d/n" or a bare address (/32). Returns false and sets *err naming the problem.
bool ParseCidr(const std::string& text, Cidr* out, std::string* err);

class AccessList {
 public:
  // This machine's own addresses (dotted quads) and the --rendezvous-allow networks.
  AccessList(const std::vector<std::string>& local_addresses, std::vector<Cidr> allowed);
  AccessList(AccessList&& other) noexcept
      : addresses_(std::move(other.addresses_)), local_(std::move(other.local_)), allowed_(std::move(other.allowed_)) {}

  // Admits these IPv4 addresses (host byte order): a job host's, as its name resolves.
  void Admit(const std::vector<uint32_t>& addresses);

  // Whether a peer at `address` (host byte order) may use the server.
  bool Allows(uint32_t address) const;

  // Whether `address` (host byte order) is this machine's: a loopback address (127.0.0.0/8, all
  // of it: any local process may use any of them as its source) or one of the interface
  // addresses given at construction. Whether it is allowed is Allows' question.
  bool IsThisMachine(uint32_t address) const;

 private:
  mutable std::mutex mu_;  // guards addresses_
  std::set<uint32_t> addresses_;
  const std::set<uint32_t> local_;  // the interface addresses given
  const std::vector<Cidr> allowed_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_ACCESS_LIST_H_
