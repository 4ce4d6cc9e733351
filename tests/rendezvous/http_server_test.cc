// The rendezvous HTTP server over real loopback sockets, fed with raw bytes as Horovod's C++ and
// Python clients send them (spec 4.4-4.5).
#include "rendezvous/http_server.h"

#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/service_threads.h"
#include "tests/rendezvous/http_test_util.h"

using etrun::rendezvous::EventLoop;
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
  explicit Server(HttpLimits limits = {}, bool start = true) : handler(&store), server(&loop, &handler, limits) {
    store.Init({{"a", 0, 2, 0, 2, 0, 1}, {"a", 1, 2, 1, 2, 0, 1}});
    if (start) Start();
  }
  void Start() {
    std::string err;
    REQUIRE(server.Listen("127.0.0.1", 0, &err));
    thread = std::thread([this] { loop.Run(); });
  }
  ~Server() {
    loop.Post([this] {
      server.Stop();
      loop.Stop();
    });
    if (thread.joinable()) thread.join();
  }
  EventLoop loop;
  KvStore store;
  KvHandler handler;
  HttpServer server;
  std::thread thread;
};

// The store as etrun serves it (launcher/rendezvous_service.h): `count` shards, GETs of missing
// keys held up to `hold` (LoopDeadlines on the first shard). Started at once; its threads are
// stopped before the server goes.
struct ThreadedStore {
  ThreadedStore(int count, std::chrono::milliseconds hold)
      : threads(count), deadlines(&threads.loop()), handler(&store, &deadlines, hold), server(threads.loops(), &handler) {
    std::string err;
    REQUIRE(server.Listen("127.0.0.1", 0, &err));
    threads.Start();
  }
  ~ThreadedStore() {
    threads.Stop();
    server.Stop();
  }
  etrun::rendezvous::ServiceThreads threads;
  etrun::rendezvous::LoopDeadlines deadlines;
  KvStore store;
  KvHandler handler;
  HttpServer server;
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

TEST_CASE("a client that pipelines thousands of requests gets every answer, in order") {
  // Given 10,000 PUTs sent back to back on one connection before any answer is read, each is
  // answered 200 in turn (each answer is written at once, and the next request is already read:
  // the server must not nest one request's handling inside the last one's), and the last
  // value stays.
  Server s;
  std::string burst;
  for (int i = 0; i < 10000; ++i) burst += CppClient("PUT", "/global/k", std::to_string(i));
  std::string r = Exchange(s.server.port(), burst, false, 10000);
  size_t answers = 0;
  for (size_t at = r.find("HTTP/1.1 "); at != std::string::npos; at = r.find("HTTP/1.1 ", at + 1)) {
    CHECK(r.compare(at, 12, "HTTP/1.1 200") == 0);
    ++answers;
  }
  CHECK(answers == 10000);
  CHECK(s.store.Get("global", "k") == "9999");
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
  ThreadedStore t(4, std::chrono::milliseconds(300));
  CHECK(t.server.listener_count() == 4);
  std::string held;
  std::thread getter([&] { held = Exchange(t.server.port(), CppClient("GET", "/global/7")); });
  // The GET is held (within 3 s). A GET answered without being held must fail this test, not
  // leave it waiting for ever.
  bool was_held = false;
  for (int i = 0; i < 3000 && !was_held; ++i) {
    was_held = t.store.waiter_count() > 0;
    if (!was_held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!was_held) getter.join();  // it was answered at once, or will be at the bound
  REQUIRE_MESSAGE(was_held, "the GET of a missing key was not held");
  CHECK(Status(Exchange(t.server.port(), CppClient("PUT", "/global/7", "late value"))) == 200);
  getter.join();
  CHECK(Status(held) == 200);
  CHECK(Body(held) == "late value");
  CHECK(Status(Exchange(t.server.port(), CppClient("GET", "/global/never"))) == 404);
}

namespace {

using etrun::testing::Connect;
using etrun::testing::ExchangeAs;
using etrun::testing::ReadAll;

// The rendezvous store as etrun serves it: peers by an access list, this machine's only as the
// user `uid` (the job's user: etrun's own). With `owners_in_proc`, owners are looked up in /proc
// (set before the loop runs: the loop's thread reads it).
struct GuardedServer : Server {
  explicit GuardedServer(uint32_t uid, HttpLimits limits = {}, bool owners_in_proc = false)
      : Server(limits, false) {
    etrun::rendezvous::Cidr loopback;
    std::string err;
    REQUIRE(etrun::rendezvous::ParseCidr("127.0.0.0/8", &loopback, &err));
    access.emplace(std::vector<std::string>{}, std::vector<etrun::rendezvous::Cidr>{loopback});
    server.set_access(&*access);
    server.set_local_user(uid);
    if (owners_in_proc) server.TEST_LookUpOwnersInProc();
    Start();
  }
  std::optional<etrun::rendezvous::AccessList> access;
};

bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

}  // namespace

TEST_CASE("from this machine, only the job's user is served; others get 403 and no key is stored") {
  // Given a store whose job user is us, our PUT is stored; given one whose job user is another
  // uid, our own connection is that other user's foreigner: 403, nothing stored.
  {
    GuardedServer s(geteuid());
    CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/global/mine", "v"))) == 200);
    CHECK(s.store.Get("global", "mine") == "v");
  }
  GuardedServer s(geteuid() + 1);
  std::string r = Exchange(s.server.port(), CppClient("PUT", "/global/evil", "evil"));
  CHECK(Status(r) == 403);
  CHECK(r.find("Connection: close\r\n") != std::string::npos);
  CHECK(Body(r) == "only the job's user may use this rendezvous store\n");
  CHECK_FALSE(s.store.Get("global", "evil").has_value());
}

TEST_CASE("with owners looked up in /proc, a burst of connections is served, or refused, alike") {
  // Given the /proc fallback (netlink refused), 40 connections opened at once before any sends
  // are each answered: 404 for the job's user, 403 when the job is another user's.
  for (uint32_t uid : {geteuid(), geteuid() + 1}) {
    CAPTURE(uid);
    GuardedServer s(uid, {}, true);
    std::vector<int> fds;
    for (int i = 0; i < 40; ++i) fds.push_back(Connect(s.server.port()));
    std::string get = "GET /global/0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    for (int fd : fds) {
      if (fd >= 0) send(fd, get.data(), get.size(), MSG_NOSIGNAL);
    }
    int expected = uid == geteuid() ? 404 : 403, answered = 0;
    for (int fd : fds) {
      std::string r = ReadAll(fd);
      close(fd);
      answered += r.size() >= 12 && Status(r) == expected ? 1 : 0;
    }
    CHECK(answered == 40);
  }
}

TEST_CASE("as root, a connection from user nobody on this machine gets 403") {
  // Given a store run by root (the job's user), a child that became nobody (65534) PUTs a key:
  // refused before its request is read; root's own GET then finds no such key.
  if (geteuid() != 0) return;
  GuardedServer s(0);
  std::string r = ExchangeAs(65534, s.server.port(), CppClient("PUT", "/global/evil", "evil"));
  CHECK(Status(r) == 403);
  CHECK_FALSE(s.store.Get("global", "evil").has_value());
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/evil"))) == 404);
}

TEST_CASE("past its share of connections an address gets 503 at once, and others are still served") {
  // Given 3 connections per address and 5 in all, 127.0.0.2 opens 3 idle connections: its
  // fourth is answered 503 before it sends anything, while 127.0.0.1 is served. With 5 open in
  // all, everyone gets 503; closing some makes room again.
  GuardedServer s(geteuid(), {.max_connections = 5, .max_connections_per_peer = 3});
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(Connect(s.server.port(), "127.0.0.2"));
  REQUIRE(WaitFor([&] { return s.server.caps()->connections_from(0x7f000002) == 3; }));
  int fourth = Connect(s.server.port(), "127.0.0.2");
  std::string r = ReadAll(fourth);
  close(fourth);
  CHECK(Status(r) == 503);
  CHECK(r.find("Connection: close\r\n") != std::string::npos);
  CHECK(Body(r) == "too many connections from this address\n");
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 404);
  for (int i = 0; i < 2; ++i) idle.push_back(Connect(s.server.port(), "127.0.0.3"));
  REQUIRE(WaitFor([&] { return s.server.caps()->connections() == 5; }));
  r = Exchange(s.server.port(), CppClient("GET", "/global/0"));
  CHECK(Status(r) == 503);
  CHECK(Body(r) == "too many connections\n");
  for (int fd : idle) close(fd);
  REQUIRE(WaitFor([&] { return s.server.caps()->connections() == 0; }));
  CHECK(Status(Exchange(s.server.port(), CppClient("GET", "/global/0"))) == 404);
}

