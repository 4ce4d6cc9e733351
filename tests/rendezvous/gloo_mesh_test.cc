// Gloo's full-mesh address lists (Gloo d96897b3 rendezvous/context.cc connectFullMesh and
// transport/tcp/address.h, as vendored by Horovod 0.28.1): what a fence must cut.
#include "rendezvous/gloo_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <doctest/doctest.h>

using etrun::rendezvous::GlooEndpoint;
using etrun::rendezvous::GlooMesh;
using etrun::rendezvous::kGlooAddressBytes;
using etrun::rendezvous::ParseGlooAddresses;

namespace {

// One 136-byte record as Gloo's Address::bytes() writes it: sockaddr_storage, then the sequence.
std::string Record4(const char* ip, uint16_t port) {
  std::string bytes(kGlooAddressBytes, '\0');
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  inet_pton(AF_INET, ip, &in.sin_addr);
  std::memcpy(bytes.data(), &in, sizeof(in));
  int64_t seq = -1;
  std::memcpy(bytes.data() + sizeof(sockaddr_storage), &seq, sizeof(seq));
  return bytes;
}

std::string Record6(const char* ip, uint16_t port) {
  std::string bytes(kGlooAddressBytes, '\0');
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &in6.sin6_addr);
  std::memcpy(bytes.data(), &in6, sizeof(in6));
  return bytes;
}

}  // namespace

TEST_CASE("gloo mesh: address lists parse to their endpoints; anything else to nothing") {
  CHECK(ParseGlooAddresses(Record4("198.18.0.2", 40001) + Record4("198.18.0.2", 40002)) ==
        std::vector<GlooEndpoint>{{"198.18.0.2", 40001}, {"198.18.0.2", 40002}});
  CHECK(ParseGlooAddresses(Record6("fd00::2", 5)).front().Text() == "[fd00::2]:5");
  CHECK(ParseGlooAddresses("").empty());
  CHECK(ParseGlooAddresses("h1").empty());  // a rank_<r> host name
  CHECK(ParseGlooAddresses(Record4("198.18.0.2", 1).substr(0, 135)).empty());
  std::string unix_family(kGlooAddressBytes, '\0');
  unix_family[0] = AF_UNIX;
  CHECK(ParseGlooAddresses(unix_family).empty());
  CHECK(ParseGlooAddresses(Record4("198.18.0.2", 0)).empty());  // no port: not a listener
}

TEST_CASE("gloo mesh: each pair is cut on both its hosts, by its listener's endpoint") {
  // Ranks 0, 1, 2 on .2, .3, .4. Rank r listens for every higher rank i at the address it put
  // for i; i connects there. On .3 (rank 1): its listener for 2 (src), and 0's listener for
  // it (dst).
  GlooMesh mesh;
  mesh.Record("global", "0", Record4("198.18.0.2", 1001) + Record4("198.18.0.2", 1002));
  mesh.Record("global", "1", Record4("198.18.0.3", 1100) + Record4("198.18.0.3", 1102));
  mesh.Record("global", "2", Record4("198.18.0.4", 1200) + Record4("198.18.0.4", 1201));
  mesh.Record("global", "rank_0", "h1");  // not an address list
  mesh.Record("global", "x", Record4("198.18.0.9", 9));
  CHECK(mesh.FilterTerms({"198.18.0.3"}) ==
        std::vector<std::string>{"dst 198.18.0.2:1001", "src 198.18.0.3:1102"});
  CHECK(mesh.FilterTerms({"198.18.0.2"}) ==
        std::vector<std::string>{"src 198.18.0.2:1001", "src 198.18.0.2:1002"});
  CHECK(mesh.FilterTerms({"198.18.0.4"}) ==
        std::vector<std::string>{"dst 198.18.0.2:1002", "dst 198.18.0.3:1102"});
  CHECK(mesh.FilterTerms({"198.18.0.9"}).empty());
  CHECK(mesh.RankIp("global", 1) == "198.18.0.3");
  CHECK(mesh.RankIp("global", 5).empty());
  CHECK(mesh.RankIp("cross_0", 0).empty());
}

TEST_CASE("gloo mesh: a scope of a new size is a new world; Clear forgets all") {
  GlooMesh mesh;
  mesh.Record("global", "0", Record4("198.18.0.2", 1001) + Record4("198.18.0.2", 1002));
  mesh.Record("global", "2", Record4("198.18.0.4", 1200) + Record4("198.18.0.4", 1201));
  mesh.Record("cross_0", "0", Record4("198.18.0.2", 2001));
  mesh.Record("cross_0", "1", Record4("198.18.0.4", 2100));
  // The world shrinks to 2: rank 0's new list replaces the old scope, rank 2's stale ports go.
  mesh.Record("global", "0", Record4("198.18.0.2", 3001));
  CHECK(mesh.FilterTerms({"198.18.0.4"}) == std::vector<std::string>{"dst 198.18.0.2:2001"});
  CHECK(mesh.FilterTerms({"198.18.0.2"}) ==
        std::vector<std::string>{"src 198.18.0.2:2001", "src 198.18.0.2:3001"});
  CHECK(mesh.scope_count() == 2);
  mesh.Clear();
  CHECK(mesh.FilterTerms({"198.18.0.2"}).empty());
}
