// flag_validators: flag values read as horovodrun's argparse reads them. CLI11 validators that
// accept exactly what Python's int() and float() and argparse's `choices=` accept, each writing the
// whole user-facing message ("<flag>: expected ..., got ..."; CLI11 prefixes its own "--name: ",
// which FlagTable::Parse strips again), and the text helpers the flag table and the checks share.
// Internal to cli/. Pure; thread-safe.
#ifndef ETRUN_CLI_FLAG_VALIDATORS_H_
#define ETRUN_CLI_FLAG_VALIDATORS_H_

#include <CLI/CLI.hpp>
#include <charconv>
#include <limits>
#include <string>
#include <vector>

namespace etrun::cli {

// `s` without leading and trailing blanks.
std::string Trim(const std::string& s);

// `items` with `separator` between them.
std::string Join(const std::vector<std::string>& items, const std::string& separator);

// The shortest text that reads back as `value`: "0.1", "-1", "1e+20".
std::string FormatNumber(double value);

// Strips blanks and one leading '+' as Python's int() and float() do; false for "+-1" and "++1".
bool StripNumber(const std::string& text, std::string* number);

// Python's int() in decimal: optional blanks and sign, then digits. Rewrites the text to plain
// decimal, because CLI11 reads "010" as octal and "0x10" as hex, and checks that it fits T.
template <typename T>
CLI::Validator WholeNumber(const std::string& display) {
  return CLI::Validator(
      [display](std::string& text) -> std::string {
        std::string s;
        const bool signed_once = StripNumber(text, &s);
        T value{};
        const char* end = s.data() + s.size();
        const auto [ptr, ec] = std::from_chars(s.data(), end, value);
        if (!signed_once || s.empty() || ptr != end || ec == std::errc::invalid_argument) {
          return display + ": expected a whole number, got '" + text + "'";
        }
        if (ec == std::errc::result_out_of_range) {
          return display + ": expected a whole number from " +
                 std::to_string(std::numeric_limits<T>::min()) + " to " +
                 std::to_string(std::numeric_limits<T>::max()) + ", got '" + text + "'";
        }
        text = std::to_string(value);
        return "";
      },
      "", "");
}

// Python's float() without hex, infinities and NaN.
CLI::Validator FiniteNumber(const std::string& display);

// Exactly one of `choices`, case-sensitive as argparse's `choices=`.
CLI::Validator OneOf(const std::string& display, const std::vector<std::string>& choices);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_FLAG_VALIDATORS_H_
