#include "rendezvous/service_threads.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>

namespace etrun::rendezvous {

int ServiceThreadCount(int requested) {
  if (requested >= 1) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ServiceThreads::ServiceThreads(int count) {
  for (int i = 0; i < std::max(count, 1); ++i) loops_.push_back(std::make_unique<EventLoop>());
}

std::vector<EventLoop*> ServiceThreads::loops() {
  std::vector<EventLoop*> all;
  for (auto& loop : loops_) all.push_back(loop.get());
  return all;
}

void ServiceThreads::Start() {
  for (auto& shard : loops_) {
    threads_.emplace_back([this, loop = shard.get()] {
      pthread_setname_np(pthread_self(), "etrun-store");  // as top -H and perf show it
      loop->Run();
      rusage u{};
      getrusage(RUSAGE_THREAD, &u);
      const long long user = u.ru_utime.tv_sec * 1000000LL + u.ru_utime.tv_usec;
      user_us_ += user;
      cpu_us_ += user + u.ru_stime.tv_sec * 1000000LL + u.ru_stime.tv_usec;
    });
  }
}

void ServiceThreads::Stop() {
  for (auto& loop : loops_) loop->Stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace etrun::rendezvous
