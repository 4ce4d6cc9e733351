// Semantics of Horovod's rendezvous store (horovod/runner/http/http_server.py, spec 4.3).
#include "rendezvous/kv_store.h"

#include <doctest/doctest.h>

using etrun::rendezvous::KvStore;
using etrun::rendezvous::SlotInfo;

namespace {
// Two hosts: a has 2 slots, b has 1 (world 3).
std::vector<SlotInfo> Plan() {
  return {{"a", 0, 3, 0, 2, 0, 2}, {"a", 1, 3, 1, 2, 0, 1}, {"b", 2, 3, 0, 1, 1, 2}};
}
}  // namespace

TEST_CASE("init sizes global, local_<host> and cross_<local_rank> from the plan") {
  KvStore store;
  store.Init(Plan());
  CHECK(store.planned_size("global") == 3);
  CHECK(store.planned_size("local_a") == 2);
  CHECK(store.planned_size("local_b") == 1);
  CHECK(store.planned_size("cross_0") == 2);
  CHECK(store.planned_size("cross_1") == 1);
  CHECK_FALSE(store.planned_size("global_process_set_hash_1f").has_value());
}

TEST_CASE("values are opaque bytes; missing keys and scopes are absent") {
  KvStore store;
  store.Init(Plan());
  std::string blob("\x00\x01\xff\n", 4);
  store.Put("global", "0", blob);
  store.Put("global", "empty", "");
  CHECK(store.Get("global", "0") == std::string_view(blob));
  CHECK(store.Get("global", "empty") == std::string_view(""));
  CHECK_FALSE(store.Get("global", "1").has_value());
  CHECK_FALSE(store.Get("nope", "0").has_value());
  store.Put("global", "0", "new");
  CHECK(store.Get("global", "0") == std::string_view("new"));
}

TEST_CASE("a planned scope keeps every key until all members finished, then clears") {
  KvStore store;
  store.Init(Plan());
  for (const char* k : {"rank_0", "rank_1", "rank_2", "0", "1", "2"}) store.Put("global", k, "v");
  store.Delete("global", "0");
  store.Delete("global", "0");  // a repeated DELETE counts once
  store.Delete("global", "1");
  CHECK(store.Get("global", "2").has_value());  // a late reader still finds its value
  store.Delete("global", "2");
  CHECK_FALSE(store.Get("global", "rank_0").has_value());
  CHECK(store.scope_count() == 0);
}

TEST_CASE("finishing one scope leaves other scopes' counters alone (fixes spec 9.11)") {
  KvStore store;
  store.Init(Plan());
  store.Put("global", "0", "g");
  store.Put("local_a", "0", "l");
  store.Delete("global", "0");
  store.Delete("global", "1");
  store.Delete("local_a", "0");
  store.Delete("local_a", "1");  // local_a done: cleared
  CHECK_FALSE(store.Get("local_a", "0").has_value());
  store.Delete("global", "2");   // global's two earlier DELETEs still count
  CHECK_FALSE(store.Get("global", "0").has_value());
}

TEST_CASE("ad-hoc scopes lose keys one DELETE at a time") {
  KvStore store;
  store.Init(Plan());
  store.Put("global_process_set_hash_ab", "0", "x");
  store.Put("global_process_set_hash_ab", "1", "y");
  store.Delete("global_process_set_hash_ab", "0");
  CHECK_FALSE(store.Get("global_process_set_hash_ab", "0").has_value());
  CHECK(store.Get("global_process_set_hash_ab", "1") == std::string_view("y"));
  store.Delete("global_process_set_hash_ab", "1");
  CHECK(store.scope_count() == 0);
  store.Delete("never_seen", "k");  // harmless
}

TEST_CASE("init wipes every scope, planned or not") {
  KvStore store;
  store.Init(Plan());
  store.Put("global", "0", "x");
  store.Put("adhoc", "k", "y");
  store.Init({{"c", 0, 1, 0, 1, 0, 1}});
  CHECK(store.scope_count() == 0);
  CHECK(store.planned_size("global") == 1);
  CHECK_FALSE(store.planned_size("local_a").has_value());
}

