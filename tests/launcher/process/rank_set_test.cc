// Real processes through RankSet: spawning, output forwarding, exits, process groups.
#include "launcher/process/rank_set.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <doctest/doctest.h>

#include "launcher/output/output_sink.h"
#include "launcher/process/spawner.h"

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

LaunchSpec Command(std::vector<std::string> argv) {
  LaunchSpec spec;
  spec.argv = std::move(argv);
  return spec;
}

LaunchSpec Shell(const std::string& script) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = {"PATH=/usr/bin:/bin"};
  return spec;
}

// Whether `text` has been written to f's file yet. Reads with pread: the OutputSink's writer
// thread appends through the same file offset, which must not move.
bool FileHas(FILE* f, const std::string& text) {
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = pread(fileno(f), buf, sizeof(buf), static_cast<off_t>(all.size()))) > 0) {
    all.append(buf, static_cast<size_t>(n));
  }
  return all.find(text) != std::string::npos;
}

// Polls `condition` until it holds (true) or `limit` passes (false).
bool WaitFor(const std::function<bool()>& condition, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A named pipe a rank's shell waits on (`read go < PATH`) until the test calls Open().
class Gate {
 public:
  Gate() {
    char dir[] = "/tmp/etrun-rank-set-test-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/gate";
    REQUIRE(mkfifo(path_.c_str(), 0600) == 0);
    // Read-write: never blocks, and the shell's open for reading does not block either.
    fd_ = open(path_.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd_ >= 0);
  }
  ~Gate() {
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  const std::string& path() const { return path_; }
  void Open() { [[maybe_unused]] ssize_t n = write(fd_, "go\n", 3); }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

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
    ranks.set_on_finished([this, &ranks, &o] {
      RankSet::Finished f;
      while (ranks.NextFinished(&f)) {
        finished.push_back(f);
        if (then) then(&ranks, o, f);
      }
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
      REQUIRE(ranks.Start(static_cast<int>(i), "localhost", -1, specs[i], o, &e));
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

TEST_CASE("each rank leads a process group of its own, in etrun's session") {
  // Where the kernel schedules by session (autogroup), a session per rank slows coupled ranks'
  // steps (docs/performance.md): ranks stay in etrun's session, each its own group's leader.
  Harness h;
  h.RunAll({Shell("read -r pid comm state ppid group session rest < /proc/$$/stat; echo \"$pid $group $session\"")});
  REQUIRE(h.finished.size() == 1);
  std::string out = ReadAll(h.out);
  int pid = 0, group = 0, session = 0;
  REQUIRE(std::sscanf(out.c_str(), "[0]<stdout>:%d %d %d", &pid, &group, &session) == 3);
  CHECK(group == pid);
  CHECK(session == getsid(0));
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

TEST_CASE("a finished rank says when its process ended, whether a stop came first, and its last stderr line") {
  // Rank 0 exits 0 at once but its child holds its output open (it finishes late); rank 1 fails
  // after 0.3 s, last saying "boom"; then everything is stopped, rank 2 (sleeping) with it. Only
  // rank 2 ended after the stop; rank 0's process had ended before it, though it finished after.
  Harness h;
  h.then = [](RankSet* ranks, const RankOutput&, const RankSet::Finished& f) {
    if (f.rank == 1) ranks->SignalAll(SIGTERM);
  };
  h.RunAll({Shell("(sleep 60) & exit 0"), Shell("sleep 0.3; echo one >&2; echo boom >&2; exit 5"),
            Shell("exec sleep 60")});
  REQUIRE(h.finished.size() == 3);
  std::sort(h.finished.begin(), h.finished.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  CHECK(h.finished[0].status.success());
  CHECK_FALSE(h.finished[0].stopped);
  CHECK(h.finished[1].status.ShellCode() == 5);
  CHECK_FALSE(h.finished[1].stopped);
  CHECK(h.finished[1].last_stderr == "boom");
  CHECK(h.finished[0].last_stderr.empty());
  CHECK(h.finished[0].exited_at < h.finished[1].exited_at);
  CHECK(h.finished[2].stopped);
  CHECK(h.finished[2].status.kind == etrun::ExitStatus::Kind::kSignaled);
}

TEST_CASE("a finish callback may start more ranks while exits are being reaped") {
  // Given a rank that closes its output before it exits, so that it finishes inside Reap(), and a
  // second rank after it in the table, when the callback starts four more ranks (the table grows
  // and moves), reaping carries on over the new table and every rank runs to completion. Reap()
  // once went on walking the old table: the ASan build reported the use after free.
  // Rank 0 exits only once RankSet has seen both its pipes end (their unterminated "bye" reaches
  // the sink only at EOF); rank 1 exits only once rank 0 has finished.
  Gate rank0_exits, rank1_exits;
  std::atomic<bool> rank0_finished{false};
  Harness h;
  h.then = [&rank0_finished, &rank1_exits](RankSet* ranks, const RankOutput& o,
                                           const RankSet::Finished& f) {
    if (f.rank != 0) return;
    for (int i = 2; i <= 5; ++i) {
      std::string e;
      REQUIRE(ranks->Start(i, "localhost", -1, Shell("echo again; exit " + std::to_string(i)), o, &e));
      REQUIRE(ranks->AwaitExecs(&e));
    }
    rank0_finished = true;
    rank1_exits.Open();
  };
  bool output_ended = false;
  bool finished_in_time = false;
  std::thread gatekeeper([&] {
    output_ended = WaitFor([&h] { return FileHas(h.out, "[0]<stdout>:bye\n") &&
                                         FileHas(h.err, "[0]<stderr>:bye\n"); },
                           std::chrono::seconds(20));
    rank0_exits.Open();
    // Should rank 0 never finish, rank 1 is let go anyway: the test fails instead of hanging.
    finished_in_time = WaitFor([&rank0_finished] { return rank0_finished.load(); },
                               std::chrono::seconds(20));
    rank1_exits.Open();
  });
  h.RunAll({Shell("printf bye; printf bye >&2; exec >&- 2>&-; read go < " + rank0_exits.path()),
            Shell("read go < " + rank1_exits.path() + "; exit 1")});
  gatekeeper.join();
  CHECK_MESSAGE(output_ended, "RankSet never saw rank 0's output end");
  CHECK_MESSAGE(finished_in_time, "rank 0 did not finish within 20 s of exiting");
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
  CHECK_FALSE(ranks.Start(0, "localhost", -1, Command({"/nonexistent/prog"}), o, &err));
  CHECK(err == "cannot run '/nonexistent/prog': no such file");
}

TEST_CASE("a rank etrun has no descriptors left for fails with EMFILE in start_errno, a missing program with 0") {
  // Given every descriptor below a lowered soft limit in use, Start cannot make the rank's pipes:
  // start_errno says EMFILE (a shortage of etrun's, not the command's fault); a program that is
  // not there has no errno behind it.
  asio::io_context io;
  LocalSpawner spawner;
  OutputSink sink;
  RankOutput o;
  o.console_out = sink.AddDestination(open("/dev/null", O_WRONLY | O_CLOEXEC), true, "null");
  o.console_err = o.console_out;
  RankSet ranks(&io, &spawner, &sink, nullptr, std::chrono::milliseconds(100));
  std::string err;
  CHECK_FALSE(ranks.Start(0, "localhost", -1, Command({"/nonexistent/prog"}), o, &err));
  CHECK(ranks.start_errno() == 0);

  struct rlimit saved;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  struct rlimit low = saved;
  low.rlim_cur = 64;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> filler;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  bool started = ranks.Start(1, "localhost", -1, Shell("true"), o, &err);
  int err_no = ranks.start_errno();
  for (int fd : filler) close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK_FALSE(started);
  CHECK(err_no == EMFILE);
  CHECK(err == "cannot create pipes: Too many open files");
  ranks.ClearStartErrno();
  CHECK(ranks.start_errno() == 0);
}

namespace {

// A remote host's agent as RankSet sees it: records what it was asked.
struct FakeHost : etrun::launcher::RankHost {
  void StartRank(int id, const std::string& command, const etrun::launcher::GpuShare&) override {
    started.push_back(id);
  }
  void SignalRank(int id, int sig) override { signals.emplace_back(id, sig); }
  void ProbeRank(int id) override { probed.push_back(id); }
  void CheckHost(const std::string&, const std::string&, int) override {}
  void CheckPeers(const std::string&) override {}
  void Resume() override {}
  std::vector<int> started;
  std::vector<std::pair<int, int>> signals;
  std::vector<int> probed;
};

LaunchSpec On(FakeHost* host) {
  LaunchSpec spec;
  spec.remote_host = host;
  spec.remote_command = "train";
  return spec;
}

// Runs what is posted until `io` has nothing left to do now.
void Drain(asio::io_context* io) {
  io->restart();
  io->poll();
}

}  // namespace

TEST_CASE("for the hang watchdog: output and starts are life, taps see output while set, probes reach remote ranks only") {
  asio::io_context io;
  LocalSpawner spawner;
  OutputSink sink;
  RankOutput o;
  o.console_out = sink.AddDestination(open("/dev/null", O_WRONLY | O_CLOEXEC), true, "out");
  o.console_err = o.console_out;
  RankSet ranks(&io, &spawner, &sink, nullptr, std::chrono::milliseconds(100));
  FakeHost a, b;
  std::string err;
  int a0 = -1, b0 = -1;
  auto before = ranks.last_activity();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  REQUIRE(ranks.Start(0, "a", 0, On(&a), o, &err, &a0));
  CHECK(ranks.last_activity() > before);
  REQUIRE(ranks.Start(1, "b", 0, On(&b), o, &err, &b0));

  std::vector<std::tuple<int, bool, std::string>> tapped;
  ranks.OnRemoteOutput(&a, a0, true, "before the tap\n");
  ranks.set_output_tap([&](int id, bool is_stderr, std::string_view data) {
    tapped.emplace_back(id, is_stderr, std::string(data));
  });
  before = ranks.last_activity();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ranks.OnRemoteOutput(&a, a0, true, "Thread 0x1 (most recent call first):\n");
  ranks.OnRemoteOutput(&b, b0, false, "out\n");
  CHECK(ranks.last_activity() > before);
  ranks.set_output_tap(nullptr);
  ranks.OnRemoteOutput(&a, a0, true, "after it\n");
  CHECK(tapped == std::vector<std::tuple<int, bool, std::string>>{
                      {a0, true, "Thread 0x1 (most recent call first):\n"}, {b0, false, "out\n"}});

  std::vector<std::pair<int, std::string>> facts;
  ranks.set_facts_tap([&](int id, std::string_view text) { facts.emplace_back(id, std::string(text)); });
  CHECK(ranks.ProbeRemote(b0));
  CHECK(b.probed == std::vector<int>{b0});
  ranks.OnRemoteFacts(&a, b0, "state=S\n");  // not a's rank: dropped
  ranks.OnRemoteFacts(&b, b0, "state=D\n");
  CHECK(facts == std::vector<std::pair<int, std::string>>{{b0, "state=D\n"}});
  ranks.OnRemoteExit(&b, b0, etrun::ExitStatus::Exited(0), std::chrono::steady_clock::now());
  Drain(&io);
  CHECK_FALSE(ranks.ProbeRemote(b0));  // finished
  CHECK_FALSE(ranks.ProbeRemote(12345));
  ranks.OnHostLost(&a, "lost\n", etrun::ExitStatus::Exited(255));
  Drain(&io);
}

TEST_CASE("the rank table knows which host runs a rank: other hosts' reports and late ones are dropped") {
  // Given ranks 0 and 1 on host a and rank 2 on host b, b's report of a's rank goes nowhere, an
  // exit ends a rank for good (its later output dropped, no signal reaches its host), and a's
  // loss ends only a's ranks still running, the oldest saying why.
  asio::io_context io;
  LocalSpawner spawner;
  OutputSink sink;
  char out_path[] = "/tmp/etrun-rankset-XXXXXX";
  int fd = mkstemp(out_path);
  REQUIRE(fd >= 0);
  FILE* f = fdopen(fd, "r");
  RankOutput o;
  o.console_out = sink.AddDestination(dup(fd), true, "out");
  o.console_err = o.console_out;
  RankSet ranks(&io, &spawner, &sink, nullptr, std::chrono::milliseconds(100));
  FakeHost a, b;
  std::string err;
  int a0 = -1, a1 = -1, b0 = -1;
  REQUIRE(ranks.Start(0, "a", 0, On(&a), o, &err, &a0));
  REQUIRE(ranks.Start(1, "a", 1, On(&a), o, &err, &a1));
  REQUIRE(ranks.Start(2, "b", 0, On(&b), o, &err, &b0));
  CHECK(a.started == std::vector<int>{a0, a1});
  CHECK(ranks.slots().size() == 3);

  ranks.OnRemoteOutput(&b, a0, false, "from the wrong host\n");
  ranks.OnRemoteOutput(&a, a0, false, "a0 says hi\n");
  ranks.OnRemoteExit(&b, a1, etrun::ExitStatus::Exited(9), std::chrono::steady_clock::now());  // not b's: nothing ends
  ranks.OnRemoteExit(&a, a1, etrun::ExitStatus::Exited(0), std::chrono::steady_clock::now());
  ranks.OnRemoteOutput(&a, a1, false, "after its exit\n");
  ranks.Signal(a1, SIGTERM);
  CHECK(a.signals.empty());
  ranks.OnHostLost(&a, "etrun: error: ssh a:22: connection lost\n", etrun::ExitStatus::Exited(255));
  Drain(&io);

  std::vector<RankSet::Finished> finished;
  for (RankSet::Finished done; ranks.NextFinished(&done);) finished.push_back(done);
  REQUIRE(finished.size() == 2);
  CHECK(finished[0].id == a1);
  CHECK(finished[0].status.code == 0);
  CHECK(finished[0].local_rank == 1);
  CHECK(finished[1].id == a0);
  CHECK(finished[1].status.code == 255);
  // Handed out, their slots are free; b's rank still holds its own.
  CHECK(ranks.slots() == std::map<RankSet::Slot, std::vector<int>>{{{"b", 0}, {b0}}});
  CHECK(ranks.starts("a", 0) == 1);
  sink.Flush();
  std::string text = ReadAll(f);
  CHECK(text == "[0]<stdout>:a0 says hi\n[0]<stderr>:etrun: error: ssh a:22: connection lost\n");
  fclose(f);
  unlink(out_path);
}
