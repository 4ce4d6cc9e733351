// Horovod's Wire framing (horovod/runner/common/util/network.py, spec §5.2): each message on the
// driver <-> worker notification connections is
//   HMAC-SHA256(key, body) (32 bytes) | len(body) as little-endian int32 | body (a pickle).
// The length is always little-endian here (Horovod writes native order, i.e. little-endian on
// x86-64 and aarch64). FrameDecoder reads a frame from a byte stream incrementally and, unlike
// Horovod (§9.13), refuses a negative or oversized length as soon as the header is in, instead of
// waiting for gigabytes. No sockets here. Functions are thread-safe; a FrameDecoder is not.
#ifndef ETRUN_RENDEZVOUS_WIRE_H_
#define ETRUN_RENDEZVOUS_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rendezvous/pickle.h"

namespace etrun::rendezvous {

inline constexpr size_t kWireMacBytes = 32;
inline constexpr size_t kWireHeaderBytes = kWireMacBytes + 4;
inline constexpr size_t kDefaultMaxFrameBody = 1 << 20;

// The 32-byte HMAC-SHA256 of `data` under `key` (any length, empty included).
std::string HmacSha256(std::string_view key, std::string_view data);

// MAC | length | body. REQUIRES: body.size() <= INT32_MAX.
std::string EncodeFrame(std::string_view key, std::string_view body);

// Frames of EncodePingRequest() and EncodeHostsUpdatedRequest(timestamp, res) (pickle.h), what
// the driver sends to a worker's notification service.
std::string EncodePingRequestFrame(std::string_view key);
std::string EncodeHostsUpdatedFrame(std::string_view key, int64_t timestamp, HostUpdateResult res);

enum class FrameStatus { kNeedMore, kComplete, kError };

// Collects one frame from bytes fed as they arrive.
class FrameDecoder {
 public:
  // `key` is copied. Bodies longer than `max_body_bytes` are refused.
  explicit FrameDecoder(std::string_view key, size_t max_body_bytes = kDefaultMaxFrameBody);

  // Takes bytes up to the end of the frame and sets *consumed to how many it took (bytes after the
  // frame are left to the caller; Horovod sends one frame per connection). Returns kNeedMore while
  // the frame is incomplete, kComplete once the whole frame is in and its MAC verifies (body() is
  // then valid), kError with *err set on a negative or oversized length or a MAC mismatch (checked
  // in constant time). kComplete and kError are final: later calls consume nothing and repeat them.
  FrameStatus Feed(std::string_view data, size_t* consumed, std::string* err);

  // How many more bytes the frame needs at least (header first, then body): reading exactly this
  // many never reads past the frame. 0 once complete or failed.
  size_t bytes_wanted() const;

  // The verified body. REQUIRES: Feed returned kComplete.
  const std::string& body() const { return body_; }

 private:
  std::string key_;
  size_t max_body_;
  std::string header_;  // MAC and length, up to kWireHeaderBytes
  size_t body_length_ = 0;
  std::string body_;
  FrameStatus status_ = FrameStatus::kNeedMore;
  std::string error_;
};

// One-shot form: `frame` must be exactly one whole frame. Returns false and sets *err otherwise
// (*body is then unchanged).
bool DecodeFrame(std::string_view key, std::string_view frame, std::string* body, std::string* err,
                 size_t max_body_bytes = kDefaultMaxFrameBody);

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_WIRE_H_
