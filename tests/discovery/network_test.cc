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

namespace etrun::discovery {
namespace {

TEST_CASE("one choice of listen address and interfaces for every mode") {
  // Given this machine's lo (127.0.0.1) and eth0 (198.18.0.1): named interfaces win; a route
  // toward a remote host picks the interface it leaves from; with a remote shell and hosts not
  // known yet, the first non-loopback interface; otherwise the loopback.
  std::vector<Interface> nics = {{"lo", {"127.0.0.1"}}, {"eth0", {"198.18.0.1"}}};
  struct Case {
    const char* what;
    std::vector<std::string> requested;
    bool hosts_known;
    std::vector<std::string> remote;
    bool remote_shell;
    std::vector<std::string> nics;
    std::string address;
  };
  std::vector<Case> cases = {
      {"named", {"eth0"}, true, {}, false, {"eth0"}, "198.18.0.1"},
      {"named, remote hosts too", {"eth0"}, true, {"127.0.0.2"}, false, {"eth0"}, "198.18.0.1"},
      {"all local", {}, true, {}, false, {"lo"}, "127.0.0.1"},
      {"all local, remote shell", {}, true, {}, true, {"lo"}, "127.0.0.1"},
      {"hosts later", {}, false, {}, false, {"lo"}, "127.0.0.1"},
      {"hosts later, remote shell", {}, false, {}, true, {"eth0"}, "198.18.0.1"},
      {"route toward a remote host", {}, true, {"127.0.0.2"}, false, {"lo"}, "127.0.0.1"},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.what));
    std::vector<std::string> chosen;
    std::string address, err;
    REQUIRE(ChooseListenAddress(c.requested, c.hosts_known, c.remote, c.remote_shell, nics, &chosen,
                                &address, &err));
    CHECK(chosen == c.nics);
    CHECK(address == c.address);
  }
  std::vector<std::string> chosen;
  std::string address, err;
  CHECK_FALSE(ChooseListenAddress({"nope0"}, true, {}, false, nics, &chosen, &address, &err));
  CHECK(err.find("nope0") != std::string::npos);
}

}  // namespace
}  // namespace etrun::discovery
