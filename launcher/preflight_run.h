// One pre-flight (--preflight) of a job's hosts, before their ranks start: each host's own checks
// (its agent's there; this machine's on a thread here), with the environment its first rank
// would get; then every host's probes toward the others; then which hosts are sick
// (launcher/preflight/verdict.h). Loop thread only.
#ifndef ETRUN_LAUNCHER_PREFLIGHT_RUN_H_
#define ETRUN_LAUNCHER_PREFLIGHT_RUN_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "events/event_log.h"
#include "launcher/preflight/probe.h"
#include "launcher/preflight/self_check.h"
#include "launcher/preflight/verdict.h"
#include "launcher/process/rank_host.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {

// A host to check: its first rank's start, planned as it would run (RankLauncher::Plan).
struct PreflightHost {
  std::string name;
  int slots = 0;
  LaunchSpec spec;        // spec.remote_host: its agent; null: this machine
  std::string problem;    // the plan failed: why ("" when it did not); the host is then sick
};

struct PreflightResult {
  std::vector<std::string> hosts;          // in the order given
  std::vector<preflight::HostCheck> checks;
  std::vector<preflight::SickHost> sick;
  double seconds = 0;
  double median_mbit_s = -1;               // of the streams; -1 when none ran
  double rtt_ms_max = -1;                  // the largest round trip measured
};

// Says what a pre-flight found: one line per sick host (an error when `action` is "refuse", else
// a warning saying what becomes of it), a summary line (info) and a `preflight` event.
void ReportPreflight(const PreflightResult& result, const std::string& action, events::EventLog* events);
// The sick hosts' names, "h3, h4".
std::string SickNames(const PreflightResult& result);

class PreflightRun {
 public:
  struct Limits {
    std::chrono::milliseconds answer{90000};  // a host's own checks (its agent may be starting)
    std::chrono::milliseconds probes{20000};  // every host's probes
  };

  PreflightRun(boost::asio::io_context* io, std::vector<PreflightHost> hosts, Limits limits,
               std::function<void(const PreflightResult&)> done);
  ~PreflightRun();
  PreflightRun(const PreflightRun&) = delete;
  PreflightRun& operator=(const PreflightRun&) = delete;

  void Start();
  // An agent's answer (RankHostEvents::OnRemoteCheck), or its host's loss.
  void OnCheck(RankHost* from, std::string_view text);

 private:
  enum class Phase { kSelf, kPeers, kDone };
  struct State {
    preflight::HostCheck check;
    preflight::SelfCheck self;
    bool answered = false;  // in this phase
  };

  void OnSelf(size_t i, preflight::SelfCheck self);
  void OnPeers(size_t i, std::vector<preflight::PeerResult> peers);
  void Gone(size_t i, const std::string& why);
  void Arm(std::chrono::milliseconds after);
  // To the next phase once every host answered; not while Start, Probe or the timer go through
  // the hosts (a lost host answers inside their calls), which call it once they are through.
  void MaybeAdvance();
  void Probe();
  void Finish();
  // Runs `work` on a thread of its own; `then` on the loop with its result, unless this run is
  // gone by then.
  template <typename T>
  void OffLoop(std::function<T()> work, std::function<void(T)> then);

  boost::asio::io_context* io_;
  std::vector<PreflightHost> hosts_;
  Limits limits_;
  std::function<void(const PreflightResult&)> done_;
  std::vector<State> states_;
  Phase phase_ = Phase::kSelf;
  std::chrono::steady_clock::time_point started_;
  boost::asio::steady_timer timer_;
  bool busy_ = false;  // see MaybeAdvance
  // This machine's listeners (a host named twice, localhost and its own name: one each) and the
  // threads that check it; joined when the run goes, their probes cancelled first.
  const std::string key_ = preflight::NewProbeKey();  // the run's probes prove they know it
  std::vector<std::unique_ptr<preflight::ProbeServer>> local_servers_;
  std::vector<std::thread> threads_;
  std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PREFLIGHT_RUN_H_
