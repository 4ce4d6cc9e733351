// report summaries: the text and JSON `etrun report` prints (see report.h).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "events/exit_status.h"
#include "report/report.h"

namespace etrun::report {

JobSummary Summarize(const JobTimeline& timeline) {
  JobSummary s;
  s.duration = timeline.end;
  for (const SizeSegment& seg : timeline.sizes) {
    const double length = seg.end - seg.start;
    const bool no_world = seg.state != SizeSegment::State::kRunning;
    s.time_at_size[no_world ? 0 : seg.size] += length;
    if (seg.state == SizeSegment::State::kResetting) s.reset_lost += length;
  }
  s.resets = static_cast<int>(timeline.resets.size());
  s.ranks_started = static_cast<int>(timeline.runs.size());
  return s;
}

namespace {

// "12.3 s"; "3.25 s" below 10 s.
std::string Seconds(double seconds) {
  return seconds < 10 ? fmt::format("{:.2f} s", seconds) : fmt::format("{:.1f} s", seconds);
}

// "12:34" or "1:02:05", from the same tenth of a second Seconds() shows.
std::string Clock(double seconds) {
  const long total = std::lround(std::floor(seconds + 0.05));
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

}  // namespace

std::string FormatDuration(double seconds) {
  return seconds >= 60 ? Seconds(seconds) + " (" + Clock(seconds) + ")" : Seconds(seconds);
}

namespace {

std::string Join(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// "exited with code 1", "was killed by signal 9 (SIGKILL)", "exited" when the file says neither.
std::string DescribeExit(const std::optional<int>& code, const std::optional<int>& signal) {
  if (signal) return ExitStatus::Signaled(*signal).Describe();
  if (code) return ExitStatus::Exited(*code).Describe();
  return "exited";
}

std::string Mode(const JobTimeline& tl) {
  std::string mode = fmt::format("{}, np {}", tl.elastic ? "elastic" : "static", tl.np);
  if (tl.min_np) mode += fmt::format(", min {}", *tl.min_np);
  if (tl.max_np) mode += fmt::format(", max {}", *tl.max_np);
  return mode;
}

double Fraction(double part, double whole) { return whole > 0 ? part / whole : 0; }
double Millis(double seconds) { return std::round(seconds * 1000) / 1000; }

}  // namespace

std::string SummaryText(const JobTimeline& tl) {
  const JobSummary s = Summarize(tl);
  std::string out;
  out += fmt::format("job: {} ({})\n", tl.job.empty() ? "(no name)" : tl.job, Mode(tl));
  if (!tl.command.empty()) out += "command: " + Join(tl.command, " ") + "\n";
  if (!tl.start_ts.empty()) out += "started: " + tl.start_ts + "\n";
  out += "duration: " + FormatDuration(s.duration) + "\n";
  if (!tl.has_job_end) {
    out +=
        "exit: unknown: no job_end (the job is still running or was killed); "
        "up to the last event\n";
  } else if (tl.exit_code == 0) {
    out += "exit: 0 (success)\n";
  } else {
    out += fmt::format("exit: {}{}\n", tl.exit_code, tl.cause.empty() ? "" : " (" + tl.cause + ")");
  }
  out += "time at each world size:\n";
  for (const auto& [size, seconds] : s.time_at_size) {
    // "size 2: 12.3 s (30%)", "size 4: 121.1 s (2:01, 22%)"
    out +=
        fmt::format("  size {}: {} ({}{:.0f}%){}\n", size, Seconds(seconds),
                    seconds >= 60 ? Clock(seconds) + ", " : "", 100 * Fraction(seconds, s.duration),
                    size == 0 ? " no world: starting or resetting" : "");
  }
  out += fmt::format("hosts: {}, rank processes started: {}\n", tl.hosts.size(), s.ranks_started);
  out +=
      fmt::format("resets: {}, time lost to resets: {}\n", s.resets, FormatDuration(s.reset_lost));
  out += fmt::format("failures: {}\n", tl.failures.size());
  for (const RankFailure& f : tl.failures) {
    out += fmt::format("  at {}: rank {} on {} {}\n", FormatDuration(f.t), f.rank, f.host,
                       DescribeExit(f.code, f.signal));
  }
  out += fmt::format("blacklisted hosts: {}\n", tl.blacklists.size());
  for (const HostBlacklisting& b : tl.blacklists) {
    const std::string how_long = b.cooldown_s ? fmt::format("for {:g} s", *b.cooldown_s)
                                              : std::string("for the rest of the job");
    out += fmt::format("  at {}: {} {}{}\n", FormatDuration(b.t), b.host, how_long,
                       b.reason.empty() ? "" : ": " + b.reason);
  }
  return out;
}

std::string SummaryJson(const JobTimeline& tl) {
  const JobSummary s = Summarize(tl);
  using ojson = nlohmann::ordered_json;
  auto optional_int = [](const std::optional<int>& v) { return v ? ojson(*v) : ojson(nullptr); };
  ojson out;
  out["job"] = tl.job;
  out["command"] = tl.command;
  out["started"] = tl.start_ts;
  out["elastic"] = tl.elastic;
  out["np"] = tl.np;
  out["min_np"] = optional_int(tl.min_np);
  out["max_np"] = optional_int(tl.max_np);
  out["complete"] = tl.has_job_end;
  out["exit_code"] = tl.has_job_end ? ojson(tl.exit_code) : ojson(nullptr);
  out["cause"] = tl.cause;
  out["duration_s"] = Millis(s.duration);
  ojson sizes = ojson::array();
  for (const auto& [size, seconds] : s.time_at_size) {
    sizes.push_back({{"size", size},
                     {"seconds", Millis(seconds)},
                     {"fraction", std::round(Fraction(seconds, s.duration) * 1e4) / 1e4}});
  }
  out["time_at_size"] = sizes;
  out["hosts"] = tl.hosts;
  out["ranks_started"] = s.ranks_started;
  out["resets"] = s.resets;
  out["reset_lost_s"] = Millis(s.reset_lost);
  ojson failures = ojson::array();
  for (const RankFailure& f : tl.failures) {
    failures.push_back({{"t", Millis(f.t)},
                        {"rank", f.rank},
                        {"host", f.host},
                        {"local_rank", f.local_rank},
                        {"code", optional_int(f.code)},
                        {"signal", optional_int(f.signal)}});
  }
  out["failures"] = failures;
  ojson blacklisted = ojson::array();
  for (const HostBlacklisting& b : tl.blacklists) {
    blacklisted.push_back({{"t", Millis(b.t)},
                           {"host", b.host},
                           {"reason", b.reason},
                           {"cooldown_s", b.cooldown_s ? ojson(*b.cooldown_s) : ojson(nullptr)}});
  }
  out["blacklisted"] = blacklisted;
  out["warnings"] = tl.warnings;
  // Strings from the file are valid UTF-8 (the parser checked), so dump() cannot throw.
  return out.dump() + "\n";
}

}  // namespace etrun::report
