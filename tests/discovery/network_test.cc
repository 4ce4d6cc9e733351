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
  // Given this machine's lo (127.0.0.1) and eth0 (198.18.0.1): named interfaces win everywhere
  // and are listened on; all hosts local: the loopback; hosts elsewhere or not known yet: every
  // address is listened on and each remote rank finds its own, this machine's ranks use the
  // route toward the first remote host (127.0.0.2 routes over lo here), else the loopback.
  std::vector<Interface> nics = {{"lo", {"127.0.0.1"}}, {"eth0", {"198.18.0.1"}}};
  struct Case {
    const char* what;
    std::vector<std::string> requested;
    bool hosts_known;
    std::vector<std::string> remote;
    bool remote_shell;
    std::vector<std::string> nics;
    std::string address;
    std::string listen;
    bool per_host;
  };
  std::vector<Case> cases = {
      {"named", {"eth0"}, true, {}, false, {"eth0"}, "198.18.0.1", "198.18.0.1", false},
      {"named, remote hosts too", {"eth0"}, true, {"127.0.0.2"}, false, {"eth0"}, "198.18.0.1",
       "198.18.0.1", false},
      {"named, hosts later", {"eth0"}, false, {}, false, {"eth0"}, "198.18.0.1", "198.18.0.1", false},
      {"all local", {}, true, {}, false, {"lo"}, "127.0.0.1", "127.0.0.1", false},
      {"all local, remote shell", {}, true, {}, true, {"lo"}, "127.0.0.1", "127.0.0.1", false},
      {"hosts later", {}, false, {}, false, {"lo"}, "127.0.0.1", "0.0.0.0", true},
      {"hosts later, remote shell", {}, false, {}, true, {"lo"}, "127.0.0.1", "0.0.0.0", true},
      {"route toward a remote host", {}, true, {"127.0.0.2"}, false, {"lo"}, "127.0.0.1", "0.0.0.0",
       true},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.what));
    ListenChoice choice;
    std::string err;
    REQUIRE(ChooseListenAddress(c.requested, c.hosts_known, c.remote, c.remote_shell, nics, &choice,
                                &err));
    CHECK(choice.nics == c.nics);
    CHECK(choice.address == c.address);
    CHECK(choice.listen == c.listen);
    CHECK(choice.per_host == c.per_host);
  }
  ListenChoice choice;
  std::string err;
  CHECK_FALSE(ChooseListenAddress({"nope0"}, true, {}, false, nics, &choice, &err));
  CHECK(err.find("nope0") != std::string::npos);
  // A remote host with no route from here (an unresolvable name): an error naming the flag,
  // unless a remote shell may know the name (then the first non-loopback interface).
  CHECK_FALSE(ChooseListenAddress({}, true, {"no-such-host.invalid"}, false, nics, &choice, &err));
  CHECK(err.find("no-such-host.invalid") != std::string::npos);
  REQUIRE(ChooseListenAddress({}, true, {"no-such-host.invalid"}, true, nics, &choice, &err));
  CHECK(choice.nics == std::vector<std::string>{"eth0"});
  CHECK(choice.address == "198.18.0.1");
  CHECK(choice.per_host);
}

TEST_CASE("the launcher address told to a host: the route's source, else the first non-loopback") {
  std::vector<Interface> nics = {{"lo", {"127.0.0.1"}}, {"eth0", {"198.18.0.1"}}};
  CHECK(LauncherAddressToward({0x7f000002}, nics) == "127.0.0.1");  // 127.0.0.2: over lo
  CHECK(LauncherAddressToward({}, nics) == "198.18.0.1");           // a name not known here
  CHECK(LauncherAddressToward({}, {{"lo", {"127.0.0.1"}}}).empty());
}

}  // namespace
}  // namespace etrun::discovery

TEST_CASE("IPv4 addresses in host byte order print as dotted quads") {
  using etrun::discovery::Ipv4Text;
  CHECK(Ipv4Text(0xC6120203u) == "198.18.2.3");
  CHECK(Ipv4Text(0x7F000001u) == "127.0.0.1");
  CHECK(Ipv4Text(0) == "0.0.0.0");
  CHECK(Ipv4Text(0xFFFFFFFFu) == "255.255.255.255");
}
