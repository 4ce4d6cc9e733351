// svg: what the job picture (report_svg.cc) and the pool picture (pool_svg.cc) share, so that
// the two look alike and can be drawn one above the other in one document: the page's width and
// margins, the palette's neutral colours, text escaping, the time axis and its grid, the document
// around a body. Internal to report/; pure; thread-compatible.
#ifndef ETRUN_REPORT_SVG_H_
#define ETRUN_REPORT_SVG_H_

#include <string>
#include <string_view>

#include "report/report.h"

namespace etrun::report {

// Every picture is laid out for a fixed width; heights grow with the content.
inline constexpr double kWidth = 1000;
inline constexpr double kLeft = 170;  // host names, job names and the y axes
inline constexpr double kRight = 30;
inline constexpr double kPlotWidth = kWidth - kLeft - kRight;

inline constexpr char kGridColor[] = "#e3e3e3";
inline constexpr char kTextColor[] = "#222";
inline constexpr char kFailColor[] = "#d62728";

// Text for XML content and attribute values: markup escaped, control characters that XML 1.0
// forbids dropped (the JSON parser already guaranteed valid UTF-8).
std::string Escape(std::string_view s);

// At most max_chars characters (UTF-8 code points) of s; a cut is marked with "…".
std::string Clip(std::string_view s, size_t max_chars);

// Coordinates with one decimal keep the file small and exact enough.
std::string N(double v);

// "12.350 s" for tooltips, with milliseconds below a minute.
std::string At(double t);

// A <text> element at (x, y) with the given attributes; the text is escaped.
void Text(std::string* out, double x, double y, const std::string& text, const char* attrs);

// Picks a y axis step for 0..max_value: 1, 2, 5, 10, 20, 50... with at most 5 steps.
int SizeStep(int max_value);

// The time axis of one section: [0, span] seconds of the axis across the plot, tick spacing and
// label style chosen from the span. A section's own times are `offset` seconds later on the axis
// (a job drawn on its pool's axis started that long after the pool); `since` names the axis's
// zero ("job", "pool").
class TimeAxis {
 public:
  explicit TimeAxis(double span, double offset = 0, const char* since = "job");

  // x of a time of the section (offset applied), clamped to the plot.
  double X(double t) const { return XAt(t + offset_); }
  // x of a time on the axis.
  double XAt(double axis_t) const;
  double step() const { return step_; }
  double span() const { return span_; }

  std::string Label(double axis_t) const;
  std::string Title() const;

 private:
  double span_;
  double offset_;
  const char* since_;
  double step_ = 1;
};

// Vertical grid lines at each tick from y = top to bottom, and the labelled time axis below.
void TimeGrid(std::string* out, const TimeAxis& axis, double top, double bottom);

// A whole SVG document of the given height around `grid` (drawn first, under everything) and
// `body`; `title` becomes the document's <title>.
std::string SvgDocument(double height, const std::string& title, const std::string& grid,
                        const std::string& body);

// A job's picture (what RenderSvg draws) on `axis`, from y = 0: appends its grid (to be drawn
// under everything) to *grid and the rest to *body; *title gets its title. Returns its height.
double JobSection(const JobTimeline& timeline, const TimeAxis& axis, std::string* grid,
                  std::string* body, std::string* title);

}  // namespace etrun::report

#endif  // ETRUN_REPORT_SVG_H_
