// KvClient: a small blocking HTTP/1.1 client for etrun's rendezvous store (spec §4.2: PUT, GET,
// DELETE /<scope>/<key>; GET of a missing key answers 404 at once, so readers poll). One TCP
// connection per request ("Connection: close"), every wait bounded by a deadline. All keys live
// in one scope of etrun-smoke's own (kSmokeScope), which no Horovod worker uses. Not
// thread-safe; one per rank.
#ifndef ETRUN_SMOKE_KV_CLIENT_H_
#define ETRUN_SMOKE_KV_CLIENT_H_

#include <chrono>
#include <string>
#include <string_view>

#include "smoke/socket.h"

namespace etrun::smoke {

inline constexpr std::string_view kSmokeScope = "etrun-smoke";

enum class ParseStatus { kComplete, kIncomplete, kMalformed };

// Parses an HTTP/1.x response held in `raw`: the status code and a body framed by
// Content-Length (any capitalization) or, without one, everything after the headers (the
// response then ends when the connection does: `at_eof`). *err says what is malformed.
ParseStatus ParseHttpResponse(std::string_view raw, bool at_eof, int* status, std::string* body,
                              std::string* err);

class KvClient {
 public:
  // `address:port` is the store (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT); `io_timeout` bounds each
  // request (connect, send, answer).
  KvClient(std::string address, int port, std::chrono::milliseconds io_timeout);

  // Stores `value` (any bytes) under `key`.
  bool Put(std::string_view key, std::string_view value, std::string* err);
  // *found is false after a 404; *value is then unchanged.
  bool Get(std::string_view key, std::string* value, bool* found, std::string* err);
  // Polls until `key` exists (first at once, then every few milliseconds) or `timeout` passes:
  // then false with *err "timed out after N s waiting for <key>".
  bool WaitFor(std::string_view key, std::chrono::milliseconds timeout, std::string* value,
               std::string* err);
  // "Finished with key": the store drops it (etrun-smoke's scope is ad hoc, spec §4.3).
  bool Delete(std::string_view key, std::string* err);

  // The local IPv4 address of the last connection to the store: an address on the route to
  // etrun, where peers that reach the store can most likely reach this rank too.
  const std::string& local_address() const { return local_address_; }

  // "127.0.0.1:4321", for messages.
  std::string where() const { return address_ + ":" + std::to_string(port_); }

 private:
  // One request; *status is the HTTP status. False on I/O or protocol errors.
  bool Request(std::string_view method, std::string_view key, std::string_view body, int* status,
               std::string* response_body, std::string* err);

  std::string address_;
  int port_;
  std::chrono::milliseconds io_timeout_;
  std::string local_address_;
};

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_KV_CLIENT_H_
