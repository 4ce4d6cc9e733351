#include "rendezvous/http_server.h"

#include "rendezvous/http_request.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <optional>

#include <boost/beast/core.hpp>
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
// Written into `out`, no allocation; returns their size. The longest (a 444 closing, a 20-digit
// length) takes 108 bytes.
constexpr size_t kMaxResponseHeader = 128;
size_t WriteResponseHeader(int status, bool keep_alive, size_t length, char (&out)[kMaxResponseHeader]) {
  char* at = out;
  auto put = [&at](std::string_view text) { at = std::copy(text.begin(), text.end(), at); };
  put("HTTP/1.1 ");
  at = std::to_chars(at, out + kMaxResponseHeader, status).ptr;
  put(" ");
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  put(std::string_view(reason.data(), reason.size()));
  put(keep_alive ? "\r\n" : "\r\nConnection: close\r\n");
  put("Content-Length: ");
  at = std::to_chars(at, out + kMaxResponseHeader, length).ptr;
  put("\r\n\r\n");
  return static_cast<size_t>(at - out);
}

std::string ResponseHeader(int status, bool keep_alive, size_t length) {
  char header[kMaxResponseHeader];
  return std::string(header, WriteResponseHeader(status, keep_alive, length, header));
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

// The answer to a request whose body would pass ServerCaps' bytes in flight.
constexpr const char* kReceivingTooMuch = "the rendezvous store is receiving too much at once; try again\n";

// Limits as Listen applies them: the total under half the open-file limit.
HttpLimits Applied(HttpLimits limits) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    limits.max_connections = std::min<size_t>(limits.max_connections, std::max<size_t>(files.rlim_cur / 2, 1));
  }
  return limits;
}

}  // namespace

// A connection's epoll events: edge-triggered, so a descriptor costs one epoll_ctl for its life
// (a second only when an answer does not fit the socket at once: EPOLLOUT is added then).
constexpr uint32_t kReadEvents = EPOLLIN | EPOLLRDHUP | EPOLLET;
constexpr uint32_t kWriteEvents = kReadEvents | EPOLLOUT;

class HttpServer::Connection : public Watcher, public std::enable_shared_from_this<Connection> {
 public:
  // Counted in the shard's caps (admitted from `address`) until destroyed.
  Connection(int fd, std::shared_ptr<Shard> shard, uint32_t address)
      : fd_(fd), shard_(std::move(shard)), address_(address) {}

  ~Connection() {
    if (fd_ >= 0) close(fd_);
    ReleaseBody();
    shard_->caps->Release(address_);
  }

  // The server is going away with no thread left to answer: close the socket and drop the
  // self-reference, so the connection is freed once nothing else holds it.
  void Abandon() {
    closed_ = true;
    open_ = {};
    timed_ = {};
    if (fd_ >= 0) {
      Unregister();
      close(fd_);
    }
    fd_ = -1;
    auto last = std::move(self_);
  }

  // The next open connection of the shard's list.
  Connection* next_open() const { return open_.next; }

  void Start() {
    self_ = shared_from_this();
    Link(&shard_->open, this, &Connection::open_);
    ++shard_->open_count;
    // Bytes that came before this are reported at once. No read is tried first: measured, the
    // request was almost never there yet when its connection was accepted (the client sends it
    // once connect() returns), and each such read was a system call for nothing.
    if (!Register(kReadEvents)) return Close(false);
    BeginRequest();
  }

  void OnEvents(uint32_t events) override {
    if (closed_) return;  // closed by an earlier event of this batch
    // Reset, or hung up both ways: nobody is left to answer.
    if (events & (EPOLLHUP | EPOLLERR)) return Close(true);
    if (events & EPOLLIN) readable_ = true;
    if (events & EPOLLRDHUP) peer_done_ = true;
    if (state_ == State::kWriting && (events & EPOLLOUT)) return Write();
    if (state_ == State::kReading && readable_) ReadMore();
  }

 private:
  // kNext: an answer is out and the next request's start is posted; events meanwhile are only
  // noted (readable_), so that a write already done is not done again.
  enum class State { kReading, kHandling, kWriting, kNext };

