#include "rendezvous/gloo_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>
#include <set>

namespace etrun::rendezvous {

std::string GlooEndpoint::Text() const {
  bool v6 = ip.find(':') != std::string::npos;
  return (v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

// One record: a sockaddr_storage holding AF_INET or AF_INET6, then the sequence number.
static bool ParseRecord(const char* record, GlooEndpoint* out) {
  sockaddr_storage ss;
  std::memcpy(&ss, record, sizeof(ss));
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, &ss, sizeof(in));
    if (inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text)) == nullptr) return false;
    out->port = ntohs(in.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, &ss, sizeof(in6));
    if (inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text)) == nullptr) return false;
    out->port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  out->ip = text;
  return out->port != 0;
}

std::vector<GlooEndpoint> ParseGlooAddresses(std::string_view value) {
  static_assert(sizeof(sockaddr_storage) + 8 == kGlooAddressBytes);
  std::vector<GlooEndpoint> out;
  if (value.empty() || value.size() % kGlooAddressBytes != 0) return out;
  for (size_t at = 0; at < value.size(); at += kGlooAddressBytes) {
    GlooEndpoint e;
    if (!ParseRecord(value.data() + at, &e)) return {};
    out.push_back(std::move(e));
  }
  return out;
}

void GlooMesh::Record(std::string_view scope, std::string_view key, std::string_view value) {
  int rank = -1;
  auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), rank);
  if (ec != std::errc() || end != key.data() + key.size() || rank < 0) return;
  std::vector<GlooEndpoint> addresses = ParseGlooAddresses(value);
  size_t size = addresses.size() + 1;
  if (addresses.empty() || static_cast<size_t>(rank) >= size) return;
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) it = scopes_.emplace(std::string(scope), Scope{}).first;
  if (it->second.size != size) it->second = Scope{size, {}};  // a new world's scope
  it->second.addresses[rank] = std::move(addresses);
}

std::vector<std::string> GlooMesh::FilterTerms(const std::vector<std::string>& host_ips) const {
  std::set<std::string, std::less<>> ips(host_ips.begin(), host_ips.end());
  std::vector<std::string> terms;
  for (const auto& [name, scope] : scopes_) {
    for (const auto& [r, list] : scope.addresses) {
      for (size_t slot = 0; slot < list.size(); ++slot) {
        int peer = static_cast<int>(slot) < r ? static_cast<int>(slot) : static_cast<int>(slot) + 1;
        if (peer < r) continue;  // r listens only for higher ranks
        const GlooEndpoint& listen = list[slot];
        if (ips.contains(listen.ip)) terms.push_back("src " + listen.Text());
        // The connecting side: the peer's host, known by the addresses it published itself.
        auto other = scope.addresses.find(peer);
        if (other != scope.addresses.end() && !other->second.empty() &&
            ips.contains(other->second.front().ip)) {
          terms.push_back("dst " + listen.Text());
        }
      }
    }
  }
  return terms;
}

std::string GlooMesh::RankIp(std::string_view scope, int rank) const {
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) return "";
  auto list = it->second.addresses.find(rank);
  return list == it->second.addresses.end() || list->second.empty() ? "" : list->second.front().ip;
}

}  // namespace etrun::rendezvous
