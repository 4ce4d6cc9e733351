// ServerCaps: what an HttpServer holds at once, counted, so that no client can make it hold more:
// connections in total and per peer address, and request body bytes being received, in total and
// per peer address (a quarter of the total). The server asks before it takes a connection
// (TryAdmit) and before it reads a body (ReserveBody); past a cap it answers 503 and closes
// instead. Per-peer caps below the total leave room for the other peers: one flooding address
// cannot take every connection or every byte. Thread-safe (the store's threads
// free connections while the accept loop admits them).
#ifndef ETRUN_RENDEZVOUS_SERVER_CAPS_H_
#define ETRUN_RENDEZVOUS_SERVER_CAPS_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace etrun::rendezvous {

class ServerCaps {
 public:
  enum class Verdict { kAdmitted, kPeerFull, kTotalFull };

  ServerCaps(size_t max_connections, size_t max_per_peer, size_t max_body_bytes_in_flight)
      : max_connections_(max_connections), max_per_peer_(max_per_peer), max_body_bytes_(max_body_bytes_in_flight) {}
  ServerCaps(const ServerCaps&) = delete;
  ServerCaps& operator=(const ServerCaps&) = delete;

  // Counts one more connection from `address` unless that would pass a cap; then counts nothing.
  Verdict TryAdmit(uint32_t address);
  // Uncounts a connection TryAdmit admitted.
  void Release(uint32_t address);

  // Reserves `bytes` of request body from `address` unless the bodies being received, in all or
  // from that address, would pass their cap; then reserves nothing.
  bool ReserveBody(uint32_t address, size_t bytes);
  void ReleaseBody(uint32_t address, size_t bytes);

  size_t max_connections() const { return max_connections_; }
  size_t max_per_peer() const { return max_per_peer_; }
  size_t connections() const;
  size_t connections_from(uint32_t address) const;
  size_t body_bytes() const;
  size_t body_bytes_from(uint32_t address) const;

 private:
  const size_t max_connections_, max_per_peer_, max_body_bytes_;
  mutable std::mutex mu_;  // guards everything below
  size_t connections_ = 0;
  std::unordered_map<uint32_t, size_t> per_peer_;  // addresses with a connection open only
  size_t body_bytes_ = 0;
  std::unordered_map<uint32_t, size_t> peer_body_bytes_;  // addresses with a body reserved only
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_SERVER_CAPS_H_
