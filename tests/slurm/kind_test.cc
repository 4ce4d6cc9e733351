// Slurm as a cluster kind (slurm/kind.h): the allocation's words, hosts, GPUs and templates, as
// allocation.h and job_source.h give them.
#include "slurm/kind.h"

#include <doctest/doctest.h>

#include <map>
#include <memory>

#include "slurm/allocation.h"
#include "slurm/job_source.h"

namespace etrun::slurm {
namespace {

TEST_CASE("Slurm's words make its flags and messages: --ignore-slurm, --add-slurm-jobs, srun") {
  discovery::ClusterWords w = kKind.words();
  CHECK(std::string(w.name) == "slurm");
  CHECK(std::string(w.title) == "Slurm");
  CHECK(std::string(w.allocators) == "sbatch, salloc");
  CHECK(std::string(w.step) == "srun");
  CHECK(std::string(w.grow_example) == "sbatch -J NAME -N2 --wrap 'sleep infinity'");
  CHECK(w.term_stops_job);
}

TEST_CASE("an allocation read from the environment: its id, nodes, slots and GPUs per node") {
  discovery::ClusterAllocation a;
  std::string err;
  REQUIRE(kKind.Read({"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-2]", "SLURM_TASKS_PER_NODE=2(x2)"},
                     &a, &err));
  CHECK(a.id == "7");
  CHECK(a.hosts == std::vector<discovery::HostSlots>{{"h1", 2}, {"h2", 2}});
  CHECK(a.gpus_per_node == 0);
  REQUIRE(kKind.Read({"SLURM_JOB_ID=8", "SLURM_JOB_NODELIST=g1", "SLURM_GPUS_ON_NODE=4"}, &a,
                     &err));
  CHECK(a.gpus_per_node == 4);
  CHECK(a.hosts == std::vector<discovery::HostSlots>{{"g1", 4}});
  CHECK_FALSE(kKind.Read({"SLURM_JOB_ID=9", "SLURM_JOB_NODELIST=h[1-"}, &a, &err));
  CHECK(a.id == "9");  // for the message that names the allocation
  CHECK(a.hosts.empty());
  CHECK(err.starts_with("SLURM_JOB_NODELIST="));
}

TEST_CASE("agents start as srun steps, and an elastic job polls squeue") {
  CHECK(kKind.StartTemplate("7") == SrunTemplate("7"));
  CHECK(kKind.PollCommand("7", "spare") == QueueCommand("7", "spare"));
  CHECK(kKind.PollCommand("7", "") == QueueCommand("7", ""));
  CHECK(kKind.Inside({"SLURM_JOB_ID=7", "SLURM_NODELIST=h1"}));
  CHECK_FALSE(kKind.Inside({"SLURM_JOB_ID=7"}));
}

// Prints what squeue would, once per run.
class PrintingRunner : public discovery::ScriptRunner {
 public:
  explicit PrintingRunner(std::string output) : output_(std::move(output)) {}
  void Run(std::function<void(discovery::ScriptResult)> done) override {
    discovery::ScriptResult r;
    r.ok = true;
    r.output = output_;
    done(r);
  }

 private:
  std::string output_;
};

TEST_CASE("an elastic job follows its allocation as squeue has it, with its first slots") {
  // Given allocation 12 read as h1:2,h2:2 and squeue showing it shrunk to h1, plus job 13 (grown
  // onto), the grant is h1:2 then h3:2 through srun in job 13; Slurm's departed hosts are gone.
  PrintingRunner squeue("12 RUNNING h1\n13 RUNNING h3\n");
  std::unique_ptr<discovery::HostSource> source =
      kKind.Follow(&squeue, {"12", {{"h1", 2}, {"h2", 2}}, 0});
  discovery::HostGrant grant;
  source->Poll([&](discovery::HostGrant g) { grant = std::move(g); });
  REQUIRE(grant.ok);
  CHECK(grant.hosts == std::vector<discovery::HostSlots>{{"h1", 2}, {"h3", 2}});
  CHECK(grant.start_through == std::map<std::string, discovery::StartRoute>{
                                   {"h3", {SrunTemplate("13"), &kKind, /*job_own=*/false}}});
  CHECK(source->traits().forget_departed);
}

}  // namespace
}  // namespace etrun::slurm
