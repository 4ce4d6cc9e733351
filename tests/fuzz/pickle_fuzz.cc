// libFuzzer target: arbitrary bytes through every decoder of the Horovod pickle subset, the
// base64 body decoder and the Wire frame decoder (fed in two pieces). Nothing may crash, read out
// of bounds or hang; a decoded HostsUpdatedRequest re-encodes to something that decodes the same.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rendezvous/pickle.h"
#include "rendezvous/wire.h"

namespace r = etrun::rendezvous;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string err, a, b;
  r::DecodePingRequest(bytes, &err);
  r::DecodePingResponse(bytes, &a, &b, &err);
  r::DecodeAckResponse(bytes, &err);
  int64_t timestamp = 0;
  r::HostUpdateResult res;
  if (r::DecodeHostsUpdatedRequest(bytes, &timestamp, &res, &err)) {
    int64_t t2 = 0;
    r::HostUpdateResult res2;
    if (!r::DecodeHostsUpdatedRequest(r::EncodeHostsUpdatedRequest(timestamp, res), &t2, &res2, &err) ||
        t2 != timestamp || res2 != res) {
      abort();
    }
  }
  r::WorkerAddresses addresses;
  std::string key;
  r::DecodeWorkerAddresses(bytes, &addresses, &key, &err);
  r::DecodeWorkerAddressesBody(bytes, &addresses, &key, &err);

  static const std::string kKey(32, '\x07');
  r::FrameDecoder decoder(kKey, 1 << 16);
  size_t split = size / 2, consumed = 0;
  if (decoder.Feed(bytes.substr(0, split), &consumed, &err) == r::FrameStatus::kNeedMore) {
    decoder.Feed(bytes.substr(split), &consumed, &err);
  }
  std::string body;
  r::DecodeFrame(kKey, bytes, &body, &err, 1 << 16);
  return 0;
}
