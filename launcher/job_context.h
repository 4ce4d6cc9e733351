// JobContext: everything a JobPolicy may do and see while its job runs — the job's settings and
// the time, host facts, starting and signalling ranks, output, events, the loop's posts and
// timers. The Runtime (launcher/runtime.h) implements it over the real loop, rank set and
// servers; tests implement it with fakes (tests/launcher/fake_job_context.h), so each policy runs
// in unit tests without processes, sockets or sleeps. A policy hears of finished ranks only
// after the reap that found them has returned (JobPolicy::OnRankFinished), never from inside it.
// Every call from the loop thread, but for host_directory().Resolve and Post, which any thread may call
// (a host source's thread does).
#ifndef ETRUN_LAUNCHER_JOB_CONTEXT_H_
#define ETRUN_LAUNCHER_JOB_CONTEXT_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "discovery/host_source.h"
#include "discovery/network.h"
#include "events/event_log.h"
#include "launcher/clock.h"
#include "launcher/job_config.h"
#include "launcher/preflight_run.h"
#include "launcher/process/child.h"
#include "launcher/process/rank_set.h"
#include "launcher/process/spawner.h"
#include "launcher/rank_launcher.h"
#include "launcher/remote_starter.h"
#include "rendezvous/deadlines.h"
#include "rendezvous/notifier.h"

namespace etrun::launcher {

// A host for a pre-flight (JobContext::Preflight): the request its first rank would start with,
// and how many slots it has there.
struct PreflightRequest {
  RankRequest first;
  int slots = 0;
};

// A pending call; destroying or cancelling it means the call will not happen.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void Cancel() = 0;
};

class JobContext {
 public:
  virtual ~JobContext() = default;

  // The job: its settings, the launcher's environment ("K=V", the base of every rank's), time.
  virtual const JobConfig& config() const = 0;
  virtual const std::vector<std::string>& environment() const = 0;
  virtual TimePoint Now() const = 0;

  // Hosts: this machine's interfaces and name lookups (cached; Resolve blocks: call it off the
  // loop or before it runs), the job's host source (null: the fixed hosts of the flags), how
  // ranks start on other hosts (null: this machine only), the file limit (null: leave it).
  virtual discovery::HostDirectory& host_directory() = 0;
  virtual discovery::HostSource* host_source() = 0;
  virtual RemoteStarter* remote() = 0;
  virtual FileLimit* file_limit() = 0;

  // Starts the rank `request` describes (RankLauncher::Start: environment, GPUs, files,
  // admission, `rank_started`). Returns false and sets *err; see RankLauncher::Start for *id.
  virtual bool StartRank(const RankRequest& request, int* id, std::string* err) = 0;
  // Starts a process as it is (mpirun), labelled `label` on `host` (RankSet::Start).
  virtual bool StartProcess(int label, const std::string& host, const LaunchSpec& spec,
                            const RankOutput& output, int* id, std::string* err) = 0;
  // Waits for the execs of the ranks started since the last call (RankSet::AwaitExecs).
  virtual bool AwaitExecs(std::string* err) = 0;
  // After a StartRank, StartProcess or AwaitExecs that returned false: the errno of the system
  // call behind it (a pipe, the fork, the exec or the child's set-up), 0 when the failure had
  // none (a missing GPU, no such program). IsShortage() tells etrun's own limits apart.
  virtual int start_errno() const = 0;
  // Sends `sig` to one unfinished rank's process group, or to every one's.
  virtual void Signal(int id, int sig) = 0;
  virtual void SignalAll(int sig) = 0;
  // SIGTERM to every rank now, SIGKILL to those left after --grace-period. Once per job.
  virtual void StopAll(const std::string& why) = 0;
  // The ranks not yet finished (for status).
  virtual std::vector<RankSet::Running> Unfinished() const = 0;
  // The rank table by slot (RankSet::slots): every slot with ranks the policy has not yet been
  // handed by OnRankFinished, and their ids, oldest first. A policy keeps no table of its own.
  virtual const std::map<RankSet::Slot, std::vector<int>>& RankSlots() const = 0;

  // Output: the console's settings (ranks copy them), a new destination for `fd` (taken over
  // when `owned`), text written to a destination as it is.
  virtual const RankOutput& console() const = 0;
  virtual int AddOutput(int fd, bool owned, const std::string& label) = 0;
  virtual void Write(int destination, std::string_view text) = 0;
  virtual events::EventLog& events() = 0;

  // The loop: `fn` runs later on it; after `delay` unless the Timer is gone; `work` on the
  // blocking-work thread, then `then` on the loop.
  virtual void Post(std::function<void()> fn) = 0;
  virtual std::unique_ptr<Timer> After(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  virtual void RunBlocking(std::function<void()> work, std::function<void()> then) = 0;
  // Runs a fence command (launcher/fence.h) on this machine, on the blocking-work thread; not
  // waited for.
  virtual void FenceHere(const std::string& command) = 0;
  // Checks `hosts` before their ranks start (--preflight; launcher/preflight_run.h): each host's
  // agent (started now where it is not yet) or this machine; `done` runs on the loop once the
  // verdict is in, never inside this call. One at a time; a second replaces the first unheard.
  virtual void Preflight(const std::vector<PreflightRequest>& hosts,
                         std::function<void(const PreflightResult&)> done) = 0;
  // Ends the job once the policy says it is over and every rank has finished. Call after any
  // event a policy handles itself (timers, host grants); the runtime calls it after its own.
  virtual void CheckDone() = 0;
  // A notifier (rank 0's "hosts updated" messages) whose connections run on the job's loop.
  virtual std::unique_ptr<rendezvous::Notifier> MakeNotifier() = 0;
  // Deadlines on the rendezvous store's threads, for a handler that holds GETs of missing keys
  // (rendezvous/kv_handler.h); null: answer them at once.
  virtual rendezvous::Deadlines* rendezvous_deadlines() { return nullptr; }
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_JOB_CONTEXT_H_
