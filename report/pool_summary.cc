// pool summaries: the text and JSON `etrun report POOL.jsonl` prints (see pool_report.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "report/pool_report.h"

namespace etrun::report {

std::vector<PoolJobSummary> SummarizePool(const PoolTimeline& tl) {
  std::vector<PoolJobSummary> out;
  for (const PoolJobHistory& job : tl.jobs) {
    PoolJobSummary s;
    s.seconds_in_pool = std::max(0.0, job.left - job.joined);
    // The whole series, not only up to `left`: slots a job still gives back after it left
    // (a later allocation names it) were still its own.
    for (size_t i = 0; i < job.held.size(); ++i) {
      const double until = i + 1 < job.held.size() ? job.held[i + 1].t : tl.end;
      s.slot_seconds += job.held[i].slots * std::max(0.0, until - job.held[i].t);
      s.peak_held = std::max(s.peak_held, job.held[i].slots);
    }
    s.average_held = s.seconds_in_pool > 0 ? s.slot_seconds / s.seconds_in_pool : 0;
    out.push_back(s);
  }
  return out;
}

namespace {

double Millis(double seconds) { return std::round(seconds * 1000) / 1000; }

// "8", or "8; 12 from 100 s; 8 from 200 s" when the pool's hosts changed.
std::string TotalText(const PoolTimeline& tl) {
  if (tl.total.empty()) return "unknown (no pool_start)";
  std::string out = std::to_string(tl.total[0].slots);
  for (size_t i = 1; i < tl.total.size(); ++i) {
    out += fmt::format("; {} from {}", tl.total[i].slots, FormatDuration(tl.total[i].t));
  }
  return out;
}

// "joined at 1.20 s (min 1, max 8), left at 35.0 s (ended)"
std::string StayText(const PoolJobHistory& job) {
  std::string out = "joined at " + FormatDuration(job.joined);
  if (job.min_np && job.max_np) {
    out += fmt::format(" (min {}, max {})", *job.min_np, *job.max_np);
  } else if (job.min_np || job.max_np) {
    out +=
        job.min_np ? fmt::format(" (min {})", *job.min_np) : fmt::format(" (max {})", *job.max_np);
  }
  if (!job.has_left) return out + ", still in the pool at the end";
  return out + ", left at " + FormatDuration(job.left) +
         (job.left_reason.empty() ? "" : " (" + job.left_reason + ")");
}

// "5000", "5000, 10000 from 20.0 s"
std::string PriorityText(const PoolJobHistory& job) {
  if (job.priorities.empty()) return "unknown";
  std::string out = std::to_string(job.priorities[0].priority);
  for (size_t i = 1; i < job.priorities.size(); ++i) {
    out += fmt::format(", {} from {}", job.priorities[i].priority,
                       FormatDuration(job.priorities[i].t));
  }
  return out;
}

// The names of an allocation in the order the jobs joined the pool.
std::vector<std::string> InJobOrder(const PoolTimeline& tl, const PoolAllocation& a) {
  std::vector<std::string> names;
  for (const auto& [name, slots] : a.held) names.push_back(name);
  for (const auto& [name, slots] : a.target) {
    if (a.held.count(name) == 0) names.push_back(name);
  }
  auto order = [&tl](const std::string& name) {
    for (size_t i = 0; i < tl.jobs.size(); ++i) {
      if (tl.jobs[i].name == name) return i;
    }
    return tl.jobs.size();
  };
  std::stable_sort(
      names.begin(), names.end(),
      [&order](const std::string& x, const std::string& y) { return order(x) < order(y); });
  return names;
}

// "train1 8 (target 4), train2 0 (target 4); queued: train3"
std::string AllocationText(const PoolTimeline& tl, const PoolAllocation& a) {
  std::string out;
  for (const std::string& name : InJobOrder(tl, a)) {
    const auto held = a.held.find(name);
    const auto target = a.target.find(name);
    const int h = held == a.held.end() ? 0 : held->second;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, h);
    if (target != a.target.end() && target->second != h) {
      out += fmt::format(" (target {})", target->second);
    }
  }
  if (out.empty()) out = "no jobs";
  if (!a.queued.empty()) {
    out += "; queued:";
    for (const std::string& name : a.queued) out += " " + name;
  }
  return out;
}

}  // namespace

