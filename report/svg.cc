// svg: the pieces the job and pool pictures share (see svg.h).
#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace etrun::report {

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t')
          out += c;
        else if (c == '\n' || c == '\r')
          out += ' ';
    }
  }
  return out;
}

std::string Clip(std::string_view s, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (++chars > max_chars) return std::string(s.substr(0, i)) + "\u2026";
  }
  return std::string(s);
}

std::string N(double v) { return fmt::format("{:.1f}", v); }

std::string At(double t) { return t < 60 ? fmt::format("{:.3f} s", t) : FormatDuration(t); }

void Text(std::string* out, double x, double y, const std::string& text, const char* attrs) {
  *out += fmt::format("<text x=\"{}\" y=\"{}\" {}>{}</text>\n", N(x), N(y), attrs, Escape(text));
}

int SizeStep(int max_value) {
  for (int base = 1;; base *= 10) {
    for (const int m : {1, 2, 5}) {
      if (max_value / (base * m) <= 5) return base * m;
    }
  }
}

TimeAxis::TimeAxis(double span, double offset, const char* since)
    : span_(span > 0 ? span : 1), offset_(offset), since_(since) {
  static constexpr double kSteps[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05,  0.1,   0.2,   0.5,
                                      1,     2,     5,     10,   15,   30,    60,    120,   300,
                                      600,   900,   1800,  3600, 7200, 10800, 21600, 43200, 86400};
  step_ = 86400 * std::ceil(span_ / 86400 / 10);
  for (const double s : kSteps) {
    if (span_ / s <= 10) {
      step_ = s;
      break;
    }
  }
}

double TimeAxis::XAt(double axis_t) const {
  return kLeft + std::clamp(axis_t / span_, 0.0, 1.0) * kPlotWidth;
}

std::string TimeAxis::Label(double axis_t) const {
  if (span_ < 120) {
    const int decimals = step_ < 1 ? static_cast<int>(std::ceil(-std::log10(step_) - 1e-9)) : 0;
    return fmt::format("{:.{}f}", axis_t, decimals);
  }
  const long s = std::lround(axis_t);
  if (span_ < 7200) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}", s / 3600, s / 60 % 60);
}

std::string TimeAxis::Title() const {
  if (span_ < 120) return fmt::format("seconds since {} start", since_);
  if (span_ < 7200) return fmt::format("minutes:seconds since {} start", since_);
  return fmt::format("hours:minutes since {} start", since_);
}

void TimeGrid(std::string* out, const TimeAxis& axis, double top, double bottom) {
  const int ticks = static_cast<int>(std::floor(axis.span() / axis.step() + 1e-6));
  for (int i = 0; i <= ticks; ++i) {
    const double t = i * axis.step();
    const double x = axis.XAt(t);
    *out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", N(x),
                        N(top), N(x), N(bottom + 4), kGridColor);
    Text(out, x, bottom + 18, axis.Label(t),
         "font-size=\"10\" text-anchor=\"middle\" fill=\"#666\"");
  }
  *out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>\n", N(kLeft),
                      N(bottom + 4), N(kLeft + kPlotWidth), N(bottom + 4));
  Text(out, kLeft + kPlotWidth / 2, bottom + 36, axis.Title(),
       "font-size=\"11\" text-anchor=\"middle\" fill=\"#666\"");
}

std::string SvgDocument(double height, const std::string& title, const std::string& grid,
                        const std::string& body) {
  return fmt::format(
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
             "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
             "fill=\"{2}\">\n"
             "<title>{3}</title>\n"
             "<defs><pattern id=\"blacklisted\" width=\"6\" height=\"6\" "
             "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
             "<rect width=\"6\" height=\"6\" fill=\"#f6d5d5\"/>"
             "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"{4}\" stroke-width=\"2\"/>"
             "</pattern></defs>\n"
             "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n",
             kWidth, height, kTextColor, Escape(title), kFailColor) +
         grid + body + "</svg>\n";
}

}  // namespace etrun::report
