// FakeJobContext: a JobContext over fakes, for driving a JobPolicy in unit tests. Nothing runs:
// started ranks are recorded with made-up ids and pids, signals and stops are recorded, posted
// calls wait in a queue until the test runs them (RunPosted), timers fire when the test moves the
// fake clock past them (Advance), events are captured, and a rank finishes when the test says
// so (Finish), which hands it to the policy as the runtime does: after the "reap", then
// CheckDone. Hosts: this machine is "localhost" and 127.0.0.1 (interface lo); any other address
// literal is another host.
#ifndef ETRUN_TESTS_LAUNCHER_FAKE_JOB_CONTEXT_H_
#define ETRUN_TESTS_LAUNCHER_FAKE_JOB_CONTEXT_H_

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include "discovery/host_slots.h"
#include "launcher/job_context.h"
#include "launcher/job_policy.h"
#include "launcher/process/child.h"

namespace etrun::launcher {

class FakeJobContext : public JobContext {
 public:
  static constexpr int kFirstPid = 1 << 30;
  static constexpr int kSignalAll = -1;  // the id recorded for SignalAll

  // A rank (or process) started through the context.
  struct Started {
    int id = -1;
    int label = 0;
    std::string host;
    RankRequest request;  // for StartRank
    LaunchSpec spec;      // for StartProcess
    RankOutput output;    // for StartProcess
    bool slotted = false; // a rank of a slot (StartRank), not a bare process
  };

  FakeJobContext() {
    events_.Capture();
    console_.console_out = 0;
    console_.console_err = 1;
  }

  // --- what the test sets up
  JobConfig job;
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  TimePoint now = TimePoint() + std::chrono::hours(1);
  discovery::HostSource* source = nullptr;
  RemoteStarter* remote_starter = nullptr;
  bool refuse_start = false;   // StartRank/StartProcess fail
  bool exec_fails = false;     // AwaitExecs fails
  // etrun's own limit: once this many ranks run, StartRank fails with `short_errno` (or, with
  // `short_at_exec`, the rank is started and AwaitExecs fails: it then exits 127). -1: no limit.
  int short_after = -1;
  int short_errno = EMFILE;
  bool short_at_exec = false;

  // What a pre-flight finds: the sick hosts' names and why (the result's other fields as given).
  PreflightResult preflight_result;

  // --- what the policy did
  std::vector<Started> started;
  std::vector<std::vector<PreflightRequest>> preflights;  // each Preflight's hosts
  std::vector<std::string> fenced_here;  // FenceHere's commands, per call
  std::vector<std::pair<int, int>> signals;  // (id or kSignalAll, signal)
  std::vector<std::string> stops;            // StopAll's reasons
  std::string written;                       // text written to any destination
  int check_done = 0;

  // -H `text` as the CLI fills it: the raw text, the parsed list or the error it keeps.
  void SetHosts(const std::string& text) {
    job.hosts_flag = text;
    job.host_list.clear();
    job.host_list_error.clear();
    if (!discovery::ParseHostsFlag(text, &job.host_list, &job.host_list_error)) job.host_list.clear();
  }

