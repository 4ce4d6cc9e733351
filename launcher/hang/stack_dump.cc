#include "launcher/hang/stack_dump.h"

#include <algorithm>
#include <map>

namespace etrun::launcher::hang {

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// `  File "PATH", line N in FUNC`
std::optional<StackFrame> ParseFrame(std::string_view line) {
  constexpr std::string_view kFile = "  File \"";
  if (!StartsWith(line, kFile)) return std::nullopt;
  line.remove_prefix(kFile.size());
  size_t mid = line.rfind("\", line ");
  if (mid == std::string_view::npos) return std::nullopt;
  StackFrame frame;
  frame.file = std::string(line.substr(0, mid));
  std::string_view rest = line.substr(mid + 8);
  size_t in = rest.find(" in ");
  std::string_view number = rest.substr(0, in);
  if (number.empty() || number.size() > 9) return std::nullopt;
  for (char c : number) {
    if (c < '0' || c > '9') return std::nullopt;
    frame.line = frame.line * 10 + (c - '0');
  }
  if (in != std::string_view::npos) frame.function = std::string(rest.substr(in + 4));
  return frame;
}

bool ThreadHeader(std::string_view line, bool* current) {
  constexpr std::string_view kTail = " (most recent call first):";
  if (line.size() < kTail.size() || line.substr(line.size() - kTail.size()) != kTail) return false;
  if (StartsWith(line, "Current thread 0x")) {
    *current = true;
    return true;
  }
  if (StartsWith(line, "Thread 0x")) {
    *current = false;
    return true;
  }
  return false;
}

bool IsThreadBootstrap(const StackFrame& frame) {
  return frame.function.starts_with("_bootstrap") &&
         (frame.file.ends_with("/threading.py") || frame.file == "threading.py");
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

std::string HostsOf(const std::vector<const RankObservation*>& group) {
  std::vector<std::string> hosts;
  for (const RankObservation* r : group) {
    if (std::find(hosts.begin(), hosts.end(), r->host) == hosts.end()) hosts.push_back(r->host);
  }
  return Join(hosts, ",");
}

std::vector<int> RanksOf(const std::vector<const RankObservation*>& group) {
  std::vector<int> out;
  for (const RankObservation* r : group) out.push_back(r->rank);
  return out;
}

// "rank 2 on b" / "ranks 4,5 on b,c"
std::string Who(const std::vector<const RankObservation*>& group, bool with_hosts) {
  std::string out = (group.size() == 1 ? "rank " : "ranks ") + RankList(RanksOf(group));
  if (with_hosts) out += " on " + HostsOf(group);
  return out;
}

}  // namespace

std::vector<ThreadStack> ParseStackDump(std::string_view text) {
  std::vector<ThreadStack> dump;  // the dump being read
  std::vector<ThreadStack> last;  // the last one complete
  bool in_dump = false;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool current = false;
    if (ThreadHeader(line, &current)) {
      // A header after a non-frame line that was not the blank one between threads starts a
      // new dump (a later signal's).
      if (!in_dump) dump.clear();
      dump.push_back({current, {}});
      in_dump = true;
      continue;
    }
    if (!in_dump) continue;
    if (auto frame = ParseFrame(line)) {
      dump.back().frames.push_back(std::move(*frame));
    } else if (line.empty() || line == "  <no Python frame>" || line == "  ...") {
      // between threads, a thread in C only, a stack cut short
    } else {
      in_dump = false;
      last = dump;
    }
  }
  if (in_dump) last = dump;
  return last;
}

std::optional<StackFrame> MainThreadFrame(const std::vector<ThreadStack>& threads) {
  const ThreadStack* best = nullptr;
  for (const ThreadStack& t : threads) {
    if (t.frames.empty() || IsThreadBootstrap(t.frames.back())) continue;
    if (best == nullptr || (t.current && !best->current)) best = &t;
  }
  if (best == nullptr) return std::nullopt;
  return best->frames.front();
}

std::string FrameText(const StackFrame& frame) {
  std::string_view path = frame.file;
  for (std::string_view marker : {"site-packages/", "dist-packages/"}) {
    size_t at = path.rfind(marker);
    if (at != std::string_view::npos) {
      path.remove_prefix(at + marker.size());
      return std::string(path) + ":" + std::to_string(frame.line) + " (" + frame.function + ")";
    }
  }
  size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  return std::string(path) + ":" + std::to_string(frame.line) + " (" + frame.function + ")";
}

