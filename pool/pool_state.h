// PoolState: the book of a shared slot pool (`etrun pool start`): its hosts and slots, the jobs
// that joined, which slots each job holds, and the moves that bring holdings to the policy's
// targets (pool/allocation.h). No I/O and no clock of its own: the pool daemon feeds it requests
// and the time, and writes the events it hands out.
//
// Slots. Host h with n slots has slots h/0 .. h/(n-1). With GPUs, slot i of a host runs on the
// host's GPU devices[i / ranks_per_gpu]; plain (CPU) slots have no device.
//
// A job's holding on a host is an ordered list of slot indices: position k is the job's local
// rank k there (etrun's elastic driver gives a host's slots to local ranks 0..n-1 and drops the
// highest first when the host's count falls). So a job shrinks by losing the tail of a host's
// list and grows by appending to it.
//
// Moving slots, shrink first: a slot taken from a job stays "releasing" (still the job's, free
// for nobody) until the job's next report no longer lists a live process in that local rank; only
// free slots are granted, so a slot is never held by two jobs, even for a moment. A job is not
// grown on a host while it still gives back slots there (its local ranks would overlap).
//
// Gang: a job holding nothing gets slots only when at least its min-np are free at once.
// Hold: a job that grew is not shrunk again for `min_hold` (releases of ended jobs and
// admissions still proceed), so allocations do not thrash.
// Thread-compatible.
#ifndef ETRUN_POOL_POOL_STATE_H_
#define ETRUN_POOL_POOL_STATE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discovery/start_route.h"
#include "pool/allocation.h"
#include "pool/pool_wire.h"

namespace etrun::pool {

using PoolTime = std::chrono::steady_clock::time_point;

struct PoolHost {
  std::string name;
  int slots = 0;
  std::vector<std::string> devices;  // GPU ids ("0", a UUID); empty: plain slots
  discovery::StartRoute start_through{};  // the route of its grants (Grant::Host::start_through,
                                          // start_kind; an initializer: {name, slots, devices}
                                          // stays a complete aggregate)
  bool operator==(const PoolHost&) const = default;
};

class PoolState {
 public:
  // (event name, fields): see events/schema.h's pool_* events.
  using EventSink = std::function<void(const char* event, nlohmann::json fields)>;

  PoolState(std::string name, int ranks_per_gpu, std::chrono::milliseconds min_hold,
            EventSink events);

  // The pool's hosts (from -H, --hostfile or a discovery run). A job holding a slot that vanished
  // gives it back, and every later local rank of that host with it; they stay its (releasing)
  // until it reports them gone.
  void SetHosts(std::vector<PoolHost> hosts, PoolTime now);
  const std::vector<PoolHost>& hosts() const { return hosts_; }
  int total() const;

  // The book (the daemon keeps it in a file: pool/pool_wire.h), and a new pool's start from it:
  // every job is restored with what it held, as a placeholder that keeps those slots from other
  // jobs until the job joins again (adopted by pid, or by name for jobs on other machines) or is
  // gone. A job whose entry makes no sense (no id, a bad priority or np range, slots another
  // restored job holds) is left out: it joins again as a new one.
  Book Holdings() const;
  void Restore(const Book& book, PoolTime now);

  // A job joins (or re-registers with what it holds). Returns its id (the name, made unique, with
  // characters other than letters, digits, '.', '_' and '-' replaced by '_'), or "" with *err.
  std::string Join(const JoinRequest& request, PoolTime now, std::string* err);
  // A job's report: local ranks with a live process per host, and the version of the last grant
  // it applied. Frees slots it has given back, rebalances, and returns its grant. False with
  // *err for an unknown job.
  bool Sync(const std::string& id, const HostLists& live, int64_t seen, PoolTime now,
            Grant* grant, std::string* err);
  // The job ended (its processes are gone) or died: its slots are free at once.
  bool Leave(const std::string& id, const char* reason, PoolTime now);
  bool SetPriority(const std::string& id, int priority, PoolTime now, std::string* err);
  // Applies holds that expired.
  void Tick(PoolTime now) { Rebalance(now); }

  // Jobs whose etrun runs here: the daemon watches their processes (restored placeholders too).
  // The others (id, when last heard from): the daemon counts them lost after a lease.
  struct LocalJob {
    std::string id;
    int pid = 0;
    int64_t pid_start = -1;  // the process's start time (control::ProcessStartTime)
  };
  std::vector<LocalJob> LocalJobs() const;
  std::vector<std::pair<std::string, PoolTime>> RemoteJobs() const;
  bool HasJob(const std::string& id) const { return jobs_.count(id) != 0; }
  // The job's grant version (0 for an unknown job): what a job that just joined has seen at most.
  int64_t Version(const std::string& id) const;

  nlohmann::json Status(PoolTime now) const;
  // Every slot in at most one job (held or releasing), every held one on a known host. Tests and
  // the daemon's own check; *why names the first violation.
  bool Consistent(std::string* why) const;

 private:
  // A job: its entry of the book (id, Grant::version, terms, arrival, pid, holdings), stored
  // once and written to the book as it is, and what the pool works out from it.
  struct Job : BookJob {
    bool admitted = false;
    bool restored = false;  // a placeholder from Restore, not joined again yet
    int target = 0;
    PoolTime last_grow{};
    PoolTime last_heard{};
    int count() const;
  };

  static bool CheckRequest(const JoinRequest& request, std::string* err);
  std::string Rejoin(const JoinRequest& request, PoolTime now);
  std::string UniqueId(const std::string& name) const;
  int SlotsOf(const std::string& host) const;  // -1 for a host the pool does not have
  void KeepHeld(const JoinRequest& request, Job* job) const;
  void ReportJoined(const Job& job);
  void Rebalance(PoolTime now);
  void GiveBackMissing(Job* job) const;
  void Shrink(Job* job, int by);
  void Grow(Job* job, int by, PoolTime now);
  std::map<std::string, std::set<int>> Busy() const;
  const std::string* Device(const std::string& host, int slot) const;
  discovery::StartRoute StartThrough(const std::string& host) const;  // none for a host it lacks
  void ReportAllocation();

  std::string name_;
  int ranks_per_gpu_ = 1;
  std::chrono::milliseconds min_hold_;
  EventSink events_;
  std::vector<PoolHost> hosts_;
  std::map<std::string, Job> jobs_;
  int64_t arrivals_ = 0;
  nlohmann::json last_allocation_;
};

}  // namespace etrun::pool

#endif  // ETRUN_POOL_POOL_STATE_H_
