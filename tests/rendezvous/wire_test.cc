// Horovod's Wire framing (horovod/runner/common/util/network.py, spec §5.2, §5.7, §9.13).
// Protocol-4 MACs below were computed at development time with Python's
// `hmac.new(bytes(range(32)), pickle_bytes, 'sha256')` over CPython 3.11.2's protocol-4 pickles of
// stub classes named like Horovod's (see tests/rendezvous/pickle_test.cc).
#include "rendezvous/wire.h"

#include <doctest/doctest.h>

#include "tests/rendezvous/hex_test_util.h"

using etrun::rendezvous::DecodeFrame;
using etrun::rendezvous::DecodePingResponse;
using etrun::rendezvous::EncodeFrame;
using etrun::rendezvous::EncodeHostsUpdatedFrame;
using etrun::rendezvous::EncodePingRequestFrame;
using etrun::rendezvous::FrameDecoder;
using etrun::rendezvous::FrameStatus;
using etrun::rendezvous::HmacSha256;
using etrun::rendezvous::HostUpdateResult;
using etrun::rendezvous::kWireHeaderBytes;

namespace {

using etrun::testing::Hex;
using etrun::testing::Unhex;

std::string Key() {
  std::string key;
  for (int i = 0; i < 32; ++i) key.push_back(static_cast<char>(i));
  return key;
}

// Spec §5.7 pickles (protocol 5).
const char kPingRequestP5[] =
    "80059539000000000000008c22686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f72"
    "6b948c0b50696e67526571756573749493942981942e";
const char kPingResponseP5[] =
    "80059589000000000000008c22686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f72"
    "6b948c0c50696e67526573706f6e73659493942981947d94288c0c736572766963655f6e616d65948c1b776f726b"
    "6572206e6f74696669636174696f6e2073657276696365948c0e736f757263655f61646472657373948c09313237"
    "2e302e302e319475622e";
const char kAckResponseP5[] =
    "80059539000000000000008c22686f726f766f642e72756e6e65722e636f6d6d6f6e2e7574696c2e6e6574776f72"
    "6b948c0b41636b526573706f6e73659493942981942e";
const char kHostsAddedP5[] =
    "80059575000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "7265739468008c10486f7374557064617465526573756c749493944b028594529475622e";
const char kHostsMixedP5[] =
    "80059575000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b6572948c1348"
    "6f73747355706461746564526571756573749493942981947d94288c0974696d657374616d70944a00f153658c03"
    "7265739468008c10486f7374557064617465526573756c749493944b038594529475622e";

// `pickle` with PROTO 4 instead of 5.
std::string Proto4(std::string_view hex) {
  std::string pickle = Unhex(hex);
  pickle[1] = 4;
  return pickle;
}

// Feeds `data` and returns the status; *consumed accumulates.
FrameStatus FeedAll(FrameDecoder* decoder, std::string_view data, size_t* consumed,
                    std::string* err) {
  size_t taken = 0;
  FrameStatus status = decoder->Feed(data, &taken, err);
  *consumed += taken;
  return status;
}

}  // namespace