std::string RankList(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ",";
    if (j - i >= 2) {
      out += std::to_string(sorted[i]) + "-" + std::to_string(sorted[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += (k > i ? "," : "") + std::to_string(sorted[k]);
    }
    i = j + 1;
  }
  return out;
}

Verdict JudgeHang(std::string_view why, std::vector<RankObservation> ranks) {
  std::sort(ranks.begin(), ranks.end(),
            [](const RankObservation& a, const RankObservation& b) { return a.rank < b.rank; });
  // Places in the order their first rank comes; ranks without a stack apart.
  std::vector<std::pair<std::string, std::vector<const RankObservation*>>> places;
  std::vector<const RankObservation*> no_stack;
  for (const RankObservation& r : ranks) {
    if (!r.where) {
      no_stack.push_back(&r);
      continue;
    }
    std::string place = FrameText(*r.where);
    auto it = std::find_if(places.begin(), places.end(), [&](const auto& p) { return p.first == place; });
    if (it == places.end()) {
      places.push_back({place, {&r}});
    } else {
      it->second.push_back(&r);
    }
  }
  Verdict v;
  v.why = std::string(why);
  std::vector<std::string> parts;
  // The place where most ranks wait: one alone holding more ranks than any other (a tie, or one
  // rank per place, names nobody odd: there is no telling which side is stuck).
  size_t most = 0;
  bool unique = true;
  for (size_t i = 1; i < places.size(); ++i) {
    if (places[i].second.size() > places[most].second.size()) {
      most = i;
      unique = true;
    } else if (places[i].second.size() == places[most].second.size()) {
      unique = false;
    }
  }
  bool majority = !places.empty() && unique && (places.size() == 1 || places[most].second.size() > 1);
  std::vector<const RankObservation*> odd;
  if (majority) {
    const auto& [place, group] = places[most];
    v.waiting_in = place;
    if (group.size() == ranks.size() && group.size() > 1) {
      parts.push_back("all " + std::to_string(group.size()) + " ranks wait in " + place);
    } else {
      parts.push_back(Who(group, false) + (group.size() == 1 ? " waits in " : " wait in ") + place);
    }
    for (size_t i = 0; i < places.size(); ++i) {
      if (i == most) continue;
      const auto& [other, members] = places[i];
      parts.push_back(Who(members, true) + (members.size() == 1 ? " is" : " are") + " elsewhere: " + other);
      odd.insert(odd.end(), members.begin(), members.end());
    }
  } else {
    for (const auto& [place, members] : places) parts.push_back(Who(members, true) + " in " + place);
  }
  // Ranks with no Python stack, grouped by what the kernel says of them.
  std::vector<std::pair<std::string, std::vector<const RankObservation*>>> states;
  for (const RankObservation* r : no_stack) {
    std::string state = r->facts ? DescribeProcFacts(*r->facts) : "";
    auto it = std::find_if(states.begin(), states.end(), [&](const auto& s) { return s.first == state; });
    if (it == states.end()) {
      states.push_back({state, {r}});
    } else {
      it->second.push_back(r);
    }
  }
  for (const auto& [state, members] : states) {
    std::string who = Who(members, true);
    std::string has = members.size() == 1 ? " has" : " have";
    // Shown, never odd: a rank without a stack (not Python, its hook missing, its dump late)
    // says nothing about where it is stuck, and --hang-action restart must not blame its host.
    parts.push_back(state.empty() ? who + " gave neither a Python stack nor its state"
                                  : who + has + " no Python stack: " + state);
  }
  std::sort(odd.begin(), odd.end(), [](auto a, auto b) { return a->rank < b->rank; });
  for (const RankObservation* r : odd) {
    v.odd_ranks.push_back(r->rank);
    if (std::find(v.odd_hosts.begin(), v.odd_hosts.end(), r->host) == v.odd_hosts.end()) {
      v.odd_hosts.push_back(r->host);
    }
  }
  v.summary = parts.empty() ? "no rank is running" : Join(parts, "; ");
  v.line = "etrun: hang: " + std::string(why) + ": " + v.summary;
  v.ranks = std::move(ranks);
  return v;
}

}  // namespace etrun::launcher::hang
