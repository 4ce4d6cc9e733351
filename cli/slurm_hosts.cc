#include "cli/slurm_hosts.h"

#include "discovery/host_slots.h"
#include "slurm/allocation.h"

namespace etrun::cli {

std::string SrunTemplate(const std::string& job_id) {
  // --overlap: ranks' steps share the allocation's CPUs and memory (Slurm >= 20.11); one task on
  // {host}; --quiet keeps srun's own notes off the rank's stderr.
  return "srun --overlap --jobid=" + job_id + " --nodes=1 --ntasks=1 --nodelist={host} --quiet";
}

bool UseSlurmAllocation(const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                        std::string* err) {
  if (c->ignore_slurm || !slurm::InAllocation(env) || !c->hosts.empty() || !t.hostfile().empty() ||
      !c->host_discovery_script.empty() || !c->pool.empty()) {
    return true;
  }
  std::vector<discovery::HostSlots> hosts;
  if (!slurm::AllocationHosts(env, &hosts, err)) {
    *err = "inside Slurm allocation " + slurm::EnvValue(env, "SLURM_JOB_ID") + ": " + *err +
           " (or give -H, or --ignore-slurm)";
    return false;
  }
  c->slurm_job = slurm::EnvValue(env, "SLURM_JOB_ID");
  c->host_list = hosts;
  c->hosts = discovery::FormatHosts(hosts);  // mpirun's -H
  if (!c->num_proc) {
    int slots = 0;
    for (const discovery::HostSlots& h : hosts) slots += h.slots;
    c->num_proc = slots;
  }
  if (c->remote_shell.empty() && c->controller != Controller::kMpi) {
    c->remote_shell = SrunTemplate(c->slurm_job);
  }
  return true;
}

}  // namespace etrun::cli