TEST_CASE("idle connections and slow senders are cut off at the read timeout") {
  // Given a 300 ms read timeout, a connection that sends nothing and one that sends half a
  // request are closed by then (the half request answered 400), and their count is freed.
  GuardedServer s(geteuid(), {.read_timeout = std::chrono::milliseconds(300)});
  int silent = Connect(s.server.port());
  int slow = Connect(s.server.port());
  std::string half = "PUT /global/0 HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
  REQUIRE(send(slow, half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
  CHECK(ReadAll(silent).empty());
  CHECK(ReadAll(slow).empty());  // timed out mid-body: closed, nothing to answer
  close(silent);
  close(slow);
  CHECK(WaitFor([&] { return s.server.caps()->connections() == 0 && s.server.caps()->body_bytes() == 0; }));
  CHECK_FALSE(s.store.Get("global", "0").has_value());
}

TEST_CASE("a request that arrives in pieces is read whole, wherever it is cut") {
  // Given a PUT followed by a GET on one connection, sent in two writes cut at one place (in the
  // request line, in a field, at the head's end, in the body, in the next request), the server
  // answers both: a head not all here is Beast's to parse, a body that comes later is awaited.
  // Given a body the client stops short of with its close, the answer is 400 (a partial message).
  std::string put = CppClient("PUT", "/global/0", "hello");
  std::string both = put + "GET /global/0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  size_t head = put.find("\r\n\r\n") + 4;
  for (size_t cut : {size_t{5}, size_t{30}, head, head + 2, put.size() + 7}) {
    CAPTURE(cut);
    Server s;
    int fd = etrun::testing::Connect(s.server.port());
    REQUIRE(send(fd, both.data(), cut, MSG_NOSIGNAL) == static_cast<ssize_t>(cut));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // read apart from the rest
    REQUIRE(send(fd, both.data() + cut, both.size() - cut, MSG_NOSIGNAL) == static_cast<ssize_t>(both.size() - cut));
    std::string r = etrun::testing::ReadAll(fd);
    close(fd);
    CHECK(r.rfind("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0) == 0);
    CHECK(r.size() > 5);
    CHECK(r.substr(r.size() - 5) == "hello");
    CHECK(s.store.Get("global", "0") == "hello");
  }
  Server s;
  CHECK(Exchange(s.server.port(), "PUT /global/0 HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", true) ==
        "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  CHECK_FALSE(s.store.Get("global", "0").has_value());
  CHECK(WaitFor([&] { return s.server.caps()->body_bytes() == 0; }));
}

TEST_CASE("a client that stops reading its answer is cut off at the timeout") {
  // Given a 300 ms timeout and a 16 MB value, a GET whose client never reads fills the socket's
  // buffers and stalls the server's write: the connection is closed by the deadline and its
  // count freed; the client then finds less than the whole answer.
  GuardedServer s(geteuid(), {.read_timeout = std::chrono::milliseconds(300)});
  std::string value(16 << 20, 'v');
  REQUIRE(s.store.Put("global", "big", value));
  int stalled = Connect(s.server.port());
  REQUIRE(stalled >= 0);
  std::string get = CppClient("GET", "/global/big");
  REQUIRE(send(stalled, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size()));
  REQUIRE(WaitFor([&] { return s.server.caps()->connections() == 1; }));
  CHECK(WaitFor([&] { return s.server.caps()->connections() == 0; }));
  CHECK(ReadAll(stalled).size() < value.size());
  close(stalled);
}

TEST_CASE("bodies past the bytes in flight are answered 503, not read") {
  // Given 100 bytes in flight at most from one address (400 in all), a sender that announced 80
  // and is slow to send them holds them: another PUT of 50 gets 503, one of 20 goes through;
  // once the slow one is done, 50 fits.
  GuardedServer s(geteuid(), {.max_body_bytes = 1024, .max_body_bytes_in_flight = 400});
  int slow = Connect(s.server.port());
  std::string head = "PUT /global/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 80\r\n\r\n";
  REQUIRE(send(slow, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  REQUIRE(WaitFor([&] { return s.server.caps()->body_bytes() == 80; }));
  std::string r = Exchange(s.server.port(), CppClient("PUT", "/global/a", std::string(50, 'a')));
  CHECK(Status(r) == 503);
  CHECK(Body(r) == "the rendezvous store is receiving too much at once; try again\n");
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/global/b", std::string(20, 'b')))) == 200);
  std::string rest(80, 's');
  REQUIRE(send(slow, rest.data(), rest.size(), MSG_NOSIGNAL) == 80);
  CHECK(Status(ReadAll(slow)) == 200);
  close(slow);
  CHECK(s.store.Get("global", "slow") == rest);
  CHECK(Status(Exchange(s.server.port(), CppClient("PUT", "/global/a", std::string(50, 'a')))) == 200);
  CHECK(s.server.caps()->body_bytes() == 0);
}

namespace {

// Drops every request's `respond` uncalled.
class DroppingHandler : public etrun::rendezvous::HttpHandler {
 public:
  void Handle(etrun::rendezvous::HttpRequest&&, etrun::rendezvous::Responder) override {}
};

}  // namespace

TEST_CASE("a request its handler drops unanswered gets a 500, not an endless wait") {
  EventLoop loop;
  DroppingHandler handler;
  HttpServer server(&loop, &handler);
  std::string err;
  REQUIRE(server.Listen("127.0.0.1", 0, &err));
  std::thread thread([&] { loop.Run(); });
  std::string r = Exchange(server.port(), CppClient("GET", "/global/0"));
  CHECK(Status(r) == 500);
  CHECK(Body(r) == "the request was dropped unanswered\n");
  loop.Post([&] {
    server.Stop();
    loop.Stop();
  });
  thread.join();
}

TEST_CASE("a held GET whose client resets its connection frees that connection at once, not at the bound") {
  // Given GETs held up to 120 s, a client that sends one and then resets its connection (as a
  // killed worker's kernel does) frees its connection long before the bound; the PUT that later
  // releases the held GET answers into nothing, and the server goes on serving.
  ThreadedStore t(1, std::chrono::seconds(120));
  int held = Connect(t.server.port());
  REQUIRE(held >= 0);
  std::string get = CppClient("GET", "/global/7");
  REQUIRE(send(held, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size()));
  REQUIRE(WaitFor([&] { return t.store.waiter_count() == 1; }));
  CHECK(t.server.caps()->connections() == 1);
  linger reset{1, 0};
  REQUIRE(setsockopt(held, SOL_SOCKET, SO_LINGER, &reset, sizeof reset) == 0);
  close(held);
  CHECK(WaitFor([&] { return t.server.caps()->connections() == 0; }));  // 30 s at most: a quarter of the bound
  CHECK(Status(Exchange(t.server.port(), CppClient("PUT", "/global/7", "late value"))) == 200);
  CHECK(Status(Exchange(t.server.port(), CppClient("GET", "/global/7"))) == 200);
}

namespace {

// A shared answer that counts what it was sent and tells when it is deleted.
class CountingTarget : public etrun::rendezvous::Responder::Target {
 public:
  CountingTarget(int* sends, bool* deleted) : sends_(sends), deleted_(deleted) {}
  ~CountingTarget() override { *deleted_ = true; }
  void Send(etrun::rendezvous::HttpResponse) override { ++*sends_; }

 private:
  int* sends_;
  bool* deleted_;
};

}  // namespace

TEST_CASE("Responder: copies share one answer, freed with the last copy; any callable is one") {
  using etrun::rendezvous::HttpResponse;
  using etrun::rendezvous::Responder;
  int sends = 0;
  bool deleted = false;
  {
    Responder first(new CountingTarget(&sends, &deleted));
    Responder copy = first;
    Responder moved = std::move(copy);
    CHECK_FALSE(copy);  // NOLINT(bugprone-use-after-move): moved from is empty, as documented
    {
      Responder another(first);
      another({200, "x"});
    }
    CHECK_FALSE(deleted);  // two copies still hold it
    first = Responder();
    CHECK_FALSE(deleted);
    moved({200, "y"});
    CHECK(sends == 2);  // the target decides what a second call does; this one counts both
  }
  CHECK(deleted);

  std::vector<int> statuses;
  Responder from_lambda = [&statuses](HttpResponse r) { statuses.push_back(r.status); };
  std::function<void(HttpResponse)> fn = [&statuses](HttpResponse r) { statuses.push_back(r.status + 1); };
  Responder from_function = fn;
  Responder copied = from_lambda;
  from_lambda({404, ""});
  copied({200, ""});
  from_function({500, ""});
  CHECK(statuses == std::vector<int>{404, 200, 501});
}
