// report_svg: a JobTimeline as one SVG picture (see report.h). Hand-written SVG 1.1 text, no
// library: a title, a legend, the world size as a step line over time, one lane per host with a
// bar per rank process, and markers for failures, blacklisted hosts and resets. Everything is
// laid out for a fixed 1000 px width; the height grows with the number of hosts, and lanes get
// thinner past a dozen hosts so that 50 hosts still fit on a screen or two. Every bar and marker
// carries a <title> (a tooltip in browsers) with its exact times. The page, the time axis and the
// document around it are shared with the pool's picture (svg.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "events/exit_status.h"
#include "report/report.h"
#include "report/svg.h"

namespace etrun::report {
namespace {

constexpr double kSizePanelHeight = 120;
constexpr double kSizePanelPad = 16;  // room above the highest step for its label

constexpr char kLineColor[] = "#1f77b4";
constexpr char kResetColor[] = "#9467bd";

// How a rank process ended -> bar color and legend label.
struct EndStyle {
  const char* reason;
  const char* color;
  const char* label;
};
constexpr EndStyle kEndStyles[] = {
    {"finished", "#2ca02c", "finished"},
    {"failed", "#d62728", "failed"},
    {"drained", "#ff9f1c", "drained (host removed)"},
    {"stopped", "#8c8c8c", "stopped by etrun"},
    {"", "#6baed6", "still running at the end"},
};
constexpr char kOtherEndColor[] = "#bcbd22";

const char* EndColor(const RankRun& run) {
  if (!run.exited) return kEndStyles[4].color;
  for (const EndStyle& s : kEndStyles) {
    if (run.reason == s.reason) return s.color;
  }
  return kOtherEndColor;
}

std::string DescribeRunEnd(const RankRun& run) {
  if (!run.exited) return "still running";
  std::string text = run.reason;
  if (run.signal)
    text += ", signal " + std::to_string(*run.signal) + " (" + SignalName(*run.signal) + ")";
  else if (run.code)
    text += ", code " + std::to_string(*run.code);
  return text;
}

// A red X centred on (x, y), on a white outline so that it shows on a red bar too.
void Cross(std::string* out, double x, double y, double r, const std::string& tip) {
  const std::string lines = fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><line x1=\"{}\" y1=\"{}\" x2=\"{}\" "
      "y2=\"{}\"/>",
      N(x - r), N(y - r), N(x + r), N(y + r), N(x - r), N(y + r), N(x + r), N(y - r));
  *out += fmt::format(
      "<g class=\"failure\" stroke-linecap=\"round\"><title>{}</title>"
      "<g stroke=\"#fff\" stroke-width=\"4.5\">{}</g><g stroke=\"{}\" stroke-width=\"2.2\">{}</g>"
      "</g>\n",
      Escape(tip), lines, kFailColor, lines);
}

// A "no entry" sign (circle with a slash) centred on (x, y).
void NoEntry(std::string* out, double x, double y, double r, const std::string& tip) {
  *out += fmt::format(
      "<g class=\"blacklist\" stroke=\"#000\" stroke-width=\"1.6\" fill=\"#fff\"><title>{}</title>"
      "<circle cx=\"{}\" cy=\"{}\" r=\"{}\"/><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>"
      "</g>\n",
      Escape(tip), N(x), N(y), N(r), N(x - r * 0.7), N(y + r * 0.7), N(x + r * 0.7),
      N(y - r * 0.7));
}

// The legend: one row of swatches, wrapped at the picture's width. Returns the y below it.
double Legend(std::string* out, double y, bool any_running, bool elastic) {
  struct Item {
    enum Kind { kLine, kBand, kBar, kCross, kBlacklist, kResetLine, kPresence } kind;
    const char* color;
    const char* label;
  };
  std::vector<Item> items = {{Item::kLine, kLineColor, "world size"},
                             {Item::kBand, kResetColor, "resetting (no world)"}};
  for (const EndStyle& s : kEndStyles) {
    if (*s.reason != '\0' || any_running) items.push_back({Item::kBar, s.color, s.label});
  }
  items.push_back({Item::kCross, kFailColor, "rank failure"});
  items.push_back({Item::kBlacklist, "", "host blacklisted"});
  items.push_back({Item::kResetLine, kResetColor, "reset"});
  if (elastic) items.push_back({Item::kPresence, "", "host listed by discovery"});

  *out += "<g class=\"legend\">\n";
  double x = kLeft;
  for (const Item& item : items) {
    const double width = 22 + 6.3 * static_cast<double>(std::string_view(item.label).size()) + 18;
    if (x + width > kWidth - 10 && x > kLeft) {
      x = kLeft;
      y += 18;
    }
    const double cy = y - 4;
    switch (item.kind) {
      case Item::kLine:
        *out += fmt::format(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
            "stroke-width=\"2\"/>\n",
            N(x), N(cy), N(x + 16), N(cy), item.color);
        break;
      case Item::kBand:
        *out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"{}\" "
            "fill-opacity=\"0.25\"/>\n",
            N(x), N(cy - 5), item.color);
        break;
      case Item::kBar:
        *out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" rx=\"2\" "
            "fill=\"{}\"/>\n",
            N(x), N(cy - 5), item.color);
        break;
      case Item::kCross:
        Cross(out, x + 8, cy, 4, "a rank exited with a failure");
        break;
      case Item::kBlacklist:
        *out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" "
            "fill=\"url(#blacklisted)\"/>\n",
            N(x), N(cy - 5));
        NoEntry(out, x + 8, cy, 4, "host blacklisted");
        break;
      case Item::kResetLine:
        *out += fmt::format(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
            "stroke-width=\"1.5\" stroke-dasharray=\"3 2\"/>\n",
            N(x + 8), N(cy - 6), N(x + 8), N(cy + 6), item.color);
        break;
      case Item::kPresence:
        *out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" "
            "fill=\"#dde6f0\"/>\n",
            N(x), N(cy - 5));
        break;
    }
    Text(out, x + 22, y, item.label, "font-size=\"11\"");
    x += width;
  }
  *out += "</g>\n";
  return y + 10;
}

