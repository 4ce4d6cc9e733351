#include "launcher/hang/stack_dump.h"

#include <doctest/doctest.h>

using etrun::launcher::hang::FrameText;
using etrun::launcher::hang::JudgeHang;
using etrun::launcher::hang::MainThreadFrame;
using etrun::launcher::hang::ParseStackDump;
using etrun::launcher::hang::ProcFacts;
using etrun::launcher::hang::RankList;
using etrun::launcher::hang::RankObservation;
using etrun::launcher::hang::StackFrame;

namespace {

// faulthandler's dump of Python 3.11 (a daemon thread, then the main thread that took the signal).
constexpr char kDump[] =
    "Thread 0x00007faa75bbd6c0 (most recent call first):\n"
    "  File \"/tmp/fh.py\", line 4 in worker\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 1038 in _bootstrap_inner\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n"
    "\n"
    "Current thread 0x00007faa75e782c0 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/horovod/torch/mpi_ops.py\", line 1030 in synchronize\n"
    "  File \"/home/u/train.py\", line 8 in <module>\n";

RankObservation At(int rank, std::string host, std::string file, int line, std::string function) {
  RankObservation r;
  r.rank = rank;
  r.host = std::move(host);
  r.where = StackFrame{std::move(file), line, std::move(function)};
  return r;
}

}  // namespace

TEST_CASE("a faulthandler dump: every thread, innermost frame first; the main thread's is where the rank is") {
  auto threads = ParseStackDump(std::string("[some output before]\n") + kDump);
  REQUIRE(threads.size() == 2);
  CHECK_FALSE(threads[0].current);
  CHECK(threads[0].frames.size() == 4);
  CHECK(threads[1].current);
  CHECK(threads[1].frames.front() ==
        StackFrame{"/usr/lib/python3/dist-packages/horovod/torch/mpi_ops.py", 1030, "synchronize"});
  auto main = MainThreadFrame(threads);
  REQUIRE(main);
  CHECK(FrameText(*main) == "horovod/torch/mpi_ops.py:1030 (synchronize)");
}

TEST_CASE("the main thread is the one not started by threading, even when another took the signal") {
  std::string dump =
      "Current thread 0x01 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n"
      "\n"
      "Thread 0x02 (most recent call first):\n"
      "  File \"train.py\", line 41 in load_batch\n"
      "  File \"train.py\", line 50 in <module>\n";
  auto main = MainThreadFrame(ParseStackDump(dump));
  REQUIRE(main);
  CHECK(FrameText(*main) == "train.py:41 (load_batch)");
}

TEST_CASE("of several dumps the last counts; text that is no dump gives none") {
  std::string two = std::string(kDump) + "later output\n" +
                    "Current thread 0x03 (most recent call first):\n  File \"b.py\", line 2 in g\n";
  auto main = MainThreadFrame(ParseStackDump(two));
  REQUIRE(main);
  CHECK(FrameText(*main) == "b.py:2 (g)");
  CHECK(ParseStackDump("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n").empty());
  CHECK_FALSE(MainThreadFrame(ParseStackDump("")));
  CHECK_FALSE(MainThreadFrame(ParseStackDump("Current thread 0x1 (most recent call first):\n  <no Python frame>\n")));
}

TEST_CASE("rank lists join runs of three or more") {
  CHECK(RankList({0, 1, 3}) == "0,1,3");
  CHECK(RankList({3, 0, 1, 2, 5, 7, 8}) == "0-3,5,7,8");
  CHECK(RankList({4}) == "4");
}

TEST_CASE("the verdict: where most ranks wait, and who is elsewhere, with its host") {
  auto v = JudgeHang("no output for 300 s",
                     {At(0, "a", "/x/site-packages/horovod/torch/mpi_ops.py", 1030, "synchronize"),
                      At(2, "b", "/home/u/train.py", 41, "load_batch"),
                      At(1, "a", "/x/site-packages/horovod/torch/mpi_ops.py", 1030, "synchronize"),
                      At(3, "b", "/x/site-packages/horovod/torch/mpi_ops.py", 1030, "synchronize")});
  CHECK(v.line ==
        "etrun: hang: no output for 300 s: ranks 0,1,3 wait in horovod/torch/mpi_ops.py:1030 "
        "(synchronize); rank 2 on b is elsewhere: train.py:41 (load_batch)");
  CHECK(v.waiting_in == "horovod/torch/mpi_ops.py:1030 (synchronize)");
  CHECK(v.odd_ranks == std::vector<int>{2});
  CHECK(v.odd_hosts == std::vector<std::string>{"b"});
  CHECK(v.ranks.size() == 4);
  CHECK(v.ranks[2].rank == 2);
}

TEST_CASE("the verdict: all in one place; ranks with no stack show their kernel state") {
  auto all = JudgeHang("on request", {At(0, "a", "t.py", 3, "f"), At(1, "a", "t.py", 3, "f")});
  CHECK(all.summary == "all 2 ranks wait in t.py:3 (f)");
  CHECK(all.odd_ranks.empty());
  RankObservation shell;
  shell.rank = 2;
  shell.host = "b";
  shell.facts = ProcFacts{'S', "hrtimer_nanosleep", "sleep 1000", ""};
  RankObservation gone;
  gone.rank = 3;
  gone.host = "c";
  auto v = JudgeHang("no output for 5 s", {At(0, "a", "t.py", 3, "f"), At(1, "a", "t.py", 3, "f"), shell, gone});
  CHECK(v.summary ==
        "ranks 0,1 wait in t.py:3 (f); rank 2 on b has no Python stack: state S (sleeping), waits in "
        "hrtimer_nanosleep: sleep 1000; rank 3 on c gave neither a Python stack nor its state");
  CHECK(v.odd_ranks.empty());  // no stack says nothing of where a rank is stuck
  // No Python anywhere: nobody stands out, ranks in the same state are one group.
  RankObservation other = shell;
  other.rank = 5;
  auto none = JudgeHang("no output for 5 s", {shell, other});
  CHECK(none.summary == "ranks 2,5 on b have no Python stack: state S (sleeping), waits in "
                        "hrtimer_nanosleep: sleep 1000");
  CHECK(none.odd_ranks.empty());
  CHECK(none.waiting_in.empty());
}

TEST_CASE("the verdict: two ranks in two places, or a tie, name no odd one") {
  auto v = JudgeHang("no output for 5 s", {At(0, "a", "t.py", 3, "f"), At(1, "b", "t.py", 9, "g")});
  CHECK(v.summary == "rank 0 on a in t.py:3 (f); rank 1 on b in t.py:9 (g)");
  CHECK(v.odd_ranks.empty());
  // Four and four (two pipeline stages, one per host): neither side is the odd one.
  std::vector<RankObservation> split;
  for (int r = 0; r < 8; ++r) split.push_back(At(r, r < 4 ? "a" : "b", "t.py", r < 4 ? 3 : 9, r < 4 ? "f" : "g"));
  auto tie = JudgeHang("no output for 5 s", split);
  CHECK(tie.summary == "ranks 0-3 on a in t.py:3 (f); ranks 4-7 on b in t.py:9 (g)");
  CHECK(tie.odd_ranks.empty());
  CHECK(tie.odd_hosts.empty());
  CHECK(tie.waiting_in.empty());
}
