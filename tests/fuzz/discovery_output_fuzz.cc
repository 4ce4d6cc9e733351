// libFuzzer target: arbitrary bytes as a host discovery script's stdout (spec §2.4), parsed as
// etrun parses every poll. Beyond "no crash", checks what the rest of etrun relies on:
// - a parse succeeds or fails the same way whatever --slots-per-host is, with the same host names
//   in the same order (the default only fills counts), and the same error text;
// - every parsed host has a valid name (IsValidHostName), a count >= 0, and appears once; no
//   name begins with '-' (a command would read it as an option), and a line with a '-' put
//   before a parsed name is refused for that reason;
// - writing the hosts back as `host:slots` lines, with CRLF or LF, parses to the same list with no
//   warnings (so the parse is a fixed point and no information is lost);
// - LF -> CRLF in the input changes nothing (lines are trimmed);
// - a failed parse leaves *hosts untouched and names a line that exists.
// Run: scripts/fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "discovery/discovery_output.h"
#include "discovery/host_slots.h"

namespace d = etrun::discovery;

namespace {

struct Parsed {
  bool ok = false;
  std::vector<d::HostSlots> hosts;
  std::vector<std::string> warnings;
  std::string err;
};

Parsed Parse(std::string_view output, int default_slots) {
  Parsed p;
  // A sentinel: a failed parse must leave it as it was.
  p.hosts = {{"sentinel", 7}};
  p.ok = d::ParseDiscoveryOutput(output, default_slots, &p.hosts, &p.warnings, &p.err);
  if (!p.ok && (p.hosts != std::vector<d::HostSlots>{{"sentinel", 7}} || p.err.empty())) abort();
  return p;
}

std::vector<std::string> Names(const std::vector<d::HostSlots>& hosts) {
  std::vector<std::string> names;
  for (const d::HostSlots& h : hosts) names.push_back(h.name);
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view output(reinterpret_cast<const char*>(data), size);
  Parsed one = Parse(output, 1);
  Parsed three = Parse(output, 3);
  if (one.ok != three.ok || one.err != three.err || Names(one.hosts) != Names(three.hosts)) abort();
  if (!one.ok) {
    // "line N: ..." with 1 <= N <= the number of lines.
    if (one.err.rfind("line ", 0) != 0) abort();
    long line = strtol(one.err.c_str() + 5, nullptr, 10);
    long lines = 1;
    for (char c : output) lines += c == '\n';
    if (line < 1 || line > lines) abort();
  }

  for (const Parsed* p : {&one, &three}) {
    if (!p->ok) continue;
    std::set<std::string> seen;
    std::string lf, crlf;
    for (const d::HostSlots& h : p->hosts) {
      if (!d::IsValidHostName(h.name) || d::StartsLikeOption(h.name) || h.slots < 0 ||
          !seen.insert(h.name).second) {
        abort();
      }
      lf += h.name + ":" + std::to_string(h.slots) + "\n";
      crlf += h.name + ":" + std::to_string(h.slots) + "\r\n";
    }
    for (const std::string& text : {lf, crlf}) {
      Parsed again = Parse(text, 5);
      if (!again.ok || again.hosts != p->hosts || !again.warnings.empty()) abort();
    }
    if (!p->hosts.empty()) {
      std::string dashed = "-" + p->hosts.front().name;
      Parsed refused = Parse(lf + dashed + ":1\n", 1);
      if (refused.ok ||
          refused.err != "line " + std::to_string(p->hosts.size() + 1) + ": " +
                             d::OptionLikeHostError(dashed) + ", got \"" + dashed + ":1\"") {
        abort();
      }
    }
  }

  // CRLF output parses exactly as LF output.
  std::string crlf_input;
  for (char c : output) {
    if (c == '\n') crlf_input += '\r';
    crlf_input += c;
  }
  Parsed crlf = Parse(crlf_input, 1);
  if (crlf.ok != one.ok || crlf.hosts != one.hosts || crlf.err != one.err ||
      crlf.warnings != one.warnings) {
    abort();
  }
  return 0;
}
