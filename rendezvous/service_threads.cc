#include "rendezvous/service_threads.h"

#include <sys/resource.h>

#include <algorithm>

namespace etrun::rendezvous {

int ServiceThreadCount(int requested) {
  if (requested >= 1) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ServiceThreads::ServiceThreads(int count) {
  for (int i = 0; i < std::max(count, 1); ++i) {
    // A concurrency hint of 1: one thread runs each (other threads still post to it).
    shards_.push_back(std::make_unique<boost::asio::io_context>(1));
    work_.emplace_back(shards_.back()->get_executor());
  }
}

std::vector<boost::asio::io_context*> ServiceThreads::shards() {
  std::vector<boost::asio::io_context*> all;
  for (auto& shard : shards_) all.push_back(shard.get());
  return all;
}

void ServiceThreads::Start() {
  for (auto& shard : shards_) {
    threads_.emplace_back([this, io = shard.get()] {
      io->run();
      rusage u{};
      getrusage(RUSAGE_THREAD, &u);
      cpu_us_ += (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000LL + u.ru_utime.tv_usec +
                 u.ru_stime.tv_usec;
    });
  }
}

void ServiceThreads::Stop() {
  for (WorkGuard& work : work_) work.reset();
  for (auto& shard : shards_) shard->stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace etrun::rendezvous
