// The Slurm job source's grant (slurm/job_source.h) from squeue's output, and the command it runs.
#include "slurm/job_source.h"

#include <doctest/doctest.h>

#include "slurm/allocation.h"
#include "slurm/kind.h"

namespace etrun::slurm {
namespace {

discovery::ScriptResult Printed(const std::string& output) {
  discovery::ScriptResult r;
  r.ok = true;
  r.output = output;
  return r;
}

std::vector<std::string> Names(const discovery::HostGrant& g) {
  std::vector<std::string> names;
  for (const discovery::HostSlots& h : g.hosts) names.push_back(h.name + ":" + std::to_string(h.slots));
  return names;
}

const std::vector<discovery::HostSlots> kOwn = {{"h1", 2}, {"h2", 2}, {"h3", 2}};

TEST_CASE("the own allocation's nodes as squeue has them now, with the slots the job started with") {
  discovery::HostGrant g = GrantFromQueue(Printed("12 RUNNING h[1-3]\n"), kKind, "12", kOwn);
  REQUIRE(g.ok);
  CHECK(Names(g) == std::vector<std::string>{"h1:2", "h2:2", "h3:2"});
  CHECK(g.start_through.empty());  // the job's own template
  g = GrantFromQueue(Printed("12 RUNNING h[1-2]\n"), kKind, "12", kOwn);  // NumNodes=2
  CHECK(Names(g) == std::vector<std::string>{"h1:2", "h2:2"});
}

TEST_CASE("other running jobs' nodes follow, each started through srun in its own allocation") {
  discovery::HostGrant g = GrantFromQueue(
      Printed("12 RUNNING h[1-2]\n15 RUNNING h5\n13 RUNNING h[3-4]\n14 PENDING (null)\n"
              "12 RUNNING h[1-2]\n16 RUNNING h2,h6\n17_1 RUNNING h7\n"),
      kKind, "12", kOwn);
  REQUIRE(g.ok);
  CHECK(Names(g) == std::vector<std::string>{"h1:2", "h2:2", "h3:2", "h4:2", "h5:2", "h6:2"});
  CHECK(g.start_through.at("h3").command == SrunTemplate("13"));
  CHECK(g.start_through.at("h4").command == SrunTemplate("13"));
  CHECK(g.start_through.at("h5").command == SrunTemplate("15"));
  CHECK(g.start_through.at("h6").command == SrunTemplate("16"));
  for (const auto& [host, route] : g.start_through) {  // Slurm's steps, of other allocations
    CHECK(route.kind == &kKind);
    CHECK_FALSE(route.job_own);
  }
  CHECK(g.start_through.count("h2") == 0);  // shared with the own job: the own job's
}

TEST_CASE("the own job gone or ending, a failed squeue or a bad node list is a failure") {
  CHECK(GrantFromQueue(Printed(""), kKind, "12", kOwn).failure ==
        "Slurm job 12 is gone: its allocation has no nodes to run on");
  CHECK(GrantFromQueue(Printed("12 COMPLETING h1\n"), kKind, "12", kOwn).failure ==
        "Slurm job 12 is COMPLETING: its allocation has no nodes to run on");
  discovery::ScriptResult failed;
  failed.failure = "exit code 1";
  failed.errors = "slurm_load_jobs error: Unable to contact slurm controller\n";
  discovery::HostGrant g = GrantFromQueue(failed, kKind, "12", kOwn);
  CHECK_FALSE(g.ok);
  CHECK(g.failure == "squeue failed (exit code 1)");
  CHECK(g.errors == failed.errors);
  CHECK(GrantFromQueue(Printed("12 RUNNING h[1-\n"), kKind, "12", kOwn).failure.starts_with(
      "squeue printed job 12's node list "));
  // A node another job holds whose name begins with '-' is refused as ssh would misread it.
  CHECK(GrantFromQueue(Printed("12 RUNNING h1\n13 RUNNING -G\n"), kKind, "12", kOwn).failure ==
        "squeue printed job 13's node list \"-G\" names node '-G': host names cannot begin with '-' "
        "(ssh or a remote shell would read '-G' as an option)");
}

TEST_CASE("the queue command asks for the own job, and the named ones only when growing") {
  CHECK(QueueCommand("12", "") == "squeue --noheader --format='%i %T %N' --jobs='12'");
  CHECK(QueueCommand("12", "grow it") ==
        "squeue --noheader --format='%i %T %N' --jobs='12' && squeue --noheader --format='%i %T "
        "%N' --states=RUNNING --user=\"$(id -u)\" --name='grow it'");
}

}  // namespace
}  // namespace etrun::slurm
