// libFuzzer target: the Wire framing decoder (rendezvous/wire.h, spec §5.2) on arbitrary bytes,
// fed in pieces whose sizes the input chooses. Beyond "no crash", checks:
// - the outcome does not depend on how the bytes are split, and matches an independent reading of
//   the header: a negative or oversized length is an error as soon as the header is in, a short
//   input needs exactly bytes_wanted() more, and a whole frame completes only if its MAC verifies
//   (then body() is the frame's body and the bytes taken are exactly the frame);
// - kComplete and kError are final: later input is not consumed;
// - DecodeFrame agrees with the incremental decoder;
// - the input as a body, framed with EncodeFrame, decodes back to itself, and the same frame with
//   any one bit flipped (chosen by the input) never decodes: the decoder never returns a frame
//   whose MAC does not verify.
// Run: scripts/fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rendezvous/wire.h"

namespace r = etrun::rendezvous;

namespace {

constexpr size_t kMaxBody = 1 << 12;

// The spec's test-vector key, bytes(range(32)), so the seed frames (§5.7) verify.
std::string Key() {
  std::string key(32, '\0');
  for (int i = 0; i < 32; ++i) key[i] = static_cast<char>(i);
  return key;
}

struct Outcome {
  r::FrameStatus status = r::FrameStatus::kNeedMore;
  size_t consumed = 0;
  size_t wanted = 0;
  std::string body;
  std::string err;
};

// Feeds `bytes` in pieces of 1..16 bytes taken from `sizes` (cycled), or whole if `sizes` is
// empty. Checks that a piece after a final status is not consumed.
Outcome Feed(const std::string& key, std::string_view bytes, std::string_view sizes) {
  r::FrameDecoder decoder(key, kMaxBody);
  Outcome out;
  size_t pos = 0, piece = 0;
  do {
    size_t n = bytes.size() - pos;
    if (!sizes.empty()) n = std::min<size_t>(n, 1 + static_cast<uint8_t>(sizes[piece++ % sizes.size()]) % 16);
    size_t consumed = 0;
    std::string err;
    out.status = decoder.Feed(bytes.substr(pos, n), &consumed, &err);
    // While it needs more it takes all it is given; a final status may leave some of the piece.
    if (consumed > n || (out.status == r::FrameStatus::kNeedMore && consumed != n)) abort();
    out.consumed += consumed;
    pos += n;
    if (out.status == r::FrameStatus::kError) out.err = err;
  } while (pos < bytes.size() && out.status == r::FrameStatus::kNeedMore);
  out.wanted = decoder.bytes_wanted();
  if (out.status == r::FrameStatus::kComplete) out.body = decoder.body();
  // Final states stay final and take nothing more.
  size_t consumed = 1;
  std::string err;
  if (out.status != r::FrameStatus::kNeedMore &&
      (decoder.Feed("more", &consumed, &err) != out.status || consumed != 0)) {
    abort();
  }
  return out;
}

void CheckAgainstHeader(const std::string& key, std::string_view bytes, const Outcome& o) {
  if (bytes.size() < r::kWireHeaderBytes) {
    if (o.status != r::FrameStatus::kNeedMore || o.wanted != r::kWireHeaderBytes - bytes.size())
      abort();
    return;
  }
  uint32_t raw = 0;
  for (int i = 0; i < 4; ++i) raw |= uint32_t{static_cast<uint8_t>(bytes[32 + i])} << (8 * i);
  int32_t length = static_cast<int32_t>(raw);
  if (length < 0 || static_cast<size_t>(length) > kMaxBody) {
    if (o.status != r::FrameStatus::kError || o.consumed != r::kWireHeaderBytes) abort();
    return;
  }
  size_t frame = r::kWireHeaderBytes + static_cast<size_t>(length);
  if (bytes.size() < frame) {
    if (o.status != r::FrameStatus::kNeedMore || o.wanted != frame - bytes.size()) abort();
    return;
  }
  std::string_view body = bytes.substr(r::kWireHeaderBytes, static_cast<size_t>(length));
  bool mac_ok = r::HmacSha256(key, body) == bytes.substr(0, r::kWireMacBytes);
  if (o.consumed != frame || o.wanted != 0) abort();
  if (mac_ok ? (o.status != r::FrameStatus::kComplete || o.body != body)
             : (o.status != r::FrameStatus::kError || o.err.find("MAC") == std::string::npos)) {
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kKey = Key();
  std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The input as a byte stream, whole and in input-chosen pieces.
  Outcome whole = Feed(kKey, bytes, {});
  CheckAgainstHeader(kKey, bytes, whole);
  Outcome split = Feed(kKey, bytes, bytes.substr(0, 8));
  if (split.status != whole.status || split.consumed != whole.consumed ||
      split.wanted != whole.wanted || split.body != whole.body || split.err != whole.err) {
    abort();
  }
  std::string body, err;
  bool decoded = r::DecodeFrame(kKey, bytes, &body, &err, kMaxBody);
  bool exact = whole.status == r::FrameStatus::kComplete && whole.consumed == size;
  if (decoded != exact || (decoded && body != whole.body) || (!decoded && err.empty())) abort();

  // The input as a body: it round-trips, and no single flipped bit gets through.
  if (size <= kMaxBody) {
    std::string frame = r::EncodeFrame(kKey, bytes);
    Outcome good = Feed(kKey, frame, bytes.substr(0, 4));
    if (good.status != r::FrameStatus::kComplete || good.body != bytes ||
        good.consumed != frame.size()) {
      abort();
    }
    uint32_t pick = 0;
    if (size > 0) memcpy(&pick, data + (size >= 4 ? size - 4 : 0), std::min<size_t>(size, 4));
    size_t bit = pick % (frame.size() * 8);
    frame[bit / 8] = static_cast<char>(frame[bit / 8] ^ (1 << (bit % 8)));
    Outcome bad = Feed(kKey, frame, {});
    CheckAgainstHeader(kKey, frame, bad);
    if (bad.status == r::FrameStatus::kComplete) abort();
  }
  return 0;
}
