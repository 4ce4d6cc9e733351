// Hex helpers shared by the wire-protocol tests (the spec's vectors are hex).
#ifndef ETRUN_TESTS_RENDEZVOUS_HEX_TEST_UTIL_H_
#define ETRUN_TESTS_RENDEZVOUS_HEX_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace etrun::testing {

// Bytes from hex (an even number of digits; spaces and newlines are ignored). Used for
// namespace-scope constants too, hence no doctest assertions.
inline std::string Unhex(std::string_view hex) {
  std::string digits, out;
  for (char c : hex) {
    if (c != ' ' && c != '\n') digits.push_back(c);
  }
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Lower-case hex of bytes.
inline std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 15]);
  }
  return out;
}

}  // namespace etrun::testing

#endif  // ETRUN_TESTS_RENDEZVOUS_HEX_TEST_UTIL_H_
