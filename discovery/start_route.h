// StartRoute: how an agent starts on a host that is not reached over SSH — a remote-shell
// template ({host}) and the cluster kind whose step it runs — as one value, made where the
// template comes from and never guessed later:
//   - the job's own (JobConfig::start, filled by cli/cluster_hosts): the user's --remote-shell,
//     or the step of the cluster allocation etrun runs inside (ClusterKind::Route);
//   - a host's own (HostGrant::start_through, filled by its host source): a node of another
//     allocation the job grew onto, or a pool's host (ClusterKind::Route there too).
// RankLauncher picks the host's own over the job's, once per rank; the agent starter uses what it
// is given. Plain value; thread-compatible.
#ifndef ETRUN_DISCOVERY_START_ROUTE_H_
#define ETRUN_DISCOVERY_START_ROUTE_H_

#include <string>

namespace etrun::discovery {

class ClusterKind;  // discovery/cluster_kind.h

struct StartRoute {
  std::string command;               // the template; "": SSH
  const ClusterKind* kind = nullptr;  // the kind whose step `command` starts; null: a plain shell
  // The job's own route (its --remote-shell or allocation), not a host's: a SIGTERM that its
  // kind's cluster sends the job's steps stops the job (ClusterWords::term_stops_job). A host of
  // another allocation or a pool's ending is no stop.
  bool job_own = false;
  bool operator==(const StartRoute&) const = default;
};

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_START_ROUTE_H_
