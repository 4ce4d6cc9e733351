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
  CHECK_FALSE(store.FindOrWait("global", "2", [&](etrun::rendezvous::KvValue v) { ++calls, got = v; }, &ticket));
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
  store.FindOrWait("global", "2", [&](etrun::rendezvous::KvValue) { ++calls; }, &first);
  store.FindOrWait("global", "2", [&](etrun::rendezvous::KvValue) { ++calls; }, &second);
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
