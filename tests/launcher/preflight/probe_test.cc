#include "launcher/preflight/probe.h"

#include <doctest/doctest.h>
#include <sys/socket.h>

#include <cerrno>

#include <string>
#include <thread>
#include <vector>

using etrun::launcher::preflight::IsProbeKey;
using etrun::launcher::preflight::NewProbeKey;
using etrun::launcher::preflight::ParsePeerResultLine;
using etrun::launcher::preflight::PeerResult;
using etrun::launcher::preflight::PeerResultLine;
using etrun::launcher::preflight::PeerTarget;
using etrun::launcher::preflight::ProbeLimits;
using etrun::launcher::preflight::ProbePeers;
using etrun::launcher::preflight::ProbeServer;

namespace {

const std::string kKey = NewProbeKey();

// What a listener says to a connection that sends `sent` (then, with `done`, shuts its sending
// side) and waits: its bytes until it closes the connection, or "timed out" after 10 s.
std::string AnswerTo(int port, const std::string& sent, bool done = false) {
  auto deadline = etrun::smoke::Clock::now() + std::chrono::seconds(10);
  etrun::smoke::Fd fd;
  std::string err, got;
  REQUIRE(etrun::smoke::ConnectIpv4("127.0.0.1", port, deadline, &fd, &err));
  REQUIRE(etrun::smoke::WriteAll(fd, sent, deadline, &err));
  if (done) shutdown(fd.get(), SHUT_WR);
  while (etrun::smoke::ReadSome(fd, &got, deadline, &err)) {
  }
  return err.empty() || err.find("reset") != std::string::npos ? got : err;  // closed either way
}

}  // namespace

TEST_CASE("a run's key is 32 hex digits from the kernel, new each time") {
  std::string a = NewProbeKey(), b = NewProbeKey();
  CHECK(IsProbeKey(a));
  CHECK(IsProbeKey(b));
  CHECK(a != b);
  CHECK_FALSE(IsProbeKey(""));
  CHECK_FALSE(IsProbeKey(a.substr(1)));
  CHECK_FALSE(IsProbeKey(std::string(32, 'G')));
}

TEST_CASE("the listener answers only a probe that opens with the run's key") {
  ProbeServer server;
  std::string err;
  REQUIRE(server.Start(kKey, &err));
  CHECK(AnswerTo(server.port(), kKey + "rr", true) == "rr");
  std::string wrong = kKey;
  wrong[31] = wrong[31] == '0' ? '1' : '0';
  CHECK(AnswerTo(server.port(), wrong + "rr").empty());                // closed, unanswered
  CHECK(AnswerTo(server.port(), std::string(40, 'r')).empty());        // a bare probe too
  CHECK(AnswerTo(server.port(), kKey.substr(0, 10)).empty());          // part of it: closed at its deadline
  std::vector<PeerResult> results = ProbePeers({{"s", "127.0.0.1", server.port(), true}}, wrong, ProbeLimits{});
  CHECK_FALSE(results[0].reached());
  CHECK(results[0].mbit_s == -1);  // nothing streamed to it
}

TEST_CASE("a listener without a key is not started; connections that send no key cannot crowd out the probes") {
  ProbeServer none;
  std::string err;
  CHECK_FALSE(none.Start("", &err));
  CHECK(err == "cannot listen for probes: no key for them");
  ProbeServer server;
  REQUIRE(server.Start(kKey, &err));
  auto connected = etrun::smoke::Clock::now();
  auto deadline = connected + std::chrono::seconds(10);
  etrun::smoke::Fd first;
  REQUIRE(etrun::smoke::ConnectIpv4("127.0.0.1", server.port(), deadline, &first, &err));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the oldest of them
  std::vector<etrun::smoke::Fd> crowd(256);
  for (etrun::smoke::Fd& fd : crowd) REQUIRE(etrun::smoke::ConnectIpv4("127.0.0.1", server.port(), deadline, &fd, &err));
  // The 257th without a key closed the first (end of stream, not "timed out"), well before the
  // first's own 2 s were up; the newest is still open.
  std::string got;
  CHECK_FALSE(etrun::smoke::ReadSome(first, &got, connected + ProbeServer::kKeyWithin / 2, &err));
  CHECK(err.empty());
  char c = 0;
  CHECK(recv(crowd.back().get(), &c, 1, MSG_DONTWAIT) < 0);  // nothing to read, not closed
  CHECK(errno == EAGAIN);
  std::vector<PeerResult> results = ProbePeers({{"s", "127.0.0.1", server.port(), false}}, kKey, ProbeLimits{});
  CHECK(results[0].ok());
}

