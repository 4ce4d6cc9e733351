#include "rendezvous/kv_store.h"

namespace etrun::rendezvous {

void KvStore::Init(const std::vector<SlotInfo>& plan) {
  values_.clear();
  Resize(plan);
}

void KvStore::Resize(const std::vector<SlotInfo>& plan) {
  finished_.clear();
  scope_size_.clear();
  for (const SlotInfo& slot : plan) {
    scope_size_["global"] = slot.size;
    scope_size_["local_" + slot.hostname] = slot.local_size;
    scope_size_["cross_" + std::to_string(slot.local_rank)] = slot.cross_size;
  }
}

std::optional<std::string_view> KvStore::Get(std::string_view scope, std::string_view key) const {
  auto s = values_.find(scope);
  if (s == values_.end()) return std::nullopt;
  auto k = s->second.find(key);
  if (k == s->second.end()) return std::nullopt;
  return std::string_view(k->second);
}

void KvStore::Put(std::string_view scope, std::string_view key, std::string value) {
  auto s = values_.find(scope);
  if (s == values_.end()) s = values_.emplace(std::string(scope), decltype(values_)::mapped_type()).first;
  auto k = s->second.find(key);
  if (k == s->second.end()) {
    s->second.emplace(std::string(key), std::move(value));
  } else {
    k->second = std::move(value);
  }
  if (on_put_) on_put_(scope, key);
}

void KvStore::Erase(std::string_view scope, std::string_view key) {
  auto s = values_.find(scope);
  if (s == values_.end()) return;
  if (auto k = s->second.find(key); k != s->second.end()) s->second.erase(k);
  if (s->second.empty()) values_.erase(s);
}

void KvStore::Delete(std::string_view scope, std::string_view key) {
  auto size = scope_size_.find(scope);
  if (size != scope_size_.end()) {
    auto f = finished_.find(scope);
    if (f == finished_.end()) f = finished_.emplace(std::string(scope), decltype(finished_)::mapped_type()).first;
    f->second.emplace(key);
    if (static_cast<int>(f->second.size()) >= size->second) {
      if (auto s = values_.find(scope); s != values_.end()) values_.erase(s);
      finished_.erase(f);
      if (on_scope_done_) on_scope_done_(scope);
    }
    return;
  }
  Erase(scope, key);  // an ad-hoc scope loses its keys one DELETE at a time
}

std::optional<int> KvStore::planned_size(std::string_view scope) const {
  auto it = scope_size_.find(scope);
  if (it == scope_size_.end()) return std::nullopt;
  return it->second;
}

}  // namespace etrun::rendezvous
