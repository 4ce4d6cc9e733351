// pool_main: `etrun pool VERB ...`, the shared slot pool's commands (pool/pool_daemon.h):
//   etrun pool start NAME [-H HOSTS | --hostfile FILE | --host-discovery-script SCRIPT] [...]
//     (none of them: inside a cluster allocation, Slurm's, its nodes; see PoolOnCluster)
//   etrun pool status [NAME] [--json]
//   etrun pool priority JOB N [--pool NAME]
//   etrun pool stop [NAME]
//   etrun pool token [NAME]
// Like `status` and `scale`, a verb only as etrun's first argument.
#ifndef ETRUN_CLI_POOL_MAIN_H_
#define ETRUN_CLI_POOL_MAIN_H_

#include <string>
#include <vector>

#include "discovery/cluster_kind.h"
#include "pool/pool_daemon.h"

namespace etrun::cli {

inline constexpr char kPoolVerb[] = "pool";

// The cluster allocation a pool took (PoolOnCluster).
struct PoolCluster {
  const discovery::ClusterKind* kind = nullptr;
  std::string job;        // the allocation's id
  int gpus_per_node = 0;  // the slots count GPUs: their count per node; else 0
};

// `etrun pool start` with no -H, --hostfile or discovery script, inside an allocation of one of
// `kinds` (`env`, "K=V"; cli/cluster_kinds.h): the pool's hosts and slots are the allocation's
// (discovery::ClusterKind::Read), and jobs on other machines start their ranks there through the
// kind's step in it (DaemonOptions::start_through: srun), so they need no cluster knowledge of
// their own. When the slots count GPUs (Slurm: SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE) and
// options->gpus is not "none", each node has its GPUs times options->ranks_per_gpu slots and
// cluster->gpus_per_node is their GPU count (else 0). Reads options->name, gpus and
// ranks_per_gpu. Returns false and sets *err (one line: outside an allocation, where the slots
// may come from; an allocation it cannot read, the variable and the fix); *options is then
// unchanged.
bool PoolOnCluster(const std::vector<const discovery::ClusterKind*>& kinds,
                   const std::vector<std::string>& env, pool::DaemonOptions* options,
                   PoolCluster* cluster, std::string* err);

// argv[0] is "pool". Exit codes: 0 done; 1 the pool cannot be found, reached or started, or it
// refused the request; 2 bad flags. Errors are one "etrun: error:" line.
int PoolMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_POOL_MAIN_H_
