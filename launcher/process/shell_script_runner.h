// ShellScriptRunner: the real discovery::ScriptRunner. Runs `/bin/sh -c <script>` in the
// launcher's working directory and environment, in its own process group (launcher/process/child.h), on
// a helper thread; a script still running at the deadline is SIGKILLed with its whole group
// (horovodrun has no timeout and freezes, spec §9.1). Output beyond discovery::kMaxScriptOutput
// fails the run; stderr beyond kMaxScriptErrors is cut. Run from one thread; `done` runs on the
// helper thread.
#ifndef ETRUN_LAUNCHER_PROCESS_SHELL_SCRIPT_RUNNER_H_
#define ETRUN_LAUNCHER_PROCESS_SHELL_SCRIPT_RUNNER_H_

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "discovery/script_runner.h"
#include "launcher/process/child.h"

namespace etrun::launcher {

class ShellScriptRunner : public discovery::ScriptRunner {
 public:
  // `limit` (may be null) gives the script the open-file limit etrun started with.
  ShellScriptRunner(std::string script, std::chrono::milliseconds timeout,
                    const FileLimit* limit = nullptr);
  ~ShellScriptRunner() override;  // Stop()s.
  void Run(std::function<void(discovery::ScriptResult)> done) override;
  // Kills a run in progress (its `done` gets failure "cancelled") and joins its thread.
  void Stop() override;

  // Runs the script once on the calling thread (used by Run's thread). `cancel_fd` readable
  // aborts the run early (-1: none).
  static discovery::ScriptResult RunOnce(const std::string& script,
                                         std::chrono::milliseconds timeout, int cancel_fd,
                                         const struct rlimit* nofile = nullptr);

 private:
  std::string script_;
  std::chrono::milliseconds timeout_;
  const FileLimit* limit_;
  std::thread thread_;
  int cancel_pipe_[2] = {-1, -1};
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_SHELL_SCRIPT_RUNNER_H_
