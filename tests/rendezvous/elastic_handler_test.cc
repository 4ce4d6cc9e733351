// The elastic endpoints of the rendezvous server (spec 4.4) over real sockets, with a fake
// driver behind ElasticHooks.
#include "rendezvous/elastic_handler.h"

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include <doctest/doctest.h>

#include "tests/rendezvous/http_test_util.h"

using etrun::rendezvous::ElasticHooks;
using etrun::rendezvous::EventLoop;
using etrun::rendezvous::FormatRankAndSize;
using etrun::rendezvous::HttpServer;
using etrun::rendezvous::KvStore;
using etrun::rendezvous::ParseSlotKey;
using etrun::rendezvous::RendezvousHandler;
using etrun::rendezvous::SlotInfo;
using etrun::rendezvous::WorkerRegistration;
using etrun::testing::Body;
using etrun::testing::CppClient;
using etrun::testing::Exchange;
using etrun::testing::Status;

namespace {

// Records what the HTTP layer asked; the test decides when and how to answer.
class FakeDriver : public ElasticHooks {
 public:
  void RecordReady(const std::string& host, int local_rank,
                   std::function<void(std::optional<SlotInfo>)> reply) override {
    std::lock_guard<std::mutex> lock(mutex);
    ready.push_back(host + ":" + std::to_string(local_rank));
    pending.push_back(std::move(reply));
  }
  void RegisterWorker(WorkerRegistration registration, std::function<void(bool)> done) override {
    std::lock_guard<std::mutex> lock(mutex);
    registered.push_back(std::move(registration));
    done(accept_registrations);
  }
  size_t ready_count() {
    std::lock_guard<std::mutex> lock(mutex);
    return ready.size();
  }
  std::mutex mutex;
  std::vector<std::string> ready;
  std::vector<std::function<void(std::optional<SlotInfo>)>> pending;
  std::vector<WorkerRegistration> registered;
  bool accept_registrations = true;
};

struct Server {
  Server() : handler(&store, &driver), server(&loop, &handler) {
    store.Init({{"hostA", 0, 1, 0, 1, 0, 1}});
    std::string err;
    REQUIRE(server.Listen("127.0.0.1", 0, &err));
    thread = std::thread([this] { loop.Run(); });
  }
  ~Server() {
    loop.Post([this] {
      server.Stop();
      loop.Stop();
    });
    thread.join();
  }
  // Runs f on the server's thread and waits for it.
  void OnLoop(std::function<void()> f) {
    std::promise<void> done;
    loop.Post([&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }
  EventLoop loop;
  KvStore store;
  FakeDriver driver;
  RendezvousHandler handler;
  HttpServer server;
  std::thread thread;
};

// Waits until the server has handed `count` rank_and_size requests to the driver. False after
// `limit`: the test then fails with its own message instead of spinning for ever.
bool WaitForReady(FakeDriver* driver, size_t count,
                  std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (driver->ready_count() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The exact body Horovod's worker sends for ({'lo': [('127.0.0.1', 40000)]}, bytes(range(32))).
const char* kAddressesBody =
    "gAWVQgAAAAAAAAB9lIwCbG+UXZSMCTEyNy4wLjAuMZRNQJyGlGFzQyAAAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eH5SGlC4=";

}  // namespace

TEST_CASE("rank_and_size is held until the driver's barrier opens, then answered as CSV") {
  Server s;
  auto answer = std::async(std::launch::async, [&] {
    return Exchange(s.server.port(), CppClient("GET", "/rank_and_size/hostA:0"));
  });
  REQUIRE_MESSAGE(WaitForReady(&s.driver, 1),
                  "GET /rank_and_size did not reach the driver within 10 s");
  CHECK(answer.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  s.OnLoop([&] { s.driver.pending[0](SlotInfo{"hostA", 1, 3, 0, 1, 1, 3}); });
  std::string r = answer.get();
  CHECK(Status(r) == 200);
  CHECK(Body(r) == "1,3,0,1,1,3");
  CHECK(s.driver.ready == std::vector<std::string>{"hostA:0"});
}

TEST_CASE("a slot without assignment gets minus ones, never a 404") {
  Server s;
  auto answer = std::async(std::launch::async, [&] {
    return Exchange(s.server.port(), CppClient("GET", "/rank_and_size/gone-host:3"));
  });
  REQUIRE_MESSAGE(WaitForReady(&s.driver, 1),
                  "GET /rank_and_size did not reach the driver within 10 s");
  s.OnLoop([&] { s.driver.pending[0](std::nullopt); });
  std::string r = answer.get();
  CHECK(Status(r) == 200);
  CHECK(Body(r) == "-1,-1,-1,-1,-1,-1");
  CHECK(s.driver.ready == std::vector<std::string>{"gone-host:3"});
}

TEST_CASE("worker_addresses is decoded safely and handed to the driver") {
  Server s;
  std::string r = Exchange(s.server.port(), CppClient("PUT", "/worker_addresses/hostA:0", kAddressesBody));
  CHECK(Status(r) == 200);
  REQUIRE(s.driver.registered.size() == 1);
  const WorkerRegistration& reg = s.driver.registered[0];
  CHECK(reg.host == "hostA");
  CHECK(reg.local_rank == 0);
  REQUIRE(reg.addresses.size() == 1);
  CHECK(reg.addresses[0].name == "lo");
  REQUIRE(reg.addresses[0].addresses.size() == 1);
  CHECK(reg.addresses[0].addresses[0].ip == "127.0.0.1");
  CHECK(reg.addresses[0].addresses[0].port == 40000);
  std::string key;
  for (int i = 0; i < 32; ++i) key.push_back(static_cast<char>(i));
  CHECK(reg.key == key);
  // horovodrun also keeps the raw body in the store.
  CHECK(Body(Exchange(s.server.port(), CppClient("GET", "/worker_addresses/hostA:0"))) == kAddressesBody);
}

TEST_CASE("a refused registration is a 500 and unreadable ones are 400s") {
  Server s;
  s.driver.accept_registrations = false;
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/worker_addresses/hostA:0", kAddressesBody))) == 500);
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/worker_addresses/hostA:0", "not base64!"))) == 400);
  // cos\nsystem\n... : a pickle that would run code under Python's pickle is rejected unread.
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/worker_addresses/hostA:0", "Y29zCnN5c3RlbQooUydlY2hvIGhpJwp0Ui4="))) == 400);
  CHECK(s.driver.registered.size() == 1);  // only the well-formed one reached the driver
}

TEST_CASE("bad slot keys and methods are answered without reaching the driver") {
  Server s;
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/rank_and_size/hostA"))) == 400);
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/rank_and_size/:0"))) == 400);
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/rank_and_size/hostA:x"))) == 400);
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/rank_and_size/hostA:0", "1"))) == 405);
  CHECK(s.driver.ready_count() == 0);
  // Other scopes are the KV store as usual.
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 404);
}

TEST_CASE("slot keys and CSV formatting") {
  std::string host;
  int lr = -1;
  CHECK(ParseSlotKey("node-1.example:12", &host, &lr));
  CHECK(host == "node-1.example");
  CHECK(lr == 12);
  CHECK_FALSE(ParseSlotKey("node:-1", &host, &lr));
  CHECK_FALSE(ParseSlotKey("node:99999999999", &host, &lr));
  CHECK(FormatRankAndSize(SlotInfo{"h", 0, 2, 0, 1, 0, 2}) == "0,2,0,1,0,2");
}

TEST_CASE("PostedHooks hands every driver call to the driver's loop, in order") {
  // Given a queue standing in for the driver's loop, nothing reaches the driver until the queue
  // runs; then the calls arrive in the order the server threads made them.
  FakeDriver driver;
  std::vector<std::function<void()>> loop;
  etrun::rendezvous::PostedHooks hooks(&driver, [&loop](std::function<void()> fn) { loop.push_back(std::move(fn)); });
  std::optional<SlotInfo> answer;
  hooks.RecordReady("hostA", 0, [&answer](std::optional<SlotInfo> slot) { answer = slot; });
  bool accepted = false;
  WorkerRegistration registration;
  registration.host = "hostB";
  hooks.RegisterWorker(registration, [&accepted](bool ok) { accepted = ok; });
  CHECK(driver.ready.empty());
  CHECK(driver.registered.empty());
  for (auto& fn : loop) fn();
  CHECK(driver.ready == std::vector<std::string>{"hostA:0"});
  REQUIRE(driver.registered.size() == 1);
  CHECK(driver.registered[0].host == "hostB");
  CHECK(accepted);
  driver.pending[0](SlotInfo{"hostA", 0, 1, 0, 1, 0, 1});
  CHECK(answer.has_value());
}
