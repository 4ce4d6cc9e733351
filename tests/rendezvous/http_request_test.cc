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
