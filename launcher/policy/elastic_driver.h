// ElasticDriver: the elastic job's state machine (spec §6.1-6.10), as pure logic. It takes
// events (discovery results, worker exits, workers asking for their rank, registrations, clock
// ticks) and acts through small interfaces (WorkerControl starts and stops slot processes,
// CoordinatorNotifier talks to rank 0, the KvStore is re-initialized per round), so every
// scenario runs in a unit test without processes, sockets or sleeps.
//
// Rounds: each assignment opens a round whose parties are its slots. A slot records READY (its
// worker asked GET rank_and_size), SUCCESS (exited 0) or FAILURE (exited non-zero); records are
// idempotent per slot. When every party has recorded, the decision of §6.5 runs. etrun departs
// from horovodrun where it breaks (spec §9):
//  * a round has a deadline: parties still silent when it passes count as failed and are stopped;
//  * a host-change notification that cannot be delivered yet (reset in progress, coordinator not
//    registered) is kept and sent once the coordinator can take it;
//  * workers whose slot lost its assignment are drained: answered -1, then stopped with SIGTERM
//    (and SIGKILL after the grace period); their exits are neither success nor failure;
//  * a worker that finishes (exit 0) while others wait in a reset ends the job successfully: the
//    waiting ones are released (-1) and drained instead of being killed into a failure;
//  * the exit code of a failed job is the own code of the failure that ended it (the last one:
//    the round that exceeded --reset-limit, the last host to fail), not 1; 1 when no worker
//    failed (a timeout, a discovery failure);
//  * a worker etrun cannot start for lack of its own resources (open files, processes, memory)
//    is no failure of its host: no further worker of that round is started, the job says so once
//    and keeps from then on to the ranks that could start, fewer if etrun needs room to work
//    (the round is opened again with them, after the workers started for the larger one are
//    gone), or ends (exit 1) when they are fewer than --min-np.
// With ElasticOptions::restart_all the driver instead follows torchrun: any change or failure
// stops all workers and starts the whole new world afresh.
// Driver thread only.
#ifndef ETRUN_LAUNCHER_POLICY_ELASTIC_DRIVER_H_
#define ETRUN_LAUNCHER_POLICY_ELASTIC_DRIVER_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "discovery/host_manager.h"
#include "discovery/host_source.h"
#include "control/control_wire.h"
#include "events/event_log.h"
#include "events/exit_status.h"
#include "launcher/job_config.h"
#include "rendezvous/assign.h"
#include "rendezvous/elastic_handler.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/pickle.h"

