// HttpServer: a small HTTP/1.1 server on an io_context, built on Boost.Beast, that fronts the
// rendezvous store (and etrun's control endpoint). A connection closes after its response unless the client asked
// for keep-alive (Horovod's own server closes always; its clients cope with both); every
// response carries `Content-Length` spelled
// exactly so (Horovod's C++ client needs it, spec §4.5). Hardened where Horovod's server is
// fragile (§9.10, §9.12, §9.20): bounded header and body sizes, a read timeout, and every
// malformed request answered (400, 405, 411, 413) rather than dropped; a client that stalls
// mid-request is disconnected after the read timeout. It never serves files.
// Peers outside the job can be refused (set_access, spec §9 "no auth at all" in horovodrun).
// The handler may answer later (rank_and_size is held until a barrier opens; a GET of a missing
// key until it is set), from any thread.
//
// Threads. The io_context may be run by one thread (etrun's control endpoint, on the driver's
// loop) or by several (the rendezvous store, rendezvous/service_threads.h). Each connection lives
// on its own strand: its reads, writes and timers never run concurrently, and `respond` hops onto
// that strand from whichever thread calls it. The accept loop is one chain of handlers. The
// handler is called on the connection's strand, so with several threads it is called
// concurrently and must be thread-safe itself (KvHandler is: KvStore has its own mutex; the
// elastic routes post what the driver owns to the driver's loop, see elastic_handler.h).
// Listen, Stop and set_access are the owner's calls: before the io_context's threads run, on its
// one thread, or after they stopped.
//
// Zero copy: a response may carry its body as a shared immutable buffer (a stored value); it
// goes out with the header in one gathered write, never copied into a response object.
#ifndef ETRUN_RENDEZVOUS_HTTP_SERVER_H_
#define ETRUN_RENDEZVOUS_HTTP_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/access_list.h"

namespace etrun::rendezvous {

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // raw path, no decoding
  std::string body;
  std::string authorization;  // the Authorization header, if any (etrun's control endpoint)
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int s, std::string b) : status(s), body(std::move(b)) {}
  HttpResponse(int s, std::shared_ptr<const std::string> shared) : status(s), shared_body(std::move(shared)) {}

  int status = 200;
  std::string body;
  // When set, the body instead of `body`: written from this buffer as it is, shared, not copied.
  std::shared_ptr<const std::string> shared_body;
};

// Answers requests. `respond` must be called exactly once, now or later, from any thread;
// calling it after the client went away is harmless.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(HttpRequest request, std::function<void(HttpResponse)> respond) = 0;
};

struct HttpLimits {
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 64 << 20;  // a 512-rank Gloo address blob is ~100 KB
  std::chrono::milliseconds read_timeout{10000};
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context* io, HttpHandler* handler, HttpLimits limits = {});
  // Frees the connections still waiting on the handler's answer (a held GET, a barrier): they
  // keep themselves alive until answered, so only this ends them. REQUIRES: no thread runs the
  // io_context's handlers (its threads joined), or only the calling thread does.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds `address` (IPv4 dotted quad; "0.0.0.0" for all) on `port` (0: any free port) and
  // starts accepting. Returns false and sets *err when the address cannot be bound.
  bool Listen(const std::string& address, int port, std::string* err);

  // The bound port, after Listen.
  int port() const { return port_; }

  // Stops accepting; connections in flight finish or time out.
  void Stop();

  // From now on, peers `access` does not allow get 403 and are disconnected; each refused
  // address is logged once. Null (the default) admits everyone. `access` must outlive the server.
  void set_access(const AccessList* access) { access_ = access; }

 private:
  class Connection;
  // Connections waiting on the handler's answer, by address; shared with them, since a
  // connection may outlive the server.
  struct Held {
    std::mutex mu;
    std::unordered_map<Connection*, std::weak_ptr<Connection>> waiting;
  };
  void Accept();
  void Refuse(boost::asio::ip::tcp::socket socket, uint32_t address);

  boost::asio::io_context* io_;
  HttpHandler* handler_;
  HttpLimits limits_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  const AccessList* access_ = nullptr;
  bool out_of_descriptors_ = false;  // warned about EMFILE on accept
  std::set<uint32_t> refused_;  // addresses already logged
  std::shared_ptr<bool> alive_;
  std::shared_ptr<Held> held_ = std::make_shared<Held>();
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_HTTP_SERVER_H_
