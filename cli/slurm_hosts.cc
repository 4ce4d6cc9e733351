#include "cli/slurm_hosts.h"

#include "discovery/host_slots.h"
#include "slurm/allocation.h"

namespace etrun::cli {

namespace {

bool UseAllocation(const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
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
    c->remote_shell = slurm::SrunTemplate(c->slurm_job);
  }
  return true;
}

}  // namespace

bool UseSlurmAllocation(const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                        std::string* err) {
  if (!UseAllocation(t, env, c, err)) return false;
  if (c->add_slurm_jobs.empty()) return true;
  if (c->slurm_job.empty()) {
    *err = "--add-slurm-jobs " + c->add_slurm_jobs + " grows a job over its Slurm allocation: run etrun "
           "inside one (sbatch, salloc) with no -H, --hostfile, discovery script, --pool or "
           "--ignore-slurm";
    return false;
  }
  if (!c->elastic()) {
    *err = "--add-slurm-jobs " + c->add_slurm_jobs + " needs an elastic job: add --min-np (e.g. --min-np " +
           std::to_string(c->num_proc.value_or(1)) + ")";
    return false;
  }
  return true;
}

}  // namespace etrun::cli
