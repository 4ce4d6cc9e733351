// The control endpoint over real loopback sockets (control/control.h): a request with the token
// reaches the handler; without it nothing does, and the body of a request that fails its check
// is never read; a client never sends the token, nor anything but its hello, to a server that
// cannot prove it knows it, and says so in one line naming the job or pool.
#include "control/control.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "control/control_wire.h"
#include "tests/control/temp_registry.h"

using etrun::control::ControlServer;
using etrun::control::JobEntry;
using etrun::control::TempRegistry;
using nlohmann::json;
namespace control = etrun::control;

namespace {

// A ControlServer whose handler echoes each request, served on a thread of its own.
class Served {
 public:
  explicit Served(size_t limit = control::kControlBodyLimit)
      : server_(&io_,
                [this](const etrun::rendezvous::HttpRequest& r, std::function<void(int, json)> respond) {
                  ++calls_;
                  respond(200, {{"method", r.method}, {"target", r.target}, {"body", r.body}});
                },
                limit) {
    std::string err;
    REQUIRE(server_.Start("t", &err));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Served() {
    io_.stop();
    thread_.join();
  }
  const JobEntry& entry() const { return server_.entry(); }
  int calls() const { return calls_; }

 private:
  TempRegistry registry_;
  boost::asio::io_context io_;
  ControlServer server_;
  std::thread thread_;
  std::atomic<int> calls_{0};
};

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// Everything the peer sends until it closes (or 5 s pass).
std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  pollfd p{fd, POLLIN, 0};
  while (poll(&p, 1, 5000) == 1) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// A listener that is not etrun's: it records what arrives and answers 200 "{}".
class PlainListener {
 public:
  PlainListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(listen(fd_, 4) == 0);
    socklen_t size = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buffer[4096];
      pollfd p{c, POLLIN, 0};
      while (received_.find("\r\n\r\n") == std::string::npos && poll(&p, 1, 5000) == 1) {
        ssize_t n = read(c, buffer, sizeof(buffer));
        if (n <= 0) break;
        received_.append(buffer, static_cast<size_t>(n));
      }
      const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
      (void)!write(c, answer, sizeof(answer) - 1);
      // Whatever else the client sends is recorded too, until it closes.
      while (poll(&p, 1, 2000) == 1) {
        ssize_t n = read(c, buffer, sizeof(buffer));
        if (n <= 0) break;
        received_.append(buffer, static_cast<size_t>(n));
      }
      close(c);
    });
  }
  ~PlainListener() {
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::string received() {
    if (thread_.joinable()) thread_.join();
    return received_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string received_;
};

}  // namespace

TEST_CASE("control: a request with the token reaches the handler and its answer comes back") {
  Served served;
  std::string reply, err;
  int status = control::ControlRequest(served.entry(), "POST", "/overrides?x=1", R"({"to":3})", &reply, &err);
  CHECK(err.empty());
  REQUIRE(status == 200);
  CHECK(json::parse(reply) == json{{"method", "POST"}, {"target", "/overrides?x=1"}, {"body", R"({"to":3})"}});
  CHECK(served.calls() == 1);
}

TEST_CASE("control: a client with another token gets nothing through and says why in one line") {
  // Given the job's entry with a token that is not its own (an old one), the client refuses to go
  // on after the hello: the handler is never called.
  Served served;
  JobEntry entry = served.entry();
  entry.token = std::string(64, 'f');
  std::string reply, err;
  CHECK(control::ControlRequest(entry, "GET", "/status", "", &reply, &err) == 0);
  CHECK(err == "job 't' did not prove it knows the job's token (its proof is of another token): "
               "refusing to send it anything (is something else listening at 127.0.0.1:" +
                   std::to_string(entry.port) + "?)");
  CHECK(served.calls() == 0);
}