// The size panel's y axis: world sizes 0..y_max, between y = bottom and kSizePanelPad below the
// panel's top.
struct SizeScale {
  double bottom = 0;
  int y_max = 1;
  double Y(int size) const {
    return bottom - static_cast<double>(size) / y_max * (kSizePanelHeight - kSizePanelPad);
  }
};

// The panel's title and a grid line with its label at each `step` of world size.
void SizeGrid(std::string* out, const SizeScale& scale, int step, double top) {
  Text(out, 12, top + kSizePanelHeight / 2, "world size", "font-size=\"12\" font-weight=\"bold\"");
  for (int v = 0; v <= scale.y_max; v += step) {
    *out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", N(kLeft),
                        N(scale.Y(v)), N(kLeft + kPlotWidth), N(scale.Y(v)), kGridColor);
    Text(out, kLeft - 6, scale.Y(v) + 4, std::to_string(v),
         "font-size=\"10\" text-anchor=\"end\" fill=\"#666\"");
  }
}

// Bands where there is no world, labelled where there is room.
void NoWorldBands(std::string* out, const JobTimeline& tl, const TimeAxis& axis, double top) {
  for (const SizeSegment& s : tl.sizes) {
    if (s.state == SizeSegment::State::kRunning) continue;
    const bool resetting = s.state == SizeSegment::State::kResetting;
    const double x0 = axis.X(s.start), x1 = axis.X(s.end);
    *out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"{}\">"
        "<title>{} from {} to {}</title></rect>\n",
        N(x0), N(top), N(std::max(1.0, x1 - x0)), N(kSizePanelHeight),
        resetting ? kResetColor : "#999", resetting ? "0.18" : "0.12",
        resetting ? "resetting" : "starting: no world yet", At(s.start), At(s.end));
    if (x1 - x0 >= 60) {
      Text(out, (x0 + x1) / 2, top + 12, resetting ? "resetting" : "starting",
           resetting ? "font-size=\"10\" text-anchor=\"middle\" fill=\"#6a3d9a\""
                     : "font-size=\"10\" text-anchor=\"middle\" fill=\"#666\"");
    }
  }
}

// Across segs[i], a stretch without a world: the size line dashed down to 0 and back up.
void NoWorldLine(std::string* out, const std::vector<SizeSegment>& segs, size_t i,
                 const TimeAxis& axis, const SizeScale& scale) {
  const int before =
      i > 0 && segs[i - 1].state == SizeSegment::State::kRunning ? segs[i - 1].size : 0;
  const int after = i + 1 < segs.size() && segs[i + 1].state == SizeSegment::State::kRunning
                        ? segs[i + 1].size
                        : 0;
  const double x0 = axis.X(segs[i].start), x1 = axis.X(segs[i].end);
  *out += fmt::format(
      "<polyline class=\"no-world\" points=\"{},{} {},{} {},{} {},{}\" fill=\"none\" "
      "stroke=\"{}\" "
      "stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/>\n",
      N(x0), N(scale.Y(before)), N(x0), N(scale.Y(0)), N(x1), N(scale.Y(0)), N(x1),
      N(scale.Y(after)), kLineColor);
}