TEST_CASE("a waiter is called once by the Put that sets its key, with the stored buffer") {
  KvStore store;
  store.Init(Plan());
  int calls = 0;
  etrun::rendezvous::KvValue got;
  uint64_t ticket = 0;
  CHECK_FALSE(store.FindOrWait("global", "2", [&](etrun::rendezvous::KvValue v) { ++calls, got = v; }, &ticket, 10));
  store.Put("global", "1", "other key");
  CHECK(calls == 0);
  store.Put("global", "2", "mine");
  CHECK(calls == 1);
  CHECK(got == store.Find("global", "2"));
  CHECK_FALSE(store.CancelWait(ticket));  // already called
  store.Put("global", "2", "again");
  CHECK(calls == 1);
}

TEST_CASE("a cancelled waiter is never called; Init and scope clearing call no waiter") {
  KvStore store;
  store.Init(Plan());
  int calls = 0;
  uint64_t first = 0, second = 0;
  store.FindOrWait("global", "2", [&](etrun::rendezvous::KvValue) { ++calls; }, &first, 10);
  store.FindOrWait("global", "2", [&](etrun::rendezvous::KvValue) { ++calls; }, &second, 10);
  CHECK(store.waiter_count() == 2);
  CHECK(store.CancelWait(first));
  store.Init(Plan());
  CHECK(calls == 0);
  store.Put("global", "2", "v");
  CHECK(calls == 1);  // the second one only
  CHECK(store.waiter_count() == 0);
}

TEST_CASE("Init and Resize count generations") {
  KvStore store;
  uint64_t g = store.generation();
  store.Init(Plan());
  store.Resize(Plan());
  CHECK(store.generation() == g + 2);
}

TEST_CASE("at most max_waiters wait; past that a missing key registers nothing") {
  KvStore store;
  uint64_t ticket = 0;
  CHECK_FALSE(store.FindOrWait("global", "1", [](etrun::rendezvous::KvValue) {}, &ticket, 1));
  CHECK(ticket != 0);
  CHECK_FALSE(store.FindOrWait("global", "2", [](etrun::rendezvous::KvValue) {}, &ticket, 1));
  CHECK(ticket == 0);
  CHECK(store.waiter_count() == 1);
  store.Put("global", "2", "v");  // a present key is still found, whatever the count
  CHECK(*store.FindOrWait("global", "2", [](etrun::rendezvous::KvValue) {}, &ticket, 1) == "v");
}

TEST_CASE("the store holds no more bytes than its cap; freed bytes make room again") {
  // Given a 1,000-byte cap (each entry costs its key, value and kEntryOverhead; a scope its
  // name and kEntryOverhead), Puts are taken until the next would pass it, then refused with
  // nothing stored; a replaced value counts once; deleting and Init free their bytes.
  KvStore store(1000);
  const size_t entry = KvStore::kEntryOverhead;
  CHECK(store.Put("s", "k", std::string(100, 'x')));
  CHECK(store.bytes() == (1 + entry) + (1 + 100 + entry));
  CHECK(store.Put("s", "k", std::string(200, 'y')));  // replaced, not added
  CHECK(store.bytes() == (1 + entry) + (1 + 200 + entry));
  CHECK_FALSE(store.Put("s", "big", std::string(1000, 'z')));
  CHECK_FALSE(store.Get("s", "big").has_value());
  int taken = 0;
  while (store.Put("s", "k" + std::to_string(taken), std::string(50, 'v'))) ++taken;
  CHECK(taken == 3);  // 1000 - 458 = 542 bytes left: three entries of 180
  CHECK(store.bytes() <= store.byte_cap());
  store.Delete("s", "k0");  // an ad-hoc scope loses the key and its bytes
  CHECK(store.Put("s", "kz", std::string(50, 'v')));
  store.Init(Plan());
  CHECK(store.bytes() == 0);
  CHECK(store.Put("global", "0", std::string(700, 'v')));
  store.Delete("global", "0");
  store.Delete("global", "1");
  store.Delete("global", "2");  // the planned scope is done: cleared
  CHECK(store.bytes() == 0);
}

TEST_CASE("the byte cap is 1 GiB, or 1 KiB per pair of workers of the largest world sized") {
  KvStore store;
  CHECK(store.byte_cap() == size_t{1} << 30);
  store.Init(Plan());
  CHECK(store.byte_cap() == size_t{1} << 30);
  std::vector<SlotInfo> big{{"a", 0, 2048, 0, 2048, 0, 1}};
  store.Resize(big);
  CHECK(store.byte_cap() == size_t{2048} * 2048 * 1024);  // 4 GiB
  store.Init(Plan());  // a smaller world later keeps the larger cap
  CHECK(store.byte_cap() == size_t{2048} * 2048 * 1024);
}
