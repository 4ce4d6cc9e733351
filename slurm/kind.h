// Slurm as a cluster kind (discovery/cluster_kind.h): an allocation from the environment
// (allocation.h), followed by squeue (job_source.h), agents started as `srun --overlap` steps.
#ifndef ETRUN_SLURM_KIND_H_
#define ETRUN_SLURM_KIND_H_

#include <memory>
#include <string>
#include <vector>

#include "discovery/cluster_kind.h"

namespace etrun::slurm {

class SlurmKind : public discovery::ClusterKind {
 public:
  discovery::ClusterWords words() const override;
  bool Inside(const std::vector<std::string>& env) const override;
  bool Read(const std::vector<std::string>& env, discovery::ClusterAllocation* allocation,
            std::string* err) const override;
  std::string StartTemplate(const std::string& id) const override;
  std::string PollCommand(const std::string& id, const std::string& grow_name) const override;
  std::unique_ptr<discovery::HostSource> Follow(
      discovery::ScriptRunner* runner, const discovery::ClusterAllocation& own) const override;
};

// The one Slurm kind, for cli/cluster_kinds.cc.
extern const SlurmKind kKind;

}  // namespace etrun::slurm

#endif  // ETRUN_SLURM_KIND_H_