// One world's marks on the size line: a dot where a round opened it, its size where it fits.
void WorldMarks(std::string* out, const SizeSegment& s, const TimeAxis& axis,
                const SizeScale& scale) {
  const double x0 = axis.X(s.start), x1 = axis.X(s.end);
  const std::string tip =
      (s.round > 0 ? fmt::format("round {}: ", s.round) : std::string()) +
      fmt::format("world size {} from {} to {}", s.size, At(s.start), At(s.end));
  if (s.round > 0) {
    *out += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"><title>{}</title>"
        "</circle>\n",
        N(x0), N(scale.Y(s.size)), kLineColor, Escape(tip));
  }
  if (x1 - x0 >= 24) {
    *out += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" "
        "fill=\"{}\">{}<title>{}</title></text>\n",
        N((x0 + x1) / 2), N(scale.Y(s.size) - 4), kLineColor, s.size, Escape(tip));
  }
}

// Through segs[begin..end), a stretch of worlds: the solid step line over a shaded area, and
// each world's marks.
void WorldLine(std::string* out, const std::vector<SizeSegment>& segs, size_t begin, size_t end,
               const TimeAxis& axis, const SizeScale& scale) {
  std::string points;
  for (size_t k = begin; k < end; ++k) {
    points += fmt::format("{},{} {},{} ", N(axis.X(segs[k].start)), N(scale.Y(segs[k].size)),
                          N(axis.X(segs[k].end)), N(scale.Y(segs[k].size)));
  }
  *out += fmt::format("<polygon points=\"{}{},{} {},{}\" fill=\"{}\" fill-opacity=\"0.12\"/>\n",
                      points, N(axis.X(segs[end - 1].end)), N(scale.Y(0)),
                      N(axis.X(segs[begin].start)), N(scale.Y(0)), kLineColor);
  *out += fmt::format(
      "<polyline class=\"size\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
      "stroke-width=\"2\"/>\n",
      points, kLineColor);
  for (size_t k = begin; k < end; ++k) WorldMarks(out, segs[k], axis, scale);
}

// The world size panel, between y = top and top + kSizePanelHeight.
void SizePanel(std::string* out, const JobTimeline& tl, const TimeAxis& axis, double top) {
  int max_size = std::max(1, tl.np);
  for (const SizeSegment& s : tl.sizes) max_size = std::max(max_size, s.size);
  const int step = SizeStep(max_size);
  const SizeScale scale{top + kSizePanelHeight, (max_size + step - 1) / step * step};
  SizeGrid(out, scale, step, top);
  NoWorldBands(out, tl, axis, top);
  // The step line: solid through each stretch of worlds, dashed down to 0 where there is none.
  const std::vector<SizeSegment>& segs = tl.sizes;
  for (size_t i = 0; i < segs.size();) {
    if (segs[i].state != SizeSegment::State::kRunning) {
      NoWorldLine(out, segs, i, axis, scale);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < segs.size() && segs[j].state == SizeSegment::State::kRunning) ++j;
    WorldLine(out, segs, i, j, axis, scale);
    i = j;
  }
}

// Where one host's lane is drawn: from y down, `height` high.
struct Lane {
  size_t index;  // odd lanes are shaded
  const std::string& host;
  double y;
  double height;
  double mid() const { return y + height / 2; }
};

// A lane's background: its shading, the host's name, when discovery listed it and when it was
// blacklisted.
void LaneBackground(std::string* out, const JobTimeline& tl, const TimeAxis& axis,
                    const Lane& lane) {
  const std::string& host = lane.host;
  const double font = std::min(12.0, lane.height - 3);
  if (lane.index % 2 == 1) {
    *out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f5f5f5\"/>\n",
                        N(kLeft), N(lane.y), N(kPlotWidth), N(lane.height));
  }
  *out += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"end\">{}"
      "<title>{}</title></text>\n",
      N(kLeft - 8), N(lane.mid() + font * 0.35), N(font), Escape(Clip(host, 24)), Escape(host));
  if (tl.elastic) {
    if (auto it = tl.presence.find(host); it != tl.presence.end()) {
      for (const HostPresence& p : it->second) {
        *out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#dde6f0\"><title>{} "
            "listed from {} to {}</title></rect>\n",
            N(axis.X(p.start)), N(lane.y + 1), N(std::max(0.5, axis.X(p.end) - axis.X(p.start))),
            N(lane.height - 2), Escape(host), At(p.start), At(p.end));
      }
    }
  }
  for (const HostBlacklisting& b : tl.blacklists) {
    if (b.host != host) continue;
    *out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#blacklisted)\">"
        "<title>{} blacklisted from {} to {}</title></rect>\n",
        N(axis.X(b.t)), N(lane.y + 1), N(std::max(0.5, axis.X(b.end) - axis.X(b.t))),
        N(lane.height - 2), Escape(host), At(b.t), At(b.end));
  }
}

