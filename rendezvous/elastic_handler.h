// RendezvousHandler: the full HTTP surface of Horovod's rendezvous server. The KV routes of
// KvHandler, plus in elastic mode the two driver endpoints of spec §4.4:
//   GET /rank_and_size/<host>:<local_rank>   held until the driver's barrier for the round opens,
//                                            then "rank,size,local_rank,local_size,cross_rank,
//                                            cross_size", or "-1,-1,-1,-1,-1,-1" for a slot
//                                            without assignment; never 404 (a worker would read
//                                            an empty body as rank 0).
//   PUT /worker_addresses/<host>:<local_rank> base64 pickle of ({iface: [(ip, port)]}, key),
//                                            decoded by the safe pickle reader (never unpickled
//                                            by anything that can execute code), handed to the
//                                            driver; 200 once accepted, 500 if refused.
// The driver side is the ElasticHooks interface, so the HTTP layer is tested with a fake driver.
// Thread-safe as KvHandler, given hooks that may be called from any thread: the store's server
// threads call the driver through PostedHooks, which runs each call on the driver's loop (the
// driver owns the round, the barrier and the notifier; its replies reach the HTTP server from the
// driver's thread, which is allowed).
#ifndef ETRUN_RENDEZVOUS_ELASTIC_HANDLER_H_
#define ETRUN_RENDEZVOUS_ELASTIC_HANDLER_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/assign.h"
#include "rendezvous/http_server.h"
#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/pickle.h"

namespace etrun::rendezvous {

struct WorkerRegistration {
  std::string host;
  int local_rank = 0;
  WorkerAddresses addresses;  // the worker's notification service, per interface
  std::string key;            // its 32-byte HMAC key
};

// What the elastic driver offers the HTTP layer.
class ElasticHooks {
 public:
  virtual ~ElasticHooks() = default;
  // A worker (host, local_rank) is ready for the next round. Call `reply` exactly once, when the
  // round's barrier opens: with the slot's assignment, or nullopt when it has none.
  virtual void RecordReady(const std::string& host, int local_rank,
                           std::function<void(std::optional<SlotInfo>)> reply) = 0;
  // A worker registered its notification service. Call `done(true)` once accepted (e.g. after a
  // successful ping), `done(false)` to refuse (the worker's hvd.elastic.run then fails).
  virtual void RegisterWorker(WorkerRegistration registration, std::function<void(bool)> done) = 0;
};

// "1,3,0,1,1,3" for a slot, "-1,-1,-1,-1,-1,-1" for none.
std::string FormatRankAndSize(const std::optional<SlotInfo>& slot);

// Parses "<host>:<local_rank>" (the host may not be empty; local_rank is a non-negative int).
bool ParseSlotKey(std::string_view key, std::string* host, int* local_rank);

// ElasticHooks that hand every call to `post` (which must be thread-safe and run what it is given
// on the thread `driver` belongs to, in order), so server threads never touch the driver.
class PostedHooks : public ElasticHooks {
 public:
  PostedHooks(ElasticHooks* driver, std::function<void(std::function<void()>)> post)
      : driver_(driver), post_(std::move(post)) {}
  void RecordReady(const std::string& host, int local_rank,
                   std::function<void(std::optional<SlotInfo>)> reply) override;
  void RegisterWorker(WorkerRegistration registration, std::function<void(bool)> done) override;

 private:
  ElasticHooks* driver_;
  std::function<void(std::function<void()>)> post_;
};

class RendezvousHandler : public HttpHandler {
 public:
  // `hooks` null: a static job, where the elastic paths are plain KV keys as in horovodrun.
  RendezvousHandler(KvStore* store, ElasticHooks* hooks) : store_(store), kv_(store), hooks_(hooks) {}
  // The same, GETs of missing keys held as KvHandler's (deadlines, bound).
  RendezvousHandler(KvStore* store, ElasticHooks* hooks, Deadlines* deadlines,
                    std::chrono::milliseconds bound)
      : store_(store), kv_(store, deadlines, bound), hooks_(hooks) {}
  void Handle(HttpRequest&& request, Responder respond) override;

 private:
  KvStore* store_;
  KvHandler kv_;
  ElasticHooks* hooks_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_ELASTIC_HANDLER_H_