TEST_CASE("HMAC-SHA256 matches RFC 4231 and is defined for empty keys and bodies") {
  CHECK(Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(Hex(HmacSha256("", "")) ==
        "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST_CASE("the spec's frames are MAC, little-endian length and pickle") {
  struct Case {
    const char* name;
    const char* pickle;
    const char* mac;
    const char* length;
  };
  const Case cases[] = {
      {"PingRequest", kPingRequestP5,
       "bb2cbff712bf565961e2277e4343a9305b3da9e1a96567de2e4d9cbdce930ec9", "44000000"},
      {"PingResponse", kPingResponseP5,
       "d84fb3cc3cff82602ff15704ed0fa7cdcbaa3b913db8b398d062df9d03fd4219", "94000000"},
      {"AckResponse", kAckResponseP5,
       "c41edba9650bd7f1bc648117db6dcbd46d4aaf63984f071b554bf122cb3a3418", "44000000"},
      {"HostsUpdatedRequest added", kHostsAddedP5,
       "f16c0445fc5ef6634be4858d3bd17385bcdd8069c354f27e6386190c3c968865", "80000000"},
      {"HostsUpdatedRequest removed|added", kHostsMixedP5,
       "af2f806d81a973c90d72bfadfecf09cad1a489d165f25297af58336b7a11cbf4", "80000000"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::string pickle = Unhex(c.pickle);
    CHECK(Hex(HmacSha256(Key(), pickle)) == c.mac);
    std::string frame = EncodeFrame(Key(), pickle);
    CHECK(Hex(frame) == std::string(c.mac) + c.length + c.pickle);
    std::string body, err;
    REQUIRE_MESSAGE(DecodeFrame(Key(), frame, &body, &err), err);
    CHECK(body == pickle);
  }
}

TEST_CASE("the driver's frames carry the protocol-4 pickles under their own MAC") {
  struct Case {
    const char* name;
    std::string frame;
    const char* mac;
    const char* length;
    std::string pickle;
  };
  const Case cases[] = {
      {"PingRequest", EncodePingRequestFrame(Key()),
       "eeeaf5d7e84db1a18ac9d06b549aea4a1be9cb43dc1b39cd19624f7cd1d1fa39", "44000000",
       Proto4(kPingRequestP5)},
      {"added", EncodeHostsUpdatedFrame(Key(), 1700000000, HostUpdateResult::kAdded),
       "5684f85d96ba7009697260498f42b550947638b5fbc1bd46c40509cef41ba2e3", "80000000",
       Proto4(kHostsAddedP5)},
      {"mixed", EncodeHostsUpdatedFrame(Key(), 1700000000, HostUpdateResult::kMixed),
       "9e2053f0599d3a93d3cc917bc3b3992b8f06cffe2c9001468eceb7067e196128", "80000000",
       Proto4(kHostsMixedP5)},
      {"2^31 (LONG1)", EncodeHostsUpdatedFrame(Key(), 2147483648, HostUpdateResult::kAdded),
       "3add8b4d0dca98e87ebcbbaf478cd1a2bdfbc982b9766109c47a0a05818b26e3", "82000000",
       Unhex("80049577000000000000008c1d686f726f766f642e72756e6e65722e656c61737469632e776f726b65"
             "72948c13486f73747355706461746564526571756573749493942981947d94288c0974696d65737461"
             "6d70948a0500000080008c037265739468008c10486f7374557064617465526573756c749493944b"
             "028594529475622e")},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK(Hex(c.frame) == std::string(c.mac) + c.length + Hex(c.pickle));
  }
}

TEST_CASE("the length field is little-endian whatever the host") {
  std::string frame = EncodeFrame(Key(), std::string(0x0102, 'x'));
  CHECK(Hex(frame.substr(32, 4)) == "02010000");
  CHECK(frame.size() == kWireHeaderBytes + 0x0102);
}

TEST_CASE("a frame fed whole completes and leaves later bytes to the caller") {
  std::string frame = EncodeFrame(Key(), Unhex(kPingResponseP5));
  FrameDecoder decoder(Key());
  size_t consumed = 0;
  std::string err;
  CHECK(decoder.Feed(frame + "next", &consumed, &err) == FrameStatus::kComplete);
  CHECK(consumed == frame.size());
  CHECK(decoder.bytes_wanted() == 0);
  std::string service, source;
  REQUIRE(DecodePingResponse(decoder.body(), &service, &source, &err));
  CHECK(service == "worker notification service");
  // Complete is final.
  CHECK(decoder.Feed("more", &consumed, &err) == FrameStatus::kComplete);
  CHECK(consumed == 0);
}

TEST_CASE("a frame split at any byte boundary decodes the same") {
  std::string body = Unhex(kHostsAddedP5);
  std::string frame = EncodeFrame(Key(), body);
  for (size_t split = 0; split <= frame.size(); ++split) {
    CAPTURE(split);
    FrameDecoder decoder(Key());
    size_t consumed = 0;
    std::string err;
    FrameStatus first =
        FeedAll(&decoder, std::string_view(frame).substr(0, split), &consumed, &err);
    CHECK(first == (split == frame.size() ? FrameStatus::kComplete : FrameStatus::kNeedMore));
    CHECK(FeedAll(&decoder, std::string_view(frame).substr(split), &consumed, &err) ==
          FrameStatus::kComplete);
    CHECK(consumed == frame.size());
    CHECK(decoder.body() == body);
  }
}

TEST_CASE("fed one byte at a time, the decoder asks for exactly the bytes the frame lacks") {
  std::string frame = EncodeFrame(Key(), Unhex(kPingRequestP5));
  FrameDecoder decoder(Key());
  std::string err;
  for (size_t i = 0; i < frame.size(); ++i) {
    CAPTURE(i);
    CHECK(decoder.bytes_wanted() ==
          (i < kWireHeaderBytes ? kWireHeaderBytes - i : frame.size() - i));
    size_t consumed = 0;
    FrameStatus status = decoder.Feed(frame.substr(i, 1), &consumed, &err);
    CHECK(consumed == 1);
    CHECK(status == (i + 1 == frame.size() ? FrameStatus::kComplete : FrameStatus::kNeedMore));
  }
  CHECK(decoder.body() == Unhex(kPingRequestP5));
}

TEST_CASE("an empty body is a frame") {
  std::string frame = EncodeFrame(Key(), "");
  CHECK(frame.size() == kWireHeaderBytes);
  std::string body = "unchanged", err;
  REQUIRE(DecodeFrame(Key(), frame, &body, &err));
  CHECK(body.empty());
}

TEST_CASE("any flipped bit in MAC or body, or another key, fails the MAC check") {
  std::string frame = EncodeFrame(Key(), Unhex(kAckResponseP5));
  for (size_t i = 0; i < frame.size(); ++i) {
    if (i >= 32 && i < kWireHeaderBytes) continue;  // the length field: see below
    CAPTURE(i);
    std::string corrupted = frame;
    corrupted[i] = static_cast<char>(corrupted[i] ^ 0x01);
    std::string body = "unchanged", err;
    CHECK_FALSE(DecodeFrame(Key(), corrupted, &body, &err));
    CHECK(err == "wire: frame MAC does not match (wrong key or corrupted frame)");
    CHECK(body == "unchanged");
  }
  std::string other_key = Key();
  other_key[31] = 'x';
  std::string body, err;
  CHECK_FALSE(DecodeFrame(other_key, frame, &body, &err));
  CHECK(err.find("MAC does not match") != std::string::npos);
}

TEST_CASE("negative and oversized lengths fail as soon as the header is in") {
  struct Case {
    const char* name;
    const char* length;
    size_t max_body;
    const char* error;
  };
  const Case cases[] = {
      {"-1", "ffffffff", 1 << 20, "wire: negative frame length -1"},
      {"INT32_MIN", "00000080", 1 << 20, "wire: negative frame length -2147483648"},
      {"a big-endian 68 (the hang of spec 5.2)", "00000044", 1 << 20,
       "wire: frame length 1140850688 exceeds the limit of 1048576 bytes"},
      {"one over a custom limit", "65000000", 100,
       "wire: frame length 101 exceeds the limit of 100 bytes"},
      {"INT32_MAX", "ffffff7f", 1 << 20, "exceeds the limit"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::string header = std::string(32, '\0') + Unhex(c.length);
    FrameDecoder decoder(Key(), c.max_body);
    size_t consumed = 0;
    std::string err;
    CHECK(decoder.Feed(header.substr(0, 35), &consumed, &err) == FrameStatus::kNeedMore);
    CHECK(decoder.Feed(header.substr(35) + "body", &consumed, &err) == FrameStatus::kError);
    CHECK(consumed == 1);
    CHECK(err.find(c.error) != std::string::npos);
    CHECK(decoder.bytes_wanted() == 0);
    // Errors are final.
    std::string again;
    CHECK(decoder.Feed("x", &consumed, &again) == FrameStatus::kError);
    CHECK(consumed == 0);
    CHECK(again == err);
  }
  // Exactly at the limit is accepted.
  std::string frame = EncodeFrame(Key(), std::string(100, 'x'));
  FrameDecoder decoder(Key(), 100);
  size_t consumed = 0;
  std::string err;
  CHECK(decoder.Feed(frame, &consumed, &err) == FrameStatus::kComplete);
}

TEST_CASE("the one-shot decoder wants exactly one frame") {
  std::string frame = EncodeFrame(Key(), Unhex(kPingRequestP5));
  std::string body = "unchanged", err;
  CHECK_FALSE(DecodeFrame(Key(), frame.substr(0, frame.size() - 1), &body, &err));
  CHECK(err == "wire: truncated frame (103 bytes, 1 more needed)");
  CHECK_FALSE(DecodeFrame(Key(), frame.substr(0, 10), &body, &err));
  CHECK(err == "wire: truncated frame (10 bytes, 26 more needed)");
  CHECK_FALSE(DecodeFrame(Key(), frame + "!", &body, &err));
  CHECK(err == "wire: 1 bytes after the frame");
  CHECK(body == "unchanged");
  REQUIRE(DecodeFrame(Key(), frame, &body, &err));
  CHECK(body == Unhex(kPingRequestP5));
}
