// ServiceThreads: event loops of their own and one thread for each, for the rendezvous store's
// HTTP server (so a storm of Gloo requests never delays the driver's loop: rank output,
// supervision, heartbeats). Each thread runs one EventLoop (a shard) alone: the server gives each
// shard a listener of its own (SO_REUSEPORT), and a connection lives on its shard's thread, so
// nothing of a connection is locked and no two threads share a scheduler. (One io_context run by
// every thread cost 8x the CPU of one thread on 16 cores: 217 against 26 us a request,
// docs/rendezvous.md.) Start() runs the threads; Stop() stops the loops and joins them (work not
// yet run is dropped; the loops' objects may then be destroyed from the owner's thread). Owner's
// thread only, except loop() and loops(), which any thread may post to.
#ifndef ETRUN_RENDEZVOUS_SERVICE_THREADS_H_
#define ETRUN_RENDEZVOUS_SERVICE_THREADS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/event_loop.h"

namespace etrun::rendezvous {

// The number of threads to serve on: `requested` when given (>= 1), else the machine's cores.
int ServiceThreadCount(int requested);

class ServiceThreads {
 public:
  // `count` shards (at least 1), each to be run by a thread of its own once started.
  explicit ServiceThreads(int count = 1);
  ~ServiceThreads() { Stop(); }
  ServiceThreads(const ServiceThreads&) = delete;
  ServiceThreads& operator=(const ServiceThreads&) = delete;

  // The first shard: for what is not a connection (deadlines).
  EventLoop& loop() { return *loops_.front(); }
  // Every shard, the first one first: for the server's listeners.
  std::vector<EventLoop*> loops();

  // Runs one thread on each shard until Stop. REQUIRES: not started.
  void Start();

  // Stops and joins the threads; idempotent.
  void Stop();

  int thread_count() const { return static_cast<int>(threads_.size()); }

  // CPU seconds (user + system) the threads used, summed as each thread ends: complete after
  // Stop. For benchmarks.
  double cpu_seconds() const { return static_cast<double>(cpu_us_.load()) / 1e6; }
  // The user-space part of it: the store's own work, without the kernel's.
  double user_cpu_seconds() const { return static_cast<double>(user_us_.load()) / 1e6; }

 private:
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
  std::atomic<long long> cpu_us_{0};
  std::atomic<long long> user_us_{0};
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_SERVICE_THREADS_H_
