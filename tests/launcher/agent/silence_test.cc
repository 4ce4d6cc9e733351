// The judge of a silent host (silence.h): gone or busy, from the kernel's word or the heartbeats'
// rhythm, within the two bounds.
#include "launcher/agent/silence.h"

#include <vector>

#include <doctest/doctest.h>

namespace etrun::launcher::agent {
namespace {

using Verdict = SilenceJudge::Verdict;
using std::chrono::milliseconds;

SilenceJudge WithBeats(const std::vector<int>& intervals_ms) {
  SilenceJudge judge(3, 20);
  auto t = std::chrono::steady_clock::time_point() + std::chrono::hours(1);
  judge.Beat(t);
  for (int ms : intervals_ms) {
    t += milliseconds(ms);
    judge.Beat(t);
  }
  return judge;
}

TEST_CASE("a host whose kernel still acknowledges is late, not lost, until the longer bound") {
  SilenceJudge judge = WithBeats(std::vector<int>(20, 1000));
  CHECK(judge.Judge(2.9, true) == Verdict::kFine);
  CHECK(judge.Judge(4, true) == Verdict::kLate);   // SIGSTOPped for 4 s: the job goes on
  CHECK(judge.Judge(19.9, true) == Verdict::kLate);
  CHECK(judge.Judge(20.1, true) == Verdict::kLost);  // frozen for good
}

TEST_CASE("a host whose kernel stopped acknowledging is lost at the first bound") {
  SilenceJudge judge = WithBeats(std::vector<int>(20, 1000));
  CHECK(judge.Judge(2.9, false) == Verdict::kFine);
  CHECK(judge.Judge(3.1, false) == Verdict::kLost);  // a cut link: found in seconds, as before
}

TEST_CASE("over a pipe the heartbeats' rhythm decides: steady ones are lost at once, irregular ones waited for") {
  // Steady beats every second: silence past the first bound is beyond any of them.
  SilenceJudge steady = WithBeats(std::vector<int>(20, 1000));
  CHECK(steady.Judge(3.1, std::nullopt) == Verdict::kLost);
  CHECK(steady.Phi(3.1) > SilenceJudge::kPhiThreshold);
  // A loaded host's beats come 0.5-4 s apart: 6 s of silence is within its habits, 25 s is not.
  std::vector<int> irregular;
  for (int i = 0; i < 30; ++i) irregular.push_back(i % 3 == 0 ? 4000 : (i % 3 == 1 ? 500 : 1200));
  SilenceJudge loaded = WithBeats(irregular);
  CHECK(loaded.Judge(6, std::nullopt) == Verdict::kLate);
  CHECK(loaded.Judge(25, std::nullopt) == Verdict::kLost);  // the ceiling holds whatever the rhythm
  // Before any rhythm is known, a second between beats with the least spread.
  SilenceJudge fresh(3, 20);
  CHECK(fresh.Judge(3.5, std::nullopt) == Verdict::kLost);
}

}  // namespace
}  // namespace etrun::launcher::agent
