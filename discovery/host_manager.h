// HostManager: the elastic job's view of its hosts (spec §6.2, §6.6). It diffs each discovery
// result against the last one (HostUpdateResult flags of §5.5), keeps the assignment order stable
// (hosts already ordered stay first, so surviving ranks keep low numbers; new hosts follow in the
// script's output order, not a hash order), and blacklists hosts whose ranks failed: for good, or
// with --blacklist-cooldown-range, for MIN*2^count + U(0,1)*MIN seconds clamped to [MIN, MAX],
// after which the host is resurrected (counted as added) while its count persists.
// Pure: time and randomness are passed in. Driver thread only.
#ifndef ETRUN_DISCOVERY_HOST_MANAGER_H_
#define ETRUN_DISCOVERY_HOST_MANAGER_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "discovery/host_slots.h"

namespace etrun::discovery {

// Flags of one change, with horovod's HostUpdateResult values.
enum HostUpdateFlags : int { kNoUpdate = 0, kRemoved = 1, kAdded = 2, kMixed = 3 };

using TimePoint = std::chrono::steady_clock::time_point;

class HostManager {
 public:
  // `cooldown_s`: --blacklist-cooldown-range (MIN, MAX) seconds, or nullopt for a permanent
  // blacklist. `uniform01` returns numbers in [0, 1) (tests pass a fixed one).
  HostManager(std::optional<std::pair<int, int>> cooldown_s, std::function<double()> uniform01);

  // Takes a new discovery result. Returns what changed since the last one (resurrections count
  // as added); the available hosts and their order are updated.
  int Update(const std::vector<HostSlots>& discovered, TimePoint now);

  // Whether a blacklisted host that leaves the discovered list is forgotten (HostSourceTraits::
  // forget_departed): listed again, it is available. Default: blacklisted still.
  void set_forget_departed(bool forget) { forget_departed_ = forget; }

  // Blacklists a host whose rank failed. No effect while the host is inside a cooldown window.
  void Blacklist(const std::string& host, TimePoint now);

  // The last list Update took (the job's hosts: its source's grant with `etrun scale`'s
  // overrides), in the order given; whether Update was ever called.
  const std::vector<HostSlots>& discovered() const { return discovered_; }
  bool updated() const { return updated_; }

  // Hosts that are discovered and not blacklisted, in assignment order.
  std::vector<HostSlots> Available() const;
  // Their total slots, capped at INT_MAX (a script may print huge counts).
  int AvailableSlots() const;

  bool IsBlacklisted(const std::string& host) const;
  // Whether `host` left for good: it is not in the last list and departed hosts are forgotten
  // (set_forget_departed). Blacklisting it would be forgotten at once: there is nothing to do.
  bool Departed(const std::string& host) const;
  // When a blacklisted host may come back; nullopt if never (or not blacklisted).
  std::optional<TimePoint> CooldownEnd(const std::string& host) const;

 private:
  struct HostState {
    bool blacklisted = false;
    int count = 0;                         // blacklistings with a cooldown, ever
    std::optional<TimePoint> cooldown_end;
  };

  std::optional<std::pair<int, int>> cooldown_s_;
  bool forget_departed_ = false;
  std::function<double()> uniform01_;
  std::vector<HostSlots> discovered_;      // last discovery result, in output order
  bool updated_ = false;
  std::vector<std::string> order_;         // assignment order of the available hosts
  std::map<std::string, HostState> states_;
};

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_HOST_MANAGER_H_
