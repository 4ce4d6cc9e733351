// AgentLink over pipes, with the test as the host's agent: what the launcher sends before and
// after the agent runs (the binary on request, frames only once it is up), how the agent's
// frames become ranks' output and exits, and how a stream that ends or goes silent ends the
// host's ranks with 255 and a line saying why.
#include "launcher/agent/agent_link.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

namespace etrun::launcher::agent {
namespace {

// What the link reported, per rank. It stands for RankSet, whose rank table says which ranks
// the host runs: reports of ranks it did not start there, or that ended, are dropped, and a lost
// host ends the ranks it still runs, the oldest saying why.
struct Recorder : RankHostEvents {
  bool Runs(RankHost* from, int id) const { return from == host && started.count(id) && !exits.count(id); }
  bool OnRemoteOutput(RankHost* from, int id, bool is_stderr, std::string_view data) override {
    if (Runs(from, id)) (is_stderr ? err[id] : out[id]) += data;
    return !pause;
  }
  void OnRemoteExit(RankHost* from, int id, const ExitStatus& status,
                    std::chrono::steady_clock::time_point exited_at) override {
    if (Runs(from, id)) exit_times[id] = exited_at;
    if (Runs(from, id)) exits[id] = status;
  }
  void OnRemoteFacts(RankHost* from, int id, std::string_view text) override {
    if (Runs(from, id)) facts[id] = std::string(text);
  }
  void OnRemoteCheck(RankHost* from, std::string_view text) override {
    if (from == host) checks.emplace_back(text);
  }
  void OnHostLost(RankHost* from, std::string_view line, const ExitStatus& status) override {
    std::vector<int> ids;
    for (int id : started) {
      if (Runs(from, id)) ids.push_back(id);
    }
    for (int id : ids) {
      if (id == ids.front()) OnRemoteOutput(from, id, true, line);
      OnRemoteExit(from, id, status, std::chrono::steady_clock::now());
    }
  }
  RankHost* host = nullptr;  // the link under test
  std::set<int> started;
  std::map<int, std::string> out, err, facts;
  std::map<int, ExitStatus> exits;
  std::map<int, std::chrono::steady_clock::time_point> exit_times;
  std::vector<std::string> checks;  // pre-flight answers
  bool pause = false;
};

// The test's end of the link's streams.
struct FakeAgent {
  FakeAgent() {
    REQUIRE(pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(pipe2(err, O_CLOEXEC) == 0);
    fcntl(in[0], F_SETFL, O_NONBLOCK);
  }
  ~FakeAgent() {
    for (int fd : {in[0], out[1], err[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  AgentTransport Transport() {
    AgentTransport t{in[1], out[0], err[0], -1};
    in[1] = out[0] = err[0] = -1;
    return t;
  }
  void Say(const std::string& bytes) { REQUIRE(write(out[1], bytes.data(), bytes.size()) == ssize_t(bytes.size())); }
  void Frame(char op, uint32_t id, const std::string& data) {
    std::string f;
    AppendFrame(&f, op, id, data);
    Say(f);
  }
  // What the launcher wrote so far.
  std::string Heard() {
    char buffer[1 << 16];
    ssize_t n;
    while ((n = read(in[0], buffer, sizeof(buffer))) > 0) heard.append(buffer, static_cast<size_t>(n));
    return heard;
  }
  void Hang() {  // the stream ends: the agent, or its connection, is gone
    close(out[1]);
    out[1] = -1;
    close(err[1]);
    err[1] = -1;
  }
  int in[2], out[2], err[2];
  std::string heard;
};

// A link to the test's fake agent, begun; its io_context is run by RunUntil.
struct Linked {
  // `peer`: the transport's kernel's word on the far end (a TCP transport's); null: a pipe.
  explicit Linked(AgentLink::Options options,
                  std::function<std::optional<bool>(std::chrono::milliseconds)> peer = nullptr)
      : link(&io, &events, std::move(options)) {
    events.host = &link;
    AgentTransport transport = agent.Transport();
    transport.peer_acking = std::move(peer);
    link.Begin(transport);
  }
  // RankSet's part: a rank of the host's goes into its table, then to the link.
  void Start(int id, const std::string& command, const GpuShare& gpus) {
    events.started.insert(id);
    link.StartRank(id, command, gpus);
  }
  boost::asio::io_context io;
  Recorder events;
  FakeAgent agent;
  AgentLink link;  // last: gone first
};

AgentLink::Options Named(const std::string& host, const std::string& label = "") {
  AgentLink::Options options;
  options.host = host;
  options.label = label;
  return options;
}

void RunUntil(boost::asio::io_context* io, const std::function<bool()>& done, double seconds = 5) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done() && std::chrono::steady_clock::now() < until) {
    io->restart();
    io->run_for(std::chrono::milliseconds(10));
  }
}

std::vector<Frame> FramesOf(const std::string& bytes) {
  std::vector<Frame> frames;
  FrameReader reader;
  reader.Feed(bytes, [&](Frame& f) { frames.push_back(f); });
  return frames;
}

TEST_CASE("a host without an agent gets the binary first, and frames only once the agent runs") {
  AgentImage image("#!/bin/sh\n# not really etrun\n", "/nonexistent/etrun-agent");
  AgentLink::Options options = Named("h1", "ssh h1:22");
  options.image = &image;
  Linked t(options);
  t.Start(4, "echo hi", {});  // queued: the bootstrap reads the binary from this stream first
  t.agent.Say("Welcome to h1\n");
  t.agent.Say(std::string(kNeedLine) + "\n");
  RunUntil(&t.io, [&] { return t.agent.Heard().size() >= 29; });
  CHECK(t.agent.Heard() == "#!/bin/sh\n# not really etrun\n");
  CHECK_FALSE(t.link.up());
  t.agent.Say(std::string(kHelloLine) + "build-1\n");
  t.agent.Frame(kFacts, 0, "hostname=h1\n");
  RunUntil(&t.io, [&] { return t.agent.Heard().size() > 29; });
  CHECK(t.link.up());
  std::vector<Frame> frames = FramesOf(t.agent.Heard().substr(29));
  REQUIRE(frames.size() >= 1);
  CHECK(frames[0].op == kStart);
  CHECK(frames[0].id == 4);
  CHECK(frames[0].data == "echo hi");
  CHECK(t.link.facts() == "hostname=h1\n");
}

TEST_CASE("the agent's frames are each rank's output and exit; signals go to the agent") {
  AgentLink::Options options = Named("h1");
  Linked t(options);
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.Start(1, "a", {});
  t.Start(2, "b", {});
  t.agent.Frame(kStdout, 1, "one\ntw");
  t.agent.Frame(kStderr, 2, "warn\n");
  t.agent.Frame(kStdout, 1, "o\n");
  t.agent.Frame(kExit, 1, "c3");
  t.agent.Frame(kExit, 2, "s9");
  t.agent.Frame(kStdout, 1, "after its exit: dropped\n");
  RunUntil(&t.io, [&] { return t.events.exits.size() == 2; });
  CHECK(t.events.out[1] == "one\ntwo\n");
  CHECK(t.events.err[2] == "warn\n");
  CHECK(t.events.exits[1].code == 3);
  CHECK(t.events.exits[2].kind == ExitStatus::Kind::kSignaled);
  CHECK(t.events.exits[2].signal == 9);
  t.Start(3, "c", {});
  t.link.SignalRank(3, 15);
  RunUntil(&t.io, [&] { return FramesOf(t.agent.Heard()).size() >= 4; });
  std::vector<Frame> frames = FramesOf(t.agent.Heard());
  REQUIRE(frames.size() == 4);
  CHECK(frames[3].op == kSignal);
  CHECK(frames[3].id == 3);
  CHECK(frames[3].data == "15");
  CHECK(t.link.RunDetached("ss -K dst 198.18.0.3"));
}

TEST_CASE("the agent's SIGTERM stops the job before the exits it sent after it are taken in") {
  // Slurm signals a job's steps: the agent says so, then its ranks drain and exit 0. Their exits,
  // read in the same turn, must find the job stopping already, or they read as finished.
  AgentLink::Options options = Named("h2");
  std::vector<std::string> order;
  const std::map<int, ExitStatus>* exits = nullptr;
  options.on_term = [&] { order.push_back("term, exits seen: " + std::to_string(exits->size())); };
  Linked t(options);
  exits = &t.events.exits;
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.Start(1, "a", {});
  std::string bytes;
  AppendFrame(&bytes, kTerm, 0, "");
  AppendFrame(&bytes, kExit, 1, "c0");
  t.agent.Say(bytes);  // one write: one read
  RunUntil(&t.io, [&] { return t.events.exits.size() == 1; });
  REQUIRE(t.events.exits.size() == 1);
  CHECK(order == std::vector<std::string>{"term, exits seen: 0"});
  t.agent.Frame(kTerm, 0, "");  // again: passed on again (the runtime counts it a repeat)
  RunUntil(&t.io, [&] { return order.size() == 2; });
  CHECK(order == std::vector<std::string>{"term, exits seen: 0", "term, exits seen: 1"});
}

TEST_CASE("an agent's SIGTERM is ignored where the cluster's signal is no stop of the job") {
  Linked t(Named("h2"));  // no on_term: a pod being terminated, a borrowed allocation's node
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.Start(1, "a", {});
  t.agent.Frame(kTerm, 0, "");
  t.agent.Frame(kExit, 1, "c0");
  RunUntil(&t.io, [&] { return t.events.exits.size() == 1; });
  CHECK(t.events.exits[1].code == 0);
  CHECK(t.link.up());
}

TEST_CASE("exit times come in the agent's clock, translated to ours to the microsecond") {
  // A stop's way to a rank and the rank's end can take less than a millisecond: the times of two
  // hosts' ranks, which decide a cascade's first failure, must not be rounded to one.
  Linked t(Named("h1"));
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.agent.Frame(kFacts, 0, "hostname=h1\nclock_us=5000000\n");
  t.Start(1, "a", {});
  t.Start(2, "b", {});
  t.agent.Frame(kExit, 1, "c1@4000400");  // a second before its hello: no later than now
  t.agent.Frame(kExit, 2, "s15@4000100");
  RunUntil(&t.io, [&] { return t.events.exits.size() == 2; });
  REQUIRE(t.events.exit_times.size() == 2);
  CHECK(t.events.exit_times[1] - t.events.exit_times[2] == std::chrono::microseconds(300));
  CHECK(t.events.exit_times[1] <= std::chrono::steady_clock::now());
}

TEST_CASE("a pre-flight goes to the agent with the host's slots; its answers come back as they were") {
  Linked t(Named("h2"));
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.link.CheckHost("0123456789abcdef0123456789abcdef", "the first rank's start", 3);
  t.link.CheckPeers("h1 198.18.0.2 4000 1\n");
  t.link.CheckPeers("");
  RunUntil(&t.io, [&] { return FramesOf(t.agent.Heard()).size() >= 3; });
  std::vector<Frame> frames = FramesOf(t.agent.Heard());
  REQUIRE(frames.size() == 3);
  CHECK((frames[0].op == kCheck && frames[0].id == 3 && frames[0].data == "0123456789abcdef0123456789abcdef\nthe first rank's start"));
  CHECK((frames[1].op == kPeers && frames[1].data == "h1 198.18.0.2 4000 1\n"));
  CHECK((frames[2].op == kPeers && frames[2].data.empty()));
  t.agent.Frame(kChecked, 0, "self\nprobe 198.18.0.3:4001\n");
  RunUntil(&t.io, [&] { return t.events.checks.size() == 1; });
  CHECK(t.events.checks == std::vector<std::string>{"self\nprobe 198.18.0.3:4001\n"});
}

TEST_CASE("a pre-flight of a host that is gone is answered at once with why") {
  Linked t(Named("h2", "remote shell to h2"));
  t.agent.Hang();
  RunUntil(&t.io, [&] { return t.link.lost(); });
  REQUIRE(t.link.lost());
  t.link.CheckHost("0123456789abcdef0123456789abcdef", "start", 1);
  REQUIRE(t.events.checks.size() == 1);
  CHECK(t.events.checks[0].starts_with("lost\netrun: error: remote shell to h2: "));
}

TEST_CASE("a probe asks the agent for a rank's facts, which come back as that rank's, rank 0's too; the host's stay apart") {
  AgentLink::Options options = Named("h1");
  Linked t(options);
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.agent.Frame(kFacts, 0, "hostname=h1\npid=7\n");
  t.Start(0, "a", {});
  t.Start(4, "b", {});
  t.link.ProbeRank(4);
  RunUntil(&t.io, [&] { return FramesOf(t.agent.Heard()).size() >= 3; });
  std::vector<Frame> frames = FramesOf(t.agent.Heard());
  REQUIRE(frames.size() == 3);
  CHECK(frames[2].op == kProbe);
  CHECK(frames[2].id == 4);
  t.agent.Frame(kRankFacts, 4, "state=S\nwchan=do_wait\ncommand=sh\n");
  t.agent.Frame(kRankFacts, 0, "state=R\nwchan=\ncommand=python3\n");
  RunUntil(&t.io, [&] { return t.events.facts.size() == 2; });
  CHECK(t.events.facts[4] == "state=S\nwchan=do_wait\ncommand=sh\n");
  CHECK(t.events.facts[0] == "state=R\nwchan=\ncommand=python3\n");  // the host's are the link's own
}

TEST_CASE("a rank that takes GPUs is preceded by its share, for the agent to count them out") {
  Linked t(Named("h1"));
  t.agent.Say(std::string(kHelloLine) + "x\n");
  t.Start(5, "train", {2, 0, 1});
  t.Start(6, "plain", {});
  RunUntil(&t.io, [&] { return FramesOf(t.agent.Heard()).size() >= 3; });
  std::vector<Frame> frames = FramesOf(t.agent.Heard());
  REQUIRE(frames.size() == 3);
  CHECK((frames[0].op == kGpus && frames[0].id == 5 && frames[0].data == "2 0 1"));
  CHECK((frames[1].op == kStart && frames[1].id == 5 && frames[1].data == "train"));
  CHECK((frames[2].op == kStart && frames[2].id == 6));
}

TEST_CASE("a stream that ends before the agent runs fails its ranks with the login's last words") {
  AgentLink::Options options = Named("h2", "remote shell to h2");
  Linked t(options);
  t.Start(0, "a", {});
  std::string said = "ssh: connect to host h2 port 22: No route to host\n";
  REQUIRE(write(t.agent.err[1], said.data(), said.size()) == static_cast<ssize_t>(said.size()));
  t.agent.Hang();
  RunUntil(&t.io, [&] { return t.events.exits.size() == 1; });
  CHECK(t.events.exits[0].code == kHostLost);
  CHECK(t.events.err[0] == "etrun: error: remote shell to h2: the agent did not start: ssh: connect to host h2 "
                         "port 22: No route to host\n");
  CHECK(t.link.lost());
  t.Start(1, "b", {});  // a lost host fails new ranks at once
  CHECK(t.events.exits[1].code == kHostLost);
}

TEST_CASE("an agent that goes silent is lost after --lost-host-timeout, counted from its start") {
  AgentLink::Options options = Named("h3", "ssh h3:22");
  options.lost_after_s = 0.5;
  Linked t(options);
  t.Start(7, "a", {});
  t.Start(8, "b", {});
  // A slow login: silent for longer than the timeout before the agent runs, and not lost.
  RunUntil(&t.io, [] { return false; }, 1.2);
  CHECK_FALSE(t.link.lost());
  t.agent.Say(std::string(kHelloLine) + "x\n");
  RunUntil(&t.io, [&] { return t.link.up(); });
  REQUIRE(t.link.up());
  RunUntil(&t.io, [&] { return t.events.exits.count(7) != 0; }, 5);
  CHECK(t.link.lost());
  CHECK(t.events.exits[7].code == kHostLost);
  CHECK(t.events.err[7] == "etrun: error: ssh h3:22: connection lost: no answer for 0.5 s (--lost-host-timeout)\n");
  // One line for the host: its other rank exits 255 without repeating it.
  CHECK(t.events.exits[8].code == kHostLost);
  CHECK(t.events.err.count(8) == 0);
}

}  // namespace
}  // namespace etrun::launcher::agent

namespace etrun::launcher::agent {
namespace {

TEST_CASE("a silent agent whose host still acknowledges is late, and lost only at --unresponsive-host-timeout") {
  // Busy, not gone: SSH's kernel still acknowledges the pings. One call says it is late; the
  // host is lost once the longer bound passes, in one line that says which bound.
  AgentLink::Options options = Named("h3", "ssh h3:22");
  options.lost_after_s = 0.5;
  options.unresponsive_after_s = 2.5;
  std::vector<std::string> late;
  options.on_late = [&](const std::string& host, double silent, double bound) {
    late.push_back(host + " " + std::to_string(bound));
    CHECK(silent > 0.5);
  };
  int asked = 0;
  Linked t(options, [&](std::chrono::milliseconds window) {
    ++asked;
    CHECK(window == std::chrono::milliseconds(500));
    return std::optional<bool>(true);
  });
  t.Start(7, "a", {});
  t.agent.Say(std::string(kHelloLine) + "x\n");
  RunUntil(&t.io, [&] { return t.link.up(); });
  RunUntil(&t.io, [&] { return !late.empty(); }, 5);
  CHECK_FALSE(t.link.lost());
  RunUntil(&t.io, [&] { return t.events.exits.count(7) != 0; }, 8);
  CHECK(t.link.lost());
  CHECK(late == std::vector<std::string>{"h3 2.500000"});
  CHECK(asked >= 1);
  CHECK(t.events.err[7].starts_with("etrun: error: no answer from h3's agent for "));
  CHECK(t.events.err[7].ends_with(" s, though the host is still reachable (--unresponsive-host-timeout 2.5): "
                                  "the host's ranks are lost\n"));
}

TEST_CASE("a silent agent whose host's kernel stopped acknowledging is lost at --lost-host-timeout") {
  AgentLink::Options options = Named("h4", "ssh h4:22");
  options.lost_after_s = 0.5;
  options.unresponsive_after_s = 30;
  bool late = false;
  options.on_late = [&](const std::string&, double, double) { late = true; };
  Linked t(options, [](std::chrono::milliseconds) { return std::optional<bool>(false); });
  t.Start(7, "a", {});
  t.agent.Say(std::string(kHelloLine) + "x\n");
  RunUntil(&t.io, [&] { return t.events.exits.count(7) != 0; }, 5);
  CHECK(t.link.lost());
  CHECK_FALSE(late);
  CHECK(t.events.err[7] == "etrun: error: ssh h4:22: connection lost: no answer for 0.5 s (--lost-host-timeout)\n");
}

}  // namespace
}  // namespace etrun::launcher::agent
