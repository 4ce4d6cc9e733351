// How many threads serve the rendezvous store (launcher/rendezvous_service.h).
#include "launcher/rendezvous_service.h"

#include <thread>

#include <doctest/doctest.h>

using etrun::JobConfig;
using etrun::launcher::RendezvousThreads;

TEST_CASE("the store's threads: the flag, else $ETRUN_RENDEZVOUS_THREADS, else one per core") {
  JobConfig config;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(RendezvousThreads(config, {}) == cores);
  CHECK(RendezvousThreads(config, {"ETRUN_RENDEZVOUS_THREADS=3"}) == 3);
  CHECK(RendezvousThreads(config, {"ETRUN_RENDEZVOUS_THREADS=0"}) == cores);     // ignored
  CHECK(RendezvousThreads(config, {"ETRUN_RENDEZVOUS_THREADS=two"}) == cores);   // ignored
  config.rendezvous_threads = 1;
  CHECK(RendezvousThreads(config, {"ETRUN_RENDEZVOUS_THREADS=3"}) == 1);
}
