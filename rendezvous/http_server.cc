#include "rendezvous/http_server.h"

#include "rendezvous/http_request.h"

#include <array>
#include <optional>

#include <boost/asio/ip/address_v4.hpp>
#include <boost/beast/core.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace etrun::rendezvous {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// The status line and headers of a response: what Beast writes for the same response, so the
// bytes are unchanged ("Connection: close" first when closing, then Content-Length, always).
std::string ResponseHeader(int status, bool keep_alive, size_t length) {
  std::string header = "HTTP/1.1 " + std::to_string(status) + " ";
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  header.append(reason.data(), reason.size());
  header += keep_alive ? "\r\n" : "\r\nConnection: close\r\n";
  header += "Content-Length: " + std::to_string(length) + "\r\n\r\n";
  return header;
}

}  // namespace

class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpHandler* handler, const HttpLimits& limits,
             std::weak_ptr<bool> server_alive, std::shared_ptr<Held> held)
      : stream_(std::move(socket)),
        handler_(handler),
        limits_(limits),
        server_alive_(server_alive),
        held_(std::move(held)) {}

  // The server is going away with no thread left to answer: drop the self-reference, so the
  // connection is freed (its socket closed) once nothing else holds it.
  void Abandon() { self_.reset(); }

  void Start() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    stream_.expires_after(limits_.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec) {
      int status = StatusForReadError(ec);
      return status == 0 ? Close() : Reply({status, ""});
    }
    stream_.expires_never();  // a held rank_and_size may wait for minutes
    HttpRequest request;
    if (int status = AcceptRequest(parser_->release(), &request, &keep_alive_); status != 0) {
      return Reply({status, ""});
    }
    if (server_alive_.expired()) return Reply({503, ""});
    std::weak_ptr<Connection> weak = shared_from_this();
    // Keep ourselves alive while the handler holds the answer; the server frees us if it goes
    // first.
    Hold();
    handler_->Handle(std::move(request), [weak](HttpResponse response) {
      auto self = weak.lock();
      if (!self) return;
      // Onto this connection's strand: at once when called there, else queued.
      asio::dispatch(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->Reply(std::move(response));
      });
    });
  }

  // Answers the current request. A client that asked for keep-alive (HTTP/1.1 without
  // "Connection: close", as wrk or Horovod's C++ client) may send another request; everything
  // else (errors included) closes after the response. The header and the body go out in one
  // gathered write; a shared body is written from the stored buffer itself.
  void Reply(HttpResponse response) {
    if (replied_) return;
    replied_ = true;
    bool keep = keep_alive_ && response.status < 400;
    body_ = std::move(response.body);
    shared_body_ = std::move(response.shared_body);
    const std::string& body = shared_body_ ? *shared_body_ : body_;
    header_ = ResponseHeader(response.status, keep, body.size());
    std::array<asio::const_buffer, 2> buffers{asio::buffer(header_), asio::buffer(body)};
    stream_.expires_after(limits_.read_timeout);
    asio::async_write(stream_, buffers, [self = shared_from_this(), keep](beast::error_code ec, size_t) {
      self->shared_body_.reset();
      if (ec || !keep) return self->Close();
      self->Release();
      self->replied_ = false;
      self->keep_alive_ = false;
      self->Start();
    });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    Release();
  }

  void Hold() {
    self_ = shared_from_this();
    std::lock_guard<std::mutex> lock(held_->mu);
    held_->waiting[this] = self_;
  }

  void Release() {
    if (!self_) return;
    {
      std::lock_guard<std::mutex> lock(held_->mu);
      held_->waiting.erase(this);
    }
    self_.reset();  // may free us: last
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string header_;   // of the response being written
  std::string body_;     // its body, unless shared_body_
  std::shared_ptr<const std::string> shared_body_;
  HttpHandler* handler_;
  HttpLimits limits_;
  std::weak_ptr<bool> server_alive_;
  std::shared_ptr<Held> held_;
  std::shared_ptr<Connection> self_;  // while the handler holds the answer (Hold)
  bool replied_ = false;
  bool keep_alive_ = false;
};

HttpServer::HttpServer(asio::io_context* io, HttpHandler* handler, HttpLimits limits)
    : io_(io), handler_(handler), limits_(limits), acceptor_(*io), alive_(std::make_shared<bool>(true)) {}

HttpServer::~HttpServer() {
  Stop();
  std::unordered_map<Connection*, std::weak_ptr<Connection>> waiting;
  {
    std::lock_guard<std::mutex> lock(held_->mu);
    waiting.swap(held_->waiting);
  }
  for (auto& [address, weak] : waiting) {
    if (auto connection = weak.lock()) connection->Abandon();
  }
}

bool HttpServer::Listen(const std::string& address, int port, std::string* err) {
  beast::error_code ec;
  auto ip = asio::ip::make_address_v4(address, ec);
  if (ec) {
    *err = "cannot listen on '" + address + "': not an IPv4 address";
    return false;
  }
  tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    *err = "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return false;
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  return true;
}

void HttpServer::Stop() {
  beast::error_code ignored;
  acceptor_.close(ignored);
  alive_.reset();
}

void HttpServer::Accept() {
  std::weak_ptr<bool> alive = alive_;
  // Each connection gets a strand of its own (see the header); the accept chain is one handler
  // at a time.
  acceptor_.async_accept(asio::make_strand(*io_), [this, alive](beast::error_code ec, tcp::socket socket) {
    if (!alive.lock()) return;
    if (!ec && access_ != nullptr) {
      tcp::endpoint peer = socket.remote_endpoint(ec);
      if (!ec && peer.address().is_v4() && !access_->Allows(peer.address().to_v4().to_uint())) {
        Refuse(std::move(socket), peer.address().to_v4().to_uint());
        if (acceptor_.is_open()) Accept();
        return;
      }
    }
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Connection>(std::move(socket), handler_, limits_, alive_, held_)->Start();
    } else if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec == asio::error::no_buffer_space ||
               ec == asio::error::no_memory) {
      // Out of descriptors: the pending connection stays queued; try again shortly instead of
      // spinning on accept. Open connections keep being served meanwhile.
      if (!out_of_descriptors_) {
        spdlog::warn("rendezvous server: cannot accept more connections ({}); retrying", ec.message());
      }
      out_of_descriptors_ = true;
      auto timer = std::make_shared<asio::steady_timer>(*io_, std::chrono::milliseconds(100));
      timer->async_wait([this, alive, timer](beast::error_code) {
        if (alive.lock() && acceptor_.is_open()) Accept();
      });
      return;
    }
    if (!ec) out_of_descriptors_ = false;
    if (acceptor_.is_open()) Accept();
  });
}

void HttpServer::Refuse(tcp::socket socket, uint32_t address) {
  if (refused_.insert(address).second) {
    spdlog::warn("refused a rendezvous connection from {}: not one of the job's hosts (admit a "
                 "network with --rendezvous-allow CIDR)",
                 asio::ip::address_v4(address).to_string());
  }
  static const std::string kForbidden =
      "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  auto peer = std::make_shared<tcp::socket>(std::move(socket));
  // The request is not read: the answer goes out at once and the connection is closed.
  asio::async_write(*peer, asio::buffer(kForbidden), [peer](beast::error_code, size_t) {
    beast::error_code ignored;
    peer->shutdown(tcp::socket::shutdown_both, ignored);
    peer->close(ignored);
  });
}

}  // namespace etrun::rendezvous
