#include "launcher/runtime.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "events/schema.h"


namespace etrun::launcher {

namespace asio = boost::asio;
namespace field = events::field;

namespace {

// Who may use the rendezvous server before any job host is admitted: this machine's addresses
// and --rendezvous-allow's networks (parsed by the CLI).
rendezvous::AccessList BaseAccessList(const JobConfig& config,
                                      const std::vector<discovery::Interface>& interfaces) {
  std::vector<std::string> local;
  for (const discovery::Interface& nic : interfaces) local.insert(local.end(), nic.ipv4.begin(), nic.ipv4.end());
  return rendezvous::AccessList(local, config.rendezvous_allow);
}

nlohmann::json OptionalInt(const std::optional<int>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

void JobPolicy::OnRepeatedStopSignal(int sig) {
  // Only a person presses Ctrl-C twice; SIGTERM and SIGHUP come again from schedulers (Slurm
  // signals every process of a job, the batch script passes it on too), which mean one stop.
  if (sig != SIGINT) {
    spdlog::info("received {} again: still stopping (SIGKILL after the grace period)", SignalName(sig));
    return;
  }
  spdlog::warn("received {} again: killing every rank now", SignalName(sig));
  context_->SignalAll(SIGKILL);
}

void JobPolicy::OnUserSignal(int sig) {
  spdlog::debug("forwarding {} to every rank", SignalName(sig));
  context_->SignalAll(sig);
}

void JobPolicy::OnControl(const rendezvous::HttpRequest& request, ControlRespond respond) {
  respond(404, control::ErrorToJson("unknown request " + request.method + " " + request.target));
}

Runtime::Runtime(const JobConfig& config, std::vector<std::string> environment,
                 JobServices services, std::unique_ptr<JobPolicy> policy)
    : config_(config),
      environ_(std::move(environment)),
      services_(std::move(services)),
      hosts_(services_.interfaces.empty() ? discovery::LocalInterfaces() : services_.interfaces),
      policy_(std::move(policy)),
      started_(services_.clock->Now()) {
  rendezvous_ = std::make_unique<RendezvousService>(RendezvousThreads(config_, environ_));
  policy_->set_context(this);
}

Runtime::~Runtime() {
  rendezvous_->Stop();
  preflight_.reset();  // before the agents' connections it talks to close
  policy_.reset();
  if (blocking_) blocking_->join();
  // The agents' connections close before the rank set that their ranks report to goes.
  if (services_.remote != nullptr && ranks_ != nullptr) services_.remote->Detach();
}

int Runtime::Run() {
  std::string err;
  if (!config_.events_file.empty() && !events_.Open(config_.events_file, &err)) {
    spdlog::error("{}", err);  // no file to write job_end to: the one exception
    return kExitUsage;
  }
  events_.Emit(events::kJobStart, StartEvent());
  JobResult result = RunJob();
  if (sink_) sink_->Flush();
  if (!result.cause.empty()) spdlog::error("{}", result.cause);
  events_.Emit(events::kJobEnd, {{field::kExitCode, result.code}, {field::kCause, result.cause}});
  return result.code;
}

nlohmann::json Runtime::StartEvent() const {
  nlohmann::json hosts = nlohmann::json::array();
  discovery::HostSourceTraits source;
  if (services_.host_source != nullptr) source = services_.host_source->traits();
  if (config_.host_discovery_script.empty() && !source.lent) {
    std::vector<discovery::HostSlots> listed;
    std::string ignored;
    if (JobHosts(config_, &listed, &ignored)) {
      for (const discovery::HostSlots& h : listed) {
        hosts.push_back({{field::kHost, h.name}, {field::kSlots, h.slots}});
      }
    }
  }
  nlohmann::json start = {
          {field::kJob, JobName(config_)}, {field::kCommand, config_.command},
          {field::kNp, config_.num_proc.value_or(1)}, {field::kMinNp, OptionalInt(config_.min_np)},
          {field::kMaxNp, OptionalInt(config_.max_np)}, {field::kElastic, config_.elastic()},
          {field::kHosts, hosts},
          {field::kDiscoveryScript, config_.host_discovery_script.empty()
                                        ? nlohmann::json(nullptr)
                                        : nlohmann::json(config_.host_discovery_script)},
          {field::kPid, getpid()}};
  if (source.lent) {
    start[field::kPool] = source.lender;
    start[field::kPoolJob] = source.lender_job;
  }
  return start;
}

JobResult Runtime::RunJob() {
  JobResult result;
  if (!policy_->Prepare(&result)) return result;

  // The guardian forks first, while etrun has no other thread.
  std::string err;
  if (!guardian_.Start(&err)) spdlog::warn("{}; ranks may outlive etrun if it is killed", err);
  signal(SIGPIPE, SIG_IGN);  // a closed console must come back as EPIPE, not kill etrun
  signals_ = std::make_unique<asio::signal_set>(io_, SIGINT, SIGTERM, SIGHUP);
  signals_->add(SIGUSR1);
  signals_->add(SIGUSR2);
  signals_->add(SIGCHLD);  // before the first fork, so no exit goes unnoticed

  sink_ = std::make_unique<OutputSink>();
  console_ = ConsoleOutput(config_, sink_.get());
  ranks_ = std::make_unique<RankSet>(&io_, services_.spawner, sink_.get(), &guardian_,
                                     config_.grace_period());
  ranks_->set_on_finished([this] { DeliverFinished(); });
  ranks_->set_on_check([this](RankHost* from, std::string_view text) {
    if (preflight_) preflight_->OnCheck(from, text);
  });
  if (services_.remote != nullptr) services_.remote->Attach(&io_, ranks_.get(), &events_, [this](int sig) {
      OnStop(sig);
      CheckDone();
    });
  access_.emplace(BaseAccessList(config_, hosts_.interfaces()));
  launcher_ = std::make_unique<RankLauncher>(config_, environ_, ranks_.get(), sink_.get(), console_,
                                             services_.remote, &hosts_, &*access_, &events_);
  blocking_ = std::make_unique<asio::thread_pool>(1);
  kill_timer_ = std::make_unique<asio::steady_timer>(io_);
  hang::HangWatch::Options watch;
  watch.timeout = config_.hang_timeout();
  hang_ = std::make_unique<hang::HangWatch>(&io_, ranks_.get(), watch,
                                            [this](const hang::Verdict& v) { OnHang(v); });
  if (!StartServers(&result)) return result;

  signals_->async_wait([this](const boost::system::error_code& ec, int sig) { OnSignal(ec, sig); });
  policy_->Begin(rendezvous_->port());
  hang_->Start();
  ranks_->Reap();  // exits that happened before the loop runs
  CheckDone();
  if (!done_) io_.run();
  hang_->Stop();
  return hang_result_ ? *hang_result_ : policy_->Result();
}

void Runtime::OnHang(const hang::Verdict& verdict) {
  const char* action = config_.hang_action == HangAction::kAbort     ? "abort"
                       : config_.hang_action == HangAction::kRestart ? "restart"
                                                                     : "dump";
  // A job ending already (a failure, a signal, training done) keeps its own outcome.
  if (stopping_ || hang_result_ || policy_->Status().state == "finishing") return;
  sink_->Append(console_.console_err, verdict.line + "\n");
  events_.Emit(events::kHang, {{field::kReason, verdict.why},
                               {field::kVerdict, verdict.line},
                               {field::kWaitingIn, verdict.waiting_in},
                               {field::kOddRanks, verdict.odd_ranks},
                               {field::kOddHosts, verdict.odd_hosts},
                               {field::kAction, action}});
  switch (config_.hang_action) {
    case HangAction::kDump:
      return;
    case HangAction::kAbort: {
      int ranks = ranks_->active();
      hang_result_ = JobResult{kExitHang, fmt::format("hung for {:g} s (--hang-timeout): stopped "
                                                      "{} rank{} (--hang-action abort)",
                                                      config_.hang_timeout_s.value_or(0), ranks,
                                                      ranks == 1 ? "" : "s")};
      policy_->OnStopSignal(SIGTERM);
      CheckDone();
      return;
    }
    case HangAction::kRestart:
      policy_->OnHang(verdict.odd_hosts);
      CheckDone();
      return;
  }
}

bool Runtime::StartServers(JobResult* result) {
  std::string err;
  if (rendezvous::HttpHandler* handler = policy_->rendezvous_handler()) {
    // Horovod's Gloo workers rendezvous through it, on the address they are told, served on
    // the store's own threads.
    if (!rendezvous_->Start(handler, policy_->listen_address(), &*access_, &err)) {
      *result = {kExitFailure, "rendezvous server: " + err};
      return false;
    }
  }
  control_ = std::make_unique<control::ControlServer>(
      &io_, [this](const rendezvous::HttpRequest& request, ControlRespond respond) {
        OnControl(request, std::move(respond));
      });
  if (!control_->Start(JobName(config_), &err)) {
    spdlog::warn("no control endpoint (etrun status will not see this job): {}", err);
  }
  return true;
}

void Runtime::OnControl(const rendezvous::HttpRequest& request, ControlRespond respond) {
  if (request.method == "GET" && request.target == "/dump") {
    // `etrun dump`: every rank's stack and the verdict; the stacks go to the job's console.
    return hang_->DumpNow([respond = std::move(respond)](const hang::Verdict& v) {
      nlohmann::json ranks = nlohmann::json::array();
      for (const hang::RankObservation& r : v.ranks) {
        ranks.push_back({{"rank", r.rank}, {"host", r.host},
                         {"where", r.where ? nlohmann::json(hang::FrameText(*r.where)) : nullptr},
                         {"state", r.facts ? nlohmann::json(hang::DescribeProcFacts(*r.facts)) : nullptr},
                         {"stack", r.dump}});
      }
      respond(200, {{"summary", v.summary}, {"waiting_in", v.waiting_in},
                    {"odd_ranks", v.odd_ranks}, {"odd_hosts", v.odd_hosts}, {"ranks", ranks}});
    });
  }
  if (request.method != "GET" || request.target != "/status") {
    return policy_->OnControl(request, std::move(respond));
  }
  control::JobStatus status = policy_->Status();
  status.job = control_->name();
  status.pid = getpid();
  status.duration_s = std::chrono::duration<double>(Now() - started_).count();
  respond(200, control::JobStatusToJson(status));
}

void Runtime::OnSignal(const boost::system::error_code& ec, int sig) {
  if (ec) return;
  if (sig == SIGCHLD) {
    ranks_->Reap();
  } else if (sig == SIGUSR1 || sig == SIGUSR2) {
    policy_->OnUserSignal(sig);
  } else {
    OnStop(sig);
  }
  CheckDone();
  if (!done_) {
    signals_->async_wait([this](const boost::system::error_code& e, int s) { OnSignal(e, s); });
  }
}

void Runtime::OnStop(int sig) {
  if (stop_signal_ != 0) return policy_->OnRepeatedStopSignal(sig);
  stop_signal_ = sig;
  policy_->OnStopSignal(sig);
}

void Runtime::Preflight(const std::vector<PreflightRequest>& requests,
                        std::function<void(const PreflightResult&)> done) {
  std::vector<PreflightHost> hosts;
  for (const PreflightRequest& r : requests) {
    PreflightHost h;
    h.name = r.first.slot.hostname;
    h.slots = r.slots;
    std::string err;
    access_->Admit(hosts_.Lookup(h.name).ipv4);  // it checks the store as its ranks will use it
    // Planned as its first rank: a remote host's agent starts now.
    if (!launcher_->Plan(r.first, &h.spec, &err)) h.problem = err;
    hosts.push_back(std::move(h));
  }
  // The verdict comes through the loop, after the call that found it has returned; a run that was
  // replaced meanwhile is not heard.
  uint64_t generation = ++preflight_generation_;
  preflight_ = std::make_unique<PreflightRun>(
      &io_, std::move(hosts), PreflightRun::Limits{}, [this, done, generation](const PreflightResult& result) {
        asio::post(io_, [this, done, generation, result] {
          if (generation != preflight_generation_) return;
          preflight_.reset();
          done(result);
          CheckDone();
        });
      });
  preflight_->Start();
}

void Runtime::DeliverFinished() {
  RankSet::Finished f;
  while (ranks_->NextFinished(&f)) policy_->OnRankFinished(f);
  CheckDone();
}

// A failure before the rank set is reached (the rank's GPUs, its log files) reports errno 0.
bool Runtime::StartRank(const RankRequest& request, int* id, std::string* err) {
  ranks_->ClearStartErrno();
  bool ok = launcher_->Start(request, id, err);
  start_errno_ = ok ? 0 : ranks_->start_errno();
  return ok;
}

bool Runtime::StartProcess(int label, const std::string& host, const LaunchSpec& spec,
                           const RankOutput& output, int* id, std::string* err) {
  ranks_->ClearStartErrno();
  bool ok = ranks_->Start(label, host, -1, spec, output, err, id);
  start_errno_ = ok ? 0 : ranks_->start_errno();
  return ok;
}

bool Runtime::AwaitExecs(std::string* err) {
  ranks_->ClearStartErrno();
  bool ok = ranks_->AwaitExecs(err);
  start_errno_ = ok ? 0 : ranks_->start_errno();
  return ok;
}

void Runtime::Signal(int id, int sig) { ranks_->Signal(id, sig); }

void Runtime::SignalAll(int sig) { ranks_->SignalAll(sig); }

std::vector<RankSet::Running> Runtime::Unfinished() const { return ranks_->Unfinished(); }

int Runtime::AddOutput(int fd, bool owned, const std::string& label) {
  return sink_->AddDestination(fd, owned, label);
}

void Runtime::Write(int destination, std::string_view text) { sink_->Append(destination, text); }

void Runtime::Post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

namespace {

// A steady_timer whose call is dropped once the Timer is cancelled or gone, even when its
// handler was already queued (asio's cancel cannot take back a queued handler).
class LoopTimer : public Timer {
 public:
  LoopTimer(asio::io_context* io, std::chrono::milliseconds delay, std::function<void()> fn)
      : timer_(*io, delay) {
    std::weak_ptr<bool> live = live_;
    timer_.async_wait([live, fn = std::move(fn)](const boost::system::error_code& ec) {
      if (!ec && live.lock()) fn();
    });
  }
  ~LoopTimer() override { Cancel(); }
  void Cancel() override {
    live_.reset();
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  std::shared_ptr<bool> live_ = std::make_shared<bool>(true);
};

}  // namespace

std::unique_ptr<Timer> Runtime::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  return std::make_unique<LoopTimer>(&io_, delay, std::move(fn));
}

void Runtime::StopAll(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  spdlog::debug("stopping {} ranks: {}", ranks_->active(), why);
  ranks_->SignalAll(SIGTERM);
  kill_timer_->expires_after(config_.grace_period());
  kill_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (ranks_->active() > 0) {
      spdlog::warn("{} ranks still running {:.1f} s after SIGTERM; sending SIGKILL",
                   ranks_->active(), config_.grace_period_s);
    }
    ranks_->SignalAll(SIGKILL);
  });
}

void Runtime::RunBlocking(std::function<void()> work, std::function<void()> then) {
  asio::post(*blocking_, [this, work = std::move(work), then = std::move(then)]() mutable {
    work();
    asio::post(io_, std::move(then));
  });
}

void Runtime::CheckDone() {
  if (done_ || !policy_->Finished() || ranks_->active() > 0) return;
  done_ = true;
  signals_->cancel();
  kill_timer_->cancel();
  rendezvous_->Stop();
  io_.stop();
}

}  // namespace etrun::launcher
