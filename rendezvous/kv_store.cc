#include "rendezvous/kv_store.h"

#include <algorithm>

namespace etrun::rendezvous {

namespace {

size_t EntryBytes(std::string_view name, const std::string& value) {
  return name.size() + value.size() + KvStore::kEntryOverhead;
}

}  // namespace

void KvStore::Init(const std::vector<SlotInfo>& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  values_.clear();
  bytes_ = 0;
  ResizeLocked(plan);
}

void KvStore::Resize(const std::vector<SlotInfo>& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  ResizeLocked(plan);
}

void KvStore::ResizeLocked(const std::vector<SlotInfo>& plan) {
  ++generation_;
  finished_.clear();
  scope_size_.clear();
  for (const SlotInfo& slot : plan) {
    size_t n = static_cast<size_t>(slot.size > 0 ? slot.size : 0);
    byte_cap_ = std::max(byte_cap_, n * n * 1024);
    scope_size_["global"] = slot.size;
    scope_size_["local_" + slot.hostname] = slot.local_size;
    scope_size_["cross_" + std::to_string(slot.local_rank)] = slot.cross_size;
  }
}

std::optional<std::string> KvStore::Get(std::string_view scope, std::string_view key) const {
  KvValue value = Find(scope, key);
  if (!value) return std::nullopt;
  return *value;
}

KvValue KvStore::Find(std::string_view scope, std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = values_.find(scope);
  if (s == values_.end()) return nullptr;
  auto k = s->second.find(key);
  if (k == s->second.end()) return nullptr;
  return k->second;
}

KvValue KvStore::FindOrWait(std::string_view scope, std::string_view key,
                            std::function<void(KvValue)> waiter, uint64_t* ticket, size_t max_waiters) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto s = values_.find(scope); s != values_.end()) {
    if (auto k = s->second.find(key); k != s->second.end()) return k->second;
  }
  if (waiters_.size() >= max_waiters) {
    *ticket = 0;
    return nullptr;
  }
  *ticket = next_ticket_++;
  waiters_.emplace(*ticket, Waiter{std::string(scope), std::string(key), std::move(waiter)});
  waiting_.emplace(std::make_pair(std::string(scope), std::string(key)), *ticket);
  return nullptr;
}

bool KvStore::CancelWait(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto w = waiters_.find(ticket);
  if (w == waiters_.end()) return false;
  auto [first, last] = waiting_.equal_range(std::make_pair(w->second.scope, w->second.key));
  for (auto it = first; it != last; ++it) {
    if (it->second == ticket) {
      waiting_.erase(it);
      break;
    }
  }
  waiters_.erase(w);
  return true;
}

std::vector<std::function<void(KvValue)>> KvStore::TakeWaiters(std::string_view scope,
                                                                std::string_view key) {
  std::vector<std::function<void(KvValue)>> calls;
  if (waiting_.empty()) return calls;
  auto [first, last] = waiting_.equal_range(std::make_pair(std::string(scope), std::string(key)));
  for (auto it = first; it != last; ++it) {
    auto w = waiters_.find(it->second);
    calls.push_back(std::move(w->second.call));
    waiters_.erase(w);
  }
  waiting_.erase(first, last);
  return calls;
}

bool KvStore::Put(std::string_view scope, std::string_view key, std::string value) {
  auto shared = std::make_shared<const std::string>(std::move(value));
  std::vector<std::function<void(KvValue)>> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto s = values_.find(scope);
    size_t added = EntryBytes(key, *shared), freed = 0;
    if (s == values_.end()) {
      added += EntryBytes(scope, "");
    } else if (auto k = s->second.find(key); k != s->second.end()) {
      freed = EntryBytes(key, *k->second);
    }
    if (bytes_ - freed + added > byte_cap_) return false;
    bytes_ = bytes_ - freed + added;
    if (s == values_.end()) s = values_.emplace(std::string(scope), decltype(values_)::mapped_type()).first;
    auto k = s->second.find(key);
    if (k == s->second.end()) {
      s->second.emplace(std::string(key), shared);
    } else {
      k->second = shared;
    }
    waiters = TakeWaiters(scope, key);
    if (on_put_) on_put_(scope, key);
  }
  for (auto& call : waiters) call(shared);
  return true;
}

void KvStore::Erase(std::string_view scope, std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  EraseLocked(scope, key);
}

void KvStore::EraseLocked(std::string_view scope, std::string_view key) {
  auto s = values_.find(scope);
  if (s == values_.end()) return;
  if (auto k = s->second.find(key); k != s->second.end()) {
    bytes_ -= EntryBytes(key, *k->second);
    s->second.erase(k);
  }
  if (s->second.empty()) {
    bytes_ -= EntryBytes(scope, "");
    values_.erase(s);
  }
}

void KvStore::ClearScopeLocked(std::string_view scope) {
  auto s = values_.find(scope);
  if (s == values_.end()) return;
  for (const auto& [key, value] : s->second) bytes_ -= EntryBytes(key, *value);
  bytes_ -= EntryBytes(scope, "");
  values_.erase(s);
}

void KvStore::Delete(std::string_view scope, std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto size = scope_size_.find(scope);
  if (size != scope_size_.end()) {
    auto f = finished_.find(scope);
    if (f == finished_.end()) f = finished_.emplace(std::string(scope), decltype(finished_)::mapped_type()).first;
    f->second.emplace(key);
    if (static_cast<int>(f->second.size()) >= size->second) {
      ClearScopeLocked(scope);
      finished_.erase(f);
      if (on_scope_done_) on_scope_done_(scope);
    }
    return;
  }
  EraseLocked(scope, key);  // an ad-hoc scope loses its keys one DELETE at a time
}

size_t KvStore::scope_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_.size();
}

size_t KvStore::waiter_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

size_t KvStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t KvStore::byte_cap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return byte_cap_;
}

std::optional<int> KvStore::planned_size(std::string_view scope) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = scope_size_.find(scope);
  if (it == scope_size_.end()) return std::nullopt;
  return it->second;
}

}  // namespace etrun::rendezvous
