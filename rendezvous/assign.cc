#include "rendezvous/assign.h"

#include <map>

namespace etrun::rendezvous {

bool Assign(const std::vector<HostSlotCount>& hosts, int min_np, std::optional<int> max_np,
            std::vector<SlotInfo>* slots, std::string* err) {
  std::vector<SlotInfo> out;
  std::map<std::string, int> local_size;   // host -> slots used there
  std::map<int, int> cross_size;           // local rank -> hosts using it
  bool full = false;
  for (const HostSlotCount& h : hosts) {
    for (int local_rank = 0; local_rank < h.slots; ++local_rank) {
      if (max_np && static_cast<int>(out.size()) == *max_np) {
        full = true;
        break;
      }
      SlotInfo slot;
      slot.hostname = h.host;
      slot.rank = static_cast<int>(out.size());
      slot.local_rank = local_rank;
      slot.cross_rank = cross_size[local_rank]++;
      ++local_size[h.host];
      out.push_back(slot);
    }
    if (full) break;
  }
  if (static_cast<int>(out.size()) < min_np) {
    int available = 0;
    for (const HostSlotCount& h : hosts) available += h.slots;
    *err = "requested " + std::to_string(min_np) + " processes but the hosts provide only " +
           std::to_string(available) + (available == 1 ? " slot" : " slots");
    return false;
  }
  for (SlotInfo& slot : out) {
    slot.size = static_cast<int>(out.size());
    slot.local_size = local_size[slot.hostname];
    slot.cross_size = cross_size[slot.local_rank];
  }
  *slots = std::move(out);
  return true;
}

}  // namespace etrun::rendezvous
