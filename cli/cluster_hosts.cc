#include "cli/cluster_hosts.h"

#include <algorithm>

#include "discovery/host_slots.h"

namespace etrun::cli {

namespace {

bool Ignored(const JobConfig& c, const discovery::ClusterKind& kind) {
  return std::find(c.ignore_clusters.begin(), c.ignore_clusters.end(), kind.words().name) !=
         c.ignore_clusters.end();
}

bool UseAllocation(const std::vector<const discovery::ClusterKind*>& kinds, const FlagTable& t,
                   const std::vector<std::string>& env, JobConfig* c, std::string* err) {
  const discovery::ClusterKind* kind = discovery::KindInside(kinds, env);
  if (kind == nullptr || Ignored(*c, *kind) || !c->hosts_flag.empty() || !t.hostfile().empty() ||
      !c->host_discovery_script.empty() || !c->pool.empty()) {
    return true;
  }
  discovery::ClusterAllocation allocation;
  if (!kind->Read(env, &allocation, err)) {
    *err = std::string("inside ") + kind->words().title + " allocation " + allocation.id + ": " +
           *err + " (or give -H, or --ignore-" + kind->words().name + ")";
    return false;
  }
  c->cluster = kind;
  c->cluster_job = allocation.id;
  c->host_list = allocation.hosts;
  if (!c->num_proc) {
    int slots = 0;
    for (const discovery::HostSlots& h : allocation.hosts) slots += h.slots;
    c->num_proc = slots;
  }
  if (c->remote_shell.empty() && c->controller != Controller::kMpi) {
    c->remote_shell = kind->StartTemplate(c->cluster_job);
  }
  return true;
}

}  // namespace

bool UseClusterAllocation(const std::vector<const discovery::ClusterKind*>& kinds,
                          const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                          std::string* err) {
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