// One row per local rank (at most 8; more share rows), a bar per process.
void RankBars(std::string* out, const JobTimeline& tl, const TimeAxis& axis, const Lane& lane) {
  const std::string& host = lane.host;
  int rows = 1;
  for (const RankRun& r : tl.runs) {
    if (r.host == host) rows = std::max(rows, std::min(8, r.local_rank + 1));
  }
  const double row_h = (lane.height - 4) / rows;
  const double bar_h = std::max(1.5, row_h - (rows > 1 ? 1 : 0));
  for (const RankRun& r : tl.runs) {
    if (r.host != host) continue;
    const double x0 = axis.X(r.start);
    const double w = std::max(1.0, axis.X(r.end) - x0);
    const double by = lane.y + 2 + (std::max(0, r.local_rank) % rows) * row_h;
    const std::string tip =
        fmt::format("rank {} on {} (local rank {}{}): {} to {}, {}", r.rank, host, r.local_rank,
                    r.round > 0 ? fmt::format(", round {}", r.round) : std::string(), At(r.start),
                    At(r.end), DescribeRunEnd(r));
    *out += fmt::format(
        "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
        "rx=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
        N(x0), N(by), N(w), N(bar_h), bar_h >= 8 ? "2" : "0", EndColor(r), Escape(tip));
    // "rank 3" where it fits, else "3", else nothing (the tooltip still says it).
    std::string label = "rank " + std::to_string(r.rank);
    const double label_font = std::min(10.0, bar_h - 1);
    if (w < 6 * static_cast<double>(label.size()) + 6) label = std::to_string(r.rank);
    if (label_font >= 7 && w >= 6 * static_cast<double>(label.size()) + 6) {
      *out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"{}\" fill=\"#fff\">{}</text>\n",
                          N(x0 + 3), N(by + bar_h / 2 + label_font * 0.35), N(label_font), label);
    }
  }
}

// A cross where a rank on the lane's host failed, a "no entry" sign where the host was
// blacklisted.
void FailureMarks(std::string* out, const JobTimeline& tl, const TimeAxis& axis,
                  const Lane& lane) {
  const std::string& host = lane.host;
  const double mid = lane.mid();
  for (const RankFailure& f : tl.failures) {
    if (f.host != host) continue;
    Cross(out, axis.X(f.t), mid, std::min(5.0, lane.height / 2 - 2),
          fmt::format("rank {} on {} failed at {}: {}", f.rank, host, At(f.t),
                      f.signal ? ExitStatus::Signaled(*f.signal).Describe()
                      : f.code ? ExitStatus::Exited(*f.code).Describe()
                               : std::string("exited")));
  }
  for (const HostBlacklisting& b : tl.blacklists) {
    if (b.host != host) continue;
    // A host is usually blacklisted right after its rank failed: step aside from the cross.
    const double r = std::min(5.0, lane.height / 2 - 2);
    double x = axis.X(b.t);
    for (const RankFailure& f : tl.failures) {
      if (f.host != host || std::abs(axis.X(f.t) - x) >= 2 * r + 2) continue;
      x = axis.X(f.t) + 2 * r + 3;
      if (x + r > kLeft + kPlotWidth) x = axis.X(f.t) - 2 * r - 3;  // at the right edge
    }
    NoEntry(out, x, mid, r,
            fmt::format("{} blacklisted at {}{}", host, At(b.t),
                        b.reason.empty() ? "" : ": " + b.reason));
  }
}

