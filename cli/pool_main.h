// pool_main: `etrun pool VERB ...`, the shared slot pool's commands (pool/pool_daemon.h):
//   etrun pool start NAME [-H HOSTS | --hostfile FILE | --host-discovery-script SCRIPT] [...]
//     (none of them: inside a Slurm allocation, its nodes; see PoolOnSlurm)
//   etrun pool status [NAME] [--json]
//   etrun pool priority JOB N [--pool NAME]
//   etrun pool stop [NAME]
//   etrun pool token [NAME]
// Like `status` and `scale`, a verb only as etrun's first argument.
#ifndef ETRUN_CLI_POOL_MAIN_H_
#define ETRUN_CLI_POOL_MAIN_H_

#include <string>
#include <vector>

#include "pool/pool_daemon.h"

namespace etrun::cli {

inline constexpr char kPoolVerb[] = "pool";

// `etrun pool start` with no -H, --hostfile or discovery script, inside a Slurm allocation (`env`,
// "K=V"): the pool's hosts and slots are the allocation's (slurm::AllocationHosts), and jobs on
// other machines start their ranks there through srun in it (DaemonOptions::start_through), so
// they need no Slurm knowledge of their own. When the slots count GPUs (SLURM_GPUS_ON_NODE,
// SLURM_GPUS_PER_NODE) and options->gpus is not "none", each node has its GPUs times
// options->ranks_per_gpu slots and *gpus_per_node is their GPU count (else 0). Reads
// options->name, gpus and ranks_per_gpu. Returns false and sets *err (one line: outside an
// allocation, where the slots may come from; an allocation it cannot read, the variable and the
// fix); *options is then unchanged.
bool PoolOnSlurm(const std::vector<std::string>& env, pool::DaemonOptions* options,
                 int* gpus_per_node, std::string* err);

// argv[0] is "pool". Exit codes: 0 done; 1 the pool cannot be found, reached or started, or it
// refused the request; 2 bad flags. Errors are one "etrun: error:" line.
int PoolMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_POOL_MAIN_H_