namespace etrun::launcher {

using TimePoint = discovery::TimePoint;
using SlotKey = std::pair<std::string, int>;  // (host, local_rank): a process's identity for life

struct ElasticOptions {
  int np = 1;                         // slots to wait for before the first start
  int min_np = 1;                     // slots needed to (re)start
  std::optional<int> max_np;
  // Waiting for slots, and a round's deadline.
  std::chrono::milliseconds elastic_timeout{std::chrono::seconds(kDefaultElasticTimeoutS)};
  std::optional<int> reset_limit;
  // torchrun semantics for workers that do not speak Horovod's elastic protocol: on a change
  // that alters the assignment, or on any failure, every worker is stopped and all slots start
  // afresh with the new world. Counts against reset_limit; failed hosts are not blacklisted.
  bool restart_all = false;
  // Crash recovery (Horovod mode): once a worker failed, survivors still silent this long after
  // (blocked in a collective with the dead peer until Gloo's timeout) are stopped and started
  // afresh in their slots, provided a survivor came back to carry the state. 0: off, wait.
  std::chrono::milliseconds recovery_grace{0};
  // Scale-up without a stall (Horovod mode): workers of added hosts start ahead of their round
  // while the current world trains; rank 0 is told once each has made its first rendezvous
  // request. One that fails or is not in within this time is dropped (its host blacklisted)
  // without disturbing the running world.
  std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
  // A pool job waits for its slots as long as the pool queues it (gang admission), with no
  // --elastic-timeout deadline.
  bool wait_without_deadline = false;
};

// Why etrun could not start a worker: it lacks a resource of its own (open files, processes,
// memory), which is no fault of the worker's host.
struct Shortage {
  // The resource and its limit: "too many open files: etrun's open-file limit is 200 (ulimit -Hn)".
  std::string what;
  // The workers etrun can run at once and still keep room for its own work (discovery runs,
  // rendezvous connections), estimated from what it holds now.
  int affordable = 0;
};

// Starts and stops the process of a slot. Real: ElasticPolicy, through the RankLauncher.
class WorkerControl {
 public:
  virtual ~WorkerControl() = default;
  // Starts a process for `slot` of round `round`, whose whole assignment is `world` (its env
  // carries the slot's rank variables of that round). `round` is the next one for a worker
  // started ahead of its round while the current world still trains. Returns false when etrun
  // lacks a resource of its own to start it: nothing of it will run or exit, and *shortage says
  // which. Any other failure to start comes back as the worker's exit (code 127) through
  // OnWorkerExit.
  virtual bool Start(const rendezvous::SlotInfo& slot, int round,
                     const std::vector<rendezvous::SlotInfo>& world, Shortage* shortage) = 0;
  // SIGTERM now, SIGKILL after the grace period. The exit still arrives through OnWorkerExit.
  virtual void Stop(const SlotKey& slot) = 0;
  // The rank table, as its owner sees it (RankSet, through the policy): whether `slot` has a
  // process that Start started and whose exit has not yet been given to OnWorkerExit (a start
  // that failed otherwise than for a shortage counts until its exit comes); every such slot, in
  // slot order; whether there is any. The driver keeps no list of its own.
  virtual bool Running(const SlotKey& slot) const = 0;
  virtual std::vector<SlotKey> RunningSlots() const = 0;
  virtual bool AnyRunning() const = 0;
};

// Reaches workers' notification services. Real: rendezvous::Notifier.
class CoordinatorNotifier {
 public:
  virtual ~CoordinatorNotifier() = default;
  virtual void Register(const rendezvous::WorkerRegistration& registration,
                        std::function<void(bool ok, std::string err)> done) = 0;
  virtual bool IsRegistered(const SlotKey& slot) const = 0;
  // Sends HostsUpdatedRequest(next timestamp, res); done(false) if never acknowledged.
  virtual void Notify(const SlotKey& slot, rendezvous::HostUpdateResult res,
                      std::function<void(bool ok, std::string err)> done) = 0;
};

// Live changes from `etrun scale`: they override the discovery script for the named hosts (and
// the world size, which caps the assignment like --max-np) until changed again. The control
// endpoint's own type (control/control_wire.h), as `etrun scale` sends it.
using HostOverrides = control::Overrides;

class ElasticDriver : public rendezvous::ElasticHooks {
 public:
  ElasticDriver(ElasticOptions options, discovery::HostManager* hosts, WorkerControl* workers,
                CoordinatorNotifier* notifier, rendezvous::KvStore* store, TimePoint start);

  // Events.
  void OnDiscovery(const discovery::HostGrant& grant, TimePoint now);
  // `stopped`: etrun had sent the worker a stop signal before its end was known (RankSet::
  // Finished::stopped), so an exit 0 may answer the stop rather than end its training.
  void OnWorkerExit(const SlotKey& slot, ExitStatus status, TimePoint now, bool stopped = false);
  // A host's workers could not be reached (SSH connection refused or lost): blacklisted in
  // both modes, so restart mode does not start the next world on it. Call before their exits.
  void OnHostUnreachable(const std::string& host, TimePoint now);
  // A host's ranks hung where the others did not (--hang-action restart): blacklisted as an
  // unreachable one is. Call before their exits.
  void OnHostHung(const std::string& host, TimePoint now);
  // A host a pre-flight found sick (--preflight), before any rank of the job ran there:
  // blacklisted with `why`, retried after its cooldown like any other.
  void OnHostSick(const std::string& host, const std::string& why, TimePoint now);
  void OnTick(TimePoint now);  // deadlines; call at least every second
  // Every worker of the current round has passed its global rendezvous (the store's `global`
  // scope completed): the new world trains. Restart mode marks this itself once ranks run.
  void OnWorldReady(TimePoint now);
  // The worker of global rank `rank` of the round being prepared made its first rendezvous
  // request (PUT /global/rank_<rank>): it is in, waiting for the others.
  void OnWorkerArrived(int rank, TimePoint now);
  void RecordReady(const std::string& host, int local_rank,
                   std::function<void(std::optional<rendezvous::SlotInfo>)> reply) override;
  void RegisterWorker(rendezvous::WorkerRegistration registration,
                      std::function<void(bool)> done) override;
  // A signal or an outside error: stop every worker and finish with `exit_code`.
  void Abort(int exit_code, const std::string& why);

