// libFuzzer target: arbitrary bytes as an HTTP request to the rendezvous server, decoded exactly
// as the server decodes them and, when they form a request, routed to the KV store. Checks that
// every outcome is one of the statuses the server may answer, that the server's own parser of
// simple heads (ParseSimpleHead) makes of the bytes exactly what Beast alone makes of them, and
// that a stored value reads back byte for byte. The caps are small enough to be reached: bodies past 4 KiB in flight (503 before
// the body is read) and a store of 64 KiB (a PUT past it: 503, nothing stored). Run:
// scripts/fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rendezvous/http_request.h"
#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"

using etrun::rendezvous::HttpLimits;
using etrun::rendezvous::HttpRequest;
using etrun::rendezvous::HttpResponse;
using etrun::rendezvous::KvHandler;
using etrun::rendezvous::KvStore;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static KvStore store(64 << 10);  // not copyable (its mutex): initialized in place, once
  static const bool planned = [] {
    store.Init({{"a", 0, 2, 0, 2, 0, 1}, {"a", 1, 2, 1, 2, 0, 1}});
    return true;
  }();
  (void)planned;
  HttpLimits limits;
  limits.max_header_bytes = 4096;
  limits.max_body_bytes = 1 << 16;
  limits.max_body_bytes_in_flight = 1 << 12;
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  HttpRequest request, beasts;
  bool keep_alive = false, beasts_keep_alive = false;
  int status = etrun::rendezvous::DecodeRequestBytes(raw, limits, &request, &keep_alive);
  int beasts_status = etrun::rendezvous::DecodeRequestBytes(raw, limits, &beasts, &beasts_keep_alive,
                                                            etrun::rendezvous::Decoder::kBeastOnly);
  if (status != beasts_status) abort();
  if (status == 0 && (request.method != beasts.method || request.target != beasts.target ||
                      request.body != beasts.body || request.authorization != beasts.authorization ||
                      keep_alive != beasts_keep_alive)) {
    abort();
  }
  if (status != 0) {
    if (status != -1 && status != 400 && status != 411 && status != 413 && status != 503) abort();
    return 0;
  }
  KvHandler handler(&store);
  bool is_put = request.method == "PUT";
  std::string target = request.target, body = request.body;
  int answered = 0, answer = 0;
  handler.Handle(std::move(request), [&answered, &answer](HttpResponse r) {
    ++answered;
    answer = r.status;
    if (r.status != 200 && r.status != 400 && r.status != 404 && r.status != 405 && r.status != 503) abort();
  });
  if (answered != 1) abort();
  if (store.bytes() > store.byte_cap()) abort();
  // 503 only for a PUT that did not fit: its key, scope, value and two entries' overhead at most.
  if (answer == 503 &&
      (!is_put || store.bytes() + target.size() + body.size() + 2 * KvStore::kEntryOverhead <= store.byte_cap())) {
    abort();
  }
  if (is_put && answer == 200) {  // a value just stored reads back intact
    std::string_view scope, key;
    if (etrun::rendezvous::SplitScopeKey(target, &scope, &key)) {
      auto got = store.Get(scope, key);
      if (!got || *got != body) abort();
    }
  }
  return 0;
}
