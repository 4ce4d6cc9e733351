#include "rendezvous/http_server.h"

#include "rendezvous/http_request.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>

#include <boost/asio/ip/address_v4.hpp>
#include <boost/beast/core.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
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

// Each set of things the accept loop logs once holds at most this many: an address seen
// refused is not remembered past it (nor logged again), so no peer can grow it without end.
constexpr size_t kMaxLogged = 1024;

// Answers written at accept, the request unread, and the connection closed.
std::string Refusal(int status, const std::string& body) {
  return ResponseHeader(status, false, body.size()) + body;
}
const std::string kNotAJobHost = Refusal(403, "not one of the job's hosts\n");
const std::string kNotTheJobsUser = Refusal(403, "only the job's user may use this rendezvous store\n");
const std::string kPeerFull = Refusal(503, "too many connections from this address\n");
const std::string kTotalFull = Refusal(503, "too many connections\n");

// Limits as Listen applies them: the total under half the open-file limit.
HttpLimits Applied(HttpLimits limits) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    limits.max_connections = std::min<size_t>(limits.max_connections, std::max<size_t>(files.rlim_cur / 2, 1));
  }
  return limits;
}

}  // namespace

class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Counted in `caps` (admitted from `address`) until destroyed.
  Connection(tcp::socket socket, HttpHandler* handler, const HttpLimits& limits,
             std::weak_ptr<bool> server_alive, std::shared_ptr<Shard> shard,
             std::shared_ptr<ServerCaps> caps, uint32_t address)
      : socket_(std::move(socket)),
        handler_(handler),
        limits_(limits),
        server_alive_(server_alive),
        shard_(std::move(shard)),
        caps_(std::move(caps)),
        address_(address) {}

  ~Connection() {
    ReleaseBody();
    caps_->Release(address_);
  }

  // The server is going away with no thread left to answer: drop the self-reference, so the
  // connection is freed (its socket closed) once nothing else holds it.
  void Abandon() { self_.reset(); }

  void Start() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    // One deadline for the whole request, header and body: a slow sender is cut off with it.
    Arm();
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

 private:
  // The answer to one request handed to the handler, shared by every copy of its `respond`: the
  // first call is sent; when the last copy goes uncalled, the client gets a 500 instead of
  // waiting forever (a handler that replaced a held request's callback, a queue dropped).
  class Answer {
   public:
    explicit Answer(std::weak_ptr<Connection> connection) : connection_(std::move(connection)) {}
    ~Answer() {
      if (!sent_.exchange(true)) Deliver(connection_, {500, "the request was dropped unanswered\n"});
    }
    Answer(const Answer&) = delete;
    Answer& operator=(const Answer&) = delete;

    void Send(HttpResponse response) {
      if (!sent_.exchange(true)) Deliver(connection_, std::move(response));
    }

   private:
    std::weak_ptr<Connection> connection_;
    std::atomic<bool> sent_{false};
  };

  // The header is in: reserve the body's bytes before reading it (ServerCaps), or answer 503.
  void OnHeader(beast::error_code ec) {
    if (ec || parser_->is_done()) return OnRead(ec);
    size_t body = BodyReservation(*parser_, limits_);
    if (!caps_->ReserveBody(address_, body)) {
      return Reply({503, "the rendezvous store is receiving too much at once; try again\n"});
    }
    reserved_ = body;
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code read, size_t) { self->OnRead(read); });
  }

  void ReleaseBody() {
    caps_->ReleaseBody(address_, reserved_);
    reserved_ = 0;
  }

  void OnRead(beast::error_code ec) {
    Disarm();       // a held rank_and_size may wait for minutes
    ReleaseBody();  // the body now is the request's, then the store's (which counts its own)
    if (ec) {
      int status = StatusForReadError(ec);
      return status == 0 ? Close() : Reply({status, ""});
    }
    HttpRequest request;
    if (int status = AcceptRequest(parser_->release(), &request, &keep_alive_); status != 0) {
      return Reply({status, ""});
    }
    if (server_alive_.expired()) return Reply({503, ""});
    // Keep ourselves alive while the handler holds the answer; the server frees us if it goes
    // first.
    Hold();
    auto answer = std::make_shared<Answer>(shared_from_this());
    handler_->Handle(std::move(request), [answer](HttpResponse response) { answer->Send(std::move(response)); });
  }

  // Onto this connection's shard: at once when called on its thread, else queued.
  static void Deliver(const std::weak_ptr<Connection>& weak, HttpResponse response) {
    auto self = weak.lock();
    if (!self) return;
    asio::dispatch(self->socket_.get_executor(), [self, response = std::move(response)]() mutable {
      self->Reply(std::move(response));
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
    Arm();
    asio::async_write(socket_, buffers, [self = shared_from_this(), keep](beast::error_code ec, size_t) {
      self->Disarm();
      self->shared_body_.reset();
      if (ec || !keep) return self->Close();
      self->Release();
      self->replied_ = false;
      self->keep_alive_ = false;
      self->Start();
    });
  }

  void Close() {
    Disarm();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    Release();
  }

  // Sets (or moves) the deadline of the read or write about to start. Past it, the shard's
  // sweep closes the socket, which ends that operation (operation_aborted: closed unanswered,
  // as a timed-out read). Only while an operation is pending (which holds us alive) are we in
  // shard_->timed. The shard's thread only, as Disarm.
  void Arm() {
    deadline_ = std::chrono::steady_clock::now() + limits_.read_timeout;
    if (!timed_) {
      timed_ = true;
      shard_->timed.insert(this);
    }
    Sweep(shard_, std::clamp(limits_.read_timeout / 10, std::chrono::milliseconds(5),
                             std::chrono::milliseconds(250)));
  }

  void Disarm() {
    if (!timed_) return;
    timed_ = false;
    shard_->timed.erase(this);
  }

  // Arms the shard's sweep unless armed: every `every`, it closes the sockets of the connections
  // past their deadline, and stops once none has one.
  static void Sweep(const std::shared_ptr<Shard>& shard, std::chrono::milliseconds every) {
    if (shard->sweeping) return;
    shard->sweeping = true;
    shard->sweep.expires_after(every);
    shard->sweep.async_wait([shard, every](beast::error_code ec) {
      shard->sweeping = false;
      if (ec) return;
      auto now = std::chrono::steady_clock::now();
      for (Connection* connection : shard->timed) {
        beast::error_code ignored;
        if (connection->deadline_ <= now) connection->socket_.close(ignored);
      }
      if (!shard->timed.empty()) Sweep(shard, every);
    });
  }

  void Hold() {
    self_ = shared_from_this();
    std::lock_guard<std::mutex> lock(shard_->mu);
    shard_->waiting[this] = self_;
  }

  void Release() {
    if (!self_) return;
    {
      std::lock_guard<std::mutex> lock(shard_->mu);
      shard_->waiting.erase(this);
    }
    self_.reset();  // may free us: last
  }

  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string header_;   // of the response being written
  std::string body_;     // its body, unless shared_body_
  std::shared_ptr<const std::string> shared_body_;
  HttpHandler* handler_;
  HttpLimits limits_;
  std::weak_ptr<bool> server_alive_;
  std::shared_ptr<Shard> shard_;
  std::shared_ptr<Connection> self_;  // while the handler holds the answer (Hold)
  std::shared_ptr<ServerCaps> caps_;
  uint32_t address_;
  std::chrono::steady_clock::time_point deadline_;  // of the pending read or write, when timed_
  bool timed_ = false;  // in shard_->timed
  size_t reserved_ = 0;  // body bytes reserved in caps_
  bool replied_ = false;
  bool keep_alive_ = false;
};

HttpServer::HttpServer(asio::io_context* io, HttpHandler* handler, HttpLimits limits)
    : HttpServer(std::vector<asio::io_context*>{io}, handler, limits) {}

HttpServer::HttpServer(std::vector<asio::io_context*> shards, HttpHandler* handler, HttpLimits limits)
    : handler_(handler), limits_(limits), alive_(std::make_shared<bool>(true)) {
  for (asio::io_context* shard : shards) listeners_.push_back(std::make_unique<Listener>(shard));
}

void HttpServer::set_local_user(uint32_t uid) {
  local_user_ = uid;
  for (auto& listener : listeners_) listener->peer_uid = std::make_unique<PeerUid>();
}

void HttpServer::TEST_LookUpOwnersInProc() {
  for (auto& listener : listeners_) listener->peer_uid->TEST_UseProc();
}

bool HttpServer::FirstTime(std::set<uint32_t>* seen, uint32_t key) {
  std::lock_guard<std::mutex> lock(log_mu_);
  return seen->size() < kMaxLogged && seen->insert(key).second;
}

HttpServer::~HttpServer() {
  Stop();
  for (auto& listener : listeners_) {
    std::unordered_map<Connection*, std::weak_ptr<Connection>> waiting;
    {
      std::lock_guard<std::mutex> lock(listener->shard->mu);
      waiting.swap(listener->shard->waiting);
    }
    for (auto& [address, weak] : waiting) {
      if (auto connection = weak.lock()) connection->Abandon();
    }
  }
}

bool OpenListener(tcp::acceptor& acceptor, const std::string& address, int port, std::string* err,
                  bool reuse_port) {
  beast::error_code ec;
  auto ip = asio::ip::make_address_v4(address, ec);
  if (ec) {
    *err = "cannot listen on '" + address + "': not an IPv4 address";
    return false;
  }
  tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  int one = 1;
  if (!ec && reuse_port &&
      setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    ec.assign(errno, asio::error::get_system_category());
  }
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    *err = "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return false;
  }
  return true;
}

