#include "discovery/host_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace etrun::discovery {

HostManager::HostManager(std::optional<std::pair<int, int>> cooldown_s,
                         std::function<double()> uniform01)
    : cooldown_s_(cooldown_s), uniform01_(std::move(uniform01)) {}

int HostManager::Update(const std::vector<HostSlots>& discovered, TimePoint now) {
  int flags = kNoUpdate;
  std::map<std::string, int> before;
  for (const HostSlots& h : discovered_) before[h.name] = h.slots;
  std::map<std::string, int> after;
  for (const HostSlots& h : discovered) after[h.name] = h.slots;
  for (const auto& [name, slots] : before) {
    auto it = after.find(name);
    if (it == after.end() || it->second < slots) flags |= kRemoved;
  }
  for (const auto& [name, slots] : after) {
    auto it = before.find(name);
    if (it == before.end() || it->second < slots) flags |= kAdded;
  }
  // Resurrect hosts whose cooldown ended; they are available again.
  for (auto& [name, state] : states_) {
    if (state.blacklisted && state.cooldown_end && now >= *state.cooldown_end) {
      state.blacklisted = false;
      state.cooldown_end.reset();
      if (after.count(name)) flags |= kAdded;
    }
  }
  if (forget_departed_) {
    std::erase_if(states_, [&after](const auto& entry) { return !after.count(entry.first); });
  }
  discovered_ = discovered;
  updated_ = true;
  // Hosts still available keep their order; newcomers (and hosts back from a disappearance or a
  // blacklist) follow in output order.
  std::erase_if(order_, [&after, this](const std::string& name) {
    return !after.count(name) || IsBlacklisted(name);
  });
  for (const HostSlots& h : discovered_) {
    if (!IsBlacklisted(h.name) && std::find(order_.begin(), order_.end(), h.name) == order_.end()) {
      order_.push_back(h.name);
    }
  }
  return flags;
}

void HostManager::Blacklist(const std::string& host, TimePoint now) {
  HostState& state = states_[host];
  if (state.blacklisted && state.cooldown_end && now < *state.cooldown_end) return;
  state.blacklisted = true;
  std::erase(order_, host);
  if (!cooldown_s_) {
    state.cooldown_end.reset();  // for good
    return;
  }
  ++state.count;
  double min = cooldown_s_->first, max = cooldown_s_->second;
  double delay = min * std::pow(2.0, state.count) + uniform01_() * min;
  delay = std::clamp(delay, min, max);
  state.cooldown_end = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(delay));
}

bool HostManager::Departed(const std::string& host) const {
  return forget_departed_ && std::none_of(discovered_.begin(), discovered_.end(),
                                          [&host](const HostSlots& h) { return h.name == host; });
}

std::vector<HostSlots> HostManager::Available() const {
  std::vector<HostSlots> out;
  for (const std::string& name : order_) {
    auto it = std::find_if(discovered_.begin(), discovered_.end(),
                           [&name](const HostSlots& h) { return h.name == name; });
    if (it != discovered_.end()) out.push_back(*it);
  }
  return out;
}

int HostManager::AvailableSlots() const {
  int64_t total = 0;  // counts are ints >= 0, so this cannot overflow
  for (const HostSlots& h : Available()) total += h.slots;
  return static_cast<int>(std::min<int64_t>(total, std::numeric_limits<int>::max()));
}

bool HostManager::IsBlacklisted(const std::string& host) const {
  auto it = states_.find(host);
  return it != states_.end() && it->second.blacklisted;
}

std::optional<TimePoint> HostManager::CooldownEnd(const std::string& host) const {
  auto it = states_.find(host);
  if (it == states_.end() || !it->second.blacklisted) return std::nullopt;
  return it->second.cooldown_end;
}

}  // namespace etrun::discovery
