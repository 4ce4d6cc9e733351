#include "rendezvous/server_caps.h"

namespace etrun::rendezvous {

ServerCaps::Verdict ServerCaps::TryAdmit(uint32_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (connections_ >= max_connections_) return Verdict::kTotalFull;
  auto it = per_peer_.find(address);
  if (it != per_peer_.end() && it->second >= max_per_peer_) return Verdict::kPeerFull;
  ++per_peer_[address];
  ++connections_;
  return Verdict::kAdmitted;
}

void ServerCaps::Release(uint32_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_peer_.find(address);
  if (it == per_peer_.end()) return;
  --connections_;
  if (--it->second == 0) per_peer_.erase(it);
}

bool ServerCaps::ReserveBody(uint32_t address, size_t bytes) {
  if (bytes == 0) return true;  // nothing to hold (most requests: GETs), so no lock
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > max_body_bytes_ - body_bytes_) return false;
  auto it = peer_body_bytes_.find(address);
  size_t mine = it == peer_body_bytes_.end() ? 0 : it->second;
  if (bytes > max_body_bytes_ / 4 - mine) return false;
  body_bytes_ += bytes;
  peer_body_bytes_[address] = mine + bytes;
  return true;
}

void ServerCaps::ReleaseBody(uint32_t address, size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peer_body_bytes_.find(address);
  if (it == peer_body_bytes_.end()) return;
  body_bytes_ -= bytes;
  if ((it->second -= bytes) == 0) peer_body_bytes_.erase(it);
}

size_t ServerCaps::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_;
}

size_t ServerCaps::connections_from(uint32_t address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_peer_.find(address);
  return it == per_peer_.end() ? 0 : it->second;
}

size_t ServerCaps::body_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return body_bytes_;
}

size_t ServerCaps::body_bytes_from(uint32_t address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peer_body_bytes_.find(address);
  return it == peer_body_bytes_.end() ? 0 : it->second;
}

}  // namespace etrun::rendezvous
