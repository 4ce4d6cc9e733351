// etrun-smoke's store client: response parsing (pure), then PUT/GET/DELETE and polling against
// etrun's real rendezvous server on loopback.
#include "smoke/kv_client.h"

#include <thread>

#include <doctest/doctest.h>

#include "tests/smoke/test_store.h"

using etrun::smoke::KvClient;
using etrun::smoke::ParseHttpResponse;
using etrun::smoke::ParseStatus;
using namespace std::chrono_literals;

TEST_CASE("a response is complete when Content-Length bytes of body have arrived") {
  int status = 0;
  std::string body, err;
  const std::string whole = "HTTP/1.1 200 OK\r\ncontent-LENGTH: 5\r\nServer: x\r\n\r\nhello";
  CHECK(ParseHttpResponse(whole, false, &status, &body, &err) == ParseStatus::kComplete);
  CHECK(status == 200);
  CHECK(body == "hello");
  // Every shorter prefix is incomplete while the connection is open.
  for (size_t n = 0; n < whole.size(); ++n) {
    CAPTURE(n);
    CHECK(ParseHttpResponse(whole.substr(0, n), false, &status, &body, &err) ==
          ParseStatus::kIncomplete);
  }
  // Binary bodies pass untouched.
  const std::string binary =
      "HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\n" + std::string("\0\r\n\xff", 4);
  CHECK(ParseHttpResponse(binary, false, &status, &body, &err) == ParseStatus::kComplete);
  CHECK(body == std::string("\0\r\n\xff", 4));
}

TEST_CASE("without Content-Length the body ends with the connection") {
  int status = 0;
  std::string body, err;
  const std::string raw = "HTTP/1.0 404 Not Found\r\n\r\nnope";
  CHECK(ParseHttpResponse(raw, false, &status, &body, &err) == ParseStatus::kIncomplete);
  CHECK(ParseHttpResponse(raw, true, &status, &body, &err) == ParseStatus::kComplete);
  CHECK(status == 404);
  CHECK(body == "nope");
}

TEST_CASE("malformed or cut-off responses say what is wrong") {
  struct Case {
    std::string raw;
    const char* err;
  };
  for (const Case& c : {
           Case{"", "no answer"},
           Case{"HTTP/1.1 200 OK\r\nContent-Len", "answer ends inside its headers"},
           Case{"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP answer: 'SSH-2.0-OpenSSH'"},
           Case{"HTTP/1.1 2x0 OK\r\n\r\n", "bad status line: 'HTTP/1.1 2x0 OK'"},
           Case{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length: '-1'"},
           Case{"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
                "answer shorter than its Content-Length"},
       }) {
    int status = 0;
    std::string body, err;
    CAPTURE(c.raw);
    CHECK(ParseHttpResponse(c.raw, true, &status, &body, &err) == ParseStatus::kMalformed);
    CHECK(err == c.err);
  }
}

TEST_CASE("PUT, GET and DELETE round-trip any bytes through etrun's store") {
  etrun::testing::TestStore store;
  KvClient kv("127.0.0.1", store.port(), 5s);
  std::string err, value;
  bool found = true;
  REQUIRE(kv.Get("k", &value, &found, &err));
  CHECK_FALSE(found);
  const char bytes[] = "\0\x01\r\n\r\nbinary\xff";
  const std::string blob(bytes, sizeof(bytes) - 1);
  REQUIRE(kv.Put("k", blob, &err));
  REQUIRE(kv.Get("k", &value, &found, &err));
  CHECK(found);
  CHECK(value == blob);
  CHECK(kv.local_address() == "127.0.0.1");
  REQUIRE(kv.Delete("k", &err));
  REQUIRE(kv.Get("k", &value, &found, &err));
  CHECK_FALSE(found);
}

TEST_CASE("WaitFor returns a value published later by another client") {
  etrun::testing::TestStore store;
  std::thread publisher([&store] {
    std::this_thread::sleep_for(50ms);  // let the reader poll a few times first
    KvClient kv("127.0.0.1", store.port(), 5s);
    std::string err;
    CHECK(kv.Put("late", "here", &err));
  });
  KvClient kv("127.0.0.1", store.port(), 5s);
  std::string value, err;
  CHECK(kv.WaitFor("late", 5s, &value, &err));
  CHECK(value == "here");
  publisher.join();
}

TEST_CASE("WaitFor gives up after its timeout, naming the key and the store") {
  etrun::testing::TestStore store;
  KvClient kv("127.0.0.1", store.port(), 5s);
  std::string value, err;
  CHECK_FALSE(kv.WaitFor("never", 100ms, &value, &err));
  CHECK(err == "timed out after 0.1 s waiting for never in the rendezvous store 127.0.0.1:" +
                   std::to_string(store.port()));
}

TEST_CASE("a store that is not there is a connect error naming its address") {
  int port = 0;
  {
    etrun::testing::TestStore store;  // a port that was free a moment ago and is closed now
    port = store.port();
  }
  KvClient kv("127.0.0.1", port, 5s);
  std::string err;
  CHECK_FALSE(kv.Put("k", "v", &err));
  CHECK(err == "rendezvous store: cannot connect to 127.0.0.1:" + std::to_string(port) +
                   ": Connection refused");
}
