#include "control/control.h"

#include <errno.h>
#include <sys/random.h>
#include <unistd.h>

#include <ctime>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "control/control_wire.h"

namespace etrun::control {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

std::string UtcNow() {
  time_t now = time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  char out[32];
  strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

}  // namespace

// Checks the token, then hands the request to the job's handler.
class ControlServer::Auth : public rendezvous::HttpHandler {
 public:
  Auth(Handler handler, std::string token) : handler_(std::move(handler)), token_(std::move(token)) {}

  void Handle(rendezvous::HttpRequest request,
              std::function<void(rendezvous::HttpResponse)> respond) override {
    const std::string want = "Bearer " + token_;
    const std::string& got = request.authorization;
    if (got.size() != want.size() || CRYPTO_memcmp(got.data(), want.data(), want.size()) != 0) {
      return respond({401, ErrorToJson("missing or wrong token").dump()});
    }
    handler_(request, [respond](int status, nlohmann::json body) {
      respond({status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    });
  }

 private:
  Handler handler_;
  std::string token_;
};

ControlServer::ControlServer(asio::io_context* io, Handler handler) {
  unsigned char random[32];
  size_t got = 0;
  while (got < sizeof(random)) {
    ssize_t n = getrandom(random + got, sizeof(random) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    else if (errno != EINTR) break;
  }
  std::string token;
  for (size_t i = 0; i < got; ++i) token += fmt::format("{:02x}", random[i]);
  entry_.token = token;
  auth_ = std::make_unique<Auth>(std::move(handler), token);
  server_ = std::make_unique<rendezvous::HttpServer>(io, auth_.get());
}

ControlServer::~ControlServer() {
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
  if (!server_->Listen(address, port, err)) return false;
  // Clients on this machine reach an endpoint open to every interface over loopback.
  entry_.address = address == "0.0.0.0" ? "127.0.0.1" : address;
  entry_.pid = getpid();
  entry_.pid_start = ProcessStartTime(entry_.pid);
  entry_.port = server_->port();
  entry_.started = UtcNow();
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

int ControlRequest(const JobEntry& job, const std::string& method, const std::string& target,
                   const std::string& body, std::string* reply, std::string* err,
                   std::chrono::milliseconds timeout) {
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address_v4(job.address),
                                           static_cast<unsigned short>(job.port)));
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, job.address);
    req.set(http::field::authorization, "Bearer " + job.token);
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    *reply = res.body();
    return static_cast<int>(res.result_int());
  } catch (const std::exception& e) {
    *err = fmt::format("cannot reach job '{}' (pid {}, port {}): {}", job.job, job.pid, job.port, e.what());
    return 0;
  }
}

}  // namespace etrun::control
