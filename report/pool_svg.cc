// pool_svg: a PoolTimeline as one SVG picture (see pool_report.h), in the look of the job picture
// (report_svg.cc, sharing svg.h): a title, a legend of the jobs, the slots each job holds stacked
// over time (one colour per job, first joined at the bottom, IBM WMLA's resource chart) under a
// dashed line at the pool's total, and a marker with a short label where a job joins, leaves or
// changes priority. Jobs' own timelines can follow below it, on the pool's time axis.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "report/pool_report.h"
#include "report/svg.h"

namespace etrun::report {
namespace {

constexpr double kPanelHeight = 200;
constexpr double kPanelPad = 16;   // room above the highest value
constexpr double kMarkerRow = 13;  // one row of marker labels above the panel
constexpr int kMarkerRows = 3;
constexpr size_t kLegendJobs = 40;  // more would push the chart off the first screen

// Red comes last: in the job picture it means a failure.
constexpr const char* kJobColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#d62728"};

const char* JobColor(size_t index) { return kJobColors[index % std::size(kJobColors)]; }

// Seconds since 1970 of "2026-11-24T01:00:00.000Z" (the events file's "ts"); nullopt for any
// other form.
std::optional<double> UtcSeconds(const std::string& ts) {
  int year, month, day, hour, minute, consumed = 0;
  double second;
  if (std::sscanf(ts.c_str(), "%4d-%2d-%2dT%2d:%2d:%lfZ%n", &year, &month, &day, &hour, &minute,
                  &second, &consumed) != 6 ||
      consumed != static_cast<int>(ts.size()) || month < 1 || month > 12 || day < 1 || day > 31) {
    return std::nullopt;
  }
  // Days from civil (Howard Hinnant's algorithm), proleptic Gregorian.
  const int y = year - (month <= 2 ? 1 : 0);
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = era * 146097.0 + doe - 719468;
  return days * 86400 + hour * 3600 + minute * 60 + second;
}

// "5000", "5000 → 10000", "5000 → … → 2000".
std::string PriorityPath(const PoolJobHistory& job) {
  const auto& p = job.priorities;
  if (p.empty()) return "";
  if (p.size() > 3)
    return fmt::format("{} \u2192 \u2026 \u2192 {}", p.front().priority, p.back().priority);
  std::string out;
  for (const PriorityChange& c : p)
    out += (out.empty() ? "" : " \u2192 ") + std::to_string(c.priority);
  return out;
}

// Title and a line on the pool's hosts. Returns the y below them; *title gets the title's text.
double Header(std::string* out, const PoolTimeline& tl, std::string* title) {
  const std::string name = tl.pool.empty() ? "etrun pool" : "pool " + tl.pool;
  const int total = tl.total.empty() ? 0 : tl.total.front().slots;
  *title = fmt::format("{} \u2014 {} slots \u2014 {}{}", Clip(name, 60), total,
                       FormatDuration(tl.end), tl.has_pool_stop ? "" : " so far");
  Text(out, 12, 26, *title, "font-size=\"17\" font-weight=\"bold\"");
  std::string info;
  if (!tl.start_ts.empty()) info += "started " + tl.start_ts + "  \u00b7  ";
  info += fmt::format("{} jobs", tl.jobs.size());
  if (!tl.hosts.empty()) {
    info += "  \u00b7  hosts:";
    for (const PoolHost& h : tl.hosts) info += fmt::format(" {} ({})", h.host, h.slots);
  }
  if (!tl.has_pool_stop) info += "  \u00b7  no pool_stop: still running or killed";
  Text(out, 12, 46, Clip(info, 150), "font-size=\"12\" fill=\"#666\"");
  return 46;
}

// One swatch per job (name and priorities; the first kLegendJobs), then the total's line;
// wrapped at the picture's width. Returns the y below it.
double Legend(std::string* out, const PoolTimeline& tl, double y) {
  *out += "<g class=\"legend\">\n";
  double x = kLeft;
  const size_t shown = std::min(tl.jobs.size(), kLegendJobs);
  for (size_t i = 0; i <= shown; ++i) {
    const bool total = i == shown;
    std::string label = total ? "pool total" : Clip(tl.jobs[i].name, 40);
    if (!total && !tl.jobs[i].priorities.empty()) {
      label += " (priority " + PriorityPath(tl.jobs[i]) + ")";
    }
    if (total && shown < tl.jobs.size()) {
      label = fmt::format("pool total (and {} more jobs: their bands' tooltips name them)",
                          tl.jobs.size() - shown);
    }
    const double width = 22 + 6.3 * static_cast<double>(label.size()) + 18;
    if (x + width > kWidth - 10 && x > kLeft) {
      x = kLeft;
      y += 18;
    }
    const double cy = y - 4;
    if (total) {
      *out += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.5\" "
          "stroke-dasharray=\"5 3\"/>\n",
          N(x), N(cy), N(x + 16), N(cy), kTextColor);
    } else {
      *out +=
          fmt::format("<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" rx=\"2\" fill=\"{}\"/>\n",
                      N(x), N(cy - 5), JobColor(i));
    }
    Text(out, x + 22, y, label, "font-size=\"11\"");
    x += width;
  }
  *out += "</g>\n";
  return y + 10;
}

// Maps slots to y in the panel between top and top + kPanelHeight.
struct SlotScale {
  double top = 0;
  int y_max = 1;
  double Y(double slots) const {
    return top + kPanelHeight - slots / y_max * (kPanelHeight - kPanelPad);
  }
};

// The y axis: a grid line and a label at each step of slots, and at the top (the most slots the
// pool had) unless that is too close to the last step to read.
void SlotAxis(std::string* out, const SlotScale& scale) {
  const int step = SizeStep(scale.y_max);
  Text(out, 12, scale.top + kPanelHeight / 2, "slots", "font-size=\"12\" font-weight=\"bold\"");
  std::vector<int> values;
  for (int v = 0; v <= scale.y_max; v += step) values.push_back(v);
  if (scale.Y(values.back()) - scale.Y(scale.y_max) >= 12) values.push_back(scale.y_max);
  for (const int v : values) {
    *out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", N(kLeft),
                        N(scale.Y(v)), N(kLeft + kPlotWidth), N(scale.Y(v)), kGridColor);
    Text(out, kLeft - 6, scale.Y(v) + 4, std::to_string(v),
         "font-size=\"10\" text-anchor=\"end\" fill=\"#666\"");
  }
}

