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

void KvHandler::Handle(HttpRequest request, std::function<void(HttpResponse)> respond) {
  std::string_view scope, key;
  if (!SplitScopeKey(request.target, &scope, &key)) return respond({400, ""});
  if (request.method == "GET") {
    auto value = store_->Get(scope, key);
    if (!value) return respond({404, ""});
    return respond({200, std::string(*value)});
  }
  if (request.method == "PUT") {
    store_->Put(scope, key, std::move(request.body));
    return respond({200, ""});
  }
  if (request.method == "DELETE") {
    store_->Delete(scope, key);
    return respond({200, ""});
  }
  respond({405, ""});
}

}  // namespace etrun::rendezvous