bool HttpServer::Listen(const std::string& address, int port, std::string* err) {
  // The first listener takes the port (any free one for 0); the others join it.
  bool shared = listeners_.size() > 1;
  for (auto& listener : listeners_) {
    if (!OpenListener(listener->acceptor, address, port, err, shared)) {
      beast::error_code ignored;
      for (auto& opened : listeners_) opened->acceptor.close(ignored);
      return false;
    }
    port = listener->acceptor.local_endpoint().port();
  }
  port_ = port;
  limits_ = Applied(limits_);
  caps_ = std::make_shared<ServerCaps>(limits_.max_connections, limits_.max_connections_per_peer,
                                       limits_.max_body_bytes_in_flight);
  for (auto& listener : listeners_) Accept(listener.get());
  return true;
}

void HttpServer::Stop() {
  beast::error_code ignored;
  for (auto& listener : listeners_) listener->acceptor.close(ignored);
  alive_.reset();
}

void HttpServer::Accept(Listener* listener) {
  std::weak_ptr<bool> alive = alive_;
  // Each connection stays on its listener's shard, whose one thread runs all its handlers; the
  // accept chain is one handler at a time.
  listener->acceptor.async_accept(*listener->io, [this, alive, listener](beast::error_code ec, tcp::socket socket) {
    if (!alive.lock()) return;
    if (!ec) {
      std::vector<tcp::socket> sockets;
      sockets.push_back(std::move(socket));
      if (listener->peer_uid && listener->peer_uid->using_proc()) {
        TakePending(listener, &sockets);  // one /proc reading for all
      }
      Admit(listener, std::move(sockets));
    } else if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec == asio::error::no_buffer_space ||
               ec == asio::error::no_memory) {
      // Out of descriptors: the pending connection stays queued; try again shortly instead of
      // spinning on accept. Open connections keep being served meanwhile.
      if (!listener->out_of_descriptors) {
        spdlog::warn("rendezvous server: cannot accept more connections ({}); retrying", ec.message());
      }
      listener->out_of_descriptors = true;
      auto timer = std::make_shared<asio::steady_timer>(*listener->io, std::chrono::milliseconds(100));
      timer->async_wait([this, alive, timer, listener](beast::error_code) {
        if (alive.lock() && listener->acceptor.is_open()) Accept(listener);
      });
      return;
    }
    if (!ec) listener->out_of_descriptors = false;
    if (listener->acceptor.is_open()) Accept(listener);
  });
}