// "train1 (priority 5000): joined at 1.200 s, left at 35.000 s (ended); ..." for a band's tooltip.
std::string JobTip(const PoolJobHistory& job, const PoolJobSummary& s) {
  std::string tip = job.name;
  if (!job.priorities.empty()) tip += " (priority " + PriorityPath(job) + ")";
  tip += ": joined at " + At(job.joined);
  if (job.has_left) {
    tip +=
        ", left at " + At(job.left) + (job.left_reason.empty() ? "" : " (" + job.left_reason + ")");
  }
  tip += fmt::format("; peak {} slots, {:.1f} slot-seconds", s.peak_held, s.slot_seconds);
  for (const TimeSpan& q : job.queued)
    tip += fmt::format("; queued {} to {}", At(q.start), At(q.end));
  return tip;
}

// One flat step per run of equal values in [begin, end) (values[k] holds from xs[k] to
// xs[k + 1]) as SVG coordinates, left to right, or right to left for the way back along a band's
// bottom.
std::string Edge(const std::vector<double>& xs, const std::vector<int>& values, size_t begin,
                 size_t end, const SlotScale& scale, bool backwards) {
  std::vector<std::string> steps;
  for (size_t k = begin; k < end;) {
    size_t next = k + 1;
    while (next < end && values[next] == values[k]) ++next;
    const std::string y = N(scale.Y(values[k]));
    steps.push_back(
        fmt::format("{},{} {},{}", N(xs[backwards ? next : k]), y, N(xs[backwards ? k : next]), y));
    k = next;
  }
  if (backwards) std::reverse(steps.begin(), steps.end());
  std::string out;
  for (const std::string& step : steps) out += (out.empty() ? "" : " ") + step;
  return out;
}