  // The answer to one request handed to the handler, shared by every copy of its `respond`: the
  // first call is sent; when the last copy goes uncalled, the client gets a 500 instead of
  // waiting forever (a handler that replaced a held request's callback, a queue dropped).
  class Answer : public Responder::Target {
   public:
    explicit Answer(std::weak_ptr<Connection> connection) : connection_(std::move(connection)) {}
    ~Answer() override {
      if (!sent_.exchange(true)) Deliver(connection_, {500, "the request was dropped unanswered\n"});
    }
    Answer(const Answer&) = delete;
    Answer& operator=(const Answer&) = delete;

    void Send(HttpResponse response) override {
      if (!sent_.exchange(true)) Deliver(connection_, std::move(response));
    }

   private:
    std::weak_ptr<Connection> connection_;
    std::atomic<bool> sent_{false};
  };

  // A new request: one deadline for the whole request, header and body (a slow sender is cut
  // off with it; an idle keep-alive client too). Bytes already here (a pipelined request) are
  // parsed at once; otherwise the socket is read when epoll says so.
  void BeginRequest() {
    state_ = State::kReading;
    phase_ = Phase::kHead;
    received_ = 0;
    Arm();
    if (!pending_.empty()) {
      std::string bytes = std::move(pending_);
      pending_.clear();
      if (!Feed(bytes.data(), bytes.size())) return;
    }
    if (state_ == State::kReading && readable_) ReadMore();
  }

