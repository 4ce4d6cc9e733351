// KvHandler's answers without sockets: values served from the store's shared buffers, and GETs
// of missing keys held until the key is set or the bound passes (long-polling, Horovod's
// HTTPStore::wait against horovod/runner/http/http_server.py, spec 4.5).
#include "rendezvous/kv_handler.h"

#include <optional>
#include <vector>

#include <doctest/doctest.h>

using etrun::rendezvous::Deadlines;
using etrun::rendezvous::HttpRequest;
using etrun::rendezvous::HttpResponse;
using etrun::rendezvous::KvHandler;
using etrun::rendezvous::KvStore;
using etrun::rendezvous::MayHoldKey;

namespace {

// Deadlines that fire when the test says so.
class FakeDeadlines : public Deadlines {
 public:
  void After(std::chrono::milliseconds delay, std::function<void()> fn) override {
    delays.push_back(delay);
    pending.push_back(std::move(fn));
  }
  void FireAll() {
    auto fns = std::move(pending);
    pending.clear();
    for (auto& fn : fns) fn();
  }
  std::vector<std::chrono::milliseconds> delays;
  std::vector<std::function<void()>> pending;
};

// The answer to one request, if it came.
struct Answer {
  std::optional<HttpResponse> response;
  int calls = 0;
  std::function<void(HttpResponse)> Respond() {
    return [this](HttpResponse r) {
      response = std::move(r);
      ++calls;
    };
  }
  std::string body() const { return response->shared_body ? *response->shared_body : response->body; }
};

HttpRequest Request(std::string method, std::string target, std::string body = "") {
  return {std::move(method), std::move(target), std::move(body), ""};
}

// A store whose GETs of missing keys are held up to 1 s, the deadlines fired by hand.
struct HeldStore {
  KvStore store;
  FakeDeadlines deadlines;
  KvHandler handler{&store, &deadlines, std::chrono::milliseconds(1000)};
};

}  // namespace

TEST_CASE("a value is answered from the store's own buffer, not a copy") {
  KvStore store;
  KvHandler handler(&store);
  store.Put("global", "0", std::string(1000, 'v'));
  Answer a;
  handler.Handle(Request("GET", "/global/0"), a.Respond());
  REQUIRE(a.response);
  CHECK(a.response->status == 200);
  CHECK(a.response->shared_body == store.Find("global", "0"));  // the same buffer
  CHECK(a.body() == std::string(1000, 'v'));
}

TEST_CASE("without deadlines a missing key is an immediate 404") {
  KvStore store;
  KvHandler handler(&store);
  Answer a;
  handler.Handle(Request("GET", "/global/3"), a.Respond());
  REQUIRE(a.response);
  CHECK(a.response->status == 404);
}

TEST_CASE("a held GET is answered by the PUT that sets its key") {
  // Given a GET of a missing key, nothing is answered until a PUT, then 200 with its value once.
  HeldStore held;
  auto& [store, deadlines, handler] = held;
  Answer get, put;
  handler.Handle(Request("GET", "/global/3"), get.Respond());
  CHECK_FALSE(get.response);
  CHECK(deadlines.delays == std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(1000)});
  handler.Handle(Request("PUT", "/global/3", "addr"), put.Respond());
  REQUIRE(get.response);
  CHECK(get.response->status == 200);
  CHECK(get.body() == "addr");
  deadlines.FireAll();  // the bound passing later changes nothing
  CHECK(get.calls == 1);
  CHECK(store.waiter_count() == 0);
}

TEST_CASE("a held GET whose key stays missing gets the usual 404 at the bound") {
  HeldStore held;
  auto& [store, deadlines, handler] = held;
  Answer get;
  handler.Handle(Request("GET", "/global/3"), get.Respond());
  deadlines.FireAll();
  REQUIRE(get.response);
  CHECK(get.response->status == 404);
  CHECK(store.waiter_count() == 0);
  Answer put;  // a PUT after the bound finds no one waiting
  handler.Handle(Request("PUT", "/global/3", "late"), put.Respond());
  CHECK(get.calls == 1);
}

TEST_CASE("a present key is answered at once, held or not") {
  HeldStore held;
  auto& [store, deadlines, handler] = held;
  store.Put("global", "1", "x");
  Answer get;
  handler.Handle(Request("GET", "/global/1"), get.Respond());
  REQUIRE(get.response);
  CHECK(get.body() == "x");
  CHECK(deadlines.pending.empty());
}

TEST_CASE("Gloo's rank_<n> hostname keys are never held: their 404 is an answer") {
  // connectFullMesh reads rank_<i> once with get() and counts a 404 as another host.
  HeldStore held;
  auto& [store, deadlines, handler] = held;
  Answer get;
  handler.Handle(Request("GET", "/global/rank_0"), get.Respond());
  REQUIRE(get.response);
  CHECK(get.response->status == 404);
  CHECK(deadlines.pending.empty());
  CHECK_FALSE(MayHoldKey("rank_12"));
  CHECK(MayHoldKey("rank_"));
  CHECK(MayHoldKey("rank_x"));
  CHECK(MayHoldKey("12"));
  CHECK(MayHoldKey("host:0"));
}

TEST_CASE("a planned scope finished and cleared leaves held GETs waiting for a new value") {
  // Given the scope "scope finished" rule (every member DELETEd), a held GET of one of its keys
  // is not answered with a stale value: it waits, and gets 404 at the bound, as a poll would.
  HeldStore held;
  auto& [store, deadlines, handler] = held;
  store.Init({{"a", 0, 1, 0, 1, 0, 1}});
  Answer get, del;
  handler.Handle(Request("GET", "/global/5"), get.Respond());
  handler.Handle(Request("DELETE", "/global/0"), del.Respond());
  CHECK(store.scope_count() == 0);
  CHECK_FALSE(get.response);
  deadlines.FireAll();
  REQUIRE(get.response);
  CHECK(get.response->status == 404);
}

TEST_CASE("past kMaxHeldGets held GETs a missing key is an immediate 404 again") {
  // Given kMaxHeldGets GETs held, the next GET of a missing key is answered 404 at once, as an
  // unheld one (Horovod's client polls again); when one is released, holding resumes.
  HeldStore held;
  auto& [store, deadlines, handler] = held;
  std::vector<Answer> answers(etrun::rendezvous::kMaxHeldGets);
  for (size_t i = 0; i < answers.size(); ++i) {
    handler.Handle(Request("GET", "/global/k" + std::to_string(i)), answers[i].Respond());
  }
  CHECK(store.waiter_count() == etrun::rendezvous::kMaxHeldGets);
  Answer extra;
  handler.Handle(Request("GET", "/global/x"), extra.Respond());
  REQUIRE(extra.response);
  CHECK(extra.response->status == 404);
  Answer put;
  handler.Handle(Request("PUT", "/global/k0", "v"), put.Respond());
  CHECK(answers[0].calls == 1);
  Answer again;
  handler.Handle(Request("GET", "/global/y"), again.Respond());
  CHECK_FALSE(again.response);  // held
  deadlines.FireAll();
  CHECK(again.response->status == 404);
}

TEST_CASE("a PUT the store has no room for is answered 503 with a short body") {
  KvStore store(300);
  KvHandler handler(&store);
  Answer put;
  handler.Handle(Request("PUT", "/global/0", std::string(400, 'x')), put.Respond());
  REQUIRE(put.response);
  CHECK(put.response->status == 503);
  CHECK(put.body() == "the rendezvous store is full (0 MiB): no more keys are taken\n");
  CHECK_FALSE(store.Get("global", "0").has_value());
}