// A band between bottoms and tops as path data: one closed shape per stretch of time where it
// is not empty ("M x,y x,y ... Z"), so that a job's band has no points while it holds nothing.
std::string BandPath(const std::vector<double>& xs, const std::vector<int>& bottoms,
                     const std::vector<int>& tops, const SlotScale& scale) {
  std::string d;
  for (size_t k = 0; k < tops.size();) {
    if (tops[k] == bottoms[k]) {
      ++k;
      continue;
    }
    size_t end = k + 1;
    while (end < tops.size() && tops[end] != bottoms[end]) ++end;
    d += fmt::format("{}M {} {} Z", d.empty() ? "" : " ", Edge(xs, tops, k, end, scale, false),
                     Edge(xs, bottoms, k, end, scale, true));
    k = end;
  }
  return d;
}

// The number of slots in the middle of each run of a band with the same bottom and top, where
// it fits.
std::string BandLabels(const std::vector<double>& xs, const std::vector<int>& bottoms,
                       const std::vector<int>& tops, const SlotScale& scale) {
  std::string out;
  for (size_t k = 0; k < tops.size();) {
    size_t end = k + 1;
    while (end < tops.size() && tops[end] == tops[k] && bottoms[end] == bottoms[k]) ++end;
    const double y0 = scale.Y(bottoms[k]), y1 = scale.Y(tops[k]);
    if (tops[k] > bottoms[k] && y0 - y1 >= 12 && xs[end] - xs[k] >= 24) {
      out += fmt::format(
          "<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" "
          "fill=\"#fff\">{}</text>\n",
          N((xs[k] + xs[end]) / 2), N((y0 + y1) / 2 + 3.5), tops[k] - bottoms[k]);
    }
    k = end;
  }
  return out;
}

// The held slots of every job, stacked in the order they joined: one path per job, and the
// number of slots where it fits. No outline: thousands of allocations would paint it white.
void StackedBands(std::string* out, const PoolTimeline& tl, const TimeAxis& axis,
                  const SlotScale& scale) {
  std::set<double> cuts = {0, tl.end};
  for (const PoolJobHistory& job : tl.jobs) {
    for (const SlotStep& s : job.held) cuts.insert(std::min(s.t, tl.end));
  }
  const std::vector<double> times(cuts.begin(), cuts.end());
  std::vector<double> xs;
  for (const double t : times) xs.push_back(axis.X(t));
  const std::vector<PoolJobSummary> sums = SummarizePool(tl);
  std::vector<int> tops(times.size() - 1, 0);  // per stretch: the slots of the jobs so far
  for (size_t j = 0; j < tl.jobs.size(); ++j) {
    const std::vector<int> bottoms = tops;
    for (size_t k = 0; k < tops.size(); ++k) tops[k] += SlotsAt(tl.jobs[j].held, times[k]);
    *out += fmt::format(
        "<path class=\"held\" d=\"{}\" fill=\"{}\" fill-opacity=\"0.85\"><title>{}</title>"
        "</path>\n",
        BandPath(xs, bottoms, tops, scale), JobColor(j), Escape(JobTip(tl.jobs[j], sums[j])));
    *out += BandLabels(xs, bottoms, tops, scale);
  }
}

// The pool's total slots as a dashed step line.
void TotalLine(std::string* out, const PoolTimeline& tl, const TimeAxis& axis,
               const SlotScale& scale) {
  if (tl.total.empty()) return;
  std::string points;
  for (size_t i = 0; i < tl.total.size(); ++i) {
    const double until = i + 1 < tl.total.size() ? tl.total[i + 1].t : tl.end;
    const double y = scale.Y(tl.total[i].slots);
    points += fmt::format("{},{} {},{} ", N(axis.X(tl.total[i].t)), N(y), N(axis.X(until)), N(y));
  }
  points.pop_back();
  *out += fmt::format(
      "<polyline class=\"total\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
      "stroke-dasharray=\"5 3\"><title>the pool's total slots</title></polyline>\n",
      points, kTextColor);
}

struct Marker {
  double t;
  size_t job;
  const char* kind;  // the class: "join", "leave", "priority"
  std::string label;
  std::string tip;
};

