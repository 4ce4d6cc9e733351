#include "rendezvous/http_request.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>

namespace etrun::rendezvous {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

int StatusForReadError(const boost::system::error_code& ec) {
  if (ec == http::error::body_limit || ec == http::error::header_limit) return 413;
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == beast::error::timeout ||
      ec == asio::error::operation_aborted) {
    return 0;
  }
  return 400;
}

int AcceptRequest(http::request<http::string_body>&& req, HttpRequest* out, bool* keep_alive) {
  if (req.method() == http::verb::put && req.find(http::field::content_length) == req.end() &&
      !req.chunked()) {
    return 411;
  }
  out->method = std::string(req.method_string());
  out->target = std::string(req.target());
  out->body = std::move(req.body());
  out->authorization = std::string(req[http::field::authorization]);
  *keep_alive = req.keep_alive();
  return 0;
}

size_t BodyReservation(const http::request_parser<http::string_body>& parser, const HttpLimits& limits) {
  if (parser.chunked()) return limits.max_body_bytes;
  return static_cast<size_t>(parser.content_length().value_or(0));
}

int DecodeRequestBytes(std::string_view raw, const HttpLimits& limits, HttpRequest* out) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  parser.eager(true);
  size_t used = 0;
  bool reserved = false;
  while (!parser.is_done()) {
    beast::error_code ec;
    size_t n = parser.put(asio::buffer(raw.data() + used, raw.size() - used), ec);
    used += n;
    // Every remaining byte was offered: needing more, or taking none, means incomplete.
    if (ec == http::error::need_more || (!ec && n == 0 && !parser.is_done())) return -1;
    if (ec) {
      int status = StatusForReadError(ec);
      return status == 0 ? -1 : status;
    }
    if (parser.is_header_done() && !reserved) {  // as the server reserves the body (HttpServer)
      reserved = true;
      if (BodyReservation(parser, limits) > limits.max_body_bytes_in_flight) return 503;
    }
  }
  bool keep_alive = false;
  return AcceptRequest(parser.release(), out, &keep_alive);
}

}  // namespace etrun::rendezvous
