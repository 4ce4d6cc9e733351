#include "rendezvous/service_threads.h"

#include <sys/resource.h>

#include <algorithm>

namespace etrun::rendezvous {

int ServiceThreadCount(int requested) {
  if (requested >= 1) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void ServiceThreads::Start(int count) {
  for (int i = 0; i < count; ++i) {
    threads_.emplace_back([this] {
      io_.run();
      rusage u{};
      getrusage(RUSAGE_THREAD, &u);
      cpu_us_ += (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000LL + u.ru_utime.tv_usec +
                 u.ru_stime.tv_usec;
    });
  }
}

void ServiceThreads::Stop() {
  work_.reset();
  io_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace etrun::rendezvous
