#include "cli/cluster_hosts.h"

#include <algorithm>

#include "discovery/host_slots.h"

namespace etrun::cli {

namespace {

// The job's hosts and route from the allocation etrun runs inside (discovery::FindAllocation),
// unless the user named hosts another way.
bool UseAllocation(const std::vector<const discovery::ClusterKind*>& kinds, const FlagTable& t,
                   const std::vector<std::string>& env, JobConfig* c, std::string* err) {
  if (!c->hosts_flag.empty() || !t.hostfile().empty() || !c->host_discovery_script.empty() ||
      !c->pool.empty()) {
    return true;
  }
  const discovery::ClusterKind* kind = nullptr;
  discovery::ClusterAllocation allocation;
  if (!discovery::FindAllocation(kinds, env, c->ignore_clusters, &kind, &allocation, err)) {
    *err += std::string(" (or give -H, or --ignore-") + kind->words().name + ")";
    return false;
  }
  if (kind == nullptr) return true;
  c->cluster = kind;
  c->cluster_job = allocation.id;
  c->host_list = allocation.hosts;
  if (!c->num_proc) {
    int slots = 0;
    for (const discovery::HostSlots& h : allocation.hosts) slots += h.slots;
    c->num_proc = slots;
  }
  if (c->start.command.empty() && c->controller != Controller::kMpi) {
    c->start = kind->Route(c->cluster_job, /*job_own=*/true);
  }
  return true;
}

}  // namespace

bool UseClusterAllocation(const std::vector<const discovery::ClusterKind*>& kinds,
                          const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                          std::string* err) {
  // The user's --remote-shell is the job's route whatever else holds; the allocation's step
  // is, where the user gave none.
  c->start = discovery::UserRoute(kinds, c->start.command);
  if (!UseAllocation(kinds, t, env, c, err)) return false;
  for (const discovery::ClusterKind* kind : kinds) {
    const discovery::ClusterWords w = kind->words();
    auto grow = c->add_cluster_jobs.find(w.name);
    if (grow == c->add_cluster_jobs.end() || grow->second.empty()) continue;
    std::string flag = std::string("--add-") + w.name + "-jobs " + grow->second;
    if (c->cluster != kind) {
      *err = flag + " grows a job over its " + w.title + " allocation: run etrun inside one (" +
             w.allocators + ") with no -H, --hostfile, discovery script, --pool or --ignore-" +
             w.name;
      return false;
    }
    if (!c->elastic()) {
      *err = flag + " needs an elastic job: add --min-np (e.g. --min-np " +
             std::to_string(c->num_proc.value_or(1)) + ")";
      return false;
    }
  }
  return true;
}

}  // namespace etrun::cli
