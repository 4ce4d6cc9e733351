// The control endpoint of a running job, for `etrun status`, `etrun list` and `etrun scale`.
//
// ControlServer: a small HTTP server on 127.0.0.1 beside the rendezvous server (Horovod workers'
// endpoints are untouched). Every request must carry `Authorization: Bearer <token>`, a random
// 256-bit token new at every start; anything else gets 401. The token and port are published in the registry
// (registry.h: a 0600 file in a 0700 directory of the user's), so only the job's owner (and
// root) can steer it.
// Driver thread only.
#ifndef ETRUN_CONTROL_CONTROL_H_
#define ETRUN_CONTROL_CONTROL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "control/registry.h"
#include "rendezvous/http_server.h"

namespace etrun::control {

class ControlServer {
 public:
  // A request already authenticated: method, path (query included) and body. Returns status
  // and JSON body; `respond` may be called later (on the driver thread), exactly once.
  using Handler = std::function<void(const rendezvous::HttpRequest& request,
                                     std::function<void(int status, nlohmann::json body)> respond)>;

  ControlServer(boost::asio::io_context* io, Handler handler);
  ~ControlServer();  // removes the registry file

  // Listens on `address` (127.0.0.1 unless a pool is opened to other machines; port 0: any) and
  // publishes the job under `job` (or `job-<pid>` if that name is taken by another live etrun)
  // in the registry subdirectory `sub`. Returns false and sets *err; the job runs on without
  // control then.
  bool Start(const std::string& job, std::string* err, const std::string& sub = "",
             const std::string& address = "127.0.0.1", int port = 0);

  const std::string& name() const { return entry_.job; }
  const JobEntry& entry() const { return entry_; }

 private:
  class Auth;
  std::unique_ptr<Auth> auth_;
  std::unique_ptr<rendezvous::HttpServer> server_;
  JobEntry entry_;
};

// The client side: one request to a job's control endpoint. Returns the HTTP status (0 with
// *err set when the job cannot be reached) and fills *body.
int ControlRequest(const JobEntry& job, const std::string& method, const std::string& target,
                   const std::string& body, std::string* reply, std::string* err,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace etrun::control

#endif  // ETRUN_CONTROL_CONTROL_H_
