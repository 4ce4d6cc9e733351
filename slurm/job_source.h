// The hosts of an elastic job inside Slurm, polled: its own allocation's nodes as Slurm has them
// now (`scontrol update JobId=... NumNodes=...` shrinks it) and, with --add-slurm-jobs NAME, the nodes
// of the user's other running jobs named NAME (allocations held for the job to grow onto: `sbatch
// -J NAME -N2 --wrap 'sleep infinity'`). Ranks on another allocation's node start through srun
// in that allocation (HostGrant::start_through); when that allocation ends its nodes leave the
// grant. Each poll runs one squeue command (QueueCommand) through a ScriptRunner.
#ifndef ETRUN_SLURM_JOB_SOURCE_H_
#define ETRUN_SLURM_JOB_SOURCE_H_

#include <string>
#include <vector>

#include "discovery/cluster_kind.h"
#include "discovery/host_source.h"
#include "discovery/script_runner.h"

namespace etrun::slurm {

// The shell command a poll runs: squeue lines "<job id> <state> <node list>" for `job` and, when
// `grow_name` is given, for the user's running jobs of that name.
std::string QueueCommand(const std::string& job, const std::string& grow_name);

// A grant from QueueCommand's run. The own job's nodes come first, in Slurm's order, with the
// slots `own` gives them (a node not in `own`: the first node's slots); then the other jobs'
// nodes not already listed, by job id, with the first node's slots, each started through its
// job's route of `kind` (ClusterKind::Route: srun in that job). The own job missing, or not
// running, is a failure.
discovery::HostGrant GrantFromQueue(const discovery::ScriptResult& result,
                                    const discovery::ClusterKind& kind, const std::string& job,
                                    const std::vector<discovery::HostSlots>& own);

class JobHostSource : public discovery::HostSource {
 public:
  // `runner` runs QueueCommand(job, grow_name) and must outlive the source; `own` is the
  // allocation as the environment described it at the start (slurm/allocation.h); `kind` (Slurm)
  // makes the routes of the other jobs' nodes.
  JobHostSource(const discovery::ClusterKind* kind, discovery::ScriptRunner* runner,
                std::string job, std::vector<discovery::HostSlots> own)
      : kind_(kind), runner_(runner), job_(std::move(job)), own_(std::move(own)) {}
  void Poll(std::function<void(discovery::HostGrant)> done) override;
  void Stop() override { runner_->Stop(); }
  discovery::HostSourceTraits traits() const override {
    discovery::HostSourceTraits t;
    t.forget_departed = true;
    return t;
  }

 private:
  const discovery::ClusterKind* kind_;
  discovery::ScriptRunner* runner_;
  std::string job_;
  std::vector<discovery::HostSlots> own_;
  bool answered_ = false;  // a first squeue that fails answers the environment's hosts
};

}  // namespace etrun::slurm

#endif  // ETRUN_SLURM_JOB_SOURCE_H_