std::vector<Marker> CollectMarkers(const PoolTimeline& tl) {
  std::vector<Marker> markers;
  for (size_t j = 0; j < tl.jobs.size(); ++j) {
    const PoolJobHistory& job = tl.jobs[j];
    const std::string name = Clip(job.name, 16);
    markers.push_back({job.joined, j, "join", "+" + name,
                       fmt::format("{} joined at {}", job.name, At(job.joined))});
    for (size_t i = 1; i < job.priorities.size(); ++i) {
      const PriorityChange& p = job.priorities[i];
      markers.push_back({p.t, j, "priority", fmt::format("{} p{}", name, p.priority),
                         fmt::format("{}: priority {} \u2192 {} at {}", job.name,
                                     job.priorities[i - 1].priority, p.priority, At(p.t))});
    }
    if (job.has_left) {
      const std::string why = job.left_reason.empty() ? "left" : job.left_reason;
      markers.push_back({job.left, j, "leave", "\u2212" + name + " " + why,
                         fmt::format("{} left at {}: {}", job.name, At(job.left), why)});
    }
  }
  std::stable_sort(markers.begin(), markers.end(),
                   [](const Marker& a, const Marker& b) { return a.t < b.t; });
  return markers;
}

// A dashed line in the job's colour at each join, leave and priority change, with its label in
// the first row above the panel where it does not run into the one before; where no row has
// room (a crowded pool), only the tooltip names it.
void Markers(std::string* out, const PoolTimeline& tl, const TimeAxis& axis, double strip_top,
             double bottom) {
  double row_end[kMarkerRows];
  std::fill(std::begin(row_end), std::end(row_end), -1e9);
  for (const Marker& m : CollectMarkers(tl)) {
    const double x = axis.X(m.t);
    const double width = 6 * static_cast<double>(m.label.size()) + 4;
    const bool flip = x + 3 + width > kWidth - 4;  // at the right edge: the label to the left
    const double left = flip ? x - 3 - width : x + 3;
    int row = -1;
    for (int r = 0; r < kMarkerRows && row < 0; ++r) {
      if (row_end[r] < left - 4) row = r;
    }
    std::string label;
    if (row >= 0) {
      row_end[row] = left + width;
      label = fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"{}\"{}>{}</text>",
                          N(flip ? x - 3 : x + 3), N(strip_top + kMarkerRow * (row + 1) - 3),
                          JobColor(m.job), flip ? " text-anchor=\"end\"" : "", Escape(m.label));
    }
    *out += fmt::format(
        "<g class=\"{0}\"><title>{1}</title><line x1=\"{2}\" y1=\"{3}\" x2=\"{2}\" y2=\"{4}\" "
        "stroke=\"{5}\" stroke-width=\"1\" stroke-dasharray=\"3 3\" stroke-opacity=\"0.8\"/>{6}"
        "</g>\n",
        m.kind, Escape(m.tip), N(x), N(strip_top + kMarkerRow * (row >= 0 ? row : 0)), N(bottom),
        JobColor(m.job), label);
  }
}

// The pool's picture on `axis`, from y = 0 (see JobSection in svg.h). Returns its height.
double PoolSection(const PoolTimeline& tl, const TimeAxis& axis, std::string* grid,
                   std::string* body, std::string* title) {
  const double y = Legend(body, tl, Header(body, tl, title) + 26);
  const double strip_top = y + 8;
  SlotScale scale;
  scale.top = strip_top + kMarkerRow * kMarkerRows;
  int max_slots = 1;
  for (const SlotStep& s : tl.total) max_slots = std::max(max_slots, s.slots);
  for (const PoolAllocation& a : tl.allocations) {
    int held = 0;
    for (const auto& [name, slots] : a.held) held += slots;
    max_slots = std::max(max_slots, held);  // drawn even where the file breaks its promise
  }
  scale.y_max = max_slots;
  const double bottom = scale.top + kPanelHeight;

  SlotAxis(body, scale);
  StackedBands(body, tl, axis, scale);
  TotalLine(body, tl, axis, scale);
  Markers(body, tl, axis, strip_top, bottom);
  TimeGrid(grid, axis, strip_top, bottom);
  return std::ceil(bottom + 48);
}

