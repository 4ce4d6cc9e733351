#include "slurm/kind.h"

#include "slurm/allocation.h"
#include "slurm/job_source.h"

namespace etrun::slurm {

const SlurmKind kKind;

discovery::ClusterWords SlurmKind::words() const {
  return {"slurm", "Slurm", "sbatch, salloc", "srun", "sbatch -J NAME -N2 --wrap 'sleep infinity'",
          /*term_stops_job=*/true};
}

bool SlurmKind::Inside(const std::vector<std::string>& env) const { return InAllocation(env); }

bool SlurmKind::Read(const std::vector<std::string>& env, discovery::ClusterAllocation* allocation,
                     std::string* err) const {
  *allocation = {};
  allocation->id = EnvValue(env, "SLURM_JOB_ID");
  if (!AllocationHosts(env, &allocation->hosts, err)) return false;
  if (SlotsCountGpus(env)) allocation->gpus_per_node = allocation->hosts.front().slots;
  return true;
}

std::string SlurmKind::StartTemplate(const std::string& id) const { return SrunTemplate(id); }

std::string SlurmKind::PollCommand(const std::string& id, const std::string& grow_name) const {
  return QueueCommand(id, grow_name);
}

std::unique_ptr<discovery::HostSource> SlurmKind::Follow(
    discovery::ScriptRunner* runner, const discovery::ClusterAllocation& own) const {
  return std::make_unique<JobHostSource>(this, runner, own.id, own.hosts);
}

}  // namespace etrun::slurm
