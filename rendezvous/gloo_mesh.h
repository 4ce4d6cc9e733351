// GlooMesh: which TCP connections a world's Gloo full mesh is made of, read from what its workers
// put in the rendezvous store, so a fence can cut exactly those.
//
// Gloo's connectFullMesh (Gloo d96897b3, as Horovod 0.28.1 vendors it) has every rank r of a scope
// of size n put key "<r>" = n-1 pair addresses, one per peer in rank order skipping r, each 136
// bytes: a sockaddr_storage (the pair's own listening socket) and an 8-byte sequence number. The
// pair of ranks r < i is one connection: r listens at the address it published for i and i
// connects to it. So on r's host the connection's local end is that address, on i's host its
// remote end is.
//
// Why it matters: when a peer dies or vanishes, Gloo signals the error only to operations on that
// peer's pair. A survivor waiting in a ring step for another survivor (whose collective did fail)
// blocks until HOROVOD_GLOO_TIMEOUT_SECONDS, because the failed survivor's Horovod keeps its
// context, and so that connection, open until it is re-initialized. Destroying every connection
// of the old world's mesh on every survivor fails every survivor's collective at once.
//
// Values that do not look like Gloo address lists (other keys, other sizes) are ignored. A new
// list for a scope of another size drops that scope's older lists (a new world). Thread-compatible.
#ifndef ETRUN_RENDEZVOUS_GLOO_MESH_H_
#define ETRUN_RENDEZVOUS_GLOO_MESH_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::rendezvous {

// A TCP endpoint in `ss` filter syntax: "198.18.0.2:40123" or "[fd00::2]:40123".
struct GlooEndpoint {
  std::string ip;  // dotted quad or IPv6 text, without brackets
  uint16_t port = 0;
  std::string Text() const;
  bool operator==(const GlooEndpoint&) const = default;
};

// The 136-byte record Gloo writes per pair address.
inline constexpr size_t kGlooAddressBytes = 136;

// Parses one Gloo address list (n-1 records); empty when `value` is not one.
std::vector<GlooEndpoint> ParseGlooAddresses(std::string_view value);

class GlooMesh {
 public:
  // Feeds one stored value; keeps it when `key` is a rank number and `value` an address list.
  void Record(std::string_view scope, std::string_view key, std::string_view value);

  // Forgets every scope.
  void Clear() { scopes_.clear(); }

  // `ss` filter terms ("src E" / "dst E") matching the mesh connections that have an end on a host
  // with one of `host_ips`: local ends of the pairs its ranks listen for, remote ends of the pairs
  // its ranks connected. Each pair appears once per side.
  std::vector<std::string> FilterTerms(const std::vector<std::string>& host_ips) const;

  // The address rank `rank` of `scope` listens on (its host's Gloo address), or "" if unknown.
  std::string RankIp(std::string_view scope, int rank) const;

  size_t scope_count() const { return scopes_.size(); }

 private:
  struct Scope {
    size_t size = 0;                                      // ranks in the scope
    std::map<int, std::vector<GlooEndpoint>> addresses;  // rank -> its n-1 pair addresses
  };
  std::map<std::string, Scope, std::less<>> scopes_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_GLOO_MESH_H_