  // Reads until the request is whole, the socket is drained, or the connection ends.
  void ReadMore() {
    std::vector<char>& buffer = shard_->scratch;
    while (state_ == State::kReading && !closed_) {
      ssize_t n = read(fd_, buffer.data(), buffer.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) readable_ = false;
        else Close(true);  // reset
        return;
      }
      if (n == 0) return OnEndOfStream();
      // A short read drained the socket: the next bytes bring a new edge. Not so the end of the
      // stream when it came with them (EPOLLRDHUP): reading on finds it.
      if (static_cast<size_t>(n) < buffer.size() && !peer_done_) readable_ = false;
      if (!Feed(buffer.data(), static_cast<size_t>(n))) return;
      if (!readable_) return;
    }
  }

  // The client closed its side. Mid-request, that is a malformed request (Beast's verdict, as
  // when it read the socket itself); between requests, the end.
  void OnEndOfStream() {
    readable_ = false;
    peer_done_ = true;
    if (received_ == 0 && pending_.empty()) return Close(true);
    if (phase_ == Phase::kBody) return Reply({400, ""});  // as Beast's partial message
    if (phase_ == Phase::kHead && !ToBeast()) return;
    beast::error_code ec;
    parser_->put_eof(ec);
    int status = ec ? StatusForReadError(ec) : 400;
    return status == 0 ? Close(true) : Reply({status, ""});
  }

  // Takes `size` bytes of the request: parsed as a simple head with its body (ParseSimpleHead)
  // when they start with one, else by Beast. What follows a whole request is kept (the next
  // one). False once the connection is not reading any more (answered, handed on, or closed).
  bool Feed(const char* data, size_t size) {
    received_ += size;
    if (phase_ == Phase::kBody) return FeedBody(data, size);
    if (phase_ == Phase::kBeast) return FeedBeast(data, size);
    // The request's first bytes: pending_ is empty here (BeginRequest hands its bytes over).
    std::string_view in(data, size);
    SimpleHead head;
    if (!ParseSimpleHead(in, shard_->limits, &head)) {
      pending_.assign(in);
      return ToBeast();
    }
    keep_alive_ = head.keep_alive;
    if (int status = LengthStatus(head.method, head.has_content_length); status != 0) {
      Reply({status, ""});
      return false;
    }
    // The body's bytes are reserved before they are read (ServerCaps), or 503.
    if (!shard_->caps->ReserveBody(address_, head.content_length)) {
      Reply({503, kReceivingTooMuch});
      return false;
    }
    reserved_ = head.content_length;
    // clear() then append(): the strings keep their buffers from the last request, and append
    // copies straight in (assign() takes libstdc++'s general replace: 75 instructions, against 40).
    request_.method.clear();
    request_.method.append(head.method);
    request_.target.clear();
    request_.target.append(head.target);
    request_.authorization.clear();
    request_.authorization.append(head.authorization);
    request_.body.clear();
    body_length_ = head.content_length;
    if (body_length_ > 0) request_.body.reserve(body_length_);
    phase_ = Phase::kBody;
    in.remove_prefix(head.size);
    return FeedBody(in.data(), in.size());
  }

  // A simple head's body: up to its Content-Length, the rest kept for the next request.
  bool FeedBody(const char* data, size_t size) {
    size_t take = std::min(size, body_length_ - request_.body.size());
    request_.body.append(data, take);
    if (request_.body.size() < body_length_) return true;
    pending_.assign(data + take, size - take);
    Dispatch(std::move(request_));  // request_ is set whole again by the next simple head (Feed)
    return false;
  }

  // The request so far (pending_, from its first byte) goes to Beast's parser instead. False
  // once the connection is not reading any more.
  bool ToBeast() {
    phase_ = Phase::kBeast;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shard_->limits.max_header_bytes));
    parser_->body_limit(shard_->limits.max_body_bytes);
    parser_->eager(true);
    std::string bytes = std::move(pending_);
    pending_.clear();
    return bytes.empty() || FeedBeast(bytes.data(), bytes.size());
  }

  // Gives `size` bytes to Beast's parser: with what an incomplete header left before them, and
  // keeping what follows a whole request (the next one). False once the connection is not
  // reading any more.
  bool FeedBeast(const char* data, size_t size) {
    std::string_view in(data, size);
    if (!pending_.empty()) {  // the header so far: Beast wants it whole, from its first byte
      pending_.append(data, size);
      in = pending_;
    }
    while (!in.empty()) {
      beast::error_code ec;
      size_t used = parser_->put(asio::buffer(in.data(), in.size()), ec);
      in.remove_prefix(used);
      if (ec == http::error::need_more) break;
      if (ec) {
        pending_.clear();
        int status = StatusForReadError(ec);
        Reply({status == 0 ? 400 : status, ""});
        return false;
      }
      if (parser_->is_header_done() && !reservation_checked_) {
        // The header is in: reserve the body's bytes before reading it (ServerCaps), or 503.
        reservation_checked_ = true;
        size_t body = BodyReservation(*parser_, shard_->limits);
        if (!shard_->caps->ReserveBody(address_, body)) {
          pending_.clear();
          Reply({503, kReceivingTooMuch});
          return false;
        }
        reserved_ = body;
      }
      if (parser_->is_done()) {
        std::string rest(in);  // a pipelined request, read with this one
        pending_ = std::move(rest);
        OnRequest();
        return false;
      }
      if (used == 0) break;
    }
    // Whatever the parser left is the start of a header it needs whole.
    if (in.data() != pending_.data() || in.size() != pending_.size()) {
      std::string keep(in);
      pending_ = std::move(keep);
    }
    return state_ == State::kReading && !closed_;
  }

  void ReleaseBody() {
    shard_->caps->ReleaseBody(address_, reserved_);
    reserved_ = 0;
  }

  // A whole request parsed by Beast.
  void OnRequest() {
    reservation_checked_ = false;
    HttpRequest request;
    int status = AcceptRequest(parser_->release(), &request, &keep_alive_);
    parser_.reset();
    if (status != 0) {
      Disarm();
      ReleaseBody();
      state_ = State::kHandling;
      return Reply({status, ""});
    }
    Dispatch(std::move(request));
  }

  // Hands a whole request to the handler.
  void Dispatch(HttpRequest&& request) {
    Disarm();       // a held rank_and_size may wait for minutes
    ReleaseBody();  // the body now is the request's, then the store's (which counts its own)
    state_ = State::kHandling;
    if (shard_->server_alive.expired()) return Reply({503, ""});
    shard_->handler->Handle(std::move(request), Responder(new Answer(weak_from_this())));
  }

  // Onto this connection's shard: at once when called on its thread, else queued.
  static void Deliver(const std::weak_ptr<Connection>& weak, HttpResponse response) {
    auto self = weak.lock();
    if (!self) return;
    EventLoop* loop = self->shard_->loop;
    if (loop->InLoopThread()) return self->Reply(std::move(response));
    loop->Post([self, response = std::move(response)]() mutable { self->Reply(std::move(response)); });
  }

  // Answers the current request. A client that asked for keep-alive (HTTP/1.1 without
  // "Connection: close", as wrk or Horovod's C++ client) may send another request; everything
  // else (errors included) closes after the response. The header and the body go out in one
  // gathered write; a shared body is written from the stored buffer itself.
  void Reply(HttpResponse response) {
    if (replied_ || closed_) return;
    replied_ = true;
    keep_ = keep_alive_ && response.status < 400;
    body_ = std::move(response.body);
    shared_body_ = std::move(response.shared_body);
    header_size_ = WriteResponseHeader(response.status, keep_, (shared_body_ ? *shared_body_ : body_).size(), header_);
    written_ = 0;
    state_ = State::kWriting;
    Write();
  }

  void Write() {
    const std::string& body = shared_body_ ? *shared_body_ : body_;
    const size_t total = header_size_ + body.size();
    while (written_ < total) {
      iovec iov[2];
      int count = 0;
      if (written_ < header_size_) {
        iov[count++] = {header_ + written_, header_size_ - written_};
        iov[count++] = {const_cast<char*>(body.data()), body.size()};
      } else {
        iov[count++] = {const_cast<char*>(body.data()) + (written_ - header_size_), total - written_};
      }
      msghdr message{};
      message.msg_iov = iov;
      message.msg_iovlen = static_cast<size_t>(count);
      ssize_t n = sendmsg(fd_, &message, MSG_NOSIGNAL);
      if (n >= 0) {
        written_ += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Close(true);
      // The socket is full: wait for room. The deadline is set at the first wait and not moved
      // by later ones, so the whole answer must be taken within it (a reader that takes a few
      // bytes now and then does not keep its place for ever).
      if (!timed_.in) Arm();
      if (!writable_events_) {
        writable_events_ = true;
        if (!Register(kWriteEvents)) return Close(true);
      }
      return;
    }
    Disarm();
    shared_body_.reset();
    body_.clear();
    if (!keep_) return Close(false);
    replied_ = false;
    keep_alive_ = false;
    // Nothing more read yet: wait for the next request (or the client's close) from epoll.
    if (pending_.empty() && !readable_) return BeginRequest();
    // The next request, or the end of the stream, is here already (a pipelining client). Start
    // it from the loop rather than inside this one's stack, whose depth would otherwise grow
    // with every pipelined request answered at once. Until then no event may write again (an
    // EPOLLOUT still registered from an earlier full socket comes with the client's next bytes)
    // nor start a second request.
    state_ = State::kNext;
    shard_->loop->Post([self = shared_from_this()] {
      if (!self->closed_) self->BeginRequest();
    });
  }

  // Adds the socket to the shard's epoll, or changes its events.
  bool Register(uint32_t events) {
    if (registered_) return shard_->loop->Modify(fd_, events, this);
    registered_ = true;
    return shard_->loop->Add(fd_, events, this);
  }

  // Before the socket is closed: the loop forgets it (what epoll may still report for it, while
  // a rank being started holds the descriptor too, is dropped; EventLoop::Forget). No system
  // call: close() takes it out of epoll.
  void Unregister() {
    if (registered_) shard_->loop->Forget(fd_);
    registered_ = false;
  }

  // Closes the socket; the connection is freed once the loop's current work is done (callers up
  // this stack may still touch it). With the peer still there, the socket is shut down first,
  // so an answer written before unread bytes (a 503, a 400) ends with FIN after its last byte.
  void Close(bool peer_gone) {
    if (closed_) return;
    closed_ = true;
    Disarm();
    Unregister();
    if (!peer_gone) shutdown(fd_, SHUT_RDWR);
    close(fd_);
    fd_ = -1;
    Unlink(&shard_->open, this, &Connection::open_);
    --shard_->open_count;
    shard_->loop->Retire(std::move(self_));
  }

  // Sets (or moves) the deadline of the read or write in progress. Past it, the shard's sweep
  // closes the connection (unanswered, as a timed-out read was). The shard's thread only, as
  // Disarm.
  void Arm() {
    deadline_ = shard_->loop->now() + shard_->limits.read_timeout;  // to the wake-up: ample for seconds
    if (!timed_.in) Link(&shard_->timed, this, &Connection::timed_);
    Sweep(shard_, std::clamp(shard_->limits.read_timeout / 10, std::chrono::milliseconds(5),
                             std::chrono::milliseconds(250)));
  }

  void Disarm() {
    if (timed_.in) Unlink(&shard_->timed, this, &Connection::timed_);
  }

  // A place in one of the shard's lists (Shard::open, Shard::timed): the connection is its node.
  struct Links {
    Connection* prev = nullptr;
    Connection* next = nullptr;
    bool in = false;
  };
  using Place = Links Connection::*;  // &Connection::open_ or &Connection::timed_
  static void Link(Connection** head, Connection* c, Place place) {
    (c->*place).prev = nullptr;
    (c->*place).next = *head;
    if (*head != nullptr) ((*head)->*place).prev = c;
    *head = c;
    (c->*place).in = true;
  }
  static void Unlink(Connection** head, Connection* c, Place place) {
    Links& links = c->*place;
    if (links.prev != nullptr) (links.prev->*place).next = links.next;
    else *head = links.next;
    if (links.next != nullptr) (links.next->*place).prev = links.prev;
    links = {};
  }

  // Arms the shard's sweep unless armed: every `every`, it closes the connections past their
  // deadline, and stops once none has one.
  static void Sweep(const std::shared_ptr<Shard>& shard, std::chrono::milliseconds every) {
    if (shard->sweeping) return;
    shard->sweeping = true;
    shard->loop->After(every, [weak = std::weak_ptr<Shard>(shard), every] {
      auto swept = weak.lock();
      if (!swept) return;
      swept->sweeping = false;
      auto now = swept->loop->now();
      std::vector<Connection*> late;
      for (Connection* c = swept->timed; c != nullptr; c = c->timed_.next) {
        if (c->deadline_ <= now) late.push_back(c);
      }
      for (Connection* connection : late) connection->Close(false);
      if (swept->timed != nullptr) Sweep(swept, every);
    });
  }

  // How the current request is being parsed: its head not yet (kHead), or it was a simple head
  // and its body is coming (kBody), or Beast parses it (kBeast).
  enum class Phase { kHead, kBody, kBeast };

  int fd_;
  Phase phase_ = Phase::kHead;
  HttpRequest request_;     // kBody: the request, its body growing to body_length_
  size_t body_length_ = 0;  // kBody
  std::optional<http::request_parser<http::string_body>> parser_;  // kBeast
  std::string pending_;  // read, not yet parsed: an incomplete header, or a pipelined request
  size_t received_ = 0;  // bytes of the current request read so far
  char header_[kMaxResponseHeader];  // of the response being written
  size_t header_size_ = 0;
  std::string body_;     // its body, unless shared_body_
  std::shared_ptr<const std::string> shared_body_;
  size_t written_ = 0;   // of header_ then the body
  std::shared_ptr<Shard> shard_;
  std::shared_ptr<Connection> self_;  // while open
  uint32_t address_;
  std::chrono::steady_clock::time_point deadline_;  // of the read or write in progress, when timed_
  State state_ = State::kReading;
  Links open_;   // in shard_->open while open
  Links timed_;  // in shard_->timed while a read or write has a deadline
  size_t reserved_ = 0;  // body bytes reserved in the shard's caps
  bool reservation_checked_ = false;  // for the current request
  bool readable_ = false;  // epoll said bytes came; not yet read to EAGAIN or a short read
  bool peer_done_ = false;  // the client closed its side
  bool registered_ = false;       // in the shard's epoll
  bool writable_events_ = false;  // EPOLLOUT is registered
  bool closed_ = false;
  bool replied_ = false;
  bool keep_alive_ = false;  // the client's request allows another
  bool keep_ = false;        // the answer being written leaves the connection open
};

