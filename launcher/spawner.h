// Spawner: starts one rank's process and hands back its pid and output pipes. LocalSpawner
// (local_spawner.cc) forks and execs on this machine; an SSH spawner comes later. The RankSet
// owns what a spawner returns. Not thread-safe: call from the driver thread.
#ifndef ETRUN_LAUNCHER_SPAWNER_H_
#define ETRUN_LAUNCHER_SPAWNER_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace etrun::launcher {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it contains '/'
  std::vector<std::string> env;   // complete environment, "K=V"
};

// A started process. The read ends are non-blocking and close-on-exec; the caller owns them.
struct SpawnedProcess {
  pid_t pid = -1;        // also the process group id: every rank leads its own group
  int stdout_fd = -1;
  int stderr_fd = -1;
  int exec_status_fd = -1;  // see LocalSpawner::AwaitExec
};

// In a forked child, before execve (async-signal-safe): default signal dispositions, an empty
// signal mask, and the open-file limit etrun started with (see RaiseOpenFileLimit).
void ResetProcessForExec();

class Spawner {
 public:
  virtual ~Spawner() = default;
  // Starts the process. On failure returns false, sets *err, and leaves nothing running.
  virtual bool Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err) = 0;
};

class LocalSpawner : public Spawner {
 public:
  // The child: own process group, stdin from /dev/null, stdout/stderr into pipes, signal mask
  // and dispositions reset, SIGKILL on parent death (with the fork race closed), then execve.
  // Returns as soon as the child is forked; AwaitExec tells whether the exec worked, so many
  // ranks can be forked before waiting on any of them.
  bool Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err) override;

  // Waits until the child of `process` has exec'd (returns true) or failed to (returns false,
  // sets *err, e.g. "Permission denied"; the child then exits 127). Closes exec_status_fd.
  static bool AwaitExec(SpawnedProcess* process, std::string* err);

  // Raises etrun's soft open-file limit to the hard limit (the rendezvous server may hold
  // thousands of connections); ranks started afterwards get the original soft limit back.
  static void RaiseOpenFileLimit();

  // Resolves a command name through PATH as execvp would. Returns "" and sets *err when there is
  // no executable of that name.
  static std::string ResolveProgram(const std::string& name, const std::string& path_env,
                                    std::string* err);
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SPAWNER_H_
