// Inside a Slurm allocation (sbatch, salloc) a job with no -H, --hostfile, discovery script or
// --pool runs on the allocation's nodes (slurm/allocation.h): -np defaults to their slots, and
// ranks on other nodes start through `srun --overlap` (a --remote-shell template: no sshd, no
// SSH keys), unless --ignore-slurm or a --remote-shell of the user's. --mpi leaves the start to
// mpirun, which knows the allocation itself.
#ifndef ETRUN_CLI_SLURM_HOSTS_H_
#define ETRUN_CLI_SLURM_HOSTS_H_

#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "launcher/job_config.h"

namespace etrun::cli {

// Fills *c from the allocation `env` ("K=V") describes, when the rules above say so. Returns
// false and sets *err (one line: the variable and the fix) for an allocation it cannot read, or
// for --add-slurm-jobs outside an allocation etrun takes or without --min-np.
bool UseSlurmAllocation(const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                        std::string* err);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_SLURM_HOSTS_H_
