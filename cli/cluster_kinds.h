// The cluster kinds etrun knows (discovery/cluster_kind.h), where `etrun` and `etrun pool start`
// choose: the first kind whose allocation the environment is inside gives the hosts. Adding a
// kind is its folder and one line in cluster_kinds.cc.
#ifndef ETRUN_CLI_CLUSTER_KINDS_H_
#define ETRUN_CLI_CLUSTER_KINDS_H_

#include <vector>

#include "discovery/cluster_kind.h"

namespace etrun::cli {

// Every kind, in the order they are asked; constant objects that live as long as the program.
const std::vector<const discovery::ClusterKind*>& ClusterKinds();

}  // namespace etrun::cli

#endif  // ETRUN_CLI_CLUSTER_KINDS_H_
