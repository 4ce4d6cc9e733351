// Notifier: the driver's side of Horovod's worker notification protocol (spec §5.3-5.4). When a
// worker registers its notification service, Register pings every address it listed, in parallel,
// and keeps the first that answers as a "worker notification service". Notify then sends
// HostsUpdatedRequest(timestamp, res) in a Wire frame signed with that worker's key and checks the
// signed AckResponse, retrying on failure. Unlike horovodrun (§9.5, §9.13): every exchange has a
// timeout, lengths are bounded, failures are reported to the caller (who may retry later), and
// NextTimestamp() is strictly increasing even within one second. Driver thread only.
#ifndef ETRUN_RENDEZVOUS_NOTIFIER_H_
#define ETRUN_RENDEZVOUS_NOTIFIER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "rendezvous/elastic_handler.h"
#include "rendezvous/pickle.h"

namespace etrun::rendezvous {

inline constexpr char kWorkerServiceName[] = "worker notification service";

struct NotifierOptions {
  std::chrono::milliseconds timeout{5000};      // one connect + request + reply
  int attempts = 3;                             // per address (Register) or per Notify
  std::chrono::milliseconds retry_delay{250};
};

// Sends one frame to ip:port and reads one frame back, verifying its MAC with `key`. Calls
// done(true, body, "") or done(false, "", why) exactly once, on the io_context's thread.
void ExchangeFrame(boost::asio::io_context* io, const std::string& ip, int port, const std::string& key,
                   std::string request_frame, std::chrono::milliseconds timeout,
                   std::function<void(bool ok, std::string body, std::string err)> done);

class Notifier {
 public:
  using Done = std::function<void(bool ok, std::string err)>;

  explicit Notifier(boost::asio::io_context* io, NotifierOptions options = {});

  // Probes the registration's addresses; on success the worker (host, local_rank) is notifiable
  // and done(true) runs. A worker registering again replaces its old entry.
  void Register(const WorkerRegistration& registration, Done done);

  // Notifies worker (host, local_rank). done(false, why) if it is unknown or never acknowledged.
  void Notify(const std::string& host, int local_rank, int64_t timestamp, HostUpdateResult res,
              Done done);

  bool IsRegistered(const std::string& host, int local_rank) const;

  // max(now in seconds, last + 1): workers ignore a timestamp that is not newer than the last.
  int64_t NextTimestamp();

 private:
  struct Worker {
    std::string ip;
    int port = 0;
    std::string key;
  };
  struct Registering;
  void Probe(std::shared_ptr<Registering> state, size_t index, int attempt);
  void SendNotification(const Worker& worker, std::string frame, int attempt, Done done);

  boost::asio::io_context* io_;
  NotifierOptions options_;
  std::map<std::pair<std::string, int>, Worker> workers_;
  int64_t last_timestamp_ = 0;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_NOTIFIER_H_