struct HttpServer::Arrival {
  tcp::socket socket;
  tcp::endpoint peer;
  uint32_t address = 0;
  bool ask_owner = false;  // from this machine: its owner is looked up
};

void HttpServer::TakePending(Listener* listener, std::vector<tcp::socket>* sockets) {
  beast::error_code ec;
  listener->acceptor.non_blocking(true, ec);  // accept below returns would_block when none is waiting
  while (!ec && sockets->size() < 1024) {
    tcp::socket more(*listener->io);
    listener->acceptor.accept(more, ec);  // an error other than would_block comes again to async_accept
    if (!ec) sockets->push_back(std::move(more));
  }
}

void HttpServer::Admit(Listener* listener, std::vector<tcp::socket> sockets) {
  std::vector<Arrival> arrivals;
  std::vector<TcpFourTuple> asks;
  for (tcp::socket& socket : sockets) {
    beast::error_code ec, local_ec;
    tcp::endpoint peer = socket.remote_endpoint(ec);
    tcp::endpoint local = socket.local_endpoint(local_ec);
    // Gone already (or not IPv4, which we never bind): closed as `sockets` goes.
    if (ec || local_ec || !peer.address().is_v4() || !local.address().is_v4()) continue;
    uint32_t address = peer.address().to_v4().to_uint();
    if (access_ != nullptr && !access_->Allows(address)) {
      if (FirstTime(&refused_, address)) {
        spdlog::warn("refused a rendezvous connection from {}: not one of the job's hosts (admit a "
                     "network with --rendezvous-allow CIDR)",
                     peer.address().to_string());
      }
      Refuse(std::move(socket), kNotAJobHost);
      continue;
    }
    bool ask = access_ != nullptr && local_user_ && access_->IsThisMachine(address);
    if (ask) asks.push_back({address, peer.port(), local.address().to_v4().to_uint(), local.port()});
    arrivals.push_back({std::move(socket), peer, address, ask});
  }
  // Every connection asked about is held open until its answer is used (see peer_uid.h).
  std::string err;
  std::vector<std::optional<uint32_t>> owners;
  if (!asks.empty()) owners = listener->peer_uid->FindAll(asks, &err);
  size_t next = 0;
  for (Arrival& arrival : arrivals) {
    if (arrival.ask_owner && !IsJobUser(arrival, owners[next++], err)) {
      Refuse(std::move(arrival.socket), kNotTheJobsUser);
      continue;
    }
    switch (caps_->TryAdmit(arrival.address)) {
      case ServerCaps::Verdict::kAdmitted:
        break;
      case ServerCaps::Verdict::kPeerFull:
        if (FirstTime(&capped_, arrival.address)) {
          spdlog::warn("refused rendezvous connections from {}: it has {} open, the most one address may "
                       "(a Horovod worker holds one or two)",
                       arrival.peer.address().to_string(), caps_->max_per_peer());
        }
        Refuse(std::move(arrival.socket), kPeerFull);
        continue;
      case ServerCaps::Verdict::kTotalFull:
        if (std::lock_guard<std::mutex> lock(log_mu_); !warned_total_) {
          warned_total_ = true;
          spdlog::warn("refused rendezvous connections: {} are open, the most the store serves at once",
                       caps_->max_connections());
        }
        Refuse(std::move(arrival.socket), kTotalFull);
        continue;
    }
    beast::error_code ignored;
    arrival.socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Connection>(std::move(arrival.socket), handler_, limits_, alive_, listener->shard, caps_,
                                 arrival.address)
        ->Start();
  }
}

bool HttpServer::IsJobUser(const Arrival& arrival, const std::optional<uint32_t>& uid, const std::string& err) {
  if (uid && *uid == *local_user_) return true;
  if (uid && FirstTime(&refused_users_, *uid)) {
    spdlog::warn("refused rendezvous connections from user {} on this machine (only the job's user may "
                 "use its store)",
                 *uid);
  } else if (std::lock_guard<std::mutex> lock(log_mu_); !uid && !warned_unknown_owner_) {
    warned_unknown_owner_ = true;
    spdlog::warn("refused a rendezvous connection from {}:{} on this machine: cannot tell which user it "
                 "belongs to ({}); only the job's user may use its store",
                 arrival.peer.address().to_string(), arrival.peer.port(), err);
  }
  return false;
}

void HttpServer::Refuse(tcp::socket socket, const std::string& response) {
  auto peer = std::make_shared<tcp::socket>(std::move(socket));
  // The request is not read: the answer goes out at once and the connection is closed.
  asio::async_write(*peer, asio::buffer(response), [peer](beast::error_code, size_t) {
    beast::error_code ignored;
    peer->shutdown(tcp::socket::shutdown_both, ignored);
    peer->close(ignored);
  });
}

}  // namespace etrun::rendezvous
