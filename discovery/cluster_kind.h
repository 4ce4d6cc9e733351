// ClusterKind: one kind of batch cluster (Slurm; Flux or PBS beside it) as etrun sees it, and
// nothing else: whether the launcher runs inside one of its allocations, that allocation's hosts
// and slots (once from the environment, then polled as a HostSource), and how an agent starts on
// one of its nodes (a --remote-shell template) with the words its messages and flags use. A kind
// is one folder (slurm/) and one line in cli/cluster_kinds.cc, where `etrun` and `etrun pool
// start` choose among the kinds; nothing else names one. Implementations are stateless and
// constant: thread-safe.
#ifndef ETRUN_DISCOVERY_CLUSTER_KIND_H_
#define ETRUN_DISCOVERY_CLUSTER_KIND_H_

#include <memory>
#include <string>
#include <vector>

#include "discovery/host_slots.h"
#include "discovery/host_source.h"
#include "discovery/script_runner.h"

namespace etrun::discovery {

// The words a kind's flags and messages use. Static strings.
struct ClusterWords {
  const char* name;        // "slurm": its flags are --ignore-slurm and --add-slurm-jobs
  const char* title;       // "Slurm": "inside Slurm allocation 7"
  const char* allocators;  // "sbatch, salloc": the commands that give an allocation to run in
  const char* step;        // "srun": the program of its agent starts; a --remote-shell whose
                           // program this is (a path's last part) starts one of its steps
  const char* grow_example;  // "sbatch -J NAME -N2 --wrap 'sleep infinity'": an allocation held
                             // for a job to grow onto (--add-<name>-jobs); "": the kind cannot grow
  // The cluster stops a job by sending its steps SIGTERM (preemption, a time limit, scancel): an
  // agent of the job's own allocation that gets one passes it on, and the job drains.
  bool term_stops_job;
};

// One allocation, as the environment describes it.
struct ClusterAllocation {
  std::string id;                 // the cluster's job id ("7")
  std::vector<HostSlots> hosts;   // its nodes and slots, in the cluster's order
  int gpus_per_node = 0;          // the slots count each node's GPUs: their count; else 0
};

class ClusterKind {
 public:
  virtual ~ClusterKind() = default;
  virtual ClusterWords words() const = 0;
  // Whether `env` ("K=V", the launcher's environment) is inside one of the kind's allocations.
  virtual bool Inside(const std::vector<std::string>& env) const = 0;
  // Reads the allocation `env` is inside. Returns false and sets *err (one line: the variable
  // and how to fix it, without the kind's title or id); *allocation then holds only its id.
  virtual bool Read(const std::vector<std::string>& env, ClusterAllocation* allocation,
                    std::string* err) const = 0;
  // The --remote-shell template ({host}) that starts one agent on {host} of allocation `id`.
  virtual std::string StartTemplate(const std::string& id) const = 0;
  // That template as a route of this kind; `job_own`: the job's own allocation (StartRoute).
  StartRoute Route(const std::string& id, bool job_own) const {
    return {StartTemplate(id), this, job_own};
  }
  // The shell command an elastic job runs on each poll of allocation `id` (and, with
  // `grow_name`, of the user's other running allocations of that name: --add-<name>-jobs).
  virtual std::string PollCommand(const std::string& id, const std::string& grow_name) const = 0;
  // An elastic job's hosts, polled through `runner` (which runs PollCommand and must outlive the
  // source); `own` is the allocation as Read found it. Hosts of the other allocations carry
  // their Route in HostGrant::start_through.
  virtual std::unique_ptr<HostSource> Follow(ScriptRunner* runner,
                                             const ClusterAllocation& own) const = 0;
};

// The first of `kinds` whose allocation `env` is inside; null: none.
const ClusterKind* KindInside(const std::vector<const ClusterKind*>& kinds,
                              const std::vector<std::string>& env);

// The allocation etrun runs inside, read in this one place for `etrun` (cli/cluster_hosts) and
// `etrun pool start` (cli/pool_main): *kind is the first of `kinds` whose allocation `env` is
// inside, skipping those named in `ignored` (null: none), and *allocation what it read. Returns
// false and sets *err ("inside Slurm allocation 7: <why>") when that allocation cannot be read.
bool FindAllocation(const std::vector<const ClusterKind*>& kinds, const std::vector<std::string>& env,
                    const std::vector<std::string>& ignored, const ClusterKind** kind,
                    ClusterAllocation* allocation, std::string* err);

// The kind among `kinds` named `name` (ClusterWords::name); null: none.
const ClusterKind* KindNamed(const std::vector<const ClusterKind*>& kinds, const std::string& name);

// The user's --remote-shell as the job's route: a template whose program is the step of one of
// `kinds` (ClusterWords::step: "srun ...") starts that kind's steps. "": SSH.
StartRoute UserRoute(const std::vector<const ClusterKind*>& kinds, const std::string& remote_shell);

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_CLUSTER_KIND_H_
