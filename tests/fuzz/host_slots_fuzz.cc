// libFuzzer target: arbitrary bytes as `-H` text and as hostfile contents (spec §2.1, §2.2),
// parsed as etrun parses them before starting anything. Beyond "no crash", checks:
// - every parsed host has a valid name, a count >= 0, and appears once; -H and hostfile results
//   are never empty; no name begins with '-' (a command would read it as an option), and the
//   result with a '-' put before its first name is refused for that reason, as -H and hostfile;
// - FormatHosts() of the result parses back (as -H) to the same list, and a hostfile written
//   back as `host slots=N` lines does too (a hostfile becomes an -H list, as in horovodrun);
// - TotalSlots() is the exact sum, even for counts near INT_MAX;
// - a failed parse leaves *hosts untouched and says where: -H errors quote the element, hostfile
//   errors start with the path and a line that exists (or say the file has no hosts).
// Run: scripts/fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "discovery/host_slots.h"

namespace d = etrun::discovery;

namespace {

const std::vector<d::HostSlots> kSentinel = {{"sentinel", 7}};

void CheckHosts(const std::vector<d::HostSlots>& hosts) {
  if (hosts.empty()) abort();
  std::set<std::string> seen;
  int64_t sum = 0;
  for (const d::HostSlots& h : hosts) {
    if (!d::IsValidHostName(h.name) || d::StartsLikeOption(h.name) || h.slots < 0 ||
        !seen.insert(h.name).second) {
      abort();
    }
    sum += h.slots;
  }
  if (d::TotalSlots(hosts) != sum) abort();
  std::vector<d::HostSlots> again = kSentinel;
  std::string err;
  if (!d::ParseHostsFlag(d::FormatHosts(hosts), &again, &err) || again != hosts) abort();
  // The same list with its first name made option-like is refused for that, and kept out.
  const std::string dashed = "-" + hosts.front().name;
  const std::string why = d::OptionLikeHostError(dashed);
  if (d::ParseHostsFlag("-" + d::FormatHosts(hosts), &again, &err) || again != hosts ||
      err.find(why) == std::string::npos) {
    abort();
  }
  std::string file = dashed + " slots=" + std::to_string(hosts.front().slots) + "\n";
  if (d::ParseHostfile("dash.txt", file, &again, &err) || again != hosts ||
      err.rfind("dash.txt line 1: invalid host name '" + dashed + "': " + why, 0) != 0) {
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  std::vector<d::HostSlots> hosts = kSentinel;
  std::string err;
  if (d::ParseHostsFlag(text, &hosts, &err)) {
    CheckHosts(hosts);
  } else {
    bool names_element = err.rfind("invalid host '", 0) == 0 && err.find("' in -H '") != err.npos;
    bool duplicate = err.rfind("host '", 0) == 0 && err.find("' is listed twice") != err.npos;
    if (hosts != kSentinel || !(names_element || duplicate)) abort();
  }

  hosts = kSentinel;
  err.clear();
  if (d::ParseHostfile("fuzz.txt", text, &hosts, &err)) {
    CheckHosts(hosts);
    std::string file = "# written back\n";
    for (const d::HostSlots& h : hosts) file += h.name + " slots=" + std::to_string(h.slots) + "\n";
    std::vector<d::HostSlots> again = kSentinel;
    if (!d::ParseHostfile("again.txt", file, &again, &err) || again != hosts) abort();
  } else {
    if (hosts != kSentinel) abort();
    if (err != "fuzz.txt: no hosts in hostfile: add lines like 'worker-0 slots=4'") {
      if (err.rfind("fuzz.txt line ", 0) != 0) abort();
      long line = strtol(err.c_str() + 14, nullptr, 10);
      long lines = 1;
      for (char c : text) lines += c == '\n';
      if (line < 1 || line > lines) abort();
    }
  }
  return 0;
}