HttpServer::HttpServer(EventLoop* loop, HttpHandler* handler, HttpLimits limits)
    : HttpServer(std::vector<EventLoop*>{loop}, handler, limits) {}

HttpServer::HttpServer(std::vector<EventLoop*> shards, HttpHandler* handler, HttpLimits limits)
    : handler_(handler), limits_(limits), alive_(std::make_shared<bool>(true)) {
  for (EventLoop* shard : shards) listeners_.push_back(std::make_unique<Listener>(this, shard));
}

void HttpServer::set_local_user(uint32_t uid) {
  local_user_ = uid;
  for (auto& listener : listeners_) listener->peer_uid = std::make_unique<PeerUid>();
}

void HttpServer::TEST_LookUpOwnersInProc() {
  for (auto& listener : listeners_) listener->peer_uid->TEST_UseProc();
}

size_t HttpServer::open_count() const {
  size_t open = 0;
  for (const auto& listener : listeners_) open += listener->shard->open_count;
  return open;
}

bool HttpServer::FirstTime(std::set<uint32_t>* seen, uint32_t key) {
  std::lock_guard<std::mutex> lock(log_mu_);
  return seen->size() < kMaxLogged && seen->insert(key).second;
}

HttpServer::~HttpServer() {
  Stop();
  for (auto& listener : listeners_) {
    std::vector<Connection*> open;
    for (Connection* c = listener->shard->open; c != nullptr; c = c->next_open()) open.push_back(c);
    listener->shard->open = nullptr;
    listener->shard->open_count = 0;
    listener->shard->timed = nullptr;
    for (Connection* connection : open) connection->Abandon();
  }
}

