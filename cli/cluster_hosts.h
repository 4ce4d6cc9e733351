// Inside a cluster allocation (cli/cluster_kinds.h; Slurm's sbatch, salloc) a job with no -H,
// --hostfile, discovery script or --pool runs on the allocation's nodes: -np defaults to their
// slots, and ranks on other nodes start through the kind's step (`srun --overlap`, a
// --remote-shell template: no sshd, no SSH keys), unless --ignore-<kind> (--ignore-slurm) or a
// --remote-shell of the user's. --mpi leaves the start to mpirun, which knows the allocation
// itself.
#ifndef ETRUN_CLI_CLUSTER_HOSTS_H_
#define ETRUN_CLI_CLUSTER_HOSTS_H_

#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "discovery/cluster_kind.h"
#include "launcher/job_config.h"

namespace etrun::cli {

// Fills *c from the allocation of the first of `kinds` that `env` ("K=V") is inside, when the
// rules above say so. Returns false and sets *err (one line: the variable and the fix) for an
// allocation it cannot read, or for --add-<kind>-jobs outside an allocation of that kind etrun
// takes, or without --min-np.
bool UseClusterAllocation(const std::vector<const discovery::ClusterKind*>& kinds,
                          const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                          std::string* err);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_CLUSTER_HOSTS_H_