TEST_CASE("probes reach real listeners: round trips and a stream whose every byte is counted") {
  ProbeServer a, b;
  std::string err;
  REQUIRE(a.Start(kKey, &err));
  REQUIRE(b.Start(kKey, &err));
  ProbeLimits limits;
  limits.stream_for = std::chrono::milliseconds(50);
  std::vector<PeerResult> results = ProbePeers(
      {{"a", "127.0.0.1", a.port(), true}, {"b", "127.0.0.1", b.port(), false}}, kKey, limits);
  REQUIRE(results.size() == 2);
  CHECK(results[0].ok());
  CHECK(results[0].host == "a");
  CHECK(results[0].where == "127.0.0.1:" + std::to_string(a.port()));
  CHECK(results[0].connect_ms >= 0);
  CHECK(results[0].rtt_ms >= 0);
  CHECK(results[0].mbit_s > 0);  // the server's count matched what was sent
  CHECK(results[1].ok());
  CHECK(results[1].rtt_ms >= 0);
  CHECK(results[1].mbit_s == -1);  // no stream asked for
}

TEST_CASE("a stream is bounded by its byte budget as well as its time") {
  ProbeServer a;
  std::string err;
  REQUIRE(a.Start(kKey, &err));
  ProbeLimits limits;
  limits.stream_for = std::chrono::seconds(30);
  limits.stream_bytes = 1 << 20;
  auto start = std::chrono::steady_clock::now();
  std::vector<PeerResult> results = ProbePeers({{"a", "127.0.0.1", a.port(), true}}, kKey, limits);
  CHECK(results[0].ok());
  CHECK(results[0].mbit_s > 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("a port nobody listens on, and a listener that never answers, are errors within the timeout") {
  int port = 0;
  {
    ProbeServer gone;
    std::string err;
    REQUIRE(gone.Start(kKey, &err));
    port = gone.port();
  }  // closed: connects are refused
  etrun::smoke::Fd silent;
  int silent_port = 0;
  std::string err;
  REQUIRE(etrun::smoke::Listen(&silent, &silent_port, &err));  // accepts (the kernel does), never answers
  ProbeLimits limits;
  limits.timeout = std::chrono::milliseconds(300);
  std::vector<PeerResult> results =
      ProbePeers({{"gone", "127.0.0.1", port, true}, {"silent", "127.0.0.1", silent_port, false},
                  {"bad", "not-an-address", 1, false}},
                 kKey, limits);
  CHECK_FALSE(results[0].reached());
  CHECK(results[0].error == "cannot connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
  CHECK(results[1].connect_ms >= 0);
  CHECK_FALSE(results[1].reached());
  CHECK(results[1].error == "round trip to 127.0.0.1:" + std::to_string(silent_port) + ": no answer in 300 ms");
  CHECK(results[2].error == "cannot connect to not-an-address:1: not an IPv4 address and port");
}

TEST_CASE("a result travels as one line and back") {
  PeerResult ok{"h2", "198.18.0.3:4000", "", 0.25, 0.05, 9400};
  PeerResult back;
  REQUIRE(ParsePeerResultLine(PeerResultLine(ok), &back));
  CHECK(back.host == "h2");
  CHECK(back.where == "198.18.0.3:4000");
  CHECK(back.ok());
  CHECK(back.mbit_s == doctest::Approx(9400));
  PeerResult failed{"h3", "198.18.0.4:4000", "cannot connect to 198.18.0.4:4000: no answer in 2000 ms",
                    -1, -1, -1};
  REQUIRE(ParsePeerResultLine(PeerResultLine(failed), &back));
  CHECK(back.error == failed.error);
  CHECK_FALSE(back.reached());
  CHECK_FALSE(ParsePeerResultLine("peer h2 1.2.3.4:5 x y z\n", &back));
  CHECK_FALSE(ParsePeerResultLine("program ok\n", &back));
}