  // The host source's last good grant (its warnings and the script's stderr left out): what each
  // slot's rank gets (HostGrant::slots) and how each host's ranks start (start_through). Empty
  // (not ok) before the first.
  const discovery::HostGrant& grant() const { return grant_; }

  // Replaces the overrides and applies them to the last discovery result at once.
  void SetOverrides(HostOverrides overrides, TimePoint now);
  const HostOverrides& overrides() const { return overrides_; }

  // Where discovery, blacklist, round and reset events go (may stay unset).
  void set_events(events::EventLog* events) { events_ = events; }
  // How a live worker's exit should be reported: "finished", "failed", "drained" (its slot or
  // host left the job) or "stopped" (etrun stopped it). Ask before OnWorkerExit.
  std::string ExitReasonFor(const SlotKey& slot, const ExitStatus& status) const;

  // Outcome.
  bool finished() const { return phase_ == Phase::kDone; }
  int exit_code() const { return exit_code_; }
  const std::string& summary() const { return summary_; }  // empty on success

  // Introspection.
  // "waiting" (for slots), "running", "resetting" or "finishing".
  std::string state() const;
  // A live worker's state: "running", "draining" (its slot left the job) or "stopping".
  std::string WorkerState(const SlotKey& slot) const;
  const std::vector<rendezvous::SlotInfo>& assignment() const { return assignment_; }
  int round() const { return round_; }
  // Whether the current round's world has formed (see OnWorldReady).
  bool world_ready() const { return world_ready_; }
  int resets() const { return resets_; }

 private:
  // kReplanning: a worker of the round being opened could not start (a shortage); the workers
  // started for it are being stopped, then the round opens again, smaller.
  enum class Phase { kWaitingToStart, kRunning, kRestarting, kResuming, kReplanning, kStopping, kDone };
  // kReplaced: stuck in a collective after a peer's failure; stopped, started afresh.
  // kNotStarted: its process could not be started again for lack of etrun's resources.
  enum class Record { kReady, kSuccess, kFailure, kReplaced, kNotStarted };

  bool ComputeAssignment(std::vector<rendezvous::SlotInfo>* plan, std::string* err) const;
  void ApplyHosts(std::vector<discovery::HostSlots> parsed, TimePoint now);
  void Activate();
  void Record(const SlotKey& slot, enum Record record, TimePoint now);
  void MaybeDecide(TimePoint now);
  void Decide(TimePoint now);
  void ReleaseWaiting();  // answers held rank_and_size requests from the current assignment
  // Shortages (see the file comment). `key` could not start: `shortage` says why. While the
  // round opens, `runnable` slots came before it and `fresh` were started for it.
  void ShortageWhileOpening(const SlotKey& key, int runnable, const Shortage& shortage,
                            const std::vector<SlotKey>& fresh);
  void ShortageAhead(const SlotKey& key, const Shortage& shortage);
  // A slot of the running round whose process was to start once its old one was gone.
  void ShortageInRound(const SlotKey& key, const Shortage& shortage, TimePoint now);
  // Caps the job at the fewer of `runnable` and what etrun can afford, saying so once
  // ("cannot start worker h[0]: <what>; going on with N ranks ..."). Returns false, after
  // ending the job with that line, when the cap is below --min-np.
  bool KeepTo(int runnable, const SlotKey& key, const Shortage& shortage);
  void MaybeReopen();  // kReplanning: opens the round once the stopped workers are gone
  void MaybeNotify();
  void BeginRestart(const std::string& why);
  // Restart mode: the world finished training (a rank exited 0); stop, with the failure's code
  // if one of its ranks failed.
  void FinishRestartWorld();
  // Restart mode: a rank of the running world exited 0, so training is over.
  bool WorldFinishing() const;
  void MaybeRestart();
  void Stop(int exit_code, std::string summary);
  // Failures: the last one's code ends a failed job (1 when none); the first is mentioned too.
  void NoteFailure(const ExitStatus& status, const std::string& what);
  int EndingCode() const;
  std::string EarlierFailure(const std::string& lead) const;  // "" when it is the last one
  // Stops a live worker whose exit no longer counts (removed, blacklisted, stopping).
  void Drain(const SlotKey& key, bool removed = false);
  // Whether `key` runs a process that is not being stopped: it holds the training state.
  bool HoldsState(const SlotKey& key) const;
  void BlacklistHost(const std::string& host, const std::string& reason, TimePoint now);
  void Emit(std::string_view event, nlohmann::json fields = nlohmann::json::object());
  void MaybeFinish();
  void MaybeReplaceStuck(TimePoint now);
  // Starts the workers of `plan`'s new slots ahead of their round when the change only adds
  // slots to a formed, training world. Returns false when it does not apply (then notify now).
  bool MaybeStartAhead(const std::vector<rendezvous::SlotInfo>& plan, TimePoint now);
  // Stops the workers started ahead (they are restarted with the round that comes instead).
  void AbandonStartAhead(const std::string& why);
  // After a worker started ahead failed or timed out: prepares what is left of the change.
  void Replan(TimePoint now);
  bool StartedAhead(const SlotKey& key) const;
  // Gives rank 0 of `plan` to a worker that holds the training state, when its slot would
  // otherwise get a fresh process. Keeps plan[i].rank == i.
  void KeepStateOnRankZero(std::vector<rendezvous::SlotInfo>* plan) const;
  // Whether two plans use the same slots (host, local rank), whatever their rank order: a round
  // whose rank 0 moved to the state holder is no host change.
  static bool SameSlots(const std::vector<rendezvous::SlotInfo>& a,
                        const std::vector<rendezvous::SlotInfo>& b);
  void MarkWorldReady();
  // The first worker of a running round left training: writes `reset_begin`, once per round.
  void NoteResetBegin(const std::string& why);
  std::optional<rendezvous::SlotInfo> SlotOf(const SlotKey& key) const;
  std::string Describe(const SlotKey& key) const;

