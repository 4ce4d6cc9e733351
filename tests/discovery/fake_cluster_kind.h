// A cluster kind for tests (discovery/cluster_kind.h): "flux", inside an allocation when
// FLUX_JOB_ID is set, its nodes from FLUX_NODES ("a:2,b:2"), agents started by `flux run`.
#ifndef ETRUN_TESTS_DISCOVERY_FAKE_CLUSTER_KIND_H_
#define ETRUN_TESTS_DISCOVERY_FAKE_CLUSTER_KIND_H_

#include <memory>
#include <string>
#include <vector>

#include "discovery/cluster_kind.h"
#include "discovery/host_slots.h"

namespace etrun::discovery {

class FakeClusterKind : public ClusterKind {
 public:
  ClusterWords words() const override {
    return {"flux", "Flux", "flux alloc", "flux", "", /*term_stops_job=*/false};
  }
  bool Inside(const std::vector<std::string>& env) const override {
    return !Value(env, "FLUX_JOB_ID").empty();
  }
  bool Read(const std::vector<std::string>& env, ClusterAllocation* allocation,
            std::string* err) const override {
    *allocation = {};
    allocation->id = Value(env, "FLUX_JOB_ID");
    if (!ParseHostsFlag(Value(env, "FLUX_NODES"), &allocation->hosts, err)) {
      *err = "FLUX_NODES=" + *err;
      return false;
    }
    return true;
  }
  std::string StartTemplate(const std::string& id) const override {
    return "flux run --jobid=" + id + " --requires=host:{host}";
  }
  std::string PollCommand(const std::string& id, const std::string& grow_name) const override {
    return "flux jobs " + id;
  }
  std::unique_ptr<HostSource> Follow(ScriptRunner* runner,
                                     const ClusterAllocation& own) const override {
    return std::make_unique<FixedHostSource>(own.hosts);
  }

 private:
  static std::string Value(const std::vector<std::string>& env, const std::string& name) {
    for (const std::string& kv : env) {
      if (kv.starts_with(name + "=")) return kv.substr(name.size() + 1);
    }
    return "";
  }
};

}  // namespace etrun::discovery

#endif  // ETRUN_TESTS_DISCOVERY_FAKE_CLUSTER_KIND_H_