TEST_CASE("control: a request that fails its check gets 401 before its body is read") {
  // Given requests announcing a 1 MB body that never comes, without the exchange or with the
  // token itself as a Bearer header, the server answers 401 at once and closes.
  Served served;
  for (const std::string& header : {std::string(""), "Authorization: Bearer " + served.entry().token + "\r\n",
                                   "Etrun-Auth: v1 0 " + std::string(64, 'a') + " " + std::string(64, 'b') + "\r\n"}) {
    CAPTURE(header);
    int fd = Connect(served.entry().port);
    std::string request = "POST /overrides HTTP/1.1\r\nHost: x\r\n" + header + "Content-Length: 1000000\r\n\r\n";
    REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    std::string answer = ReadAll(fd);
    close(fd);
    CHECK(answer.starts_with("HTTP/1.1 401 Unauthorized\r\n"));
    CHECK(answer.find("\r\nEtrun-Auth:") == std::string::npos);  // unsigned: no session
  }
  CHECK(served.calls() == 0);
}

TEST_CASE("control: an authenticated body over the endpoint's limit is answered 413 unread") {
  Served served(64);
  std::string reply, err;
  CHECK(control::ControlRequest(served.entry(), "POST", "/x", std::string(65, 'x'), &reply, &err) == 413);
  CHECK(control::ErrorText(reply) == "a body of 65 bytes is over this endpoint's limit of 64");
  CHECK(control::ControlRequest(served.entry(), "POST", "/x", std::string(64, 'x'), &reply, &err) == 200);
  CHECK(served.calls() == 1);
}

TEST_CASE("control: a listener that is not the pool hears nothing but a random hello") {
  // Given a plain HTTP listener where a pool was, the client sends it its hello only (no token,
  // no request), and its one error line names the pool, not a job.
  PlainListener listener;
  JobEntry pool;
  pool.kind = "pool";
  pool.job = "127.0.0.1:" + std::to_string(listener.port());
  pool.port = listener.port();
  pool.token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  std::string reply, err;
  CHECK(control::ControlRequest(pool, "POST", "/jobs", R"({"name":"secret-job"})", &reply, &err) == 0);
  CHECK(err == "pool '" + pool.job + "' did not prove it knows the pool's token (it answered 200 "
               "without one): refusing to send it anything (is something else listening there?)");
  std::string received = listener.received();
  CHECK(received.starts_with("POST /auth HTTP/1.1\r\n"));
  CHECK(received.find("Etrun-Auth: v1 hello ") != std::string::npos);
  CHECK(received.find(pool.token) == std::string::npos);
  CHECK(received.find("secret-job") == std::string::npos);
  CHECK(received.find("/jobs") == std::string::npos);
}

TEST_CASE("control: a job that cannot be reached is named with its address") {
  JobEntry pool;
  pool.kind = "pool";
  pool.job = "gpus";
  pool.pid = 42;
  pool.port = 1;  // nothing listens there
  pool.token = std::string(64, 'a');
  std::string reply, err;
  CHECK(control::ControlRequest(pool, "GET", "/status", "", &reply, &err) == 0);
  CHECK(err == "cannot reach pool 'gpus' (pid 42, 127.0.0.1:1): Connection refused");
}

TEST_CASE("control: sessions are bounded; one more is answered 503 until others close") {
  Served served;
  std::vector<int> open;
  for (int i = 0; i < control::kMaxControlSessions; ++i) open.push_back(Connect(served.entry().port));
  std::string reply, err;
  CHECK(control::ControlRequest(served.entry(), "GET", "/status", "", &reply, &err) == 0);
  CHECK(err.find("(it answered 503 without one)") != std::string::npos);
  for (int fd : open) close(fd);
  bool served_again = false;
  for (int i = 0; i < 50 && !served_again; ++i) {  // the server sees the closes shortly
    served_again = control::ControlRequest(served.entry(), "GET", "/status", "", &reply, &err) == 200;
    if (!served_again) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(served_again);
}
