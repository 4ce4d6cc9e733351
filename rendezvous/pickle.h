// The few Python pickles the Horovod driver and its workers exchange (spec §4.4, §5.6-5.8), read
// and written without Python. The writer emits protocol 4 exactly as CPython's C pickler does
// (FRAME, MEMOIZE, SETITEM vs MARK...SETITEMS, APPEND vs MARK...APPENDS, smallest int opcode), so
// its output equals CPython's byte for byte; protocol 4 because workers on Python 3.6/3.7 reject 5.
// The reader is a small stack machine over the opcode subset of §5.6 (protocols 2-5) that resolves
// globals only against a fixed allow-list, never imports or calls anything, and checks every
// length and limit, so hostile input yields false and an error, never undefined behaviour (it
// replaces horovodrun's unpickling of unauthenticated HTTP bodies, §9.12). Pure functions of
// their arguments: thread-safe.
#ifndef ETRUN_RENDEZVOUS_PICKLE_H_
#define ETRUN_RENDEZVOUS_PICKLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::rendezvous {

// horovod.runner.elastic.worker.HostUpdateResult (an IntFlag, §5.5).
enum class HostUpdateResult : int { kNoUpdate = 0, kRemoved = 1, kAdded = 2, kMixed = 3 };

// One (ip, port) a worker's notification service listens on.
struct SocketAddress {
  std::string ip;
  int port = 0;
  bool operator==(const SocketAddress&) const = default;
};

// One entry of the worker's {interface: [(ip, port), ...]} dict.
struct InterfaceAddresses {
  std::string name;
  std::vector<SocketAddress> addresses;
  bool operator==(const InterfaceAddresses&) const = default;
};

// The dict, in the worker's (insertion) order.
using WorkerAddresses = std::vector<InterfaceAddresses>;

// Limits the reader enforces; anything beyond them is rejected.
inline constexpr size_t kMaxPickleBytes = 1 << 20;        // whole pickle
inline constexpr size_t kMaxPickleStringBytes = 1 << 16;  // one str or bytes value
inline constexpr size_t kMaxPickleStackDepth = 1 << 16;   // values on the stack at once
inline constexpr size_t kMaxPickleMarkDepth = 32;         // nested MARKs
inline constexpr size_t kMaxPickleMemoEntries = 1 << 16;  // distinct memo indices
inline constexpr size_t kMaxPickleValues = 1 << 18;       // values created while reading
inline constexpr size_t kMaxWorkerAddresses = 1 << 16;    // (ip, port) pairs in one dict
inline constexpr size_t kMaxWorkerIpBytes = 64;           // one ip str in that dict
inline constexpr size_t kWorkerKeyBytes = 32;             // secret.make_secret_key()

// ---- Writer: protocol 4, byte-identical to CPython's `pickle.dumps(obj, protocol=4)` (C pickler
// of 3.8+; checked against 3.11) with Horovod's classes (and to protocol 5 output except byte 1).
// The HostUpdateResult is written in value form, REDUCE(HostUpdateResult, (int,)), which every
// Python 3 version loads.

// PingRequest().
std::string EncodePingRequest();

// HostsUpdatedRequest(timestamp, res). Timestamps of 2^31 and above (or below -2^31) become LONG1.
std::string EncodeHostsUpdatedRequest(int64_t timestamp, HostUpdateResult res);

// PingResponse(service_name, source_address), what a worker answers a ping with.
std::string EncodePingResponse(std::string_view service_name, std::string_view source_address);

// AckResponse(), what a worker answers a notification with.
std::string EncodeAckResponse();

// (addresses, key), the value a worker PUTs to /worker_addresses (§4.4). Interface names are
// written as given; a Python dict could not hold one twice, so callers should not repeat them.
std::string EncodeWorkerAddresses(const WorkerAddresses& addresses, std::string_view key);

// Base64 of EncodeWorkerAddresses: the exact HTTP body of PUT /worker_addresses/<host>:<lr>.
std::string EncodeWorkerAddressesBody(const WorkerAddresses& addresses, std::string_view key);

// ---- Reader. Each decoder returns true when `bytes` is exactly one pickle (PROTO 2-5 ... STOP,
// nothing after) of the named object; otherwise false with *err set and the outputs unchanged.
// Instances must carry exactly the attributes Horovod's __init__ sets.

bool DecodePingRequest(std::string_view bytes, std::string* err);

// service_name and source_address must be str.
bool DecodePingResponse(std::string_view bytes, std::string* service_name,
                        std::string* source_address, std::string* err);

bool DecodeAckResponse(std::string_view bytes, std::string* err);

// timestamp must be an int (any int64); res a HostUpdateResult in value form, name form
// (builtins.getattr(HostUpdateResult, 'added')), or-combined name form (_operator.or_), or a plain
// int, with a value in 0..3.
bool DecodeHostsUpdatedRequest(std::string_view bytes, int64_t* timestamp, HostUpdateResult* res,
                               std::string* err);

// ({str: [(str, int), ...], ...}, bytes): interface order kept (a key set twice keeps its first
// position and its last value, as in Python), empty dicts and lists allowed, ip strs of at most
// kMaxWorkerIpBytes, ports in 1..65535, key exactly kWorkerKeyBytes long, at most
// kMaxWorkerAddresses pairs in all (counting lists that are shared or replaced each time).
bool DecodeWorkerAddresses(std::string_view bytes, WorkerAddresses* addresses, std::string* key,
                           std::string* err);

// Base64Decode then DecodeWorkerAddresses: reads the body of PUT /worker_addresses/<host>:<lr>.
bool DecodeWorkerAddressesBody(std::string_view base64_text, WorkerAddresses* addresses,
                               std::string* key, std::string* err);

// ---- Base64 (RFC 4648 standard alphabet, '=' padding, as Python's base64.b64encode).

std::string Base64Encode(std::string_view bytes);

// Strict: the length must be a multiple of 4 with canonical padding and zero pad bits; the only
// thing ignored is one trailing "\n". Returns false and sets *err on anything else (*out is then
// unchanged).
bool Base64Decode(std::string_view text, std::string* out, std::string* err);

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_PICKLE_H_
