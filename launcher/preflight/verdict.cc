#include "launcher/preflight/verdict.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace etrun::launcher::preflight {

std::vector<PeerTarget> TargetsFor(size_t i, const std::vector<std::string>& hosts,
                                   const std::vector<std::string>& ips, const std::vector<int>& ports) {
  size_t n = hosts.size();
  std::vector<PeerTarget> targets;
  for (size_t k = 1; k < n; ++k) {
    size_t j = (i + k) % n;
    // Streams to the next two: each host sends two and receives two, so a slow link of one
    // host's shows twice on its side and once on each peer's.
    targets.push_back({hosts[j], ips[j], ports[j], k <= 2});
  }
  return targets;
}

std::string RateText(double mbit_s) {
  char text[32];
  std::snprintf(text, sizeof(text), mbit_s >= 100 ? "%.0f Mbit/s" : "%.1f Mbit/s", mbit_s);
  return text;
}

std::vector<SickHost> Judge(const std::vector<HostCheck>& checks, double* median_mbit_s) {
  struct Side {
    int probed = 0, failed = 0;          // connects it made / that failed
    int probed_by = 0, failed_by = 0;    // connects toward it / that failed
    std::vector<std::string> failures;   // "h3 (cannot connect to ...: Connection refused)"
    std::vector<std::pair<std::string, double>> sent, received;  // streams: peer, rate
  };
  std::map<std::string, Side> sides;
  struct Link {
    std::string from, to;
    double rate;
  };
  std::vector<Link> links;
  for (const HostCheck& c : checks) {
    Side& from = sides[c.host];
    for (const PeerResult& p : c.peers) {
      Side& to = sides[p.host];
      ++from.probed;
      ++to.probed_by;
      if (!p.reached()) {
        ++from.failed;
        ++to.failed_by;
        from.failures.push_back(p.host + " (" + p.error + ")");
        continue;
      }
      double rate = p.mbit_s;  // 0 for a stream that failed: it moved nothing in time
      if (rate < 0) continue;  // none was made
      from.sent.emplace_back(p.host, rate);
      to.received.emplace_back(c.host, rate);
      links.push_back({c.host, p.host, rate});
    }
  }
  auto median_of = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  std::vector<double> all;
  for (const Link& l : links) all.push_back(l.rate);
  if (median_mbit_s != nullptr) *median_mbit_s = median_of(all);
  // A host is measured against the links it is not on: a throttled host slows its peers' streams
  // toward it too (its acknowledgements wait in the same queue), which with few hosts would pull
  // the job's median down to its own level. Two hosts have no other link: the median of theirs.
  auto reference = [&](const std::string& host) {
    std::vector<double> others;
    for (const Link& l : links) {
      if (l.from != host && l.to != host) others.push_back(l.rate);
    }
    return others.empty() ? median_of(all) : median_of(others);
  };
  auto all_slow = [](const std::vector<std::pair<std::string, double>>& streams, size_t least, double median) {
    if (streams.size() < least || median <= 0) return false;
    return std::all_of(streams.begin(), streams.end(),
                       [median](const auto& s) { return s.second < median / 4; });
  };
  auto listed = [](const std::vector<std::pair<std::string, double>>& streams, const char* way) {
    std::string text;
    for (const auto& [peer, rate] : streams) {
      text += (text.empty() ? "" : ", ") + RateText(rate) + " " + way + " " + peer;
    }
    return text;
  };

  std::vector<SickHost> sick;
  for (const HostCheck& c : checks) {
    const Side& s = sides[c.host];
    std::vector<std::string> why = c.problems;
    if (s.probed > 0 && s.failed * 2 > s.probed) {
      std::string failures;
      for (const std::string& f : s.failures) failures += (failures.empty() ? "" : ", ") + f;
      why.push_back("cannot reach " + std::to_string(s.failed) + " of its " + std::to_string(s.probed) +
                    " peers: " + failures);
    } else if (s.probed_by > 0 && s.failed_by * 2 > s.probed_by) {
      why.push_back(std::to_string(s.failed_by) + " of its " + std::to_string(s.probed_by) +
                    " peers cannot reach it");
    }
    double median = reference(c.host);
    std::string median_text = "a quarter of the other links' median " + RateText(median);
    if (all_slow(s.sent, 1, median)) {
      why.push_back("slow link: sends at " + listed(s.sent, "to") + ", below " + median_text);
    } else if (all_slow(s.received, 2, median)) {
      why.push_back("slow link: receives at " + listed(s.received, "from") + ", below " + median_text);
    }
    if (why.empty()) continue;
    std::string joined;
    for (const std::string& w : why) joined += (joined.empty() ? "" : "; ") + w;
    sick.push_back({c.host, joined});
  }
  return sick;
}

}  // namespace etrun::launcher::preflight
