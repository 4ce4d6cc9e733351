// A host's network facts as its agent finds them for a rank (host_network.h): from a HostView of
// the test's, and from this machine's kernel.
#include "launcher/agent/host_network.h"

#include <doctest/doctest.h>

namespace etrun::launcher::agent {
namespace {

HostNetwork Resolving(const std::string& launcher_address) {
  HostNetwork net;
  net.resolve = true;
  net.launcher_address = launcher_address;
  net.address_vars = {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "MASTER_ADDR"};
  net.interface_vars = {"HOROVOD_GLOO_IFACE"};
  return net;
}

// A host with eth1 (198.18.0.2, the launcher's side) and lo; routes asked are counted.
struct FakeHost {
  HostView View() {
    HostView view;
    view.interfaces = [] { return std::vector<discovery::Interface>{{"lo", {"127.0.0.1"}}, {"eth1", {"198.18.0.2"}}}; };
    view.route = [this](const std::string& ipv4, std::string* nic, std::string* source) {
      ++routes;
      if (!ipv4.starts_with("198.18.")) return false;
      *nic = "eth1";
      *source = "198.18.0.2";
      return true;
    };
    view.has_interface = [](const std::string& name) { return name == "lo" || name == "eth1"; };
    return view;
  }
  int routes = 0;
};

std::vector<std::string> Vars(HostNetworkFinder* finder, const HostNetwork& net, bool ssh, std::string* err) {
  std::vector<std::string> vars;
  CHECK(finder->Vars(net, ssh, &vars, err));
  return vars;
}

TEST_CASE("a remote rank is told the launcher address its SSH connection came from") {
  // 127.0.0.5 stands for the launcher's address as the host sees it; loopback routes are "lo".
  FakeHost host;
  HostNetworkFinder finder("h1", "127.0.0.5 40000 127.0.0.9 22", host.View());
  std::string err;
  CHECK(Vars(&finder, Resolving("198.18.0.1"), true, &err) ==
        std::vector<std::string>{"HOROVOD_GLOO_RENDEZVOUS_ADDR=127.0.0.5", "MASTER_ADDR=127.0.0.5",
                                 "HOROVOD_GLOO_IFACE=lo"});
}

TEST_CASE("without a usable SSH connection a remote rank is told the launcher's address") {
  FakeHost host;
  std::string err;
  // Through a remote shell (no SSH connection of the agent's) SSH_CONNECTION may name a bastion.
  HostNetworkFinder bastion("h1", "127.0.0.5 40000 127.0.0.9 22", host.View());
  CHECK(Vars(&bastion, Resolving("127.0.0.6"), false, &err) ==
        std::vector<std::string>{"HOROVOD_GLOO_RENDEZVOUS_ADDR=127.0.0.6", "MASTER_ADDR=127.0.0.6",
                                 "HOROVOD_GLOO_IFACE=lo"});
  // An IPv6 connection gives no IPv4 launcher address: the given one, routed on the host.
  HostNetworkFinder v6("h1", "::1 40000 ::1 22", host.View());
  CHECK(Vars(&v6, Resolving("198.18.0.1"), true, &err) ==
        std::vector<std::string>{"HOROVOD_GLOO_RENDEZVOUS_ADDR=198.18.0.1", "MASTER_ADDR=198.18.0.1",
                                 "HOROVOD_GLOO_IFACE=eth1"});
  // Resolution off: nothing is set over what the launcher gave.
  CHECK(Vars(&v6, HostNetwork{}, true, &err).empty());
}

TEST_CASE("a host with no route to the launcher, or without the named interface, fails in one line") {
  FakeHost host;
  HostNetworkFinder finder("h1", "", host.View());
  std::vector<std::string> vars;
  std::string err;
  CHECK_FALSE(finder.Vars(Resolving("203.0.113.9"), false, &vars, &err));
  CHECK(err == "etrun: error: host h1 has no route to the launcher at 203.0.113.9: name the "
               "launcher's interface the hosts reach with --network-interface");
  HostNetwork named;
  named.require_interface = "nosuch0";
  CHECK_FALSE(finder.Vars(named, true, &vars, &err));
  CHECK(err == "etrun: error: host h1 has no interface nosuch0 (--network-interface): name one "
               "every host has, or leave the flag out to let etrun find each host's");
  named.require_interface = "lo";
  CHECK(finder.Vars(named, true, &vars, &err));
  CHECK(vars.empty());
}

TEST_CASE("a host's facts are found once for all its ranks") {
  // 64 ranks asking the same question cost one route lookup (issue 39: no per-rank work).
  FakeHost host;
  HostNetworkFinder finder("h1", "", host.View());
  std::string err;
  for (int i = 0; i < 64; ++i) Vars(&finder, Resolving("198.18.0.1"), false, &err);
  CHECK(host.routes == 1);
  std::vector<std::string> vars;
  CHECK_FALSE(finder.Vars(Resolving("203.0.113.9"), false, &vars, &err));
  CHECK_FALSE(finder.Vars(Resolving("203.0.113.9"), false, &vars, &err));
  CHECK(host.routes == 2);
}

TEST_CASE("this machine's kernel routes the loopback through lo, and no address nowhere") {
  HostView real = RealHostView();
  std::string nic, source;
  REQUIRE(real.route("127.0.0.1", &nic, &source));
  CHECK(nic == "lo");
  CHECK(source == "127.0.0.1");
  CHECK_FALSE(real.route("not-an-address", &nic, &source));
  CHECK(real.has_interface("lo"));
  CHECK_FALSE(real.has_interface("nosuch0"));
}

}  // namespace
}  // namespace etrun::launcher::agent
