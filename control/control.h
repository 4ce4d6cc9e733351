// The control endpoint of a running job, for `etrun status`, `etrun list` and `etrun scale`, and
// of a pool (`etrun pool`, `--pool`): the server and its client.
//
// ControlServer: a small HTTP server on 127.0.0.1 (a pool may listen elsewhere) beside the
// rendezvous server (Horovod workers' endpoints are untouched). Its token, a random 256-bit
// value new at every start, and its port are published in the registry (registry.h: a 0600 file
// in a 0700 directory of the user's), so only the job's owner (and root) can steer it. The token
// never crosses the wire: client and server run control_auth.h's exchange on each connection
// (the server proves it knows the token, then every request and answer carries a MAC under a
// key of that connection). A request is checked when its headers arrive: one that fails gets
// 401 and its body is never read; a body over the endpoint's limit gets 413, unread. Sessions
// are connections: at most kMaxControlSessions at once (more are answered 503 and closed), each
// closed after kControlReadTimeout without a whole request or at its first failed check.
//
// ControlRequest: one request, on a connection of its own, to a job's or pool's endpoint; it
// sends nothing but the hello's random nonce until the server has proven it knows the token.
// Driver thread only: a ControlServer's io_context is run by one thread.
#ifndef ETRUN_CONTROL_CONTROL_H_
#define ETRUN_CONTROL_CONTROL_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include "control/registry.h"
#include "rendezvous/http_server.h"

namespace etrun::control {

// A job's endpoint takes one body, `etrun scale`'s overrides (control_wire.h): a few dozen bytes
// per host named, so 8 KiB holds some two hundred. A pool's limit is its own (pool_wire.h).
inline constexpr size_t kControlBodyLimit = 8 << 10;
inline constexpr int kMaxControlSessions = 64;
inline constexpr std::chrono::seconds kControlReadTimeout{10};

class ControlServer {
 public:
  // A request already authenticated: method, path (query included) and body. Returns status
  // and JSON body; `respond` may be called later (on the driver thread), exactly once.
  using Handler = std::function<void(const rendezvous::HttpRequest& request,
                                     std::function<void(int status, nlohmann::json body)> respond)>;

  // `max_body`: the largest request body taken, in bytes.
  ControlServer(boost::asio::io_context* io, Handler handler, size_t max_body = kControlBodyLimit);
  ~ControlServer();  // stops accepting, removes the registry file; requests in flight get 503
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Listens on `address` (127.0.0.1 unless a pool is opened to other machines; port 0: any) and
  // publishes the job under `job` (or `job-<pid>` if that name is taken by another live etrun)
  // in the registry subdirectory `sub`. Returns false and sets *err; the job runs on without
  // control then.
  bool Start(const std::string& job, std::string* err, const std::string& sub = "",
             const std::string& address = "127.0.0.1", int port = 0);

  const std::string& name() const { return entry_.job; }
  const JobEntry& entry() const { return entry_; }

 private:
  struct Shared;
  class Connection;
  void Accept();

  boost::asio::io_context* io_;
  std::shared_ptr<Shared> shared_;  // with the connections, which may outlive the server
  boost::asio::ip::tcp::acceptor acceptor_;
  JobEntry entry_;
};

// The client side: one request to a job's or pool's control endpoint (job.kind names it in
// errors). Returns the HTTP status of an answer the server signed (control_auth.h), with its
// body in *reply; 0 with *err set (one line naming the job or pool and its address) when it
// cannot be reached, does not prove it knows job.token (then nothing but the hello was sent),
// or answers without a valid signature.
int ControlRequest(const JobEntry& job, const std::string& method, const std::string& target,
                   const std::string& body, std::string* reply, std::string* err,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace etrun::control

#endif  // ETRUN_CONTROL_CONTROL_H_
