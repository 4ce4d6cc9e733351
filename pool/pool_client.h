// A job's side of a shared slot pool (`etrun --pool NAME`): the pool is the job's host source
// (discovery/host_source.h, traits: lent). Each poll is one sync with the pool: the job reports
// the local ranks that still have a live process on each host (so the pool can free slots the
// job gave back) and gets its grant as one HostGrant: hosts, each local rank's facts (its GPU,
// ETRUN_POOL_SLOT and ETRUN_POOL_GPU for its environment), the grant's version and, from a pool
// inside Slurm, the template each host's ranks start through (srun in the pool's allocation), so
// the job needs no Slurm knowledge of its own.
//
// When the pool cannot be reached the job keeps training on what it holds (the last grant is
// answered again) and joins again, with those slots, as soon as the pool is back.
//
// PoolClient speaks HTTP to the pool daemon (pool/pool_daemon.h) with the token of its registry
// file, or of ETRUN_POOL_TOKEN for a pool reached by address (--pool HOST:PORT); the token never
// crosses the wire (control/control_auth.h), and nothing is sent to a server that has not proven
// it knows it. A pool's token is new at every start: a job rejoining a restarted pool of its
// registry reads the new one there; one given ETRUN_POOL_TOKEN is told how to get the new one.
//
// A grant's start_through (a command the job runs, {host} filled in, to start a host's ranks) is
// taken only from a pool found in this user's registry (`--pool NAME`: the user's own pool on
// this machine), or when the user trusts the pool reached by address
// (ClientOptions::trust_start_through, ETRUN_POOL_TRUST_START=1). A grant of another pool that
// carries one is refused: the job's first grant ends it with one line; a later one is a failed
// poll (the job keeps its hosts). Not dropped: a host reached otherwise than its pool says (SSH
// instead of srun into the pool's allocation) would run ranks outside what the pool manages.
#ifndef ETRUN_POOL_POOL_CLIENT_H_
#define ETRUN_POOL_POOL_CLIENT_H_

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "discovery/cluster_kind.h"
#include "discovery/host_source.h"
#include "control/control.h"
#include "pool/pool_wire.h"

namespace etrun::pool {

// "HOST:PORT" -> host and port (1..65535, or 0 with `allow_any_port`); false for anything else
// (a plain pool name).
bool SplitHostPort(const std::string& text, std::string* host, int* port, bool allow_any_port = false);

// The running pool of this user named `name`, or the only one when `name` is empty. Returns false
// and sets *err (none running, several, no such name: each with how to go on).
bool FindPool(const std::string& name, control::JobEntry* out, std::string* err);

// One local rank's place in the pool.
struct SlotView {
  int slot = -1;
  std::string device;  // GPU id; "" for a plain slot
};

struct ClientOptions {
  std::string pool;    // a pool name of this user, or HOST:PORT
  std::string token;   // for HOST:PORT (ETRUN_POOL_TOKEN)
  // For HOST:PORT: a grant's start_through is taken (ETRUN_POOL_TRUST_START=1).
  bool trust_start_through = false;
  JoinRequest join;    // name, priority, min/max, pid
  // The cluster kinds a grant's route may name (Grant::Host::start_kind).
  std::vector<const discovery::ClusterKind*> kinds;
};

class PoolClient : public discovery::HostSource {
 public:
  explicit PoolClient(ClientOptions options);
  ~PoolClient() override;

  // Finds the pool and joins it; blocking, before the job's loop runs. Returns false and sets
  // *err (no such pool: how to start it; the pool refused: why).
  bool Join(std::string* err);
  // The job ended: its slots go back to the pool at once. Blocking; errors are only logged.
  void Leave();

  void Poll(std::function<void(discovery::HostGrant)> done) override;
  void Stop() override;
  void ReportLive(std::map<std::string, std::vector<int>> live) override;
  // Lent by the pool: its name and the job's id there (its name, made unique; "" before it joined).
  discovery::HostSourceTraits traits() const override;
  std::string name() const { return options_.pool; }
  std::string job_id() const;

 private:
  bool Find(control::JobEntry* entry, std::string* err) const;
  // Whether the pool is reached by address (--pool HOST:PORT), not through the registry.
  bool by_address() const;
  // The join request: the options, and what the job holds and still drains.
  JoinRequest Request() const;
  bool JoinWith(const control::JobEntry& entry, std::string* err);
  // One sync with the pool, on the sync thread: the grant, a failure, or the last grant again
  // when the pool is away.
  discovery::HostGrant Sync();
  // POST /jobs/ID/sync: the HTTP status (0: no answer, *err says why) and the reply's body.
  int PostSync(const control::JobEntry& entry, const std::string& id, const SyncRequest& request,
               std::string* reply, std::string* err) const;
  // The pool went away, restarted (a new port or token, or no book of this job) or counted the
  // job gone: joins it again with what the job holds and syncs once more (*status, *reply).
  // False when the pool is still away.
  bool Rejoin(SyncRequest* request, std::string* reply, int* status);
  // A sync's answer -> the grant, or a failure (nothing kept).
  discovery::HostGrant Apply(int status, const std::string& reply);
  // Keeps a grant of the pool (slots held, each local rank's place) and returns it as a HostGrant.
  discovery::HostGrant Adopt(const Grant& from_pool);
  // From the book below, with mu_ held: the slots held per host (the pool's HostLists), and
  // the grant the job plans with (answered again while the pool is away; none at first).
  HostLists Held() const;
  discovery::HostGrant Granted() const;

  ClientOptions options_;
  std::thread thread_;
  mutable std::mutex mu_;  // guards the fields below (the sync thread writes them)
  control::JobEntry entry_;
  std::string id_;
  HostLists live_;
  Grant held_;                                     // the pool's last grant, as it sent it
  std::map<std::string, std::vector<SlotView>> slots_;  // by local rank; kept past give-back
  bool lost_ = false;                              // the pool could not be reached
  int64_t seen_ = 0;                               // version of the last grant handed out
  std::string lost_why_;  // the last reason warned about (the sync thread's only)
};

}  // namespace etrun::pool

#endif  // ETRUN_POOL_POOL_CLIENT_H_