// The host lanes, from y = top; returns the y below the last one.
double HostLanes(std::string* out, const JobTimeline& tl, const TimeAxis& axis, double top) {
  const size_t n = tl.hosts.size();
  const double height = n <= 10 ? 26 : n <= 24 ? 20 : n <= 60 ? 14 : 10;
  for (size_t h = 0; h < n; ++h) {
    const Lane lane{h, tl.hosts[h], top + static_cast<double>(h) * height, height};
    *out += "<g class=\"lane\">\n";
    LaneBackground(out, tl, axis, lane);
    RankBars(out, tl, axis, lane);
    FailureMarks(out, tl, axis, lane);
    *out += "</g>\n";
  }
  if (n == 0) {
    Text(out, kLeft + 6, top + 16, "no rank was started", "font-size=\"11\" fill=\"#666\"");
    return top + 24;
  }
  return top + static_cast<double>(n) * height;
}

// Title, a line on how the job was started, the cause of a failure. Returns the y below them;
// *title gets the title's text (also the document's <title>).
double Header(std::string* out, const JobTimeline& tl, std::string* title) {
  const std::string name = tl.job.empty() ? "etrun job" : tl.job;
  std::string status = fmt::format("exit {}", tl.exit_code);
  if (!tl.has_job_end) status = "no job_end: still running or killed";
  if (tl.has_job_end && tl.exit_code == 0) status = "exit 0 (success)";
  *title = fmt::format("{} \u2014 {} \u2014 {}{}", Clip(name, 60), status, FormatDuration(tl.end),
                       tl.has_job_end ? "" : " so far");
  Text(out, 12, 26, *title, "font-size=\"17\" font-weight=\"bold\"");

  std::string info;
  if (!tl.start_ts.empty()) info += "started " + tl.start_ts + "  \u00b7  ";
  info += fmt::format("{}, np {}", tl.elastic ? "elastic" : "static", tl.np);
  if (tl.min_np) info += fmt::format(", min {}", *tl.min_np);
  if (tl.max_np) info += fmt::format(", max {}", *tl.max_np);
  std::string command;
  for (const std::string& word : tl.command) command += (command.empty() ? "" : " ") + word;
  if (!command.empty()) info += "  \u00b7  " + command;
  Text(out, 12, 46, Clip(info, 150), "font-size=\"12\" fill=\"#666\"");
  if (!tl.has_job_end || tl.cause.empty()) return 46;
  Text(out, 12, 64, Clip("cause: " + tl.cause, 150), "font-size=\"12\" fill=\"#d62728\"");
  return 64;
}

// A dashed line through both panels and a marker on top at each reset.
void ResetMarkers(std::string* out, const JobTimeline& tl, const TimeAxis& axis, double top,
                  double bottom) {
  for (const JobReset& r : tl.resets) {
    const double x = axis.X(r.t);
    const std::string tip =
        fmt::format("reset {} at {}{}", r.count, At(r.t), r.reason.empty() ? "" : ": " + r.reason);
    *out += fmt::format(
        "<g class=\"reset\" stroke=\"{0}\"><title>{1}</title>"
        "<line x1=\"{2}\" y1=\"{3}\" x2=\"{2}\" y2=\"{4}\" stroke-width=\"1.2\" "
        "stroke-dasharray=\"4 3\"/><path d=\"M{2} {3} l-4 -7 h8 z\" fill=\"{0}\"/></g>\n",
        kResetColor, Escape(tip), N(x), N(top), N(bottom));
  }
}

}  // namespace

double JobSection(const JobTimeline& tl, const TimeAxis& axis, std::string* grid, std::string* body,
                  std::string* title) {
  double y = Header(body, tl, title);
  bool any_running = false;
  for (const RankRun& r : tl.runs) any_running = any_running || !r.exited;
  y = Legend(body, y + 26, any_running, tl.elastic);

  const double size_top = y + 12;
  const double lanes_top = size_top + kSizePanelHeight + 22;
  SizePanel(body, tl, axis, size_top);
  Text(body, 12, lanes_top - 8, "hosts", "font-size=\"12\" font-weight=\"bold\"");
  const double lanes_bottom = HostLanes(body, tl, axis, lanes_top);
  TimeGrid(grid, axis, size_top, lanes_bottom);
  ResetMarkers(body, tl, axis, size_top, lanes_bottom);  // drawn last, over everything else
  return std::ceil(lanes_bottom + 48);
}

std::string RenderSvg(const JobTimeline& tl) {
  std::string title;
  std::string grid;  // drawn first, under everything else
  std::string body;
  const double height = JobSection(tl, TimeAxis(tl.end), &grid, &body, &title);
  return SvgDocument(height, title, grid, body);
}

}  // namespace etrun::report
