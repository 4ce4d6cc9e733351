// Runtime: the one run loop of every job, static, elastic or --mpi. It owns the event loop, the
// signal handling, the guardian, the output sink, the rank set, the rendezvous and control
// servers, the host directory and the events file, and drives a JobPolicy
// (launcher/job_policy.h) that decides what runs, as the policy's JobContext. Run() writes
// `job_start`, then exactly one `job_end` from the policy's JobResult on every path, early
// failures included. Finished ranks reach the policy after the reap that found them.
//
// Threads: the loop's (everything here, and every policy call); the output sink's writer; the
// remote starter's (one per SSH host); the host source's; one for blocking work (RunBlocking:
// name lookups), whose results are posted back to the loop. main() builds the spawner, the host
// source, the remote starter and the clock and passes them in.
#ifndef ETRUN_LAUNCHER_RUNTIME_H_
#define ETRUN_LAUNCHER_RUNTIME_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "control/control.h"
#include "discovery/host_source.h"
#include "discovery/network.h"
#include "events/event_log.h"
#include "launcher/clock.h"
#include "launcher/job_config.h"
#include "launcher/job_policy.h"
#include "launcher/output/output_sink.h"
#include "launcher/fence.h"
#include "launcher/hang/hang_watch.h"
#include "launcher/process/child.h"
#include "launcher/process/guardian.h"
#include "launcher/process/rank_set.h"
#include "launcher/process/spawner.h"
#include "launcher/rank_launcher.h"
#include "launcher/remote_starter.h"
#include "launcher/rendezvous_service.h"
#include "rendezvous/access_list.h"
#include "rendezvous/http_server.h"

namespace etrun::launcher {

// The OS edges a job runs on; main() builds the real ones, tests fakes. Each must outlive the job.
struct JobServices {
  Spawner* spawner = nullptr;
  // Where an elastic job's hosts come from (a discovery script, a pool joined before the runtime
  // runs); null: the fixed hosts of the flags.
  discovery::HostSource* host_source = nullptr;
  const Clock* clock = nullptr;
  FileLimit* file_limit = nullptr;               // may be null: the limit is left alone
  // This machine's interfaces; empty: read them (discovery::LocalInterfaces).
  std::vector<discovery::Interface> interfaces;
  RemoteStarter* remote = nullptr;  // ranks on other hosts; null: this machine only
};

class Runtime : public JobContext {
 public:
  // `environment` ("K=V") is the launcher's, the base of every rank's.
  Runtime(const JobConfig& config, std::vector<std::string> environment, JobServices services,
          std::unique_ptr<JobPolicy> policy);
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Runs the job; returns etrun's exit code (see exit_status.h).
  int Run();

  // JobContext, for the policy. Valid from Prepare (config, environment, hosts, events, the
  // services) or from Begin (the rest) until Run returns.
  const JobConfig& config() const override { return config_; }
  const std::vector<std::string>& environment() const override { return environ_; }
  TimePoint Now() const override { return services_.clock->Now(); }
  discovery::HostDirectory& host_directory() override { return hosts_; }
  discovery::HostSource* host_source() override { return services_.host_source; }
  RemoteStarter* remote() override { return services_.remote; }
  FileLimit* file_limit() override { return services_.file_limit; }
  bool StartRank(const RankRequest& request, int* id, std::string* err) override;
  bool StartProcess(int label, const std::string& host, const LaunchSpec& spec,
                    const RankOutput& output, int* id, std::string* err) override;
  bool AwaitExecs(std::string* err) override;
  int start_errno() const override { return start_errno_; }
  void Signal(int id, int sig) override;
  void SignalAll(int sig) override;
  void StopAll(const std::string& why) override;
  std::vector<RankSet::Running> Unfinished() const override;
  const std::map<RankSet::Slot, std::vector<int>>& RankSlots() const override { return ranks_->slots(); }
  const RankOutput& console() const override { return console_; }
  int AddOutput(int fd, bool owned, const std::string& label) override;
  void Write(int destination, std::string_view text) override;
  events::EventLog& events() override { return events_; }
  void Post(std::function<void()> fn) override;
  std::unique_ptr<Timer> After(std::chrono::milliseconds delay, std::function<void()> fn) override;
  void RunBlocking(std::function<void()> work, std::function<void()> then) override;
  void FenceHere(const std::string& command) override {
    RunBlocking([command] { launcher::FenceHere(command); }, [] {});
  }
  void Preflight(const std::vector<PreflightRequest>& hosts,
                 std::function<void(const PreflightResult&)> done) override;
  void CheckDone() override;
  std::unique_ptr<rendezvous::Notifier> MakeNotifier() override {
    return std::make_unique<rendezvous::Notifier>(&io_);
  }
  rendezvous::Deadlines* rendezvous_deadlines() override { return rendezvous_->deadlines(); }

 private:
  JobResult RunJob();
  void DeliverFinished();
  bool StartServers(JobResult* result);
  void OnSignal(const boost::system::error_code& ec, int sig);
  // A stop signal (SIGINT, SIGTERM, SIGHUP) to the job: the first stops it, a repeat as the policy says.
  void OnStop(int sig);
  void OnControl(const rendezvous::HttpRequest& request, ControlRespond respond);
  void OnHang(const hang::Verdict& verdict);
  nlohmann::json StartEvent() const;

  const JobConfig& config_;
  const std::vector<std::string> environ_;
  JobServices services_;
  events::EventLog events_;
  discovery::HostDirectory hosts_;
  // Destroyed in reverse: the policy first (its threads and timers stop while the loop and the
  // ranks it points to exist), the ranks before the sink their output goes to, the guardian and
  // the loop last. The remote starter (main's) outlives the runtime, so remote ranks' stubs are
  // gone before the connections they talk to.
  boost::asio::io_context io_;
  Guardian guardian_;
  std::unique_ptr<OutputSink> sink_;
  RankOutput console_;
  std::unique_ptr<RankSet> ranks_;
  std::optional<rendezvous::AccessList> access_;
  std::unique_ptr<RankLauncher> launcher_;
  // The hang watchdog and `etrun dump` (launcher/hang/hang_watch.h): its taps point into ranks_.
  std::unique_ptr<hang::HangWatch> hang_;
  std::optional<JobResult> hang_result_;  // --hang-action abort ended the job so
  std::unique_ptr<boost::asio::thread_pool> blocking_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  std::unique_ptr<boost::asio::steady_timer> kill_timer_;
  // The rendezvous store's server and threads (launcher/rendezvous_service.h): stopped first in
  // the destructor, before the policy whose store and handler its threads call.
  std::unique_ptr<RendezvousService> rendezvous_;
  std::unique_ptr<control::ControlServer> control_;
  // A pre-flight under way (--preflight): its agents' answers come through ranks_.
  std::unique_ptr<PreflightRun> preflight_;
  uint64_t preflight_generation_ = 0;  // which run's verdict is still awaited
  std::unique_ptr<JobPolicy> policy_;
  TimePoint started_;
  int start_errno_ = 0;  // see start_errno()
  int stop_signal_ = 0;
  bool stopping_ = false;
  bool done_ = false;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_RUNTIME_H_
