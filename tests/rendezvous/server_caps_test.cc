// ServerCaps' counting without sockets (the server's use of it: http_server_test.cc).
#include "rendezvous/server_caps.h"

#include <doctest/doctest.h>

namespace etrun::rendezvous {
namespace {

TEST_CASE("one address may hold its share of connections, and all of them the total") {
  // Given a total of 5 and 3 per address, a's fourth is refused while b still gets in; at 5
  // everyone is refused; a freed connection makes room again.
  ServerCaps caps(5, 3, 0);
  using V = ServerCaps::Verdict;
  for (int i = 0; i < 3; ++i) CHECK(caps.TryAdmit(1) == V::kAdmitted);
  CHECK(caps.TryAdmit(1) == V::kPeerFull);
  CHECK(caps.TryAdmit(2) == V::kAdmitted);
  CHECK(caps.TryAdmit(2) == V::kAdmitted);
  CHECK(caps.TryAdmit(3) == V::kTotalFull);
  CHECK(caps.connections() == 5);
  CHECK(caps.connections_from(1) == 3);
  caps.Release(1);
  CHECK(caps.TryAdmit(3) == V::kAdmitted);
  caps.Release(2);
  caps.Release(2);
  CHECK(caps.connections_from(2) == 0);
  CHECK(caps.connections() == 3);
}

TEST_CASE("request bodies are reserved whole against the bytes in flight, a quarter per address") {
  // Given 400 bytes in flight at most, one address may reserve 100 of them; the others still
  // reserve theirs; a release makes room again.
  ServerCaps caps(1, 1, 400);
  CHECK(caps.ReserveBody(1, 60));
  CHECK_FALSE(caps.ReserveBody(1, 41));
  CHECK(caps.ReserveBody(1, 40));
  CHECK(caps.body_bytes_from(1) == 100);
  CHECK(caps.ReserveBody(2, 100));
  CHECK(caps.ReserveBody(3, 100));
  CHECK(caps.ReserveBody(4, 100));
  CHECK_FALSE(caps.ReserveBody(5, 1));  // all 400 taken
  CHECK(caps.ReserveBody(5, 0));        // no body, nothing to reserve
  caps.ReleaseBody(1, 60);
  CHECK(caps.body_bytes() == 340);
  CHECK(caps.ReserveBody(5, 60));
  CHECK_FALSE(caps.ReserveBody(6, size_t{1} << 62));  // no overflow
}

}  // namespace
}  // namespace etrun::rendezvous
