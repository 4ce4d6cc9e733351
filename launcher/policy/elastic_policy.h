// ElasticPolicy: an elastic job (--min-np, --host-discovery-script or --pool) on the runtime.
// Binds the ElasticDriver state machine to the world: polls of the job's host source
// (discovery/host_source.h: a discovery script, a pool's grants, or, when the runtime has none,
// the fixed -H/--hostfile/localhost:<np> hosts; one poll at a time, --discovery-interval after
// the last ended; host names are resolved on the source's thread before the grant reaches the
// loop), rank processes through the RankLauncher with their slots' facts, the rendezvous handler
// and the notifier, a 100 ms tick for deadlines, and `etrun scale` (POST /overrides). It acts on
// the source's traits, never on which source it is.
#ifndef ETRUN_LAUNCHER_POLICY_ELASTIC_POLICY_H_
#define ETRUN_LAUNCHER_POLICY_ELASTIC_POLICY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "control/control_wire.h"
#include "discovery/host_manager.h"
#include "discovery/host_source.h"
#include "launcher/job_policy.h"
#include "launcher/policy/elastic_driver.h"
#include "launcher/process/child.h"
#include "launcher/worker_env.h"
#include "rendezvous/elastic_handler.h"
#include "rendezvous/gloo_mesh.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/notifier.h"

namespace etrun::launcher {

// HOROVOD_ELASTIC_TIMEOUT in `environment`, overridden by --elastic-timeout; default 600 s.
std::chrono::milliseconds ElasticTimeout(const JobConfig& config,
                                         const std::vector<std::string>& environment);

// Descriptors etrun counts per running rank: two output pipes, one spare (the short-lived
// exec-status pipe a rank's start once took, kept so the limits users know stay as they were)
// and two log files with --output-filename.
int FilesPerRank(const JobConfig& config);

// The ranks the open-file limit lets etrun supervise at once (64 descriptors kept for itself);
// none without a limit object or with an unlimited one. main() caps a pool job's --max-np by it
// too, so the pool does not grant slots the job cannot use.
std::optional<int> SupervisableRanks(const JobConfig& config, const FileLimit* limit);

class ElasticPolicy : public JobPolicy, private WorkerControl, private CoordinatorNotifier {
 public:
  ElasticPolicy();
  ~ElasticPolicy() override;

  bool Prepare(JobResult* result) override;
  rendezvous::HttpHandler* rendezvous_handler() override { return handler_.get(); }
  std::string listen_address() const override { return listen_addr_; }
  void Begin(int rendezvous_port) override;
  void OnRankFinished(const RankSet::Finished& finished) override;
  void OnStopSignal(int sig) override;
  // --hang-action restart: the odd hosts fail (blacklisted, their ranks killed: the usual
  // reset); in restart mode every rank is killed, so the world starts afresh.
  void OnHang(const std::vector<std::string>& odd_hosts) override;
  control::JobStatus Status() const override;
  void OnControl(const rendezvous::HttpRequest& request, ControlRespond respond) override;
  bool Finished() const override { return driver_->finished(); }
  JobResult Result() const override { return {driver_->exit_code(), driver_->summary()}; }

 private:
  // WorkerControl: a slot's process gets its round's environment; Stop sends SIGTERM to its
  // process group and SIGKILL after the grace period. A start that fails for lack of etrun's own
  // resources (IsShortage) is the driver's to handle; any other failure is reported as an exit.
  bool Start(const rendezvous::SlotInfo& slot, int round,
             const std::vector<rendezvous::SlotInfo>& world, Shortage* shortage) override;
  void Stop(const SlotKey& slot) override;
  bool Running(const SlotKey& slot) const override;
  std::vector<SlotKey> RunningSlots() const override;
  bool AnyRunning() const override;
  // The newest process of `key` in the rank table that is a worker; -1: none.
  int WorkerIn(const SlotKey& key) const;
  // CoordinatorNotifier, over rendezvous::Notifier.
  void Register(const rendezvous::WorkerRegistration& registration,
                std::function<void(bool, std::string)> done) override;
  bool IsRegistered(const SlotKey& slot) const override;
  void Notify(const SlotKey& slot, rendezvous::HostUpdateResult res,
              std::function<void(bool, std::string)> done) override;

  // Prepare's steps; those that can fail return false with *result set.
  bool UseSource(JobResult* result);
  bool ChooseNetwork(JobResult* result);
  bool FitFileLimit(JobResult* result);
  bool SetOptions(JobResult* result);
  void BuildDriver();
  void WatchStore();

