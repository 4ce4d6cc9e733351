// SilenceJudge: whether a host whose agent has gone silent is gone or only busy. A host is lost
// fast when its link is dead — a cut, a crash, a reboot — so its peers' collectives need not wait
// for Gloo's timeout; a host that is reachable but silent (tearing down the last job, its cores
// pegged by dataloaders, short of memory, stopped for a moment) is given a longer bound, so load
// is not taken for loss. What tells them apart:
//   - a TCP transport (SSH): the kernel's word (TCP_INFO): a far end still acknowledging what the
//     launcher sends is alive, however silent its agent;
//   - a pipe (a remote shell, a Slurm step), where no kernel can be asked: the heartbeats' own
//     rhythm, a phi-accrual detector (Hayashibara et al., as Cassandra and Akka use it): silence
//     far beyond the heartbeats' usual spread is loss; irregular heartbeats (a loaded host) earn a
//     longer wait.
// Never lost before `lost_after` of silence; always lost after `unresponsive_after`. Pure: the
// caller gives the times. Loop thread only.
#ifndef ETRUN_LAUNCHER_AGENT_SILENCE_H_
#define ETRUN_LAUNCHER_AGENT_SILENCE_H_

#include <chrono>
#include <deque>
#include <optional>

namespace etrun::launcher::agent {

class SilenceJudge {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  enum class Verdict { kFine, kLate, kLost };

  // --lost-host-timeout and --unresponsive-host-timeout, in seconds (lost_after <= unresponsive_after).
  SilenceJudge(double lost_after_s, double unresponsive_after_s);

  // A heartbeat arrived at `at`: its interval joins the rhythm (the last 100 are kept).
  void Beat(TimePoint at);

  // The verdict on `silent_s` seconds without a word from the agent. `peer_acking`: the
  // transport's kernel says its far end acknowledged what was sent lately (true) or has not
  // (false); nullopt: no kernel to ask (a pipe).
  Verdict Judge(double silent_s, std::optional<bool> peer_acking) const;

  // -log10 of the chance that a heartbeat comes later than `silent_s` after the last, by the
  // rhythm so far (a normal distribution of the intervals, their spread at least 0.1 s). 8: one
  // chance in 10^8. The threshold Judge uses.
  double Phi(double silent_s) const;
  static constexpr double kPhiThreshold = 8.0;

 private:
  double lost_after_s_;
  double unresponsive_after_s_;
  std::optional<TimePoint> last_beat_;
  std::deque<double> intervals_;  // seconds
  double sum_ = 0, sum_squares_ = 0;
};

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_SILENCE_H_
