#include "control/control.h"

#include <unistd.h>

#include <cstdint>
#include <ctime>
#include <limits>
#include <optional>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "control/control_auth.h"
#include "control/control_wire.h"

namespace etrun::control {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr uint32_t kHeaderLimit = 8 << 10;
// The largest answer a client reads: a pool's status with thousands of hosts and jobs.
constexpr uint64_t kAnswerLimit = 64 << 20;

std::string UtcNow() {
  time_t now = time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  char out[32];
  strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

std::string ErrorBody(const std::string& why) { return ErrorToJson(why).dump(); }

std::string_view View(beast::string_view text) { return {text.data(), text.size()}; }

}  // namespace

// What the server and its connections share; the connections may outlive the server.
struct ControlServer::Shared {
  Handler handler;
  std::string token;
  size_t max_body = 0;
  bool alive = true;    // the server (and its owner, the handler's) still exists
  int connections = 0;  // open now (the driver thread's only)
};

// One client connection: a session of control_auth.h's exchange. Its reads, writes and the
// handler all run on the driver thread.
class ControlServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<Shared> shared, std::string nonce)
      : stream_(std::move(socket)),
        shared_(std::move(shared)),
        auth_(shared_->token, std::move(nonce), shared_->max_body) {
    ++shared_->connections;
  }
  ~Connection() { --shared_->connections; }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    // The body's length is ServerAuth's to judge, after the signature: no limit here (the
    // parser would refuse a long one before the headers were checked). Not boost::none, which
    // Boost 1.74's parser compares as less than any length.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(kControlReadTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

 private:
  void OnHeader(beast::error_code ec) {
    if (ec) {
      // Gone, timed out, or not HTTP: a malformed request gets 400, the rest nothing.
      bool gone = ec == http::error::end_of_stream || ec == asio::error::eof ||
                  ec == asio::error::connection_reset || ec == beast::error::timeout ||
                  ec == asio::error::operation_aborted;
      return gone ? Close() : Answer(400, ErrorBody("malformed request: " + ec.message()), "", false);
    }
    const auto& request = parser_->get();
    int64_t length = -1;
    if (!parser_->chunked()) length = static_cast<int64_t>(parser_->content_length().value_or(0));
    ServerAuth::Verdict verdict = auth_.OnHeaders(View(request.method_string()), View(request.target()),
                                                   View(request[kAuthHeader]), length);
    switch (verdict.step) {
      case ServerAuth::Step::kHello:
        return Answer(200, "", auth_.hello_reply(), true);
      case ServerAuth::Step::kRefuse:
        return Answer(verdict.status, ErrorBody(verdict.why), "", false);
      case ServerAuth::Step::kAnswer: {
        std::string body = ErrorBody(verdict.why);
        std::string signature = auth_.SignAnswer(verdict.status, body);
        return Answer(verdict.status, std::move(body), signature, false);
      }
      case ServerAuth::Step::kReadBody:
        break;
    }
    if (parser_->is_done()) return OnBody({});
    parser_->body_limit(shared_->max_body);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code e, size_t) { self->OnBody(e); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) return Close();
    auto message = parser_->release();
    if (!auth_.CheckBody(message.body())) {
      return Answer(401, ErrorBody("the body is not the one signed"), "", false);
    }
    if (!shared_->alive) {
      return Reply(503, ErrorBody("shutting down"), false);
    }
    rendezvous::HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.body = std::move(message.body());
    bool keep = message.keep_alive();
    stream_.expires_never();  // the handler may answer later
    auto answered = std::make_shared<bool>(false);
    std::weak_ptr<Connection> weak = shared_from_this();
    shared_->handler(request, [weak, answered, keep](int status, nlohmann::json body) {
      if (*answered) return;
      *answered = true;
      auto self = weak.lock();
      if (!self) return;
      std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      asio::dispatch(self->stream_.get_executor(), [self, status, text = std::move(text), keep]() mutable {
        self->Reply(status, std::move(text), keep);
      });
    });
    // Held by the handler's `respond` until it answers: keep ourselves alive until then.
    if (!*answered) held_ = shared_from_this();
  }

  // The answer to the request accepted last, signed.
  void Reply(int status, std::string body, bool keep) {
    held_.reset();
    std::string signature = auth_.SignAnswer(status, body);
    Answer(status, std::move(body), signature, keep);
  }

  void Answer(int status, std::string body, const std::string& signature, bool keep) {
    response_.emplace(static_cast<http::status>(status), 11);
    if (!signature.empty()) response_->set(kAuthHeader, signature);
    if (!body.empty()) response_->set(http::field::content_type, "application/json");
    response_->body() = std::move(body);
    response_->keep_alive(keep);
    response_->prepare_payload();
    stream_.expires_after(kControlReadTimeout);
    http::async_write(stream_, *response_, [self = shared_from_this(), keep](beast::error_code ec, size_t) {
      self->response_.reset();
      if (ec || !keep || !self->shared_->alive) return self->Close();
      self->ReadHeader();
    });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    held_.reset();  // may free us: last
  }

  beast::tcp_stream stream_;
  std::shared_ptr<Shared> shared_;
  ServerAuth auth_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::shared_ptr<Connection> held_;  // ourselves, while the handler holds the answer
};

