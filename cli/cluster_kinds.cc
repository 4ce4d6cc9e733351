#include "cli/cluster_kinds.h"

#include "slurm/kind.h"

namespace etrun::cli {

const std::vector<const discovery::ClusterKind*>& ClusterKinds() {
  static const std::vector<const discovery::ClusterKind*> kinds = {&slurm::kKind};
  return kinds;
}

}  // namespace etrun::cli
