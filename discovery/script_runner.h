// ScriptRunner: runs the host discovery script (spec §2.4) off the caller's thread, with a
// timeout, and hands back its stdout and stderr. ShellScriptRunner runs `/bin/sh -c <script>` in
// the launcher's working directory and environment, in its own process group, on a helper thread;
// a script still running at the deadline is SIGKILLed with its whole group (horovodrun has no
// timeout and freezes, §9.1). Tests use a fake. Run/Cancel from one thread.
#ifndef ETRUN_DISCOVERY_SCRIPT_RUNNER_H_
#define ETRUN_DISCOVERY_SCRIPT_RUNNER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <cstddef>
#include <string>
#include <thread>

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
};

class ShellScriptRunner : public ScriptRunner {
 public:
  ShellScriptRunner(std::string script, std::chrono::milliseconds timeout);
  ~ShellScriptRunner() override;  // Kills a run in progress and joins its thread.
  void Run(std::function<void(ScriptResult)> done) override;

  // Runs the script once on the calling thread (used by Run's thread). `cancel_fd` readable
  // aborts the run early (-1: none).
  static ScriptResult RunOnce(const std::string& script, std::chrono::milliseconds timeout,
                              int cancel_fd);

 private:
  std::string script_;
  std::chrono::milliseconds timeout_;
  std::thread thread_;
  int cancel_pipe_[2] = {-1, -1};
};

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_SCRIPT_RUNNER_H_
