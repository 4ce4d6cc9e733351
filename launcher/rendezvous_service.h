// RendezvousService: the job's rendezvous store served on threads of its own, off the driver's
// loop (rendezvous/service_threads.h), so that hundreds of Gloo workers meeting at once never
// delay rank output, supervision or heartbeats.
//
// Who owns what:
//  - the store's threads (ServiceThreads, --rendezvous-threads / $ETRUN_RENDEZVOUS_THREADS,
//    default one per core) own the HTTP server's connections and the held GETs' deadlines;
//  - the KvStore (the policy's) has its own mutex: server threads read and write values, the
//    driver calls Init/Resize/Erase; its callbacks post to the driver's loop;
//  - everything the elastic driver owns (rounds, the rank_and_size barrier, worker registrations,
//    the notifier) is touched on the driver's loop only: the handler reaches it through
//    rendezvous::PostedHooks, and the driver's replies hop back onto each connection's shard (its thread).
// Owner's thread (the driver's) only.
#ifndef ETRUN_LAUNCHER_RENDEZVOUS_SERVICE_H_
#define ETRUN_LAUNCHER_RENDEZVOUS_SERVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "launcher/job_config.h"
#include "rendezvous/access_list.h"
#include "rendezvous/deadlines.h"
#include "rendezvous/http_server.h"
#include "rendezvous/service_threads.h"

namespace etrun::launcher {

// The store's thread count: --rendezvous-threads, else $ETRUN_RENDEZVOUS_THREADS (a whole number
// >= 1; anything else is ignored with a warning), else the machine's cores.
int RendezvousThreads(const JobConfig& config, const std::vector<std::string>& environment);

class RendezvousService {
 public:
  explicit RendezvousService(int threads)
      : threads_(threads), service_(threads), deadlines_(&service_.loop()) {}
  ~RendezvousService() { Stop(); }
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  // For handlers that hold GETs: deadlines that run on the store's threads.
  rendezvous::Deadlines* deadlines() { return &deadlines_; }

  // Listens on `address` (any free port), admits peers by `access` (which must outlive this) and,
  // from this machine, only those whose socket is etrun's own user's; starts the threads.
  // Returns false and sets *err when the address cannot be bound.
  bool Start(rendezvous::HttpHandler* handler, const std::string& address,
             const rendezvous::AccessList* access, std::string* err);
  int port() const { return server_ ? server_->port() : 0; }

  // Joins the threads, then closes the server: after it, no handler runs. Idempotent.
  void Stop();

 private:
  int threads_;
  rendezvous::ServiceThreads service_;  // before server_: its loops outlive the server
  rendezvous::LoopDeadlines deadlines_;
  std::unique_ptr<rendezvous::HttpServer> server_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_RENDEZVOUS_SERVICE_H_
