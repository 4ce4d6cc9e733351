// ScriptRunner: runs a host discovery script (spec §2.4) and hands back what it printed, or why
// it failed. The real one, launcher::ShellScriptRunner (launcher/process/shell_script_runner.h:
// processes are the launcher's), runs `/bin/sh -c <script>` off the caller's thread with a
// timeout. An elastic job sees it through a ScriptHostSource (host_source.h), which parses each
// run into a HostGrant; a shared pool's daemon polls it itself. Run from one thread.
#ifndef ETRUN_DISCOVERY_SCRIPT_RUNNER_H_
#define ETRUN_DISCOVERY_SCRIPT_RUNNER_H_

#include <cstddef>
#include <functional>
#include <string>

namespace etrun::discovery {

// What etrun keeps of one discovery run: more stdout fails the run; more stderr is cut.
inline constexpr size_t kMaxScriptOutput = 1 << 20;
inline constexpr size_t kMaxScriptErrors = 64 << 10;

struct ScriptResult {
  bool ok = false;         // exited 0 within the timeout
  std::string output;      // stdout
  std::string errors;      // stderr
  std::string failure;     // why not ok: "exit code 3", "killed by signal 9", "timed out after 5 s"
};

class ScriptRunner {
 public:
  virtual ~ScriptRunner() = default;
  // Starts one run; `done` is called exactly once, on a thread of the runner's choosing (post it
  // to your loop). REQUIRES: no run in progress.
  virtual void Run(std::function<void(ScriptResult)> done) = 0;
  // Ends a run in progress and waits until its `done` has returned; no Run may follow.
  virtual void Stop() {}
};

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_SCRIPT_RUNNER_H_
