// ServiceThreads: an io_context of its own and the threads that run it, for the rendezvous
// store's HTTP server (so a storm of Gloo requests never delays the driver's loop: rank output,
// supervision, heartbeats). Start(n) runs n threads; Stop() stops the io_context and joins them
// (handlers not yet run are dropped; the io_context's objects may then be destroyed from the
// owner's thread). Owner's thread only, except io(), which any thread may post to.
#ifndef ETRUN_RENDEZVOUS_SERVICE_THREADS_H_
#define ETRUN_RENDEZVOUS_SERVICE_THREADS_H_

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace etrun::rendezvous {

// The number of threads to serve on: `requested` when given (>= 1), else the machine's cores.
int ServiceThreadCount(int requested);

class ServiceThreads {
 public:
  ServiceThreads() = default;
  ~ServiceThreads() { Stop(); }
  ServiceThreads(const ServiceThreads&) = delete;
  ServiceThreads& operator=(const ServiceThreads&) = delete;

  boost::asio::io_context& io() { return io_; }

  // Runs `count` threads on io() until Stop. REQUIRES: not started.
  void Start(int count);

  // Stops and joins the threads; idempotent.
  void Stop();

  int thread_count() const { return static_cast<int>(threads_.size()); }

  // CPU seconds (user + system) the threads used, summed as each thread ends: complete after
  // Stop. For benchmarks.
  double cpu_seconds() const { return static_cast<double>(cpu_us_.load()) / 1e6; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{io_.get_executor()};
  std::vector<std::thread> threads_;
  std::atomic<long long> cpu_us_{0};
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_SERVICE_THREADS_H_
