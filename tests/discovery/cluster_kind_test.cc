// Choosing among cluster kinds (discovery/cluster_kind.h): by the environment, and by the program
// a remote-shell template runs.
#include "discovery/cluster_kind.h"

#include <doctest/doctest.h>

#include "slurm/kind.h"
#include "tests/discovery/fake_cluster_kind.h"

namespace etrun::discovery {
namespace {

TEST_CASE("the first kind whose allocation the environment is inside is the one") {
  // Given Slurm then a fake Flux, each is chosen by its own variables; Slurm first when both.
  FakeClusterKind flux;
  const std::vector<const ClusterKind*> kinds = {&slurm::kKind, &flux};
  CHECK(KindInside(kinds, {"HOME=/root"}) == nullptr);
  CHECK(KindInside(kinds, {"FLUX_JOB_ID=f1", "FLUX_NODES=a:2"}) == &flux);
  CHECK(KindInside(kinds, {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h1"}) == &slurm::kKind);
  CHECK(KindInside(kinds, {"FLUX_JOB_ID=f1", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h1"}) ==
        &slurm::kKind);
  CHECK(KindInside(kinds, {"SLURM_JOB_ID=7"}) == nullptr);  // no node list: not inside
  CHECK(KindInside({}, {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h1"}) == nullptr);
}

TEST_CASE("the user's --remote-shell is a kind's step when its program is the kind's, by the path's last part") {
  FakeClusterKind flux;
  const std::vector<const ClusterKind*> kinds = {&slurm::kKind, &flux};
  const struct {
    std::string remote_shell;
    const ClusterKind* kind;
  } table[] = {
      {"srun --overlap --jobid=7 --nodelist={host}", &slurm::kKind},
      {"  /usr/bin/srun --jobid=7 -w {host}", &slurm::kKind},
      {"\tsrun", &slurm::kKind},
      {"flux run --requires=host:{host}", &flux},
      {"ssh {host}", nullptr},
      {"srunx {host}", nullptr},
      {"/opt/srun/bin/ssh {host}", nullptr},
      {"env srun {host}", nullptr},
      {"", nullptr},
      {"   ", nullptr},
  };
  for (const auto& row : table) {
    CAPTURE(row.remote_shell);
    StartRoute route = UserRoute(kinds, row.remote_shell);
    CHECK(route.kind == row.kind);
    CHECK(route.command == row.remote_shell);
    CHECK(route.job_own == !row.remote_shell.empty());
  }
}

TEST_CASE("a kind's route is its template, with the kind, for the job's own allocation or another") {
  CHECK(slurm::kKind.Route("7", true) == StartRoute{slurm::kKind.StartTemplate("7"), &slurm::kKind, true});
  CHECK_FALSE(slurm::kKind.Route("8", false).job_own);
  FakeClusterKind flux;
  CHECK(KindNamed({&slurm::kKind, &flux}, "slurm") == &slurm::kKind);
  CHECK(KindNamed({&slurm::kKind, &flux}, flux.words().name) == &flux);
  CHECK(KindNamed({&slurm::kKind}, "pbs") == nullptr);
}

TEST_CASE("the allocation etrun runs inside is read once, unless its kind is ignored") {
  const std::vector<const ClusterKind*> kinds = {&slurm::kKind};
  const ClusterKind* kind = nullptr;
  ClusterAllocation allocation;
  std::string err;
  REQUIRE(FindAllocation(kinds, {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-2]", "SLURM_TASKS_PER_NODE=4(x2)"},
                         {}, &kind, &allocation, &err));
  CHECK(kind == &slurm::kKind);
  CHECK(allocation.id == "7");
  CHECK(allocation.hosts.size() == 2);
  REQUIRE(FindAllocation(kinds, {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h1"}, {"slurm"}, &kind,
                         &allocation, &err));
  CHECK(kind == nullptr);
  REQUIRE(FindAllocation(kinds, {"PATH=/bin"}, {}, &kind, &allocation, &err));
  CHECK(kind == nullptr);
  CHECK_FALSE(FindAllocation(kinds, {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-"}, {}, &kind,
                             &allocation, &err));
  CHECK(kind == &slurm::kKind);
  CHECK(err.starts_with("inside Slurm allocation 7: "));
}

}  // namespace
}  // namespace etrun::discovery
