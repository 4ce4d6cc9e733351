// KvStore: the rendezvous key-value store Horovod workers use through HTTP (spec §4.2-4.3), with
// Horovod's semantics for arbitrary scope names. Init(plan) wipes everything and sizes the
// planned scopes (global, local_<host>, cross_<local_rank>); a planned scope is cleared once every
// member has sent DELETE; an ad-hoc scope (e.g. *_process_set_hash_*) loses keys one DELETE at a
// time. Unlike horovodrun, finishing one scope never resets another's bookkeeping (§9.11), and a
// repeated DELETE from the same key counts once. Values are opaque bytes, each kept as one
// immutable shared buffer that readers hold without copying (Find) even after it is replaced.
//
// A reader may wait for a key that is not set yet (Wait): the waiter is called once, by the Put
// that sets it. Clearing a scope or Init does not call waiters: they go on waiting for a value,
// as a polling worker would, until their owner cancels them (CancelWait, at its time bound).
//
// Bounded: the bytes it holds (each value, key and scope name, plus kEntryOverhead for each
// entry's bookkeeping) never pass its byte cap; a Put past it stores nothing and returns false.
// The cap is the larger of kMinByteCap (1 GiB) and 1 KiB per pair of workers (N² KiB for the
// largest world Init or Resize has sized): Gloo's address blobs are N-1 addresses of ~136 bytes
// from each of N workers, N² × 136 bytes per scope, and Horovod's six scopes (the local ones as
// big as the global ones when every worker is on one machine) do not all hold theirs at once.
// At most max_waiters waiters wait at once (FindOrWait).
//
// Thread-safe: one mutex guards everything. The driver calls Init/Resize/Erase, the server's
// threads Get/Put/Delete/Wait. The on_put and on_scope_done callbacks and the waiters run on the
// thread that made the change, the on_* callbacks with the store's lock held (so they see the
// changes in order, and generation() is the change's): they must not call the store; post instead.
#ifndef ETRUN_RENDEZVOUS_KV_STORE_H_
#define ETRUN_RENDEZVOUS_KV_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rendezvous/assign.h"

namespace etrun::rendezvous {

// A stored value: shared, never modified once stored.
using KvValue = std::shared_ptr<const std::string>;

class KvStore {
 public:
  static constexpr size_t kMinByteCap = size_t{1} << 30;
  static constexpr size_t kEntryOverhead = 128;  // a map node, its key string, the shared buffer

  // `min_byte_cap`: kMinByteCap, or less in tests.
  explicit KvStore(size_t min_byte_cap = kMinByteCap) : byte_cap_(min_byte_cap) {}

  // Drops every key of every scope and sizes the planned scopes from `plan`.
  void Init(const std::vector<SlotInfo>& plan);

  // Sizes the planned scopes from `plan` and forgets who finished, keeping every value: for a
  // round whose workers started ahead and already put their keys.
  void Resize(const std::vector<SlotInfo>& plan);

  // The value (a copy), or nullopt when the scope or key is missing. For tests and tools.
  std::optional<std::string> Get(std::string_view scope, std::string_view key) const;

  // The value's shared buffer, or null when the scope or key is missing.
  KvValue Find(std::string_view scope, std::string_view key) const;

  // Find, or when the key is missing, registers `waiter` to be called once with the value the
  // next Put of this key stores, and sets *ticket for CancelWait. Returns the value, or null
  // when the key is missing: then *ticket is 0 if `max_waiters` waiters were waiting already
  // (nothing registered; the caller answers at once), else the waiter's ticket.
  KvValue FindOrWait(std::string_view scope, std::string_view key,
                     std::function<void(KvValue)> waiter, uint64_t* ticket, size_t max_waiters);

  // Withdraws a waiter. True when it was still waiting (it will never be called); false when a
  // Put has called it or is calling it.
  bool CancelWait(uint64_t ticket);

  // Stores (overwrites) a value; empty values are values. Calls the key's waiters. Returns false,
  // storing nothing and calling no waiter, when the store would hold more than its byte cap.
  bool Put(std::string_view scope, std::string_view key, std::string value);

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

  // Counts Init and Resize calls: a callback can tell which round's store it saw.
  uint64_t generation() const { return generation_.load(); }

  // Introspection for tests and benchmarks.
  size_t scope_count() const;
  size_t waiter_count() const;
  size_t bytes() const;
  size_t byte_cap() const;
  std::optional<int> planned_size(std::string_view scope) const;

 private:
  struct Waiter {
    std::string scope, key;
    std::function<void(KvValue)> call;
  };
  void ResizeLocked(const std::vector<SlotInfo>& plan);
  void EraseLocked(std::string_view scope, std::string_view key);
  void ClearScopeLocked(std::string_view scope);
  // Moves the waiters of scope/key out of waiters_ (lock held).
  std::vector<std::function<void(KvValue)>> TakeWaiters(std::string_view scope, std::string_view key);

  // Set before the server starts, then read-only.
  std::function<void(std::string_view)> on_scope_done_;
  std::function<void(std::string_view, std::string_view)> on_put_;

  // Looked up by string_view without building a string (is_transparent, with std::equal_to<>).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>()(name); }
  };
  template <typename Value>
  using ByName = std::unordered_map<std::string, Value, NameHash, std::equal_to<>>;

  mutable std::mutex mu_;  // guards everything below
  // scope -> key -> value. Hashed: every request looks a key up here, and a scope of N workers
  // holds about 3N keys (an ordered map's walk and its string compares were a tenth of the
  // server's time in user space, perf at N = 256).
  ByName<ByName<KvValue>> values_;
  std::map<std::string, int, std::less<>> scope_size_;
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> finished_;
  std::map<uint64_t, Waiter> waiters_;  // by ticket
  std::multimap<std::pair<std::string, std::string>, uint64_t> waiting_;  // (scope, key) -> tickets
  uint64_t next_ticket_ = 1;
  size_t bytes_ = 0;     // held by values_, as counted above
  size_t byte_cap_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_KV_STORE_H_