  ElasticOptions options_;
  discovery::HostManager* hosts_;
  WorkerControl* workers_;
  CoordinatorNotifier* notifier_;
  rendezvous::KvStore* store_;

  Phase phase_ = Phase::kWaitingToStart;
  TimePoint now_;                            // time of the latest timed event
  TimePoint wait_deadline_;                  // kWaitingToStart / kResuming
  bool have_discovery_ = false;
  std::vector<rendezvous::SlotInfo> assignment_;
  int round_ = 0;
  int resets_ = 0;
  bool launched_ = false;  // a round's workers all started: they may hold training state
  std::optional<int> shortage_cap_;  // the most ranks etrun could start, after a shortage
  bool world_ready_ = false;   // this round's world formed
  bool reset_begun_ = false;   // this round's first worker left training
  std::map<SlotKey, enum Record> records_;  // this round's
  std::optional<TimePoint> round_deadline_;  // set by the round's first record
  std::optional<TimePoint> recovery_deadline_;  // a worker of this round failed: see recovery_grace
  std::set<SlotKey> start_when_gone_;        // this round's slots whose old process is still exiting
  struct StartAhead {
    std::vector<rendezvous::SlotInfo> plan;  // the next round's assignment
    std::set<SlotKey> waiting;               // started ahead, first rendezvous request not seen
    TimePoint deadline;
  };
  std::optional<StartAhead> ahead_;
  std::map<SlotKey, std::function<void(std::optional<rendezvous::SlotInfo>)>> waiting_;
  // Which slots run a process is the rank table's (WorkerControl::Running): the driver keeps
  // only what it decided about those processes, until their exits.
  std::set<SlotKey> draining_;               // stopped: their exits count for nothing
  std::set<SlotKey> removed_;                // of those, drained because the slot or host left
  int pending_flags_ = 0;                    // a host change not yet delivered to rank 0
  bool notify_in_flight_ = false;
  std::string first_failure_;
  std::optional<ExitStatus> last_failure_status_;  // the job's exit code when a failure ends it
  std::string last_failure_;
  int exit_code_ = 0;
  std::string summary_;
  events::EventLog* events_ = nullptr;
  std::string restart_reason_;
  bool last_failure_in_world_ = false;     // restart mode: a rank of this world failed
  bool finished_while_restarting_ = false;  // restart mode: a stopped rank had exited 0 first
  HostOverrides overrides_;
  // The host source's last good answer, as it gave it (before the overrides): the hosts, each
  // slot's facts, the templates of hosts that start otherwise. The job's host list (with the
  // overrides, less the blacklisted) is the host manager's; the round's ranks are assignment_.
  discovery::HostGrant grant_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_POLICY_ELASTIC_DRIVER_H_