ControlServer::ControlServer(asio::io_context* io, Handler handler, size_t max_body)
    : io_(io), shared_(std::make_shared<Shared>()), acceptor_(*io) {
  shared_->handler = std::move(handler);
  shared_->max_body = max_body;
  shared_->token = RandomHex32();
  entry_.token = shared_->token;
}

ControlServer::~ControlServer() {
  shared_->alive = false;
  beast::error_code ignored;
  acceptor_.close(ignored);
  if (!entry_.path.empty()) unlink(entry_.path.c_str());
}

bool ControlServer::Start(const std::string& job, std::string* err, const std::string& sub,
                          const std::string& address, int port) {
  if (entry_.token.size() != 64) {
    *err = "no random numbers for the control token";
    return false;
  }
  std::string dir = RegistryDir(err, sub);
  if (dir.empty()) return false;
  if (!rendezvous::OpenListener(acceptor_, address, port, err)) return false;
  Accept();
  // Clients on this machine reach an endpoint open to every interface over loopback.
  entry_.address = address == "0.0.0.0" ? "127.0.0.1" : address;
  entry_.pid = getpid();
  entry_.pid_start = ProcessStartTime(entry_.pid);
  entry_.port = acceptor_.local_endpoint().port();
  entry_.started = UtcNow();
  entry_.kind = sub == kPoolRegistry ? "pool" : "job";
  // A live job of the same name keeps it; this one gets its pid appended.
  std::string name = job;
  JobEntry other;
  if (ReadEntry(dir + "/" + name + ".json", &other) && ProcessAlive(other.pid, other.pid_start) &&
      other.pid != getpid()) {
    name += "-" + std::to_string(getpid());
  }
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  entry_.job = name;
  entry_.path = WriteEntry(dir, entry_, err);
  return !entry_.path.empty();
}

void ControlServer::Accept() {
  std::shared_ptr<Shared> shared = shared_;
  acceptor_.async_accept(*io_, [this, shared](beast::error_code ec, tcp::socket socket) {
    if (!shared->alive) return;  // the server is gone: touch nothing of it
    if (!ec) {
      std::string nonce = RandomHex32();
      if (shared->connections >= kMaxControlSessions || nonce.empty()) {
        static const std::string kBusy =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        beast::error_code ignored;
        asio::write(socket, asio::buffer(kBusy), ignored);
        socket.close(ignored);
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Connection>(std::move(socket), shared, std::move(nonce))->ReadHeader();
      }
    } else if (ec == asio::error::operation_aborted) {
      return;
    } else {
      // Out of descriptors, say: the connection stays queued; try again shortly, not in a spin.
      auto timer = std::make_shared<asio::steady_timer>(*io_, std::chrono::milliseconds(100));
      timer->async_wait([this, shared, timer](beast::error_code) {
        if (shared->alive && acceptor_.is_open()) Accept();
      });
      return;
    }
    if (acceptor_.is_open()) Accept();
  });
}