  // --- driving
  void RunPosted() {
    while (!posted_.empty()) {
      std::function<void()> fn = std::move(posted_.front());
      posted_.pop_front();
      fn();
    }
  }
  // Moves the clock and fires the timers due by then, in order, running what they post.
  void Advance(std::chrono::milliseconds d) {
    TimePoint until = now + d;
    RunPosted();
    for (;;) {
      auto due = std::min_element(timers_.begin(), timers_.end(), [](const auto& a, const auto& b) {
        return a->due < b->due;
      });
      if (due == timers_.end() || (*due)->due > until) break;
      std::shared_ptr<Pending> p = *due;
      timers_.erase(due);
      now = std::max(now, p->due);
      if (p->live) p->fn();
      RunPosted();
    }
    now = until;
  }
  // The rank with id `id` finished with `status`: handed to `policy`, then CheckDone. Its process
  // ended at `exited_at` (default: after every rank finished before it) with `last_stderr` last
  // on its stderr.
  void Finish(JobPolicy* policy, int id, ExitStatus status,
              std::optional<std::chrono::steady_clock::time_point> exited_at = std::nullopt,
              std::string last_stderr = "", bool stopped = false) {
    auto it = running_.find(id);
    REQUIRE(it != running_.end());
    int local_rank = it->second.request.slot.local_rank;
    auto ended = exited_at.value_or(std::chrono::steady_clock::time_point(std::chrono::seconds(++finishes_)));
    RankSet::Finished f{id, it->second.label, it->second.host, kFirstPid + id, status,
                        it->second.slotted ? local_rank : -1, stopped, ended, std::move(last_stderr)};
    if (it->second.slotted) {
      auto slot = slots_.find({it->second.host, local_rank});
      std::erase(slot->second, id);
      if (slot->second.empty()) slots_.erase(slot);
    }
    running_.erase(it);
    policy->OnRankFinished(f);
    CheckDone();
    RunPosted();
  }
  // Every rank still running finishes with `status`, in start order.
  void FinishAll(JobPolicy* policy, ExitStatus status) {
    while (!running_.empty()) Finish(policy, running_.begin()->first, status);
  }
  int running() const { return static_cast<int>(running_.size()); }
  bool IsRunning(int id) const { return running_.count(id) != 0; }
  // The signals sent to `id` (SignalAll's included), in order.
  std::vector<int> SignalsTo(int id) const {
    std::vector<int> out;
    for (const auto& [to, sig] : signals) {
      if (to == id || (to == kSignalAll)) out.push_back(sig);
    }
    return out;
  }
  const std::vector<nlohmann::json>& captured() const { return events_.captured(); }
  std::vector<nlohmann::json> EventsNamed(const std::string& name) const {
    std::vector<nlohmann::json> out;
    for (const nlohmann::json& e : events_.captured()) {
      if (e["event"] == name) out.push_back(e);
    }
    return out;
  }

