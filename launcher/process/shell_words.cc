#include "launcher/process/shell_words.h"

#include <string_view>

namespace etrun::launcher {

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  static constexpr std::string_view kPlain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of(kPlain) == std::string::npos;
    out += plain ? a : ShellQuote(a);
  }
  return out;
}

}  // namespace etrun::launcher
