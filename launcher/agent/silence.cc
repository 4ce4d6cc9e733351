#include "launcher/agent/silence.h"

#include <algorithm>
#include <cmath>

namespace etrun::launcher::agent {

namespace {

constexpr size_t kWindow = 100;
constexpr double kMinStdDev = 0.1;

}  // namespace

SilenceJudge::SilenceJudge(double lost_after_s, double unresponsive_after_s)
    : lost_after_s_(lost_after_s), unresponsive_after_s_(std::max(lost_after_s, unresponsive_after_s)) {}

void SilenceJudge::Beat(TimePoint at) {
  if (last_beat_) {
    double interval = std::chrono::duration<double>(at - *last_beat_).count();
    intervals_.push_back(interval);
    sum_ += interval;
    sum_squares_ += interval * interval;
    if (intervals_.size() > kWindow) {
      double old = intervals_.front();
      intervals_.pop_front();
      sum_ -= old;
      sum_squares_ -= old * old;
    }
  }
  last_beat_ = at;
}

double SilenceJudge::Phi(double silent_s) const {
  // Until the rhythm is known, heartbeats every second with the least spread.
  double n = static_cast<double>(intervals_.size());
  double mean = n > 0 ? sum_ / n : 1.0;
  double variance = n > 1 ? std::max(0.0, sum_squares_ / n - mean * mean) : 0.0;
  double sd = std::max(kMinStdDev, std::sqrt(variance));
  // P(interval > silent) for N(mean, sd): erfc gives it without cancellation far in the tail.
  double p = 0.5 * std::erfc((silent_s - mean) / (sd * std::sqrt(2.0)));
  return p <= 0 ? 1e9 : -std::log10(p);
}

SilenceJudge::Verdict SilenceJudge::Judge(double silent_s, std::optional<bool> peer_acking) const {
  if (silent_s <= lost_after_s_) return Verdict::kFine;
  if (silent_s > unresponsive_after_s_) return Verdict::kLost;
  if (peer_acking) return *peer_acking ? Verdict::kLate : Verdict::kLost;
  return Phi(silent_s) > kPhiThreshold ? Verdict::kLost : Verdict::kLate;
}

}  // namespace etrun::launcher::agent
