#include "cli/verb_common.h"

#include <cstdio>
#include <iostream>

#include <fmt/format.h>

namespace etrun::cli {

int Error(const std::string& what, int code) {
  fprintf(stderr, "etrun: error: %s\n", what.c_str());
  return code;
}

int Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return Error(std::string(e.what()) + ": see etrun " + app.get_name() + " --help", 2);
  }
  return -1;
}

std::string Duration(double seconds) {
  long long s = static_cast<long long>(seconds);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m{:02}s", s / 3600, s % 3600 / 60, s % 60);
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string Text(const nlohmann::json& j) { return j.is_null() ? "-" : j.is_string() ? j.get<std::string>() : j.dump(); }

bool ParseDuration(const std::string& text, double* seconds) {
  if (text.empty()) return false;
  double scale = 1;
  std::string number = text;
  switch (text.back()) {
    case 's': number.pop_back(); break;
    case 'm': scale = 60; number.pop_back(); break;
    case 'h': scale = 3600; number.pop_back(); break;
    default: break;
  }
  try {
    size_t used = 0;
    double v = std::stod(number, &used);
    if (used != number.size() || v <= 0) return false;
    *seconds = v * scale;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace etrun::cli
