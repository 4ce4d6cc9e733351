// Rank assignment: Horovod's `get_host_assignments` (spec §6.3), as a pure function. Ranks are
// host-major in the given host order; a slot's cross rank counts the earlier hosts that also use
// that local rank. Thread-compatible.
#ifndef ETRUN_RENDEZVOUS_ASSIGN_H_
#define ETRUN_RENDEZVOUS_ASSIGN_H_

#include <optional>
#include <string>
#include <vector>

namespace etrun::rendezvous {

struct HostSlotCount {
  std::string host;
  int slots = 0;
};

// One process slot of a round: `(hostname, local_rank)` identifies it for life.
struct SlotInfo {
  std::string hostname;
  int rank = 0;
  int size = 0;
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;
  bool operator==(const SlotInfo&) const = default;
};

// Assigns ranks to the slots of `hosts` in order, stopping at `max_np` slots when given. Returns
// the slots in rank order. Fails (returns false, sets *err, leaves *slots unchanged) when fewer
// than `min_np` slots result.
bool Assign(const std::vector<HostSlotCount>& hosts, int min_np, std::optional<int> max_np,
            std::vector<SlotInfo>* slots, std::string* err);

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_ASSIGN_H_
