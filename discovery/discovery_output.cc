#include "discovery/discovery_output.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>

namespace etrun::discovery {

void CapSlots(std::vector<HostSlots>* hosts, std::vector<std::string>* warnings) {
  int64_t total = 0;
  for (const HostSlots& h : *hosts) total += h.slots;
  if (total <= kMaxDiscoveredSlots) return;
  int left = kMaxDiscoveredSlots;
  for (HostSlots& h : *hosts) {
    h.slots = std::min(h.slots, left);
    left -= h.slots;
  }
  warnings->push_back("more than " + std::to_string(kMaxDiscoveredSlots) + " slots listed (" +
                      std::to_string(total) + "): using the first " +
                      std::to_string(kMaxDiscoveredSlots) + "; use --max-np to say how many "
                      "ranks the job may use");
}

bool ParseDiscoveryOutput(std::string_view output, int default_slots,
                          std::vector<HostSlots>* hosts, std::vector<std::string>* warnings,
                          std::string* err) {
  std::vector<HostSlots> parsed;
  std::map<std::string, size_t, std::less<>> index;
  int line_no = 0;
  size_t pos = 0;
  bool capped = false;
  while (pos < output.size()) {
    size_t nl = output.find('\n', pos);
    std::string_view raw = output.substr(pos, nl == std::string_view::npos ? output.npos : nl - pos);
    pos = nl == std::string_view::npos ? output.size() : nl + 1;
    ++line_no;
    std::string_view line = TrimWhitespace(raw);
    if (line.empty()) continue;
    std::string where = "line " + std::to_string(line_no) + ": ";
    std::string_view name = line;
    int slots = default_slots;
    size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      name = TrimWhitespace(line.substr(0, colon));
      std::string_view count = TrimWhitespace(line.substr(colon + 1));
      auto [ptr, ec] = std::from_chars(count.data(), count.data() + count.size(), slots);
      if (count.empty() || ec != std::errc() || ptr != count.data() + count.size() || slots < 0) {
        *err = where + "expected host or host:slots with a whole number of slots, got \"" +
               std::string(line) + "\"";
        return false;
      }
    }
    if (slots > kMaxSlotsPerHost) {
      *err = where + "at most " + std::to_string(kMaxSlotsPerHost) + " slots per host, got \"" +
             std::string(line) + "\"";
      return false;
    }
    if (StartsLikeOption(name)) {
      *err = where + OptionLikeHostError(name) + ", got \"" + std::string(line) + "\"";
      return false;
    }
    if (!IsValidHostName(name)) {
      *err = where + "expected host or host:slots (letters, digits, '.', '_', '-'), got \"" +
             std::string(line) + "\"";
      return false;
    }
    if (parsed.size() >= kMaxDiscoveredHosts && index.find(name) == index.end()) {
      if (!capped) {
        warnings->push_back(where + "more than " + std::to_string(kMaxDiscoveredHosts) +
                            " hosts listed: using the first " + std::to_string(kMaxDiscoveredHosts));
      }
      capped = true;
      continue;
    }
    auto [it, inserted] = index.try_emplace(std::string(name), parsed.size());
    if (inserted) {
      parsed.push_back({std::string(name), slots});
    } else if (parsed[it->second].slots != slots) {
      warnings->push_back(where + "host " + std::string(name) + " listed again with " +
                          std::to_string(slots) + " slots (was " +
                          std::to_string(parsed[it->second].slots) + "): using " +
                          std::to_string(slots));
      parsed[it->second].slots = slots;
    }
  }
  CapSlots(&parsed, warnings);
  *hosts = std::move(parsed);
  return true;
}

}  // namespace etrun::discovery
