// `etrun pool start` inside a Slurm allocation with no host flags (cli/pool_main.h PoolOnCluster):
// the allocation's nodes and slots, srun in it for jobs' ranks, GPUs from Slurm's variables.
#include "cli/pool_main.h"

#include <doctest/doctest.h>

#include "cli/cluster_kinds.h"
#include "slurm/allocation.h"
#include "slurm/kind.h"

namespace etrun::cli {
namespace {

pool::DaemonOptions Options() {
  pool::DaemonOptions o;
  o.name = "gpus";
  return o;
}

}  // namespace

TEST_CASE("a pool inside an allocation takes its nodes and starts jobs' ranks through srun in it") {
  // Given salloc -N3 (one task per node), the pool has h1..h3 with one slot each and every
  // grant says srun --jobid=12; no GPU variable: plain slots as before.
  pool::DaemonOptions o = Options();
  PoolCluster cluster;
  cluster.gpus_per_node = -1;
  std::string err;
  REQUIRE(PoolOnCluster(ClusterKinds(),
                        {"SLURM_JOB_ID=12", "SLURM_JOB_NODELIST=h[1-3]", "SLURM_TASKS_PER_NODE=1(x3)"},
                        &o, &cluster, &err));
  CHECK(o.hosts == std::vector<discovery::HostSlots>{{"h1", 1}, {"h2", 1}, {"h3", 1}});
  CHECK(o.start_through.command == "srun --overlap --jobid=12 --nodes=1 --ntasks=1 --nodelist={host} --quiet");
  CHECK(o.start_through.command == slurm::SrunTemplate("12"));
  CHECK(o.start_through.kind == &slurm::kKind);  // sent with its kind: jobs need not guess it
  CHECK_FALSE(o.start_through.job_own);
  CHECK(cluster.gpus_per_node == 0);
  CHECK(cluster.kind == &slurm::kKind);
  CHECK(cluster.job == "12");
  CHECK(o.gpus == "auto");  // left to the pool's own detection
}

TEST_CASE("a GPU allocation's slots are its GPUs per node, times --ranks-per-gpu") {
  // Given --gpus-per-node, each node's slots are its GPUs (x K with --ranks-per-gpu K) and the
  // GPU count comes back for a pool that sees no GPUs of its own; ETRUN_SLURM_SLOTS or --gpus
  // none make them plain slots.
  const struct {
    std::vector<std::string> env;
    std::string gpus_flag;
    int ranks_per_gpu;
    int slots;
    int gpus;
  } table[] = {
      {{"SLURM_GPUS_ON_NODE=4"}, "auto", 1, 4, 4},
      {{"SLURM_GPUS_PER_NODE=a100:2"}, "auto", 1, 2, 2},
      {{"SLURM_GPUS_PER_NODE=2"}, "auto", 3, 6, 2},
      {{"SLURM_GPUS_PER_NODE=2"}, "2", 1, 2, 2},
      {{"SLURM_GPUS_PER_NODE=2"}, "none", 3, 2, 0},
      {{"SLURM_GPUS_ON_NODE=4", "ETRUN_SLURM_SLOTS=3"}, "auto", 2, 3, 0},
      {{"SLURM_NTASKS_PER_NODE=2"}, "auto", 2, 2, 0},
  };
  for (const auto& row : table) {
    CAPTURE(row.env.front());
    CAPTURE(row.gpus_flag);
    std::vector<std::string> env = {"SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=n[1-2]"};
    env.insert(env.end(), row.env.begin(), row.env.end());
    pool::DaemonOptions o = Options();
    o.gpus = row.gpus_flag;
    o.ranks_per_gpu = row.ranks_per_gpu;
    PoolCluster cluster;
    cluster.gpus_per_node = -1;
    std::string err;
    REQUIRE(PoolOnCluster(ClusterKinds(), env, &o, &cluster, &err));
    CHECK(o.hosts == std::vector<discovery::HostSlots>{{"n1", row.slots}, {"n2", row.slots}});
    CHECK(cluster.gpus_per_node == row.gpus);
  }
}

TEST_CASE("a pool outside an allocation, or in one it cannot read, is one line saying what to do") {
  pool::DaemonOptions o = Options();
  o.hosts = {{"kept", 1}};
  PoolCluster cluster;
  std::string err;
  CHECK_FALSE(PoolOnCluster(ClusterKinds(), {"HOME=/root"}, &o, &cluster, &err));
  CHECK(err ==
        "pool start gpus: say where the slots are: -H HOST:SLOTS,..., --hostfile FILE or "
        "--host-discovery-script SCRIPT, or start the pool inside a Slurm allocation (sbatch, "
        "salloc) to take its nodes");
  CHECK_FALSE(PoolOnCluster(ClusterKinds(),
                            {"SLURM_JOB_ID=9", "SLURM_JOB_NODELIST=h[1-2]", "SLURM_GPUS_ON_NODE=x"}, &o,
                            &cluster, &err));
  CHECK(err ==
        "pool start gpus inside Slurm allocation 9: SLURM_GPUS_ON_NODE=\"x\" is not a whole number "
        "of slots: fix it, or set ETRUN_SLURM_SLOTS (or give -H)");
  CHECK_FALSE(PoolOnCluster(ClusterKinds(), {"SLURM_JOB_ID=9", "SLURM_JOB_NODELIST=h[1-"}, &o,
                            &cluster, &err));
  CHECK(err.starts_with("pool start gpus inside Slurm allocation 9: SLURM_JOB_NODELIST="));
  CHECK(o.hosts == std::vector<discovery::HostSlots>{{"kept", 1}});  // unchanged
  CHECK(o.start_through.command.empty());
}

}  // namespace etrun::cli
