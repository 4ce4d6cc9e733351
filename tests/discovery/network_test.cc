// The host directory: name lookups cached for the event loop, unresolvable names retried rarely.
#include "discovery/network.h"

#include <doctest/doctest.h>

using etrun::discovery::HostDirectory;

TEST_CASE("the host directory looks a name up once, and an unresolvable one again only later") {
  // Given this machine's loopback and a name that never resolves (as Kubernetes pod names
  // behind --remote-shell), polling both every second costs one lookup each, not one per poll.
  HostDirectory hosts(std::vector<etrun::discovery::Interface>{{"lo", {"127.0.0.1"}}});
  hosts.Resolve({"127.0.0.1", "no-such-host.invalid"});
  CHECK(hosts.lookups() == 2);
  for (int poll = 0; poll < 5; ++poll) hosts.Resolve({"127.0.0.1", "no-such-host.invalid"});
  CHECK(hosts.lookups() == 2);
  CHECK(hosts.Lookup("127.0.0.1").local);
  CHECK(hosts.Lookup("no-such-host.invalid").ipv4.empty());
  CHECK_FALSE(hosts.Lookup("no-such-host.invalid").local);
  CHECK(hosts.misses() == 0);  // both answered from the cache
  hosts.Lookup("localhost");   // never resolved: looked up now, and counted
  CHECK(hosts.misses() == 1);
  CHECK(hosts.lookups() == 3);
}
