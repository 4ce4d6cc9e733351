// StaticPolicy: a job on hosts that never change (-np N, -H, --hostfile). Exactly -np ranks fill
// the hosts in order, all started at once (forks first, then their execs awaited together); the
// first rank that fails stops the others (SIGTERM, SIGKILL after --grace-period) and its code is
// the job's. Workers rendezvous through the plain KV store (Horovod's static Gloo mode).
#ifndef ETRUN_LAUNCHER_POLICY_STATIC_POLICY_H_
#define ETRUN_LAUNCHER_POLICY_STATIC_POLICY_H_

#include <optional>
#include <string>
#include <vector>

#include "control/control_wire.h"
#include "discovery/host_slots.h"
#include "discovery/network.h"
#include "launcher/job_config.h"
#include "launcher/job_policy.h"
#include "launcher/worker_env.h"
#include "rendezvous/assign.h"
#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"

namespace etrun::launcher {

// What a static job will run, decided before anything starts.
struct StaticPlan {
  std::vector<discovery::HostSlots> hosts;
  std::vector<rendezvous::SlotInfo> slots;  // in rank order
  std::vector<int> group_ranks;             // per slot: index of its host among used hosts
  std::vector<std::string> remote_hosts;    // hosts that are not this machine (SSH)
  std::string listen_addr;                  // the rendezvous server's (discovery::ListenChoice)
  RunVars run;
};

// Decides hosts, ranks and run variables for a static job: exactly -np ranks filling the hosts
// in order. `hosts` answers which hosts are this machine (and caches their addresses). Remote
// hosts are reached over SSH; with them, and no --network-interface, the server listens on
// every address and each remote rank finds its own (discovery::ChooseListenAddress). Fails when
// the hosts lack slots. Starts nothing; probes one free port.
bool PlanStaticJob(const JobConfig& config, discovery::HostDirectory* hosts, StaticPlan* plan,
                   std::string* err);

class StaticPolicy : public JobPolicy {
 public:
  bool Prepare(JobResult* result) override;
  rendezvous::HttpHandler* rendezvous_handler() override { return handler_.get(); }
  std::string listen_address() const override { return plan_.listen_addr; }
  void Begin(int rendezvous_port) override;
  void OnRankFinished(const RankSet::Finished& finished) override;
  void OnStopSignal(int sig) override;
  control::JobStatus Status() const override;
  void OnControl(const rendezvous::HttpRequest& request, ControlRespond respond) override;
  bool Finished() const override { return begun_ && !preflighting_; }
  JobResult Result() const override;

 private:
  bool PlanGpus(std::string* err);
  // Starts every rank (Begin's, or once the pre-flight found nothing that stops the job).
  void StartAll();
  void OnPreflight(const PreflightResult& result);

  StaticPlan plan_;
  rendezvous::KvStore store_;
  std::unique_ptr<rendezvous::KvHandler> handler_;  // from Prepare: GETs held on the store's threads
  bool begun_ = false;
  bool preflighting_ = false;  // --preflight: the hosts are being checked; nothing started yet
  bool stopping_ = false;
  std::optional<RankSet::Finished> first_failure_;
  int stop_signal_ = 0;
  JobResult start_error_;  // code 0: none
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_POLICY_STATIC_POLICY_H_
