// Spawner: starts one process for RankSet and hands back its pid and output pipes. LocalSpawner
// starts it on this machine through Boost.Process (launcher/process/child.h); a rank on another host is
// no process here but its host's agent's (LaunchSpec::remote_host, remote_starter.h). Tests use a
// fake that records what it was asked to start. The RankSet owns what a spawner returns.
// Driver thread only.
#ifndef ETRUN_LAUNCHER_PROCESS_SPAWNER_H_
#define ETRUN_LAUNCHER_PROCESS_SPAWNER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/process/child.h"

namespace etrun::launcher {

class RankHost;

// The GPUs a rank on another host takes there (--gpus-per-rank / --ranks-per-gpu): its host's
// agent counts that host's GPUs and hands the rank its share by local rank (gpu_slots.h).
struct GpuShare {
  int gpus_per_rank = 0;
  int ranks_per_gpu = 0;
  int local_rank = 0;
  bool enabled() const { return gpus_per_rank > 0 || ranks_per_gpu > 0; }
};

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH (relative to cwd) unless it contains '/'
  std::vector<std::string> env;   // complete environment, "K=V"
  std::string cwd;                // its working directory (failure to enter it ignored); "": etrun's
  // A rank (false) dies with etrun (SIGKILL on parent death, the guardian) and is signalled as a
  // process group. A supervisor such as mpirun gets SIGTERM when etrun dies so that it stops its
  // own ranks, is left out of the guardian and is signalled alone.
  bool supervisor = false;
  // A rank on another host: its agent starts the rank `remote_command` describes there (the
  // agent wire's RankStartText; argv, env and cwd are not used).
  RankHost* remote_host = nullptr;
  std::string remote_command;
  GpuShare remote_gpus;  // none unless enabled()
};

// A started process. The read ends are non-blocking and close-on-exec; the caller owns them.
struct SpawnedProcess {
  pid_t pid = -1;        // also the process group id: every rank leads its own group
  int stdout_fd = -1;
  int stderr_fd = -1;
  int exec_errno = 0;  // why it did not exec, for Spawner::AwaitStart; 0 when it did
};

class Spawner {
 public:
  virtual ~Spawner() = default;
  // Starts the process. On failure returns false, sets *err, and leaves nothing running; *err_no
  // is the errno of the system call that failed (a pipe, the fork), 0 when none did (no such
  // program). IsShortage(*err_no) tells etrun's own limits from the command's faults.
  virtual bool Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err,
                     int* err_no) = 0;
  // Whether the process of a successful Start has exec'd (true) or failed to (false, *err says
  // why, e.g. "Permission denied", *err_no is its errno; the process then exits 127 and is reaped
  // as usual).
  virtual bool AwaitStart(SpawnedProcess* process, std::string* err, int* err_no) = 0;
};

class LocalSpawner : public Spawner {
 public:
  // `limit` (may be null) gives children the open-file limit etrun started with.
  explicit LocalSpawner(const FileLimit* limit = nullptr) : limit_(limit) {}

  // The child (StartChild): own process group, stdin from /dev/null, stdout/stderr into pipes,
  // parent-death signal, no other descriptor, then execve. Returns once the child has exec'd or
  // failed to (vfork: the parent waits for the exec, and copies no page tables); a failed exec
  // is kept for AwaitStart, which does not wait.
  bool Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err, int* err_no) override;
  bool AwaitStart(SpawnedProcess* process, std::string* err, int* err_no) override;

 private:
  const FileLimit* limit_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_SPAWNER_H_
