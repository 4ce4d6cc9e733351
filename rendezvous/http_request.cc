#include "rendezvous/http_request.h"

#include <array>
#include <string_view>

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

int LengthStatus(std::string_view method, bool has_length) {
  return method == "PUT" && !has_length ? 411 : 0;
}

int AcceptRequest(http::request<http::string_body>&& req, HttpRequest* out, bool* keep_alive) {
  auto method = req.method_string();
  if (int status = LengthStatus(std::string_view(method.data(), method.size()),
                                req.find(http::field::content_length) != req.end() || req.chunked());
      status != 0) {
    return status;
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

namespace {

// RFC 9110's tchar: what a method and a field name are made of. A table, one load a byte (a
// search of the marks below was a call to memchr for each '-').
constexpr std::array<bool, 256> kTokenChars = [] {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = table[c - 'a' + 'A'] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

bool IsTokenChar(unsigned char c) { return kTokenChars[c]; }

// What a field's value may hold in a simple head: printable ASCII and tab (Beast's own rules
// are wider; anything else goes to it).
constexpr std::array<bool, 256> kValueChars = [] {
  std::array<bool, 256> table{};
  for (int c = ' '; c < 0x7f; ++c) table[c] = true;
  table['\t'] = true;
  return table;
}();

bool EqualsLower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// The fields ParseSimpleHead reads, or leaves the whole request to Beast for.
enum class Field { kOther, kContentLength, kConnection, kAuthorization, kBeasts };

// Each name has a length of its own: one comparison at most, none for most fields (Host).
Field Classify(std::string_view name) {
  switch (name.size()) {
    case 14:
      return EqualsLower(name, "content-length") ? Field::kContentLength : Field::kOther;
    case 10:
      return EqualsLower(name, "connection") ? Field::kConnection : Field::kOther;
    case 13:
      return EqualsLower(name, "authorization") ? Field::kAuthorization : Field::kOther;
    case 17:
      return EqualsLower(name, "transfer-encoding") ? Field::kBeasts : Field::kOther;
    case 7:
      return EqualsLower(name, "upgrade") ? Field::kBeasts : Field::kOther;
    case 16:
      return EqualsLower(name, "proxy-connection") ? Field::kBeasts : Field::kOther;
    default:
      return Field::kOther;
  }
}

}  // namespace

bool ParseSimpleHead(std::string_view bytes, const HttpLimits& limits, SimpleHead* head) {
  // One pass over the bytes. A head's every CR ends a line (no name or value may hold one), so the
  // first empty line found is where the first CRLF CRLF is: the head's end.
  const char* const data = bytes.data();
  const size_t size = bytes.size();
  auto at = [data](size_t i) { return static_cast<unsigned char>(data[i]); };
  // request-line = method SP request-target SP HTTP-version CRLF
  size_t i = 0;
  while (i < size && IsTokenChar(at(i))) ++i;
  if (i == 0 || i >= size || data[i] != ' ') return false;
  head->method = bytes.substr(0, i);
  size_t start = ++i;
  while (i < size && at(i) > ' ' && at(i) < 0x7f) ++i;
  if (i == start || i >= size || data[i] != ' ') return false;
  head->target = bytes.substr(start, i - start);
  ++i;
  if (size - i < 10) return false;
  std::string_view version(data + i, 10);
  bool http11 = version == "HTTP/1.1\r\n";
  if (!http11 && version != "HTTP/1.0\r\n") return false;
  i += 10;
  // field-name ":" OWS field-value OWS CRLF, printable ASCII only, no folded lines; then CRLF.
  bool close = false, keep_alive = false, seen_connection = false, seen_authorization = false;
  head->authorization = {};
  head->has_content_length = false;
  head->content_length = 0;
  for (;;) {
    // Only a head well inside the limit: Beast alone decides the ones near it (413). The head
    // ends at i + 2 at the earliest.
    if (i + 2 >= limits.max_header_bytes || size - i < 2) return false;
    if (data[i] == '\r' && data[i + 1] == '\n') break;  // the empty line
    const size_t name_start = i;
    while (i < size && IsTokenChar(at(i))) ++i;
    if (i == name_start || i >= size || data[i] != ':') return false;
    std::string_view name(data + name_start, i - name_start);
    size_t value_start = ++i;
    while (i < size && kValueChars[at(i)]) ++i;
    if (size - i < 2 || data[i] != '\r' || data[i + 1] != '\n') return false;
    std::string_view value(data + value_start, i - value_start);
    i += 2;
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    switch (Classify(name)) {
      case Field::kOther:
        break;
      case Field::kBeasts:
        return false;
      case Field::kContentLength: {
        if (head->has_content_length || value.empty() || value.size() > 18) return false;
        size_t length = 0;
        for (char c : value) {
          if (c < '0' || c > '9') return false;
          length = length * 10 + static_cast<size_t>(c - '0');
        }
        if (length > limits.max_body_bytes) return false;
        head->has_content_length = true;
        head->content_length = length;
        break;
      }
      case Field::kConnection:
        if (seen_connection) return false;
        seen_connection = true;
        if (EqualsLower(value, "close")) close = true;
        else if (EqualsLower(value, "keep-alive")) keep_alive = true;
        else return false;
        break;
      case Field::kAuthorization:
        if (seen_authorization) return false;
        seen_authorization = true;
        head->authorization = value;
        break;
    }
  }
  head->size = i + 2;
  head->keep_alive = http11 ? !close : keep_alive;
  return true;
}

int DecodeRequestBytes(std::string_view raw, const HttpLimits& limits, HttpRequest* out, bool* keep_alive,
                       Decoder decoder) {
  SimpleHead head;
  if (decoder == Decoder::kAsServer && ParseSimpleHead(raw, limits, &head)) {
    // As the server takes it (HttpServer's Connection): 411, then the body's reservation.
    if (int status = LengthStatus(head.method, head.has_content_length); status != 0) return status;
    if (head.content_length > limits.max_body_bytes_in_flight) return 503;
    if (raw.size() - head.size < head.content_length) return -1;
    out->method = head.method;
    out->target = head.target;
    out->authorization = head.authorization;
    out->body = raw.substr(head.size, head.content_length);
    if (keep_alive != nullptr) *keep_alive = head.keep_alive;
    return 0;
  }
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
  bool alive = false;
  int status = AcceptRequest(parser.release(), out, &alive);
  if (keep_alive != nullptr) *keep_alive = alive;
  return status;
}

}  // namespace etrun::rendezvous
