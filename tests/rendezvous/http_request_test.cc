#include "rendezvous/http_request.h"

#include <doctest/doctest.h>

using etrun::rendezvous::DecodeRequestBytes;
using etrun::rendezvous::HttpLimits;
using etrun::rendezvous::HttpRequest;

TEST_CASE("raw request bytes decode as the server would decode them") {
  HttpLimits limits;
  limits.max_body_bytes = 16;
  limits.max_header_bytes = 256;
  struct Case {
    std::string raw;
    int status;
  } cases[] = {
      {"GET /global/0 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", 0},
      {std::string("PUT /global/0 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\na\0b", 57), 0},
      {"PUT /global/0 HTTP/1.1\r\nHost: h\r\n\r\n", 411},
      {"PUT /global/0 HTTP/1.1\r\nHost: h\r\nContent-Length: 99\r\n\r\n", 413},
      {"GET /x HTTP/1.1\r\nX: " + std::string(400, 'a') + "\r\n\r\n", 413},
      {"BAD\r\n\r\n", 400},
      {"GET /global/0 HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400},
      {"GET /global/0 HTTP/1.1\r\nHost: h\r\n", -1},
      {"PUT /global/0 HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", -1},
      {"", -1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.raw);
    HttpRequest request;
    CHECK(DecodeRequestBytes(c.raw, limits, &request) == c.status);
  }
  HttpRequest put;
  REQUIRE(DecodeRequestBytes(std::string("PUT /s/k?q HTTP/1.1\r\nContent-Length: 3\r\n\r\na\0b", 46), limits, &put) == 0);
  CHECK(put.method == "PUT");
  CHECK(put.target == "/s/k?q");
  CHECK(put.body == std::string("a\0b", 3));
}

namespace {

// What a decoder made of some bytes: its status and, when 0, the request.
struct Decoded {
  int status = 0;
  HttpRequest request;
  bool keep_alive = false;
};

Decoded Decode(std::string_view raw, const HttpLimits& limits, etrun::rendezvous::Decoder decoder) {
  Decoded d;
  d.status = DecodeRequestBytes(raw, limits, &d.request, &d.keep_alive, decoder);
  return d;
}

}  // namespace

TEST_CASE("a simple head is read as Beast reads it, and anything else is left to Beast") {
  using etrun::rendezvous::Decoder;
  using etrun::rendezvous::ParseSimpleHead;
  using etrun::rendezvous::SimpleHead;
  HttpLimits limits;
  limits.max_body_bytes = 64;
  limits.max_header_bytes = 256;
  limits.max_body_bytes_in_flight = 32;
  struct Case {
    std::string raw;
    bool simple;  // ParseSimpleHead takes it
  } cases[] = {
      // What the store's clients send: Python's urllib, Horovod's and Gloo's C++ clients, wrk.
      {"GET /global/rank_3 HTTP/1.1\r\nAccept-Encoding: identity\r\nHost: 127.0.0.1:5000\r\n"
       "User-Agent: Python-urllib/3.10\r\nConnection: close\r\n\r\n", true},
      {"PUT /global/3 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", true},
      {"PUT /global/3 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\n\r\n", true},
      {"DELETE /global HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", true},
      {"GET /control/stop HTTP/1.1\r\nAuthorization:   Bearer abc  \r\n\r\n", true},
      {"GET /x HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
      {"GET /x HTTP/1.0\r\n\r\n", true},
      {"GET /x HTTP/1.1\r\nCONNECTION: CLOSE\r\n\r\n", true},
      {"GET /x HTTP/1.1\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n", true},
      {"POST /x HTTP/1.1\r\ncontent-length: 007\r\n\r\n1234567", true},
      {"PUT /x HTTP/1.1\r\n\r\n", true},                               // 411, as Beast's path
      {"PUT /x HTTP/1.1\r\nContent-Length: 40\r\n\r\n", true},         // 503: past in-flight
      {"PUT /x HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc", true},       // incomplete body
      {"GET /x HTTP/1.1\r\nContent-Length: 64\r\n\r\n", true},         // 503 before the body
      // Left to Beast.
      {"GET /x HTTP/1.1\r\nContent-Length: 65\r\n\r\n", false},        // 413
      {"GET /x HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx", false},
      {"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false},
      {"GET /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nContent-Length: \r\n\r\n", false},
      {"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nProxy-Connection: close\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nConnection: close\r\nConnection: close\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nX : a\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n", false},
      {"GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nX: a\rb\r\n\r\n", false},
      {"GET /x HTTP/1.1\nHost: h\n\n", false},
      {"GET /x HTTP/2.0\r\n\r\n", false},
      {"GET /x HTTP/1.1 \r\n\r\n", false},
      {"GET  /x HTTP/1.1\r\n\r\n", false},
      {"GET\t/x HTTP/1.1\r\n\r\n", false},
      {" GET /x HTTP/1.1\r\n\r\n", false},
      {"\r\nGET /x HTTP/1.1\r\n\r\n", false},
      {"G(T /x HTTP/1.1\r\n\r\n", false},
      {"GET /x HTTP/1.1\r\nHost: h\r\n", false},                       // not all here yet
      {"GET /x HTTP/1.1\r\nX: " + std::string(240, 'a') + "\r\n\r\n", false},  // near the limit
      {"", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.raw);
    SimpleHead head;
    CHECK(ParseSimpleHead(c.raw, limits, &head) == c.simple);
    Decoded server = Decode(c.raw, limits, Decoder::kAsServer);
    Decoded beast = Decode(c.raw, limits, Decoder::kBeastOnly);
    CHECK(server.status == beast.status);
    if (server.status != 0 || beast.status != 0) continue;
    CHECK(server.request.method == beast.request.method);
    CHECK(server.request.target == beast.request.target);
    CHECK(server.request.body == beast.request.body);
    CHECK(server.request.authorization == beast.request.authorization);
    CHECK(server.keep_alive == beast.keep_alive);
  }
  SimpleHead head;
  REQUIRE(ParseSimpleHead("GET /control/stop HTTP/1.1\r\nAuthorization:   Bearer abc  \r\n\r\nrest", limits, &head));
  CHECK(head.method == "GET");
  CHECK(head.target == "/control/stop");
  CHECK(head.authorization == "Bearer abc");
  CHECK(head.size == 61);
  CHECK(head.keep_alive);
  CHECK_FALSE(head.has_content_length);
}
