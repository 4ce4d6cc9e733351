// Real processes through RankSet: spawning, output forwarding, exits, process groups.
#include "launcher/rank_set.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <doctest/doctest.h>

#include "launcher/output_sink.h"
#include "launcher/spawner.h"

namespace asio = boost::asio;
using etrun::launcher::LaunchSpec;
using etrun::launcher::LocalSpawner;
using etrun::launcher::OutputSink;
using etrun::launcher::RankOutput;
using etrun::launcher::RankSet;

namespace {

std::string ReadAll(FILE* f) {
  fflush(f);
  std::string out;
  rewind(f);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

LaunchSpec Shell(const std::string& script) {
  return {{"/bin/sh", "-c", script}, {"PATH=/usr/bin:/bin"}};
}

// Runs specs to completion; returns finished records in finishing order.
struct Harness {
  asio::io_context io;
  asio::signal_set sigchld{io, SIGCHLD};
  FILE* out = tmpfile();
  FILE* err = tmpfile();
  LocalSpawner spawner;
  std::vector<RankSet::Finished> finished;
  // Runs inside the finish callback, after `finished` is updated (may start more ranks).
  std::function<void(RankSet*, const RankOutput&, const RankSet::Finished&)> then;

  ~Harness() {
    fclose(out);
    fclose(err);
  }

  void RunAll(const std::vector<LaunchSpec>& specs) {
    OutputSink sink;
    RankOutput o;
    o.console_out = sink.AddDestination(fileno(out), false, "out");
    o.console_err = sink.AddDestination(fileno(err), false, "err");
    RankSet ranks(&io, &spawner, &sink, nullptr, std::chrono::milliseconds(2000));
    ranks.set_on_finished([this, &ranks, &o](const RankSet::Finished& f) {
      finished.push_back(f);
      if (then) then(&ranks, o, f);
      if (ranks.active() == 0) sigchld.cancel();
    });
    std::function<void(const boost::system::error_code&, int)> on_sig =
        [&](const boost::system::error_code& ec, int) {
          if (ec) return;
          ranks.Reap();
          if (ranks.active() > 0) sigchld.async_wait(on_sig);
        };
    sigchld.async_wait(on_sig);
    for (size_t i = 0; i < specs.size(); ++i) {
      std::string e;
      REQUIRE(ranks.Start(static_cast<int>(i), "localhost", specs[i], o, &e));
    }
    std::string e;
    REQUIRE(ranks.AwaitExecs(&e));
    ranks.Reap();
    if (ranks.active() > 0) io.run();
    sink.Flush();
  }
};

}  // namespace

TEST_CASE("ranks' stdout and stderr arrive prefixed and their exit statuses are reported") {
  Harness h;
  h.RunAll({Shell("echo out0; echo err0 >&2; exit 3"), Shell("printf 'a\\nb'; exit 0")});
  REQUIRE(h.finished.size() == 2);
  std::sort(h.finished.begin(), h.finished.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  CHECK(h.finished[0].status.ShellCode() == 3);
  CHECK(h.finished[1].status.success());
  std::string out = ReadAll(h.out);
  CHECK(out.find("[0]<stdout>:out0\n") != std::string::npos);
  CHECK(out.find("[1]<stdout>:a\n") != std::string::npos);
  CHECK(out.find("[1]<stdout>:b\n") != std::string::npos);  // ended by etrun at EOF
  CHECK(ReadAll(h.err) == "[0]<stderr>:err0\n");
}

TEST_CASE("a rank finishes only after its output is drained, and its leftover children die") {
  // Given a rank whose background child keeps the pipe open, the child is killed after the grace
  // period and every byte written before that is delivered.
  Harness h;
  auto start = std::chrono::steady_clock::now();
  h.RunAll({Shell("(echo child; sleep 60) & echo parent")});
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(h.finished.size() == 1);
  CHECK(h.finished[0].status.success());
  std::string out = ReadAll(h.out);
  CHECK(out.find("[0]<stdout>:parent\n") != std::string::npos);
  CHECK(out.find("[0]<stdout>:child\n") != std::string::npos);
  CHECK(took < std::chrono::seconds(30));  // not the child's 60 s sleep
}

TEST_CASE("a finish callback may start more ranks while exits are being reaped") {
  // Given a rank that closes its output before it exits, so that it finishes inside Reap(), and a
  // second rank after it in the table, when the callback starts four more ranks (the table grows
  // and moves), reaping carries on over the new table and every rank runs to completion. Reap()
  // once went on walking the old table: the ASan build reported the use after free.
  Harness h;
  h.then = [](RankSet* ranks, const RankOutput& o, const RankSet::Finished& f) {
    if (f.rank != 0) return;
    for (int i = 2; i <= 5; ++i) {
      std::string e;
      REQUIRE(ranks->Start(i, "localhost", Shell("echo again; exit " + std::to_string(i)), o, &e));
      REQUIRE(ranks->AwaitExecs(&e));
    }
  };
  h.RunAll({Shell("exec >&- 2>&-; sleep 0.3"), Shell("sleep 0.6; exit 1")});
  REQUIRE(h.finished.size() == 6);
  CHECK(h.finished[0].rank == 0);
  std::sort(h.finished.begin(), h.finished.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (int i = 0; i <= 5; ++i) CHECK(h.finished[i].status.ShellCode() == i);
  std::string out = ReadAll(h.out);
  for (int i = 2; i <= 5; ++i) {
    CHECK(out.find("[" + std::to_string(i) + "]<stdout>:again\n") != std::string::npos);
  }
}

TEST_CASE("a command that cannot be executed is reported by AwaitExecs, not silently lost") {
  asio::io_context io;
  LocalSpawner spawner;
  OutputSink sink;
  RankOutput o;
  o.console_out = sink.AddDestination(open("/dev/null", O_WRONLY | O_CLOEXEC), true, "null");
  o.console_err = o.console_out;
  RankSet ranks(&io, &spawner, &sink, nullptr, std::chrono::milliseconds(100));
  std::string err;
  // A directory on PATH resolution passes stat but fails exec.
  CHECK_FALSE(ranks.Start(0, "localhost", {{"/nonexistent/prog"}, {}}, o, &err));
  CHECK(err == "cannot run '/nonexistent/prog': no such file");
}