  void Poll();
  void AfterPoll(const discovery::HostGrant& grant);
  // The grant to the driver, and the next poll.
  void ApplyGrant(const discovery::HostGrant& grant);
  // --preflight: the grant's hosts and those `etrun scale` adds (with slots, not blacklisted or
  // past their cooldown) that have not passed one.
  std::vector<std::string> Unchecked(const discovery::HostGrant& grant);
  // Blacklisted, and its cooldown (if any) not over yet.
  bool OutForNow(const std::string& host) const;
  int SlotsOffered(const discovery::HostGrant& grant, const std::string& host) const;
  // Checks `fresh` (with hosts of the job as peers) before `grant` (and the `etrun scale`
  // overrides waiting for it) goes to the driver; a sick one is blacklisted with the reason
  // (warn: only named). One at a time: no poll is made until its verdict is in.
  void Preflight(const discovery::HostGrant& grant, std::vector<std::string> fresh);
  void OnPreflight(const discovery::HostGrant& grant, const std::vector<std::string>& fresh,
                   const std::optional<HostOverrides>& overrides, const PreflightResult& result);
  // Whether `overrides` add a host that must be checked first.
  bool NeedsPreflight(const HostOverrides& overrides) const;
  // Whether one of the hosts `grant` lists first (ResolvedAhead) with slots is this machine.
  bool OffersThisMachine(const discovery::HostGrant& grant) const;
  size_t ResolvedAhead() const;  // how many of a grant's hosts are looked up before it is used
  void Tick();
  void FailStart(const SlotKey& key, const std::string& err);
  // What etrun ran out of when a start failed with `err_no` (IsShortage), with the limit to
  // raise, and how many workers it can afford to run (see Shortage::affordable).
  Shortage ShortageOf(int err_no) const;
  std::vector<std::string> ExtraEnv(bool ahead) const;
  void ApplyOverrides(const std::string& body, ControlRespond respond);

  ElasticOptions options_;
  // A rank's network with the job's hosts on several machines (RunVars::per_host): MASTER_ADDR
  // for a rank 0 elsewhere, this machine's ranks' interface toward the remote ones.
  void PlaceOnNetwork(const rendezvous::SlotInfo& slot,
                      const std::vector<rendezvous::SlotInfo>& world, RunVars* run);

  // A host declared unreachable (`lost`), or a worker on it failed: the survivors' sockets to a
  // lost host and every connection of the world's Gloo mesh are destroyed (launcher/fence.h), so
  // their collectives fail now instead of after Gloo's timeout.
  void Fence(const std::string& host, bool lost);
  std::vector<std::string> FenceIps(const std::string& host) const;
  // Whether `key` trains in the current round's formed world: its failure stalls the others
  // (a worker started ahead of the next round, or one still meeting, stalls nobody).
  bool InFormedWorld(const SlotKey& key) const;

  RunVars run_;
  std::set<std::string> fenced_;  // lost hosts fenced and not started on since
  std::string listen_addr_;  // the rendezvous server's (discovery::ListenChoice)
  rendezvous::KvStore store_;
  rendezvous::GlooMesh mesh_;  // the current world's Gloo connections, from the store
  std::mt19937 random_;  // cooldown jitter
  std::unique_ptr<discovery::HostManager> host_manager_;
  std::unique_ptr<rendezvous::Notifier> notifier_;
  std::unique_ptr<ElasticDriver> driver_;
  std::unique_ptr<rendezvous::PostedHooks> posted_hooks_;  // the driver, called on its loop
  std::function<void(std::function<void()>)> on_loop_;   // posts to the driver's loop while alive
  std::unique_ptr<rendezvous::RendezvousHandler> handler_;
  std::unique_ptr<discovery::HostSource> fixed_hosts_;  // when the runtime has no source
  discovery::HostSource* source_ = nullptr;              // where the job's hosts come from
  discovery::HostSourceTraits traits_;
  bool polling_ = false;            // a discovery run is under way
  uint64_t poll_wait_ = 0;          // the latest wait for the next run
  std::unique_ptr<Timer> poll_timer_;
  std::unique_ptr<Timer> tick_timer_;
  std::map<int, std::unique_ptr<Timer>> kill_timers_;  // RankSet id -> SIGKILL after the grace
  // Which process runs in which slot is the rank table's (JobContext::RankSlots); of its
  // processes the policy keeps only what it alone knows:
  std::set<int> unstarted_;        // RankSet ids that could not exec for a shortage: not workers
  std::set<SlotKey> failing_;      // slots whose start failed, their exit (127) posted
  std::optional<int> supervisable_;  // without --max-np: SupervisableRanks
  bool warned_supervisable_ = false;
  bool command_checked_ = false;   // on this machine, once a grant first offered it
  // --preflight: hosts checked and found well; a check under way (no poll is made meanwhile:
  // OnPreflight goes on); `etrun scale` overrides waiting for their hosts' check.
  std::set<std::string> preflight_passed_;
  bool preflight_pending_ = false;
  std::optional<HostOverrides> pending_overrides_;
  int port_round_ = -1;            // restart mode: the round master_port_ was picked for
  int master_port_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for the discovery thread
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_POLICY_ELASTIC_POLICY_H_
