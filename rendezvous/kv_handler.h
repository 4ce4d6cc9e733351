// KvHandler: the HTTP routes of Horovod's rendezvous server over a KvStore (spec §4.2):
// `GET|PUT|DELETE /<scope>/<key>`. The target is split on '/' with no decoding (query strings
// stay part of the key). Other shapes answer 400, other methods 405. Driver thread only.
#ifndef ETRUN_RENDEZVOUS_KV_HANDLER_H_
#define ETRUN_RENDEZVOUS_KV_HANDLER_H_

#include <string_view>

#include "rendezvous/http_server.h"
#include "rendezvous/kv_store.h"

namespace etrun::rendezvous {

// Splits "/scope/key" into its two parts; false for any other shape.
bool SplitScopeKey(std::string_view target, std::string_view* scope, std::string_view* key);

class KvHandler : public HttpHandler {
 public:
  explicit KvHandler(KvStore* store) : store_(store) {}
  void Handle(HttpRequest request, std::function<void(HttpResponse)> respond) override;

 private:
  KvStore* store_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_KV_HANDLER_H_
