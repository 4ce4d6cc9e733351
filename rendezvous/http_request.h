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

// Validates a parsed request and moves it into *out. Returns 0, or the status to answer with
// (411 for a PUT without Content-Length). *keep_alive tells whether the client may send more.
int AcceptRequest(boost::beast::http::request<boost::beast::http::string_body>&& req,
                  HttpRequest* out, bool* keep_alive);

// The body bytes a request whose header is parsed will bring, to reserve before reading them
// (HttpLimits::max_body_bytes_in_flight): its Content-Length, max_body_bytes when chunked, 0
// without a body.
size_t BodyReservation(const boost::beast::http::request_parser<boost::beast::http::string_body>& parser,
                       const HttpLimits& limits);

// Parses one request from complete bytes, as the server would with these limits and nothing else
// in flight. Returns 0 on success, -1 when the bytes end before the request does, else the status
// to answer with (503 for a body larger than max_body_bytes_in_flight).
int DecodeRequestBytes(std::string_view raw, const HttpLimits& limits, HttpRequest* out);

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_HTTP_REQUEST_H_