// The pool's stay of a job, for its colour. A --pool job's job_start names its pool job
// ("pool_job"); older files do not: the pool calls a job by its name, made unique with a suffix
// ("train", "train-2"), and it joins as it starts. So: the stay with that id (or that name or a
// suffixed one) that joined nearest the job's start (on the pool's axis), or without a known
// start the one stay with exactly that id or name.
std::optional<size_t> PoolStayOf(const PoolTimeline& tl, const JobTimeline& job,
                                 const std::optional<double>& offset) {
  std::optional<size_t> best;
  for (size_t j = 0; j < tl.jobs.size(); ++j) {
    const std::string& name = tl.jobs[j].name;
    if (!job.pool_job.empty()) {
      if (name != job.pool_job) continue;
      if (!offset) {
        if (best) return std::nullopt;  // ambiguous
        best = j;
      } else if (!best || std::abs(tl.jobs[j].joined - *offset) < std::abs(tl.jobs[*best].joined - *offset)) {
        best = j;
      }
      continue;
    }
    if (!offset) {
      if (name != job.job) continue;
      if (best) return std::nullopt;  // ambiguous
      best = j;
      continue;
    }
    const bool suffixed = name.size() > job.job.size() + 1 && name.rfind(job.job + "-", 0) == 0;
    if (name != job.job && !suffixed) continue;
    if (!best ||
        std::abs(tl.jobs[j].joined - *offset) < std::abs(tl.jobs[*best].joined - *offset)) {
      best = j;
    }
  }
  return best;
}

// Adds a section's grid and body, moved down by *y, and moves *y below it.
void Place(double* y, double height, const std::string& section_grid,
           const std::string& section_body, std::string* grid, std::string* body) {
  const std::string open = fmt::format("<g transform=\"translate(0,{})\">\n", N(*y));
  *grid += open + section_grid + "</g>\n";
  *body += open + section_body + "</g>\n";
  *y += height;
}

}  // namespace

std::string RenderPoolSvg(const PoolTimeline& tl, const std::vector<JobTimeline>& jobs) {
  // Jobs whose start is known against the pool's are drawn on its axis, which then runs to the
  // last of them (a job may outlive the pool's file).
  const std::optional<double> pool_start = UtcSeconds(tl.start_ts);
  std::vector<std::optional<double>> offsets;
  double span = tl.end;
  for (const JobTimeline& job : jobs) {
    const std::optional<double> start = UtcSeconds(job.start_ts);
    offsets.push_back(pool_start && start ? std::optional<double>(*start - *pool_start)
                                          : std::nullopt);
    if (offsets.back()) span = std::max(span, *offsets.back() + job.end);
  }

  std::string title, grid, body;
  double y = 0;
  {
    std::string section_grid, section_body;
    const double height =
        PoolSection(tl, TimeAxis(span, 0, "pool"), &section_grid, &section_body, &title);
    Place(&y, height, section_grid, section_body, &grid, &body);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::string section_grid, section_body, job_title;
    const TimeAxis axis =
        offsets[i] ? TimeAxis(span, *offsets[i], "pool") : TimeAxis(jobs[i].end, 0, "job");
    body += fmt::format(
        "<line class=\"separator\" x1=\"12\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" "
        "stroke=\"#bbb\"/>\n",
        N(y + 2), N(kWidth - 12));
    // A bar in the colour of the job's band beside its title, when the pool has the job.
    if (const std::optional<size_t> j = PoolStayOf(tl, jobs[i], offsets[i])) {
      body += fmt::format(
          "<rect class=\"job-colour\" x=\"4\" y=\"{}\" width=\"4\" height=\"30\" "
          "fill=\"{}\"/>\n",
          N(y + 10), JobColor(*j));
    }
    const double height = JobSection(jobs[i], axis, &section_grid, &section_body, &job_title);
    Place(&y, height, section_grid, section_body, &grid, &body);
  }
  return SvgDocument(std::ceil(y), title, grid, body);
}

}  // namespace etrun::report
