// KvStore: the rendezvous key-value store Horovod workers use through HTTP (spec §4.2-4.3), with
// Horovod's semantics for arbitrary scope names. Init(plan) wipes everything and sizes the
// planned scopes (global, local_<host>, cross_<local_rank>); a planned scope is cleared once every
// member has sent DELETE; an ad-hoc scope (e.g. *_process_set_hash_*) loses keys one DELETE at a
// time. Unlike horovodrun, finishing one scope never resets another's bookkeeping (§9.11), and a
// repeated DELETE from the same key counts once. Values are opaque bytes. Not thread-safe: owned
// by the driver's event loop.
#ifndef ETRUN_RENDEZVOUS_KV_STORE_H_
#define ETRUN_RENDEZVOUS_KV_STORE_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/assign.h"

namespace etrun::rendezvous {

class KvStore {
 public:
  // Drops every key of every scope and sizes the planned scopes from `plan`.
  void Init(const std::vector<SlotInfo>& plan);

  // Sizes the planned scopes from `plan` and forgets who finished, keeping every value: for a
  // round whose workers started ahead and already put their keys.
  void Resize(const std::vector<SlotInfo>& plan);

  // The value, or nullopt when the scope or key is missing (a worker then sees 404 at once).
  std::optional<std::string_view> Get(std::string_view scope, std::string_view key) const;

  // Stores (overwrites) a value; empty values are values.
  void Put(std::string_view scope, std::string_view key, std::string value);

  // "Key finished with scope" (see above).
  void Delete(std::string_view scope, std::string_view key);

  // Removes a key outright (a process that put it was replaced before its round opened).
  void Erase(std::string_view scope, std::string_view key);

  // Called when every member of a planned scope has sent DELETE (its rendezvous is complete),
  // with the scope's name: "global" completing means the round's whole world met.
  void set_on_scope_done(std::function<void(std::string_view scope)> callback) {
    on_scope_done_ = std::move(callback);
  }
  // Called after every Put, with its scope and key.
  void set_on_put(std::function<void(std::string_view scope, std::string_view key)> callback) {
    on_put_ = std::move(callback);
  }

  // Introspection for tests and benchmarks.
  size_t scope_count() const { return values_.size(); }
  std::optional<int> planned_size(std::string_view scope) const;

 private:
  std::map<std::string, std::map<std::string, std::string, std::less<>>, std::less<>> values_;
  std::map<std::string, int, std::less<>> scope_size_;
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> finished_;
  std::function<void(std::string_view)> on_scope_done_;
  std::function<void(std::string_view, std::string_view)> on_put_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_KV_STORE_H_