std::string PoolSummaryText(const PoolTimeline& tl) {
  const std::vector<PoolJobSummary> sums = SummarizePool(tl);
  std::string out;
  out += fmt::format("pool: {}\n", tl.pool.empty() ? "(no name)" : tl.pool);
  if (!tl.start_ts.empty()) out += "started: " + tl.start_ts + "\n";
  out += "duration: " + FormatDuration(tl.end) + "\n";
  if (!tl.has_pool_stop) {
    out +=
        "stopped: no pool_stop (the pool is still running or was killed); up to the last event\n";
  }
  out += "total slots: " + TotalText(tl) + "\n";
  if (!tl.hosts.empty()) {
    std::string hosts;
    for (const PoolHost& h : tl.hosts) {
      hosts += fmt::format("{}{} ({} slots)", hosts.empty() ? "" : ", ", h.host, h.slots);
    }
    out += "hosts: " + hosts + "\n";
  }
  out += fmt::format("jobs: {}\n", tl.jobs.size());
  for (size_t i = 0; i < tl.jobs.size(); ++i) {
    const PoolJobHistory& job = tl.jobs[i];
    const PoolJobSummary& s = sums[i];
    out += fmt::format("  {}: {}\n", job.name, StayText(job));
    out += "    priority: " + PriorityText(job) + "\n";
    out +=
        fmt::format("    held: {:.1f} slot-seconds over {}, average {:.2f}, peak {}\n",
                    s.slot_seconds, FormatDuration(s.seconds_in_pool), s.average_held, s.peak_held);
    for (const TimeSpan& q : job.queued) {
      out += fmt::format("    queued: from {} to {}\n", FormatDuration(q.start),
                         FormatDuration(q.end));
    }
  }
  out += fmt::format("allocation changes: {}\n", tl.allocations.size());
  for (const PoolAllocation& a : tl.allocations) {
    out += fmt::format("  at {}: {}\n", FormatDuration(a.t), AllocationText(tl, a));
  }
  return out;
}

namespace {

nlohmann::ordered_json Steps(const std::vector<SlotStep>& steps) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const SlotStep& s : steps) out.push_back({{"t", Millis(s.t)}, {"slots", s.slots}});
  return out;
}

nlohmann::ordered_json JobJson(const PoolJobHistory& job, const PoolJobSummary& s) {
  using ojson = nlohmann::ordered_json;
  auto optional_int = [](const std::optional<int>& v) { return v ? ojson(*v) : ojson(nullptr); };
  ojson priorities = ojson::array();
  for (const PriorityChange& p : job.priorities) {
    priorities.push_back({{"t", Millis(p.t)}, {"priority", p.priority}});
  }
  ojson queued = ojson::array();
  for (const TimeSpan& q : job.queued) {
    queued.push_back({{"start", Millis(q.start)}, {"end", Millis(q.end)}});
  }
  ojson out;
  out["job"] = job.name;
  out["joined"] = Millis(job.joined);
  out["left"] = job.has_left ? ojson(Millis(job.left)) : ojson(nullptr);
  out["reason"] = job.left_reason;
  out["min_np"] = optional_int(job.min_np);
  out["max_np"] = optional_int(job.max_np);
  out["priorities"] = priorities;
  out["seconds_in_pool"] = Millis(s.seconds_in_pool);
  out["slot_seconds"] = Millis(s.slot_seconds);
  out["average_held"] = Millis(s.average_held);
  out["peak_held"] = s.peak_held;
  out["queued"] = queued;
  out["held"] = Steps(job.held);
  out["target"] = Steps(job.target);
  return out;
}

}  // namespace

std::string PoolSummaryJson(const PoolTimeline& tl) {
  using ojson = nlohmann::ordered_json;
  const std::vector<PoolJobSummary> sums = SummarizePool(tl);
  ojson out;
  out["pool"] = tl.pool;
  out["started"] = tl.start_ts;
  ojson hosts = ojson::array();
  for (const PoolHost& h : tl.hosts) hosts.push_back({{"host", h.host}, {"slots", h.slots}});
  out["hosts"] = hosts;
  out["complete"] = tl.has_pool_stop;
  out["duration_s"] = Millis(tl.end);
  out["total"] = Steps(tl.total);
  ojson jobs = ojson::array();
  for (size_t i = 0; i < tl.jobs.size(); ++i) jobs.push_back(JobJson(tl.jobs[i], sums[i]));
  out["jobs"] = jobs;
  ojson allocations = ojson::array();
  for (const PoolAllocation& a : tl.allocations) {
    allocations.push_back({{"t", Millis(a.t)},
                           {"total", a.total},
                           {"held", a.held},
                           {"target", a.target},
                           {"queued", a.queued}});
  }
  out["allocations"] = allocations;
  out["warnings"] = tl.warnings;
  // Strings from the file are valid UTF-8 (the parser checked), so dump() cannot throw.
  return out.dump() + "\n";
}

}  // namespace etrun::report
