// PreflightRun over a real loop with stand-in agents (RankHost fakes that record what they are
// asked and are answered by the test), and this machine checked for real: the phases, a silent
// host, a lost one, and what reaches the verdict.
#include "launcher/preflight_run.h"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

namespace etrun::launcher {
namespace {

struct StandIn : RankHost {
  void StartRank(int, const std::string&, const GpuShare&) override {}
  void SignalRank(int, int) override {}
  void ProbeRank(int) override {}
  void Resume() override {}
  void CheckHost(const std::string& key, const std::string& start, int slots) override {
    asked.push_back("check " + std::to_string(slots) + " " + start);
    keys.push_back(key);
  }
  void CheckPeers(const std::string& peers) override { asked.push_back("peers " + peers); }
  std::vector<std::string> asked;
  std::vector<std::string> keys;
};

PreflightHost Remote(const std::string& name, StandIn* agent) {
  PreflightHost h;
  h.name = name;
  h.slots = 2;
  h.spec.remote_host = agent;
  h.spec.remote_command = "start of " + name;
  return h;
}

void RunUntil(boost::asio::io_context* io, const std::function<bool()>& done) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < until) {
    io->restart();
    io->run_for(std::chrono::milliseconds(10));
  }
}

TEST_CASE("pre-flight run: a silent host is the only one named; the others go on to probe each other") {
  boost::asio::io_context io;
  StandIn a, b, c;
  std::optional<PreflightResult> verdict;
  PreflightRun::Limits limits;
  limits.answer = std::chrono::milliseconds(200);
  PreflightRun run(&io, {Remote("a", &a), Remote("b", &b), Remote("c", &c)}, limits,
                   [&](const PreflightResult& r) { verdict = r; });
  run.Start();
  CHECK(a.asked == std::vector<std::string>{"check 2 start of a"});
  REQUIRE((a.keys.size() == 1 && b.keys.size() == 1 && c.keys.size() == 1));
  CHECK(preflight::IsProbeKey(a.keys[0]));  // one key for the run, every host's
  CHECK((b.keys[0] == a.keys[0] && c.keys[0] == a.keys[0]));
  run.OnCheck(&a, "self\nprobe 198.18.0.2:4001\n");
  run.OnCheck(&c, "self\nprobe 198.18.0.4:4003\n");  // b says nothing
  RunUntil(&io, [&] { return a.asked.size() == 2; });
  REQUIRE(a.asked.size() == 2);
  CHECK(a.asked[1] == "peers c 198.18.0.4 4003 1\n");
  CHECK(c.asked[1] == "peers a 198.18.0.2 4001 1\n");
  CHECK(b.asked.size() == 1);  // never asked to probe
  run.OnCheck(&a, "peers\npeer c 198.18.0.4:4003 0.200 0.050 9000.0\n");
  run.OnCheck(&c, "peers\npeer a 198.18.0.2:4001 0.200 0.050 9000.0\n");
  REQUIRE(verdict);
  REQUIRE(verdict->sick.size() == 1);
  CHECK(verdict->sick[0].host == "b");
  CHECK(verdict->sick[0].why == "unreachable: no pre-flight answer in 0.2 s");
  CHECK(verdict->median_mbit_s == doctest::Approx(9000));
  CHECK(a.asked.back() == "peers ");  // the listeners are closed
  CHECK(b.asked.back() == "peers ");
}

TEST_CASE("pre-flight run: a host lost while asked, and one whose plan failed, are named with why") {
  boost::asio::io_context io;
  StandIn a, b;
  std::optional<PreflightResult> verdict;
  PreflightHost planless;
  planless.name = "c";
  planless.problem = "cannot start a rank on c: this job starts ranks on this machine only";
  PreflightRun run(&io, {Remote("a", &a), Remote("b", &b), planless}, {},
                   [&](const PreflightResult& r) { verdict = r; });
  run.Start();
  run.OnCheck(&b, "lost\netrun: error: ssh b:22: Connection refused\n");
  run.OnCheck(&a, "self\nproblem cannot run 'train': command not found in PATH\nprobe 198.18.0.2:4001\n");
  RunUntil(&io, [&] { return verdict.has_value(); });  // one host left to probe: no probes
  REQUIRE(verdict);
  REQUIRE(verdict->sick.size() == 3);
  CHECK(verdict->sick[0].why == "cannot run 'train': command not found in PATH");
  CHECK(verdict->sick[1].why == "unreachable: ssh b:22: Connection refused");
  CHECK(verdict->sick[2].why == "cannot start a rank on c: this job starts ranks on this machine only");
}

TEST_CASE("pre-flight run: this machine checks itself on a thread, and probes a stand-in's real listener") {
  boost::asio::io_context io;
  StandIn b;
  PreflightHost here;
  here.name = "localhost";
  here.slots = 1;
  here.spec.argv = {"sh", "-c", "true"};
  here.spec.env = {"PATH=/usr/bin:/bin", "HOROVOD_GLOO_IFACE=lo"};
  std::optional<PreflightResult> verdict;
  PreflightRun run(&io, {here, Remote("b", &b)}, {}, [&](const PreflightResult& r) { verdict = r; });
  run.Start();
  preflight::ProbeServer far;  // b's listener, with the key the run gave b
  std::string err;
  REQUIRE(b.keys.size() == 1);
  REQUIRE(far.Start(b.keys[0], &err));
  run.OnCheck(&b, "self\nprobe 127.0.0.1:" + std::to_string(far.port()) + "\n");
  RunUntil(&io, [&] { return b.asked.size() == 2; });
  REQUIRE(b.asked.size() == 2);
  CHECK(b.asked[1].starts_with("peers localhost 127.0.0.1 "));  // this machine's own listener
  run.OnCheck(&b, "peers\n" + preflight::PeerResultLine({"localhost", "127.0.0.1:1", "", 0.1, 0.05, 5000}));
  RunUntil(&io, [&] { return verdict.has_value(); });
  REQUIRE(verdict);
  CHECK(verdict->checks[0].problems.empty());  // (whether a stream is slow against a stand-in's made-up rate is no matter here)
  REQUIRE(verdict->checks[0].peers.size() == 1);
  CHECK(verdict->checks[0].peers[0].ok());  // it reached b's listener
  CHECK(verdict->checks[0].peers[0].mbit_s > 0);
}

}  // namespace
}  // namespace etrun::launcher
