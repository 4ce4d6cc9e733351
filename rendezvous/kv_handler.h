// KvHandler: the HTTP routes of Horovod's rendezvous server over a KvStore (spec §4.2):
// `GET|PUT|DELETE /<scope>/<key>`. The target is split on '/' with no decoding (query strings
// stay part of the key). Other shapes answer 400, other methods 405. A value is answered from the
// store's shared buffer, never copied (HttpResponse::shared_body).
//
// Long-polling: given Deadlines and a hold bound, a GET of a key that is not set yet is held
// until a PUT sets it (then 200 with the value) or the bound passes (then the usual 404). Horovod's
// HTTPStore::wait polls a missing key every 10 ms (spec §4.5); held, a waiting worker costs one
// request per bound instead of a hundred a second, and sees the key as soon as it is set. Never
// held: Gloo's hostname keys `rank_<n>`, which connectFullMesh reads once with get() and whose
// 404 is an answer (gloo/rendezvous/context.cc), so holding would change what a worker sees.
// Without Deadlines (the default), a missing key is an immediate 404. At most kMaxHeldGets GETs
// are held at once; past that a missing key is an immediate 404 again, which Horovod's polling
// client takes as it always did (it asks again 10 ms later).
//
// A PUT the store cannot take (its byte cap, kv_store.h) answers 503 with a short body; Horovod's
// client retries it twice, then fails the worker: a store that full is not a job's own doing.
//
// Thread-safe (KvStore and Deadlines are): Handle may run on several threads at once.
#ifndef ETRUN_RENDEZVOUS_KV_HANDLER_H_
#define ETRUN_RENDEZVOUS_KV_HANDLER_H_

#include <chrono>
#include <string_view>

#include "rendezvous/deadlines.h"
#include "rendezvous/http_server.h"
#include "rendezvous/kv_store.h"

namespace etrun::rendezvous {

// How long a GET of a missing key is held (see above). Below HTTPRequest's client timeout (it has
// none: blocking connect and recv) and short beside HOROVOD_GLOO_TIMEOUT_SECONDS (default 30):
// HTTPStore::wait checks its timeout between polls, so it may throw up to one bound later.
inline constexpr std::chrono::milliseconds kGetHoldBound{1000};

// The most GETs held at once: 8 per worker of a 1,024-worker job, each of which polls one key
// at a time from its one rendezvous thread.
inline constexpr size_t kMaxHeldGets = 8192;

// The answer to a PUT the store has no room for.
HttpResponse StoreFullResponse(const KvStore& store);

// Splits "/scope/key" into its two parts; false for any other shape.
bool SplitScopeKey(std::string_view target, std::string_view* scope, std::string_view* key);

// Whether a GET of `key` may be held: every key but Gloo's `rank_<digits>` hostname keys.
bool MayHoldKey(std::string_view key);

class KvHandler : public HttpHandler {
 public:
  explicit KvHandler(KvStore* store) : store_(store) {}
  // Holds GETs of missing keys up to `bound`, timed by `deadlines` (which must outlive this).
  KvHandler(KvStore* store, Deadlines* deadlines, std::chrono::milliseconds bound)
      : store_(store), deadlines_(deadlines), bound_(bound) {}
  void Handle(HttpRequest&& request, Responder respond) override;

 private:
  void Get(std::string_view scope, std::string_view key, Responder respond);

  KvStore* store_;
  Deadlines* deadlines_ = nullptr;
  std::chrono::milliseconds bound_{0};
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_KV_HANDLER_H_
