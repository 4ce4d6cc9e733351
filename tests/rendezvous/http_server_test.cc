// The rendezvous HTTP server over real loopback sockets, fed with raw bytes as Horovod's C++ and
// Python clients send them (spec 4.4-4.5).
#include "rendezvous/http_server.h"

#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <doctest/doctest.h>

#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/service_threads.h"
#include "tests/rendezvous/http_test_util.h"

namespace asio = boost::asio;
using etrun::rendezvous::HttpLimits;
using etrun::rendezvous::HttpServer;
using etrun::rendezvous::KvHandler;
using etrun::rendezvous::KvStore;

namespace {

using etrun::testing::Body;
using etrun::testing::CppClient;
using etrun::testing::Exchange;
using etrun::testing::Status;

struct Server {
  explicit Server(HttpLimits limits = {}) : handler(&store), server(&io, &handler, limits) {
    store.Init({{"a", 0, 2, 0, 2, 0, 1}, {"a", 1, 2, 1, 2, 0, 1}});
    std::string err;
    REQUIRE(server.Listen("127.0.0.1", 0, &err));
    thread = std::thread([this] { io.run(); });
  }
  ~Server() {
    asio::post(io, [this] { server.Stop(); });
    work.reset();
    thread.join();
  }
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  KvStore store;
  KvHandler handler;
  HttpServer server;
  std::thread thread;
};

}  // namespace

TEST_CASE("GET of a missing key is an immediate 404 with Content-Length 0") {
  Server s;
  std::string r = Exchange(s.server.port(), CppClient("GET", "/global/0"));
  CHECK(Status(r) == 404);
  CHECK(r.find("\r\nContent-Length: 0\r\n") != std::string::npos);
}

TEST_CASE("PUT then GET returns the exact bytes with an exact Content-Length") {
  Server s;
  std::string blob("addr\x00\x01\xfe\xff\r\n\r\nend", 15);
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/global/0", blob))) == 200);
  std::string r = Exchange(s.server.port(), CppClient("GET", "/global/0"));
  CHECK(Status(r) == 200);
  CHECK(r.find("\r\nContent-Length: 15\r\n") != std::string::npos);  // spelled exactly so
  CHECK(Body(r) == blob);
}

TEST_CASE("an empty PUT stores an empty value") {
  Server s;
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/local_a/rank_0", ""))) == 200);
  std::string r = Exchange(s.server.port(), CppClient("GET", "/local_a/rank_0"));
  CHECK(Status(r) == 200);
  CHECK(Body(r).empty());
}

TEST_CASE("Python urllib's PUT with extra headers works too") {
  Server s;
  std::string req =
      "PUT /worker_addresses/hostA:0 HTTP/1.1\r\nAccept-Encoding: identity\r\n"
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4\r\n"
      "Host: 127.0.0.1:41461\r\nUser-Agent: Python-urllib/3.11\r\nConnection: close\r\n\r\nabcd";
  CHECK(Status(Exchange(s.server.port(), req)) == 200);
  CHECK(Body(Exchange(s.server.port(), CppClient("GET", "/worker_addresses/hostA:0"))) == "abcd");
}

TEST_CASE("DELETE answers 200 and clears a planned scope once all members finished") {
  Server s;
  Exchange(s.server.port(), CppClient("PUT", "/global/0", "x"));
  CHECK(Status(Exchange(s.server.port(), CppClient("DELETE", "/global/0"))) == 200);
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 200);
  CHECK(Status(Exchange(s.server.port(), CppClient("DELETE", "/global/1"))) == 200);
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 404);
}

TEST_CASE("malformed requests are answered, never dropped (fixes spec 9.20)") {
  Server s({.max_header_bytes = 4096, .max_body_bytes = 1024});
  struct Case {
    std::string request;
    int status;
  } cases[] = {
      {CppClient("GET", "/a/b/c"), 400},
      {CppClient("GET", "/onlyscope"), 400},
      {CppClient("GET", "noslash/x"), 400},
      {CppClient("POST", "/global/0", "x"), 405},
      {CppClient("HEAD", "/global/0"), 405},
      {"PUT /global/0 HTTP/1.1\r\nHost: x\r\n\r\n", 411},
      {CppClient("PUT", "/global/0", std::string(2000, 'x')), 413},
      {"GET /global/0 HTTP/1.1\r\nHost: x\r\nX: " + std::string(8000, 'h') + "\r\n\r\n", 413},
      {"THIS IS NOT HTTP\r\n\r\n", 400},
  };
  for (const Case& c : cases) {
    CAPTURE(c.request.substr(0, 40));
    std::string r = Exchange(s.server.port(), c.request, true);
    REQUIRE(r.size() >= 12);
    CHECK(Status(r) == c.status);
  }
  // And the server still works.
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 404);
}

TEST_CASE("a connection that closes without a request does no harm") {
  // Given a client that closes before sending anything, it gets no answer; given one that closes
  // in the middle of a request line, it gets a 400 with "Connection: close" (a partial message
  // is a malformed request, spec 9.20). Either way the server goes on serving.
  Server s;
  CHECK(Exchange(s.server.port(), "", true).empty());
  CHECK(Exchange(s.server.port(), "GET /glo", true) ==
        "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 404);
}

TEST_CASE("a keep-alive client may send several requests on one connection") {
  // Given HTTP/1.1 without "Connection: close", the server answers both pipelined requests and
  // closes only when the client asks.
  Server s;
  std::string two = CppClient("PUT", "/global/0", "v") + CppClient("GET", "/global/0") +
                    "GET /global/0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string r = Exchange(s.server.port(), two, false, 3);
  size_t first = r.find("HTTP/1.1 200");
  size_t second = r.find("HTTP/1.1 200", first + 1);
  size_t third = r.find("HTTP/1.1 200", second + 1);
  CHECK(first == 0);
  CHECK(second != std::string::npos);
  CHECK(third != std::string::npos);
  CHECK(r.substr(r.size() - 1) == "v");
}

TEST_CASE("Horovod's Python client (Connection: close) gets one answer and a closed socket") {
  Server s;
  std::string r = Exchange(s.server.port(),
                           "GET /global/9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" +
                               CppClient("GET", "/global/9"), false, 2);
  CHECK(Status(r) == 404);
  CHECK(r.find("HTTP/1.1", 5) == std::string::npos);  // the second request was not served
}

TEST_CASE("on several threads, a held GET is answered through the socket by another client's PUT") {
  // Given the store's setup (ServiceThreads, held GETs), a GET of a missing key waits on one
  // connection until a PUT on another sets it; a key never set gets 404 at the bound.
  etrun::rendezvous::ServiceThreads threads;
  etrun::rendezvous::AsioDeadlines deadlines(threads.io().get_executor());
  KvStore store;
  KvHandler handler(&store, &deadlines, std::chrono::milliseconds(300));
  HttpServer server(&threads.io(), &handler);
  std::string err;
  REQUIRE(server.Listen("127.0.0.1", 0, &err));
  threads.Start(4);
  std::string held;
  std::thread getter([&] { held = Exchange(server.port(), CppClient("GET", "/global/7")); });
  while (store.waiter_count() == 0) std::this_thread::yield();  // the GET is held
  CHECK(Status(Exchange(server.port(), CppClient("PUT", "/global/7", "late value"))) == 200);
  getter.join();
  CHECK(Status(held) == 200);
  CHECK(Body(held) == "late value");
  CHECK(Status(Exchange(server.port(), CppClient("GET", "/global/never"))) == 404);
  threads.Stop();
  server.Stop();
}