namespace {

// One line for what went wrong before the server proved itself.
std::string Unproven(const JobEntry& job, const std::string& reason, bool other_token) {
  std::string where = job.address + ":" + std::to_string(job.port);
  std::string what = fmt::format("{} '{}' did not prove it knows the {}'s token ({}): refusing to "
                                 "send it anything", job.kind, job.job, job.kind, reason);
  if (other_token && job.kind == "pool") {
    return what + fmt::format(" (a pool's token is new at every start: get the current one with "
                              "`etrun pool token NAME` on the pool's machine; or is something "
                              "else listening at {}?)", where);
  }
  return what + (job.job == where ? " (is something else listening there?)"
                                  : " (is something else listening at " + where + "?)");
}

std::string ReadFailure(const beast::error_code& ec, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout) return fmt::format("no answer within {} ms", timeout.count());
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) {
    return "it closed the connection";
  }
  if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
    return "it answered something that is not HTTP";
  }
  return ec.message();
}

}  // namespace

int ControlRequest(const JobEntry& job, const std::string& method, const std::string& target,
                   const std::string& body, std::string* reply, std::string* err,
                   std::chrono::milliseconds timeout) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  auto ip = asio::ip::make_address_v4(job.address, ec);
  stream.expires_after(timeout);
  if (!ec) stream.connect(tcp::endpoint(ip, static_cast<unsigned short>(job.port)), ec);
  if (ec) {
    *err = fmt::format("cannot reach {} '{}' ({}{}:{}): {}", job.kind, job.job,
                       job.pid > 0 ? fmt::format("pid {}, ", job.pid) : "", job.address, job.port,
                       ec.message());
    return 0;
  }
  std::string nonce = RandomHex32();
  if (nonce.empty()) {
    *err = "no random numbers for the control handshake";
    return 0;
  }
  ClientAuth auth(job.token, nonce);
  // 1-2: the hello, and the server's proof.
  beast::flat_buffer buffer;
  {
    http::request<http::empty_body> hello(http::verb::post, kAuthTarget, 11);
    hello.set(http::field::host, job.address);
    hello.set(kAuthHeader, auth.Hello());
    hello.prepare_payload();
    http::response_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kHeaderLimit);
    http::write(stream, hello, ec);
    if (!ec) http::read(stream, buffer, parser, ec);
    if (ec) {
      *err = Unproven(job, ReadFailure(ec, timeout), false);
      return 0;
    }
    const auto& answer = parser.get();
    switch (auth.OnHelloReply(static_cast<int>(answer.result_int()), View(answer[kAuthHeader]))) {
      case ClientAuth::Proof::kOk:
        break;
      case ClientAuth::Proof::kWrong:
        *err = Unproven(job, "its proof is of another token", true);
        return 0;
      case ClientAuth::Proof::kNone:
        *err = Unproven(job, fmt::format("it answered {} without one", answer.result_int()), false);
        return 0;
    }
  }
  // 3-4: the request and its answer, both signed.
  http::request<http::string_body> request(http::string_to_verb(method), target, 11);
  request.set(http::field::host, job.address);
  request.set(kAuthHeader, auth.Sign(method, target, body));
  request.body() = body;
  request.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(kAnswerLimit);
  http::write(stream, request, ec);
  if (!ec) http::read_header(stream, buffer, parser, ec);
  std::string unsigned_answer = fmt::format("{} '{}' ({}:{}) sent an answer not signed for this "
                                            "request", job.kind, job.job, job.address, job.port);
  if (ec) {
    *err = fmt::format("{} '{}' ({}:{}): {}", job.kind, job.job, job.address, job.port, ReadFailure(ec, timeout));
    return 0;
  }
  int status = static_cast<int>(parser.get().result_int());
  if (!auth.CheckAnswerHeaders(status, View(parser.get()[kAuthHeader]))) {
    // Its body is not read: the server (or something on the path) refused or forged this.
    *err = unsigned_answer + fmt::format(" (status {}): ignoring it", status);
    return 0;
  }
  if (!parser.is_done()) http::read(stream, buffer, parser, ec);
  if (ec || !auth.CheckAnswerBody(parser.get().body())) {
    *err = unsigned_answer + (ec ? ": " + ReadFailure(ec, timeout) : ": its body differs from the one signed");
    return 0;
  }
  *reply = std::move(parser.get().body());
  return status;
}

}  // namespace etrun::control