  // --- JobContext
  const JobConfig& config() const override { return job; }
  const std::vector<std::string>& environment() const override { return env; }
  TimePoint Now() const override { return now; }
  discovery::HostDirectory& host_directory() override { return hosts_; }
  discovery::HostSource* host_source() override { return source; }
  RemoteStarter* remote() override { return remote_starter; }
  FileLimit* file_limit() override { return nullptr; }
  bool StartRank(const RankRequest& request, int* id, std::string* err) override {
    start_errno_ = 0;
    exec_short_ = false;
    if (refuse_start) {
      *err = "rank " + std::to_string(request.slot.rank) + " on " + request.slot.hostname +
             ": refused by the fake";
      return false;
    }
    if (short_after >= 0 && running() >= short_after) {
      if (short_at_exec) {
        exec_short_ = true;
      } else {
        start_errno_ = short_errno;
        *err = "rank " + std::to_string(request.slot.rank) + " on " + request.slot.hostname +
               ": cannot create pipes: " + strerror(short_errno);
        return false;
      }
    }
    Started s;
    s.id = next_id_++;
    s.label = request.slot.rank;
    s.host = request.slot.hostname;
    s.request = request;
    s.slotted = true;
    Add(s);
    *id = s.id;
    return true;
  }
  bool StartProcess(int label, const std::string& host, const LaunchSpec& spec,
                    const RankOutput& output, int* id, std::string* err) override {
    start_errno_ = 0;
    if (refuse_start) {
      *err = "refused by the fake";
      return false;
    }
    Started s;
    s.id = next_id_++;
    s.label = label;
    s.host = host;
    s.spec = spec;
    s.output = output;
    Add(s);
    *id = s.id;
    return true;
  }
  bool AwaitExecs(std::string* err) override {
    start_errno_ = 0;
    if (exec_short_) {
      exec_short_ = false;
      start_errno_ = short_errno;
      *err = std::string("rank 0 on localhost: could not start: ") + strerror(short_errno);
      return false;
    }
    if (!exec_fails) return true;
    start_errno_ = ENOEXEC;
    *err = "rank 0 on localhost: could not start: Exec format error";
    return false;
  }
  int start_errno() const override { return start_errno_; }
  void Signal(int id, int sig) override {
    if (running_.count(id) != 0) signals.emplace_back(id, sig);
  }
  void SignalAll(int sig) override { signals.emplace_back(kSignalAll, sig); }
  void StopAll(const std::string& why) override {
    stops.push_back(why);
    SignalAll(SIGTERM);
  }
  std::vector<RankSet::Running> Unfinished() const override {
    std::vector<RankSet::Running> out;
    for (const auto& [id, s] : running_) {
      int local_rank = s.slotted ? s.request.slot.local_rank : -1;
      int starts = 0;
      for (const Started& before : started) {
        starts += before.slotted && before.host == s.host && before.request.slot.local_rank == local_rank;
      }
      out.push_back({id, s.label, s.host, kFirstPid + id, now, local_rank, s.slotted ? starts : 1});
    }
    return out;
  }
  const std::map<RankSet::Slot, std::vector<int>>& RankSlots() const override { return slots_; }
  const RankOutput& console() const override { return console_; }
  int AddOutput(int fd, bool owned, const std::string&) override {
    if (owned) close(fd);
    return next_output_++;
  }
  void Write(int, std::string_view text) override { written.append(text); }
  events::EventLog& events() override { return events_; }
  void Post(std::function<void()> fn) override { posted_.push_back(std::move(fn)); }
  std::unique_ptr<Timer> After(std::chrono::milliseconds delay, std::function<void()> fn) override {
    auto pending = std::make_shared<Pending>();
    pending->due = now + delay;
    pending->fn = std::move(fn);
    timers_.push_back(pending);
    return std::make_unique<Handle>(pending);
  }
  void RunBlocking(std::function<void()> work, std::function<void()> then) override {
    work();
    Post(std::move(then));
  }
  void FenceHere(const std::string& command) override { fenced_here.push_back(command); }
  // The verdict comes through the loop (Post), as the runtime's does.
  void Preflight(const std::vector<PreflightRequest>& hosts,
                 std::function<void(const PreflightResult&)> done) override {
    preflights.push_back(hosts);
    PreflightResult result = preflight_result;
    for (const PreflightRequest& h : hosts) result.hosts.push_back(h.first.slot.hostname);
    Post([done, result] { done(result); });
  }
  void CheckDone() override { ++check_done; }
  std::unique_ptr<rendezvous::Notifier> MakeNotifier() override {
    return std::make_unique<rendezvous::Notifier>(&io_);
  }

 private:
  struct Pending {
    TimePoint due;
    std::function<void()> fn;
    bool live = true;
  };
  class Handle : public Timer {
   public:
    explicit Handle(std::shared_ptr<Pending> p) : p_(std::move(p)) {}
    ~Handle() override { Cancel(); }
    void Cancel() override { p_->live = false; }

   private:
    std::shared_ptr<Pending> p_;
  };
  void Add(const Started& s) {
    started.push_back(s);
    running_[s.id] = s;
    if (s.slotted) slots_[{s.host, s.request.slot.local_rank}].push_back(s.id);
  }

  discovery::HostDirectory hosts_{{{"lo", {"127.0.0.1"}}}};
  events::EventLog events_;
  RankOutput console_;
  boost::asio::io_context io_;
  std::map<int, Started> running_;
  int finishes_ = 0;  // Finish calls so far: the default exit times
  std::map<RankSet::Slot, std::vector<int>> slots_;  // as RankSet::slots
  std::deque<std::function<void()>> posted_;
  std::vector<std::shared_ptr<Pending>> timers_;
  int next_id_ = 0;
  int next_output_ = 2;
  int start_errno_ = 0;
  bool exec_short_ = false;  // the latest StartRank's exec fails for lack of a resource
};

}  // namespace etrun::launcher

#endif  // ETRUN_TESTS_LAUNCHER_FAKE_JOB_CONTEXT_H_
