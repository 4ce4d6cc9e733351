#include "slurm/job_source.h"

#include <map>
#include <set>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "discovery/discovery_output.h"
#include "discovery/host_slots.h"
#include "slurm/allocation.h"

namespace etrun::slurm {

namespace {

std::string Quote(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string QueueCommand(const std::string& job, const std::string& grow_name) {
  std::string cmd = "squeue --noheader --format='%i %T %N' --jobs=" + Quote(job);
  if (!grow_name.empty()) {
    cmd += " && squeue --noheader --format='%i %T %N' --states=RUNNING --user=\"$(id -u)\" --name=" +
           Quote(grow_name);
  }
  return cmd;
}

discovery::HostGrant GrantFromQueue(const discovery::ScriptResult& result,
                                    const discovery::ClusterKind& kind, const std::string& job,
                                    const std::vector<discovery::HostSlots>& own) {
  discovery::HostGrant grant;
  grant.errors = result.errors;
  if (!result.ok) {
    grant.failure = "squeue failed (" + result.failure + ")";
    return grant;
  }
  std::map<std::string, int> own_slots;
  for (const discovery::HostSlots& h : own) own_slots.emplace(h.name, h.slots);
  int default_slots = own.empty() ? 1 : own.front().slots;
  struct Job {
    std::string state;
    std::vector<std::string> nodes;
  };
  std::map<long, Job> others;  // by id: the order nodes are added in
  std::optional<Job> mine;
  std::istringstream lines(result.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string id, state, list;
    if (!(words >> id)) continue;
    words >> state >> list;
    Job j{state, {}};
    std::string err;
    if (!list.empty() && list != "(null)" && !ExpandHostList(list, &j.nodes, &err)) {
      grant.failure = "squeue printed job " + id + "'s node list " + err;
      return grant;
    }
    if (id == job) {
      mine = j;
    } else if (state == "RUNNING") {
      char* end = nullptr;
      long n = strtol(id.c_str(), &end, 10);
      if (end != id.c_str() && *end == '\0') others[n] = j;  // array tasks ("7_1") are left out
    }
  }
  if (!mine || mine->state != "RUNNING") {
    grant.failure = "Slurm job " + job + (mine ? " is " + mine->state : std::string(" is gone")) +
                    ": its allocation has no nodes to run on";
    return grant;
  }
  std::set<std::string> listed;
  for (const std::string& node : mine->nodes) {
    auto it = own_slots.find(node);
    grant.hosts.push_back({node, it != own_slots.end() ? it->second : default_slots});
    listed.insert(node);
  }
  for (const auto& [id, other] : others) {
    for (const std::string& node : other.nodes) {
      if (!listed.insert(node).second) continue;
      grant.hosts.push_back({node, default_slots});
      grant.start_through[node] = kind.Route(std::to_string(id), /*job_own=*/false);
    }
  }
  discovery::CapSlots(&grant.hosts, &grant.warnings);
  grant.ok = true;
  return grant;
}

void JobHostSource::Poll(std::function<void(discovery::HostGrant)> done) {
  runner_->Run([this, done = std::move(done)](discovery::ScriptResult result) {
    discovery::HostGrant grant = GrantFromQueue(result, *kind_, job_, own_);
    if (!grant.ok && !answered_) {
      // Before any answer the environment's hosts stand in (squeue may not be reachable yet).
      spdlog::warn("{}: running on the allocation's nodes as the environment lists them",
                   grant.failure);
      discovery::HostGrant first;
      first.ok = true;
      first.hosts = own_;
      first.errors = grant.errors;
      grant = std::move(first);
    }
    answered_ = answered_ || grant.ok;
    done(std::move(grant));
  });
}

}  // namespace etrun::slurm
