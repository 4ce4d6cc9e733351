// Where this rank stands, as etrun tells every rank through its environment (spec §3.2):
// HOROVOD_RANK/SIZE/LOCAL_RANK/HOSTNAME and the rendezvous store's HOROVOD_GLOO_RENDEZVOUS_ADDR/
// PORT. Pure; thread-compatible.
#ifndef ETRUN_SMOKE_WORLD_H_
#define ETRUN_SMOKE_WORLD_H_

#include <functional>
#include <string>

namespace etrun::smoke {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string hostname;        // HOROVOD_HOSTNAME (the host as etrun names it); may be empty
  std::string store_address;   // the rendezvous store: an IPv4 address or a host name
  int store_port = 0;
};

// Reads the variables through `getenv` (std::getenv in production, a table in tests). Returns
// false and sets *err to one line naming the variable and the fix when one is missing or bad.
bool ReadWorld(const std::function<const char*(const char*)>& getenv, World* world,
               std::string* err);

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_WORLD_H_
