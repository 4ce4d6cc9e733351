// Base64 for the worker_addresses HTTP body (spec §4.4) and the body decoder built on it.
#include "rendezvous/pickle.h"

#include <array>

namespace etrun::rendezvous {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for alphabet characters, -1 for everything else.
constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> table{};
  for (auto& entry : table) entry = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}

constexpr std::array<int8_t, 256> kDecodeTable = MakeDecodeTable();

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    size_t n = bytes.size() - i < 3 ? bytes.size() - i : 3;
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k) {
      group = group << 8 | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    }
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 63] : '=');
    }
  }
  return out;
}

bool Base64Decode(std::string_view text, std::string* out, std::string* err) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.size() % 4 != 0) {
    *err = "base64: length " + std::to_string(text.size()) + " is not a multiple of 4";
    return false;
  }
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    size_t padding = last && text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
    uint32_t group = 0;
    for (size_t k = 0; k < 4; ++k) {
      int8_t digit = k < 4 - padding ? kDecodeTable[static_cast<uint8_t>(text[i + k])] : 0;
      if (digit < 0) {
        *err = "base64: invalid character at offset " + std::to_string(i + k);
        return false;
      }
      group = group << 6 | static_cast<uint32_t>(digit);
    }
    if ((padding == 1 && (group & 0xff) != 0) || (padding == 2 && (group & 0xffff) != 0)) {
      *err = "base64: non-zero bits in the padding at offset " + std::to_string(i);
      return false;
    }
    for (size_t k = 0; k < 3 - padding; ++k) {
      bytes.push_back(static_cast<char>((group >> (16 - 8 * k)) & 0xff));
    }
  }
  *out = std::move(bytes);
  return true;
}

bool DecodeWorkerAddressesBody(std::string_view base64_text, WorkerAddresses* addresses,
                               std::string* key, std::string* err) {
  std::string bytes;
  if (!Base64Decode(base64_text, &bytes, err)) return false;
  return DecodeWorkerAddresses(bytes, addresses, key, err);
}

}  // namespace etrun::rendezvous
