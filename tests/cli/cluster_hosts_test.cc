// Inside a Slurm allocation: the allocation's hosts, -np and srun, unless told otherwise.
#include "cli/cluster_hosts.h"

#include <doctest/doctest.h>

#include "cli/flag_table.h"
#include "cli/flags.h"
#include "slurm/allocation.h"
#include "slurm/kind.h"
#include "tests/discovery/fake_cluster_kind.h"

namespace etrun::cli {
namespace {

const std::vector<std::string> kAllocation = {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-2]",
                                              "SLURM_TASKS_PER_NODE=2(x2)"};

ParseOutcome Parse(std::vector<std::string> args, JobConfig* config,
                   const std::vector<std::string>& env = kAllocation) {
  args.insert(args.begin(), "etrun");
  return ParseArgs(args, config, env);
}

TEST_CASE("inside an allocation a job takes its nodes, its slots as -np, and srun for ranks") {
  JobConfig c;
  REQUIRE(Parse({"python3", "train.py"}, &c).exit_code == -1);
  CHECK(c.cluster_job == "7");
  CHECK(c.cluster == &slurm::kKind);
  CHECK(c.host_list == std::vector<discovery::HostSlots>{{"h1", 2}, {"h2", 2}});
  CHECK(discovery::FormatHosts(c.host_list) == "h1:2,h2:2");
  CHECK(c.num_proc == 4);
  CHECK(c.start.command == slurm::SrunTemplate("7"));
  CHECK(c.start.command ==
        "srun --overlap --jobid=7 --nodes=1 --ntasks=1 --nodelist={host} --quiet");
  CHECK(c.start.kind == &slurm::kKind);  // the job's own allocation: Slurm's SIGTERM stops it
  CHECK(c.start.job_own);
  REQUIRE(Parse({"-np", "3", "--min-np", "2", "python3", "train.py"}, &c).exit_code == -1);
  CHECK(c.num_proc == 3);  // -np still wins; elastic over the allocation
  CHECK(c.host_list.size() == 2);
}

TEST_CASE("hosts given, --ignore-slurm, --mpi or a remote shell of one's own leave Slurm alone") {
  JobConfig c;
  REQUIRE(Parse({"-np", "2", "-H", "a:2", "python3", "t.py"}, &c).exit_code == -1);
  CHECK(c.cluster_job.empty());
  CHECK(c.start.command.empty());
  CHECK(c.host_list == std::vector<discovery::HostSlots>{{"a", 2}});
  ParseOutcome o = Parse({"--ignore-slurm", "python3", "t.py"}, &c);
  CHECK(o.exit_code == 2);  // -np is required again, as outside an allocation
  CHECK(o.err.find("-np") != std::string::npos);
  REQUIRE(Parse({"--mpi", "python3", "t.py"}, &c).exit_code == -1);
  CHECK(c.cluster_job == "7");
  CHECK(c.start.command.empty());  // mpirun knows the allocation itself
  REQUIRE(Parse({"--remote-shell", "ssh {host}", "python3", "t.py"}, &c).exit_code == -1);
  CHECK(c.start == discovery::StartRoute{"ssh {host}", nullptr, true});
  REQUIRE(Parse({"-np", "1", "python3", "t.py"}, &c, {}).exit_code == -1);
  CHECK(c.cluster_job.empty());
}

TEST_CASE("--add-slurm-jobs grows an elastic job over its allocation, and nothing else") {
  JobConfig c;
  REQUIRE(Parse({"--min-np", "2", "--add-slurm-jobs", "spare", "python3", "t.py"}, &c).exit_code == -1);
  CHECK(c.add_cluster_jobs == std::map<std::string, std::string>{{"slurm", "spare"}});
  CHECK(c.cluster_job == "7");
  ParseOutcome o = Parse({"--add-slurm-jobs", "spare", "python3", "t.py"}, &c);
  CHECK(o.exit_code == 2);
  CHECK(o.err == "etrun: error: --add-slurm-jobs spare needs an elastic job: add --min-np (e.g. "
                 "--min-np 4)\n");
  o = Parse({"-np", "2", "--min-np", "1", "--add-slurm-jobs", "spare", "python3", "t.py"}, &c, {});
  CHECK(o.exit_code == 2);
  CHECK(o.err == "etrun: error: --add-slurm-jobs spare grows a job over its Slurm allocation: run "
                 "etrun inside one (sbatch, salloc) with no -H, --hostfile, discovery script, "
                 "--pool or --ignore-slurm\n");
  o = Parse({"--min-np", "1", "-H", "a:2", "--add-slurm-jobs", "spare", "python3", "t.py"}, &c);
  CHECK(o.exit_code == 2);
}

TEST_CASE("an allocation etrun cannot read is one usage error naming the variable") {
  JobConfig c;
  ParseOutcome o = Parse({"python3", "t.py"}, &c,
                         {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h1", "SLURM_TASKS_PER_NODE=x"});
  CHECK(o.exit_code == 2);
  CHECK(o.err == "etrun: error: inside Slurm allocation 7: SLURM_TASKS_PER_NODE=\"x\" is not like "
                 "4(x2),2 (or give -H, or --ignore-slurm)\n");
}

TEST_CASE("another kind beside Slurm is read through the same interface, with its own words") {
  // Given a fake Flux kind listed after Slurm, a Flux environment gives its hosts, -np, its
  // template and its flag names in the errors; Slurm's growth flag outside Slurm is refused.
  discovery::FakeClusterKind flux;
  const std::vector<const discovery::ClusterKind*> kinds = {&slurm::kKind, &flux};
  const std::vector<std::string> env = {"FLUX_JOB_ID=f9", "FLUX_NODES=a:2,b:1"};
  JobConfig flags, c;
  FlagTable t(&flags);  // no --hostfile
  std::string err;
  REQUIRE(UseClusterAllocation(kinds, t, env, &c, &err));
  CHECK(c.cluster == &flux);
  CHECK(c.cluster_job == "f9");
  CHECK(c.host_list == std::vector<discovery::HostSlots>{{"a", 2}, {"b", 1}});
  CHECK(c.num_proc == 3);
  CHECK(c.start == discovery::StartRoute{"flux run --jobid=f9 --requires=host:{host}", &flux, true});
  JobConfig ignored;
  ignored.ignore_clusters = {"flux"};
  REQUIRE(UseClusterAllocation(kinds, t, env, &ignored, &err));
  CHECK(ignored.cluster == nullptr);
  JobConfig bad;
  CHECK_FALSE(UseClusterAllocation(kinds, t, {"FLUX_JOB_ID=f9", "FLUX_NODES=a:x"}, &bad, &err));
  CHECK(err.starts_with("inside Flux allocation f9: FLUX_NODES="));
  CHECK(err.ends_with(" (or give -H, or --ignore-flux)"));
  JobConfig grow;
  grow.min_np = 1;
  grow.add_cluster_jobs = {{"slurm", "spare"}};
  CHECK_FALSE(UseClusterAllocation(kinds, t, env, &grow, &err));
  CHECK(err == "--add-slurm-jobs spare grows a job over its Slurm allocation: run etrun inside one "
               "(sbatch, salloc) with no -H, --hostfile, discovery script, --pool or --ignore-slurm");
}

}  // namespace
}  // namespace etrun::cli
