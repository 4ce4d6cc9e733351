#include "rendezvous/kv_handler.h"

namespace etrun::rendezvous {

bool SplitScopeKey(std::string_view target, std::string_view* scope, std::string_view* key) {
  if (target.empty() || target[0] != '/') return false;
  target.remove_prefix(1);
  size_t slash = target.find('/');
  if (slash == std::string_view::npos || target.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  *scope = target.substr(0, slash);
  *key = target.substr(slash + 1);
  return true;
}

bool MayHoldKey(std::string_view key) {
  if (!key.starts_with("rank_") || key.size() == 5) return true;
  for (char c : key.substr(5)) {
    if (c < '0' || c > '9') return true;
  }
  return false;
}

HttpResponse StoreFullResponse(const KvStore& store) {
  return {503, "the rendezvous store is full (" + std::to_string(store.byte_cap() >> 20) +
                   " MiB): no more keys are taken\n"};
}

void KvHandler::Handle(HttpRequest&& request, Responder respond) {
  std::string_view scope, key;
  if (!SplitScopeKey(request.target, &scope, &key)) return respond({400, ""});
  if (request.method == "GET") return Get(scope, key, std::move(respond));
  if (request.method == "PUT") {
    if (!store_->Put(scope, key, std::move(request.body))) return respond(StoreFullResponse(*store_));
    return respond({200, ""});
  }
  if (request.method == "DELETE") {
    store_->Delete(scope, key);
    return respond({200, ""});
  }
  respond({405, ""});
}

void KvHandler::Get(std::string_view scope, std::string_view key, Responder respond) {
  // Most GETs find their key: they are answered without the waiter below (a callback holding a
  // copy of `respond`, an allocation) ever being made.
  if (KvValue value = store_->Find(scope, key)) return respond({200, std::move(value)});
  if (deadlines_ == nullptr || bound_.count() <= 0 || !MayHoldKey(key)) return respond({404, ""});
  // Exactly one of the two answers: the Put that calls the waiter, or the deadline whose
  // CancelWait finds it still waiting. FindOrWait looks again, under the lock that a Put since
  // the look above would have taken.
  uint64_t ticket = 0;
  KvValue value = store_->FindOrWait(
      scope, key, [respond](KvValue v) { respond({200, std::move(v)}); }, &ticket, kMaxHeldGets);
  if (value) return respond({200, std::move(value)});
  if (ticket == 0) return respond({404, ""});  // kMaxHeldGets are held: answered as unheld
  KvStore* store = store_;
  deadlines_->After(bound_, [store, ticket, respond = std::move(respond)] {
    if (store->CancelWait(ticket)) respond({404, ""});
  });
}

}  // namespace etrun::rendezvous
