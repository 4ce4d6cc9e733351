// Slurm's host lists and task counts, and an allocation's hosts from its environment.
#include "slurm/allocation.h"

#include <doctest/doctest.h>

namespace etrun::slurm {
namespace {

std::vector<std::string> Hosts(const std::string& list) {
  std::vector<std::string> hosts;
  std::string err;
  REQUIRE_MESSAGE(ExpandHostList(list, &hosts, &err), err);
  return hosts;
}

TEST_CASE("Slurm host lists expand in order, ranges keeping their zero padding") {
  using V = std::vector<std::string>;
  CHECK(Hosts("h1") == V{"h1"});
  CHECK(Hosts("h[1-3,5]") == V{"h1", "h2", "h3", "h5"});
  CHECK(Hosts("gpu-[08-10]x,login") == V{"gpu-08x", "gpu-09x", "gpu-10x", "login"});
  CHECK(Hosts("r[1-2]n[1-2]") == V{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(Hosts("a,b[7]") == V{"a", "b7"});
  std::vector<std::string> hosts;
  std::string err;
  for (const char* bad : {"", "h[1-", "h[3-1]", "h[a-b]", "h]1[", "a,,b", "h[]"}) {
    CAPTURE(bad);
    CHECK_FALSE(ExpandHostList(bad, &hosts, &err));
    CHECK(err.find("is not a Slurm host list") != std::string::npos);
  }
}

TEST_CASE("a Slurm node list naming a node that begins with '-' is refused") {
  // srun's --nodelist={host} is one word, but a --remote-shell template or ssh would read the
  // name as an option (issue 35): the list is refused, naming the node.
  struct Case {
    const char* list;
    const char* err;
  } cases[] = {
      {"-G", "\"-G\" names node '-G': host names cannot begin with '-' (ssh or a remote shell would "
             "read '-G' as an option)"},
      {"h1,-n[1-2]", "\"h1,-n[1-2]\" names node '-n1': host names cannot begin with '-' (ssh or a "
                     "remote shell would read '-n1' as an option)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.list);
    std::vector<std::string> hosts;
    std::string err;
    CHECK_FALSE(ExpandHostList(c.list, &hosts, &err));
    CHECK(err == c.err);
    CHECK(hosts.empty());
  }
  CHECK(Hosts("h-[1-2],n-") == std::vector<std::string>{"h-1", "h-2", "n-"});
  std::vector<discovery::HostSlots> hosts;
  std::string err;
  CHECK_FALSE(AllocationHosts({"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=h1,-G"}, &hosts, &err));
  CHECK(err == "SLURM_JOB_NODELIST=\"h1,-G\" names node '-G': host names cannot begin with '-' (ssh "
               "or a remote shell would read '-G' as an option)");
}

TEST_CASE("SLURM_TASKS_PER_NODE's counts expand per node") {
  std::vector<int> counts;
  std::string err;
  REQUIRE(ExpandTaskCounts("4(x2),2", &counts, &err));
  CHECK(counts == std::vector<int>{4, 4, 2});
  REQUIRE(ExpandTaskCounts("1", &counts, &err));
  CHECK(counts == std::vector<int>{1});
  CHECK_FALSE(ExpandTaskCounts("4(x2", &counts, &err));
  CHECK_FALSE(ExpandTaskCounts("x", &counts, &err));
  CHECK(err == "\"x\" is not like 4(x2),2");
}

TEST_CASE("an allocation's hosts: its nodes in Slurm's order, slots by the first rule that is set") {
  std::vector<std::string> env = {"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=h[1-3]",
                                  "SLURM_TASKS_PER_NODE=2(x2),1"};
  std::vector<discovery::HostSlots> hosts;
  std::string err;
  REQUIRE(AllocationHosts(env, &hosts, &err));
  CHECK(hosts == std::vector<discovery::HostSlots>{{"h1", 2}, {"h2", 2}, {"h3", 1}});
  env.push_back("SLURM_NTASKS_PER_NODE=3");
  REQUIRE(AllocationHosts(env, &hosts, &err));
  CHECK(hosts == std::vector<discovery::HostSlots>{{"h1", 3}, {"h2", 3}, {"h3", 3}});
  env.push_back("SLURM_GPUS_PER_NODE=a100:2,v100:2(IDX:0-1)");
  REQUIRE(AllocationHosts(env, &hosts, &err));
  CHECK(hosts.front().slots == 4);
  env.push_back("SLURM_GPUS_ON_NODE=1");
  REQUIRE(AllocationHosts(env, &hosts, &err));
  CHECK(hosts.front().slots == 1);
  env.push_back("ETRUN_SLURM_SLOTS=8");
  REQUIRE(AllocationHosts(env, &hosts, &err));
  CHECK(hosts.back() == discovery::HostSlots{"h3", 8});
  CHECK(InAllocation(env));

  CHECK_FALSE(AllocationHosts({"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=h1", "ETRUN_SLURM_SLOTS=two"},
                              &hosts, &err));
  CHECK(err == "ETRUN_SLURM_SLOTS=\"two\" is not a whole number of slots: fix it, or set ETRUN_SLURM_SLOTS");
  CHECK_FALSE(AllocationHosts({"SLURM_JOB_NODELIST=h1"}, &hosts, &err));
  CHECK(err.starts_with("not inside a Slurm allocation"));
  CHECK_FALSE(InAllocation({"SLURM_JOB_NODELIST=h1"}));
  CHECK_FALSE(AllocationHosts({"SLURM_JOB_ID=1", "SLURM_NODELIST=h[1-"}, &hosts, &err));
  CHECK(err.starts_with("SLURM_JOB_NODELIST=\"h[1-\" is not a Slurm host list"));
}

}  // namespace
}  // namespace etrun::slurm
