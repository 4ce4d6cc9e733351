#include "cli/flag_validators.h"

#include <cmath>

namespace etrun::cli {

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\n\r\f\v");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\n\r\f\v") - begin + 1);
}

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string FormatNumber(double value) {
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, end) : "?";
}

bool StripNumber(const std::string& text, std::string* number) {
  *number = Trim(text);
  if (number->empty() || (*number)[0] != '+') return true;
  number->erase(0, 1);
  return number->empty() || ((*number)[0] != '+' && (*number)[0] != '-');
}

CLI::Validator FiniteNumber(const std::string& display) {
  return CLI::Validator(
      [display](std::string& text) -> std::string {
        std::string s;
        const bool signed_once = StripNumber(text, &s);
        double value = 0;
        const char* end = s.data() + s.size();
        const auto [ptr, ec] = std::from_chars(s.data(), end, value);
        if (!signed_once || s.empty() || ptr != end || ec != std::errc() || !std::isfinite(value)) {
          return display + ": expected a finite number, got '" + text + "'";
        }
        text = s;
        return "";
      },
      "", "");
}

CLI::Validator OneOf(const std::string& display, const std::vector<std::string>& choices) {
  return CLI::Validator(
      [display, choices](std::string& text) -> std::string {
        for (const std::string& choice : choices) {
          if (text == choice) return "";
        }
        for (const std::string& choice : choices) {
          if (CLI::detail::to_lower(text) == CLI::detail::to_lower(choice)) {
            return display + ": got '" + text + "' (did you mean " + choice + "?)";
          }
        }
        return display + ": expected one of " + Join(choices, ", ") + ", got '" + text + "'";
      },
      "", "");
}

}  // namespace etrun::cli
