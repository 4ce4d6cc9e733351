// Parsing a host discovery script's stdout (spec §2.4), fixed where horovodrun breaks (§9.2):
// each line is trimmed (so CRLF output works), blank lines are skipped, output order is kept,
// `host` without `:slots` gets the default slot count, and a host listed twice keeps its last
// count with a warning instead of a random winner. Pure; thread-compatible.
#ifndef ETRUN_DISCOVERY_DISCOVERY_OUTPUT_H_
#define ETRUN_DISCOVERY_DISCOVERY_OUTPUT_H_

#include <string>
#include <string_view>
#include <vector>

#include "discovery/host_slots.h"

namespace etrun::discovery {

// At most this many distinct hosts are taken from one discovery run; the rest are ignored with a
// warning.
inline constexpr size_t kMaxDiscoveredHosts = 10000;

// At most this many slots in all are taken from one discovery run (rank assignment builds an
// entry per slot): hosts past the cap get fewer or none, with a warning. More ranks than this
// in one job is far beyond anything etrun is tested with (256).
inline constexpr int kMaxDiscoveredSlots = 1 << 16;

// At most this many slots on one host. The largest machines training runs on carry a few
// hundred hardware threads (a 4-socket server: ~900; 8 GPUs x 8 ranks: 64); a count above this
// is a typo (`localhost:100000000`), not a machine, so its line is refused like any bad line.
inline constexpr int kMaxSlotsPerHost = 4096;

// Keeps the total slot count of `hosts` within kMaxDiscoveredSlots (the first hosts keep theirs),
// with a warning when it cuts.
void CapSlots(std::vector<HostSlots>* hosts, std::vector<std::string>* warnings);

// Parses `output`. `default_slots` is --slots-per-host (or 1). Empty output is legal: no hosts
// yet. On success fills *hosts (in first-appearance order) and appends a message per duplicate,
// and one for each cap reached (hosts, slots), to *warnings. On a bad line returns false, sets *err ("line 3: ..."), leaves *hosts unchanged.
bool ParseDiscoveryOutput(std::string_view output, int default_slots,
                          std::vector<HostSlots>* hosts, std::vector<std::string>* warnings,
                          std::string* err);

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_DISCOVERY_OUTPUT_H_
