// Turning bytes into an HttpRequest: the checks the rendezvous server makes on every request,
// shared by the socket path (HttpServer) and the fuzzer, which feeds raw bytes without sockets.
// Pure; thread-compatible.
#ifndef ETRUN_RENDEZVOUS_HTTP_REQUEST_H_
#define ETRUN_RENDEZVOUS_HTTP_REQUEST_H_

#include <string_view>

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "rendezvous/http_server.h"

namespace etrun::rendezvous {

// Status for a failed read of a request: 413 for size limits, 400 for anything malformed, or 0
// when the client merely went away (nothing to answer).
int StatusForReadError(const boost::system::error_code& ec);

// 411 for a PUT without a length (neither Content-Length nor chunked), else 0.
int LengthStatus(std::string_view method, bool has_length);

// Validates a parsed request and moves it into *out. Returns 0, or the status to answer with
// (411 for a PUT without Content-Length). *keep_alive tells whether the client may send more.
int AcceptRequest(boost::beast::http::request<boost::beast::http::string_body>&& req,
                  HttpRequest* out, bool* keep_alive);

// The body bytes a request whose header is parsed will bring, to reserve before reading them
// (HttpLimits::max_body_bytes_in_flight): its Content-Length, max_body_bytes when chunked, 0
// without a body.
size_t BodyReservation(const boost::beast::http::request_parser<boost::beast::http::string_body>& parser,
                       const HttpLimits& limits);

// A request head in the shape the store's clients send (Horovod's Python and C++ clients, Gloo's
// HTTPStore, wrk): a request line, plain fields, the blank line, all of it in the bytes at hand.
// Views into those bytes.
struct SimpleHead {
  std::string_view method;
  std::string_view target;
  std::string_view authorization;  // the Authorization field's value, trimmed; empty without one
  size_t size = 0;                 // bytes of the head, its blank line included
  size_t content_length = 0;       // 0 without a Content-Length field
  bool has_content_length = false;
  bool keep_alive = false;  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 with "keep-alive"
};

// True when `bytes` begin with a whole head that Beast would take as it is, in the simple shape
// above: then *head is the request Beast would make of it, its body the Content-Length bytes that
// follow. Parsed in place, with no allocation: the store's every request goes this way. False
// leaves the request to Beast, from its first byte: a head not all here yet or near
// max_header_bytes, a Content-Length past max_body_bytes or not a plain number, anything Beast
// treats specially (Transfer-Encoding, Upgrade, a Connection list, Proxy-Connection, a repeated
// Content-Length, Connection or Authorization, folded lines), bytes outside printable ASCII,
// and anything malformed (Beast answers it).
bool ParseSimpleHead(std::string_view bytes, const HttpLimits& limits, SimpleHead* head);

// How DecodeRequestBytes parses: as the server does (ParseSimpleHead, else Beast), or with
// Beast alone (to check the one against the other).
enum class Decoder { kAsServer, kBeastOnly };

// Parses one request from complete bytes, as the server would with these limits and nothing else
// in flight. Returns 0 on success, -1 when the bytes end before the request does, else the status
// to answer with (503 for a body larger than max_body_bytes_in_flight). With `keep_alive`, whether
// the client may send another request.
int DecodeRequestBytes(std::string_view raw, const HttpLimits& limits, HttpRequest* out,
                       bool* keep_alive = nullptr, Decoder decoder = Decoder::kAsServer);

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_HTTP_REQUEST_H_
