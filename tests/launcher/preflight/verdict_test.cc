#include "launcher/preflight/verdict.h"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

using etrun::launcher::preflight::HostCheck;
using etrun::launcher::preflight::Judge;
using etrun::launcher::preflight::PeerResult;
using etrun::launcher::preflight::PeerTarget;
using etrun::launcher::preflight::SickHost;
using etrun::launcher::preflight::TargetsFor;

namespace {

PeerResult Fast(const std::string& to, double rate = 9000) { return {to, to + ":1", "", 0.2, 0.05, rate}; }
PeerResult Reached(const std::string& to) { return {to, to + ":1", "", 0.2, 0.05, -1}; }
PeerResult Refused(const std::string& to) {
  return {to, to + ":1", "cannot connect to " + to + ":1: Connection refused", -1, -1, -1};
}

// n hosts h1..hn, each streaming to the next two (TargetsFor) at `rate` unless `rates` says.
std::vector<HostCheck> Ring(int n, const std::function<double(int from, int to)>& rate) {
  std::vector<std::string> hosts, ips;
  std::vector<int> ports;
  for (int i = 1; i <= n; ++i) {
    hosts.push_back("h" + std::to_string(i));
    ips.push_back("198.18.0." + std::to_string(i));
    ports.push_back(1);
  }
  std::vector<HostCheck> checks;
  for (int i = 0; i < n; ++i) {
    HostCheck c{hosts[i], {}, {}};
    for (const PeerTarget& t : TargetsFor(i, hosts, ips, ports)) {
      int to = std::stoi(t.host.substr(1)) - 1;
      c.peers.push_back(t.stream ? Fast(t.host, rate(i, to)) : Reached(t.host));
    }
    checks.push_back(c);
  }
  return checks;
}

}  // namespace

TEST_CASE("each host streams to the next two and probes every other's connect") {
  std::vector<PeerTarget> t = TargetsFor(3, {"a", "b", "c", "d", "e"}, {"1", "2", "3", "4", "5"}, {1, 2, 3, 4, 5});
  REQUIRE(t.size() == 4);
  CHECK((t[0].host == "e" && t[0].stream && t[0].ip == "5" && t[0].port == 5));
  CHECK((t[1].host == "a" && t[1].stream));
  CHECK((t[2].host == "b" && !t[2].stream));
  CHECK((t[3].host == "c" && !t[3].stream));
  CHECK(TargetsFor(0, {"a"}, {"1"}, {1}).empty());
}

TEST_CASE("healthy hosts: nobody is sick, and the median is the streams'") {
  double median = 0;
  CHECK(Judge(Ring(8, [](int, int) { return 9000.0; }), &median).empty());
  CHECK(median == doctest::Approx(9000));
}

TEST_CASE("a host whose sending link is throttled is named with its rates; its receivers are not") {
  double median = 0;
  std::vector<SickHost> sick = Judge(Ring(8, [](int from, int) { return from == 2 ? 40.0 : 9000.0; }), &median);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h3");
  CHECK(sick[0].why == "slow link: sends at 40.0 Mbit/s to h4, 40.0 Mbit/s to h5, below a quarter of "
                       "the other links' median 9000 Mbit/s");
}

TEST_CASE("a host whose receiving link is throttled is named too") {
  std::vector<SickHost> sick = Judge(Ring(8, [](int, int to) { return to == 5 ? 40.0 : 9000.0; }), nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h6");
  CHECK(sick[0].why.starts_with("slow link: receives at 40.0 Mbit/s from h4, 40.0 Mbit/s from h5"));
}

TEST_CASE("a slowish link above a quarter of the median is no sickness") {
  CHECK(Judge(Ring(8, [](int from, int) { return from == 2 ? 2300.0 : 9000.0; }), nullptr).empty());
}

TEST_CASE("a host nobody reaches is sick; those that tried are not") {
  std::vector<HostCheck> checks = Ring(4, [](int, int) { return 9000.0; });
  for (HostCheck& c : checks) {
    for (PeerResult& p : c.peers) {
      if (p.host == "h2") p = Refused("h2");
    }
  }
  std::vector<SickHost> sick = Judge(checks, nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h2");
  CHECK(sick[0].why == "3 of its 3 peers cannot reach it");
}

TEST_CASE("a host that reaches nobody is sick with what it saw") {
  std::vector<HostCheck> checks = Ring(3, [](int, int) { return 9000.0; });
  checks[0].peers = {Refused("h2"), Refused("h3")};
  std::vector<SickHost> sick = Judge(checks, nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h1");
  CHECK(sick[0].why == "cannot reach 2 of its 2 peers: h2 (cannot connect to h2:1: Connection refused), "
                       "h3 (cannot connect to h3:1: Connection refused)");
}

TEST_CASE("a host's own problems make it sick, joined with what its links showed") {
  std::vector<HostCheck> checks = Ring(4, [](int from, int) { return from == 3 ? 10.0 : 9000.0; });
  checks[3].problems = {"cannot run 'train': command not found in PATH"};
  checks[1].problems = {"has 2 GPUs, its 4 slots need 4"};
  std::vector<SickHost> sick = Judge(checks, nullptr);
  REQUIRE(sick.size() == 2);
  CHECK(sick[0].host == "h2");
  CHECK(sick[0].why == "has 2 GPUs, its 4 slots need 4");
  CHECK(sick[1].host == "h4");
  CHECK(sick[1].why.starts_with("cannot run 'train': command not found in PATH; slow link: sends at 10.0"));
}

TEST_CASE("a stream that fails after its host was reached counts as nothing moved") {
  std::vector<HostCheck> checks = Ring(5, [](int, int) { return 9000.0; });
  for (PeerResult& p : checks[4].peers) {
    if (p.mbit_s > 0) {
      p.mbit_s = 0;  // as Stream leaves it
      p.error = "stream to x: its 100 bytes not taken in 2150 ms";
    }
  }
  std::vector<SickHost> sick = Judge(checks, nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h5");
  CHECK(sick[0].why.starts_with("slow link: sends at 0.0 Mbit/s to h1, 0.0 Mbit/s to h2"));
}

TEST_CASE("a round trip that failed is no stream: the host is unreached, not slow") {
  std::vector<HostCheck> checks = Ring(4, [](int, int) { return 9000.0; });
  for (HostCheck& c : checks) {
    for (PeerResult& p : c.peers) {
      if (p.host == "h2") p = {"h2", "h2:1", "round trip to h2:1: no answer in 2000 ms", 0.3, -1, -1};
    }
  }
  std::vector<SickHost> sick = Judge(checks, nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h2");
  CHECK(sick[0].why == "3 of its 3 peers cannot reach it");
}

TEST_CASE("two hosts: the sender of a slow stream is named") {
  std::vector<SickHost> sick = Judge(Ring(2, [](int from, int) { return from == 1 ? 10.0 : 9000.0; }), nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h2");
}

TEST_CASE("a throttled host among three is named though the streams toward it are slow too") {
  // Its acknowledgements wait behind its own sends: its peers' streams to it crawl as well, and
  // the median of all six streams (15 Mbit/s) would hide it. Against the other hosts' link it shows.
  std::vector<SickHost> sick = Judge(Ring(3, [](int from, int to) {
    return from == 2 ? 5.0 : to == 2 ? 15.0 : 9000.0;
  }), nullptr);
  REQUIRE(sick.size() == 1);
  CHECK(sick[0].host == "h3");
  CHECK(sick[0].why == "slow link: sends at 5.0 Mbit/s to h1, 5.0 Mbit/s to h2, below a quarter of the "
                       "other links' median 9000 Mbit/s");
}