int ListenSocket(const std::string& address, int port, bool reuse_port, std::string* err) {
  in_addr ip{};
  if (inet_pton(AF_INET, address.c_str(), &ip) != 1) {
    *err = "cannot listen on '" + address + "': not an IPv4 address";
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr = ip;
  at.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            (!reuse_port || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0) &&
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 &&
            bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0 && listen(fd, SOMAXCONN) == 0;
  if (!ok) {
    *err = "cannot listen on " + address + ":" + std::to_string(port) + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

bool OpenListener(tcp::acceptor& acceptor, const std::string& address, int port, std::string* err) {
  int fd = ListenSocket(address, port, false, err);
  if (fd < 0) return false;
  beast::error_code ec;
  acceptor.assign(tcp::v4(), fd, ec);
  if (ec) {
    close(fd);
    *err = "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return false;
  }
  return true;
}

bool HttpServer::Listen(const std::string& address, int port, std::string* err) {
  // The first listener takes the port (any free one for 0); the others join it.
  bool shared = listeners_.size() > 1;
  auto close_all = [this] {
    for (auto& opened : listeners_) {
      if (opened->fd >= 0) {
        opened->loop->Remove(opened->fd);
        close(opened->fd);
      }
      opened->fd = -1;
    }
  };
  for (auto& listener : listeners_) {
    listener->fd = ListenSocket(address, port, shared, err);
    if (listener->fd < 0) {
      close_all();
      return false;
    }
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    getsockname(listener->fd, reinterpret_cast<sockaddr*>(&bound), &length);
    port = ntohs(bound.sin_port);
  }
  port_ = port;
  limits_ = Applied(limits_);
  caps_ = std::make_shared<ServerCaps>(limits_.max_connections, limits_.max_connections_per_peer,
                                       limits_.max_body_bytes_in_flight);
  for (auto& listener : listeners_) {
    Shard& shard = *listener->shard;
    shard.handler = handler_;
    shard.limits = limits_;
    shard.caps = caps_;
    shard.server_alive = alive_;
  }
  for (auto& listener : listeners_) {
    // Level-triggered: a batch left waiting is offered again by the next epoll_wait.
    if (!listener->loop->Add(listener->fd, EPOLLIN, listener.get())) {
      *err = "cannot listen on " + address + ":" + std::to_string(port) + ": epoll: " + std::strerror(errno);
      close_all();
      return false;
    }
  }
  return true;
}

void HttpServer::Stop() {
  for (auto& listener : listeners_) {
    if (listener->fd >= 0) {
      listener->loop->Remove(listener->fd);  // out of epoll now: its loop may run on
      close(listener->fd);
    }
    listener->fd = -1;
  }
  alive_.reset();
}

void HttpServer::Listener::OnEvents(uint32_t) { server->AcceptReady(this); }

void HttpServer::AcceptReady(Listener* listener) {
  // One /proc reading serves a whole batch. Otherwise one at a time: the listener is
  // level-triggered, so the next epoll_wait (which the loop makes anyway) offers the next one,
  // and no accept4 is spent on learning that none is left.
  const size_t batch = listener->peer_uid && listener->peer_uid->using_proc() ? 1024 : 1;
  std::vector<Arrival>& arrivals = listener->arrivals;  // kept between calls: no allocation each
  arrivals.clear();
  while (listener->fd >= 0 && arrivals.size() < batch) {
    Arrival arrival;
    socklen_t length = sizeof arrival.peer;
    arrival.fd = accept4(listener->fd, reinterpret_cast<sockaddr*>(&arrival.peer), &length,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (arrival.fd >= 0) {
      // Not IPv4 (never bound) or gone already: nothing to serve.
      if (arrival.peer.sin_family != AF_INET) {
        close(arrival.fd);
        continue;
      }
      arrival.address = ntohl(arrival.peer.sin_addr.s_addr);
      arrivals.push_back(arrival);
      listener->out_of_descriptors = false;
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      // Out of descriptors: the pending connections stay queued; accepting pauses shortly
      // instead of spinning on accept. Open connections keep being served meanwhile.
      if (!listener->out_of_descriptors) {
        spdlog::warn("rendezvous server: cannot accept more connections ({}); retrying", std::strerror(errno));
      }
      listener->out_of_descriptors = true;
      listener->loop->Modify(listener->fd, 0, listener);
      listener->loop->After(std::chrono::milliseconds(100), [listener, alive = std::weak_ptr<bool>(alive_)] {
        if (alive.lock() && listener->fd >= 0) listener->loop->Modify(listener->fd, EPOLLIN, listener);
      });
    }
    break;  // EAGAIN: none left
  }
  if (!arrivals.empty()) Admit(listener, arrivals);
}

namespace {

std::string DottedQuad(uint32_t address) {
  in_addr ip{htonl(address)};
  char text[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &ip, text, sizeof text);
  return text;
}

}  // namespace

void HttpServer::Admit(Listener* listener, std::vector<Arrival>& arrivals) {
  std::vector<TcpFourTuple> asks;
  for (Arrival& arrival : arrivals) {
    if (access_ != nullptr && !access_->Allows(arrival.address)) {
      if (FirstTime(&refused_, arrival.address)) {
        spdlog::warn("refused a rendezvous connection from {}: not one of the job's hosts (admit a "
                     "network with --rendezvous-allow CIDR)",
                     DottedQuad(arrival.address));
      }
      Refuse(arrival.fd, kNotAJobHost);
      arrival.fd = -1;
      continue;
    }
    arrival.ask_owner = access_ != nullptr && local_user_ && access_->IsThisMachine(arrival.address);
    if (!arrival.ask_owner) continue;
    sockaddr_in local{};
    socklen_t length = sizeof local;
    if (getsockname(arrival.fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 || local.sin_family != AF_INET) {
      close(arrival.fd);  // gone already
      arrival.fd = -1;
      continue;
    }
    asks.push_back({arrival.address, ntohs(arrival.peer.sin_port), ntohl(local.sin_addr.s_addr), ntohs(local.sin_port)});
  }
  // Every connection asked about is held open until its answer is used (see peer_uid.h).
  std::string err;
  std::vector<std::optional<uint32_t>> owners;
  if (!asks.empty()) owners = listener->peer_uid->FindAll(asks, &err);
  size_t next = 0;
  for (Arrival& arrival : arrivals) {
    if (arrival.fd < 0) continue;
    if (arrival.ask_owner && !IsJobUser(arrival, owners[next++], err)) {
      Refuse(arrival.fd, kNotTheJobsUser);
      continue;
    }
    switch (caps_->TryAdmit(arrival.address)) {
      case ServerCaps::Verdict::kAdmitted:
        break;
      case ServerCaps::Verdict::kPeerFull:
        if (FirstTime(&capped_, arrival.address)) {
          spdlog::warn("refused rendezvous connections from {}: it has {} open, the most one address may "
                       "(a Horovod worker holds one or two)",
                       DottedQuad(arrival.address), caps_->max_per_peer());
        }
        Refuse(arrival.fd, kPeerFull);
        continue;
      case ServerCaps::Verdict::kTotalFull:
        if (std::lock_guard<std::mutex> lock(log_mu_); !warned_total_) {
          warned_total_ = true;
          spdlog::warn("refused rendezvous connections: {} are open, the most the store serves at once",
                       caps_->max_connections());
        }
        Refuse(arrival.fd, kTotalFull);
        continue;
    }
    std::make_shared<Connection>(arrival.fd, listener->shard, arrival.address)->Start();
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
                 DottedQuad(arrival.address), ntohs(arrival.peer.sin_port), err);
  }
  return false;
}

void HttpServer::Refuse(int fd, const std::string& response) {
  // The request is not read: the answer (a few dozen bytes, into an empty socket) goes out at
  // once and the connection is closed.
  send(fd, response.data(), response.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

}  // namespace etrun::rendezvous
