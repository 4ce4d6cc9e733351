// A real etrun rendezvous store (KvStore + KvHandler + HttpServer) on a loopback port, served
// by its own thread, for tests of etrun-smoke's client and ring against the actual server.
#ifndef ETRUN_TESTS_SMOKE_TEST_STORE_H_
#define ETRUN_TESTS_SMOKE_TEST_STORE_H_

#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "rendezvous/event_loop.h"
#include "rendezvous/http_server.h"
#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"

namespace etrun::testing {

class TestStore {
 public:
  TestStore() : handler_(&store_), server_(&loop_, &handler_) {
    std::string err;
    REQUIRE(server_.Listen("127.0.0.1", 0, &err));
    thread_ = std::thread([this] { loop_.Run(); });
  }
  ~TestStore() {
    loop_.Post([this] {
      server_.Stop();
      loop_.Stop();
    });
    thread_.join();
  }
  TestStore(const TestStore&) = delete;
  TestStore& operator=(const TestStore&) = delete;

  int port() const { return server_.port(); }

 private:
  rendezvous::EventLoop loop_;
  rendezvous::KvStore store_;
  rendezvous::KvHandler handler_;
  rendezvous::HttpServer server_;
  std::thread thread_;
};

}  // namespace etrun::testing

#endif  // ETRUN_TESTS_SMOKE_TEST_STORE_H_
