// libFuzzer target: arbitrary bytes as an HTTP request to the rendezvous server, decoded exactly
// as the server decodes them and, when they form a request, routed to the KV store. Checks that
// every outcome is one of the statuses the server may answer, and that a stored value reads back
// byte for byte. Run: scripts/fuzz.sh.
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
  static KvStore store;  // not copyable (its mutex): initialized in place, once
  static const bool planned = [] {
    store.Init({{"a", 0, 2, 0, 2, 0, 1}, {"a", 1, 2, 1, 2, 0, 1}});
    return true;
  }();
  (void)planned;
  HttpLimits limits;
  limits.max_header_bytes = 4096;
  limits.max_body_bytes = 1 << 16;
  HttpRequest request;
  int status = etrun::rendezvous::DecodeRequestBytes(
      std::string_view(reinterpret_cast<const char*>(data), size), limits, &request);
  if (status != 0) {
    if (status != -1 && status != 400 && status != 411 && status != 413) abort();
    return 0;
  }
  KvHandler handler(&store);
  bool is_put = request.method == "PUT";
  std::string target = request.target, body = request.body;
  int answered = 0;
  handler.Handle(std::move(request), [&answered](HttpResponse r) {
    ++answered;
    if (r.status != 200 && r.status != 400 && r.status != 404 && r.status != 405) abort();
  });
  if (answered != 1) abort();
  if (is_put) {  // a value just stored reads back intact
    std::string_view scope, key;
    if (etrun::rendezvous::SplitScopeKey(target, &scope, &key)) {
      auto got = store.Get(scope, key);
      if (!got || *got != body) abort();
    }
  }
  return 0;
}
