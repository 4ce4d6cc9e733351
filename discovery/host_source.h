// HostSource: where an elastic job's ranks may run, polled. Each poll yields one HostGrant: the
// hosts and their slots, the facts of each slot (its GPU, variables for its ranks) and a
// version, as one value, so the hosts a policy plans with and the facts its ranks get always
// come from the same answer. Implementations: a fixed list (-H, --hostfile, localhost:<np>), a
// discovery script (ScriptHostSource over a ScriptRunner), the shared pool's grants
// (pool/pool_client.h), a cluster allocation's (discovery/cluster_kind.h: Slurm's squeue). The
// elastic policy asks its source and acts on its traits, never on which one it is.
// Poll may call back on any thread; the rest is for the caller's (loop) thread.
#ifndef ETRUN_DISCOVERY_HOST_SOURCE_H_
#define ETRUN_DISCOVERY_HOST_SOURCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "discovery/host_slots.h"
#include "discovery/script_runner.h"
#include "discovery/start_route.h"

namespace etrun::discovery {

// What a source knows of one slot, for the rank that runs in it.
struct SlotFacts {
  std::string device;             // its GPU id; "" for a plain slot
  std::vector<std::string> env;   // variables for its rank ("K=V"), e.g. the pool's slot name
  bool operator==(const SlotFacts&) const = default;
};

// One answer of a source.
struct HostGrant {
  bool ok = false;
  std::vector<HostSlots> hosts;                          // when ok, in the source's order
  // Per host, index = local rank; may be shorter than its slots (no facts). The source owns
  // them whole: one that lends slots keeps listing a local rank's facts after it took the place
  // back (its rank may still drain) until it names that place again; the job keeps no copy.
  std::map<std::string, std::vector<SlotFacts>> slots;
  // Per host, when its ranks start otherwise than the job's: the route they start through (a
  // node of another Slurm allocation: srun --jobid=<that one>), made by its cluster kind.
  std::map<std::string, StartRoute> start_through;
  uint64_t version = 0;                                  // grows with each new grant; 0: unversioned
  std::vector<std::string> warnings;  // for the user, when ok: whole lines naming the source
  std::string errors;    // the source's own messages (a script's stderr), passed on as they are
  std::string failure;   // when !ok: one line saying why, naming the source
  std::string fix;       // when !ok: how to fix it, for the error that ends a job ("": none)
};

// How a job must treat a source's hosts.
struct HostSourceTraits {
  // The slots are lent by an allocator that other jobs share (etrun pool): the job starts with
  // --min-np and waits for its grant with no deadline (gang admission), reports its live ranks
  // before each poll and polls again as soon as one of its ranks ended (the slot may be another
  // job's next); `etrun scale` may cap its size but not add or remove its hosts.
  bool lent = false;
  std::string lender;      // the allocator's name, for status, events and messages
  std::string lender_job;  // the job's id there
  // A host the source stops listing has left for good (its Slurm allocation ended or shrank):
  // listed again it is a new lease, its old blacklisting forgotten.
  bool forget_departed = false;
};

class HostSource {
 public:
  virtual ~HostSource() = default;
  // Starts one poll; `done` is called exactly once, on a thread of the source's choosing.
  // REQUIRES: no poll under way.
  virtual void Poll(std::function<void(HostGrant)> done) = 0;
  // Ends a poll under way and waits until its `done` returned; no Poll may follow.
  virtual void Stop() {}
  // Before each Poll: the local ranks per host that still have a live process.
  virtual void ReportLive(std::map<std::string, std::vector<int>> live) {}
  virtual HostSourceTraits traits() const { return {}; }
};

// A script's run as a grant: its hosts when it exited 0 and printed good lines (slots default to
// `default_slots`), else a failure naming the script's exit or its bad line, and the fix.
HostGrant GrantFromScript(const ScriptResult& result, int default_slots);

// The discovery script, run on each poll through `runner` (which must outlive the source).
class ScriptHostSource : public HostSource {
 public:
  ScriptHostSource(ScriptRunner* runner, int default_slots)
      : runner_(runner), default_slots_(default_slots) {}
  void Poll(std::function<void(HostGrant)> done) override;
  void Stop() override { runner_->Stop(); }

 private:
  ScriptRunner* runner_;
  int default_slots_;
};

// Hosts that never change (-H, --hostfile, localhost:<np>): every poll answers them at once, on
// the caller's thread, under the same total slot cap as a script's lines.
class FixedHostSource : public HostSource {
 public:
  explicit FixedHostSource(const std::vector<HostSlots>& hosts);
  void Poll(std::function<void(HostGrant)> done) override { done(grant_); }

 private:
  HostGrant grant_;
};

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_HOST_SOURCE_H_
