// ScriptRunner: where an elastic job's (or a shared pool's) host list comes from (spec §2.4).
// Each Run hands back one listing, "host:slots" lines as a discovery script prints them, or why
// there is none. There are three: launcher::ShellScriptRunner runs the discovery script,
// `/bin/sh -c <script>`, off the caller's thread and with a timeout
// (launcher/shell_script_runner.h: processes are the launcher's); FixedHosts is a list that never
// changes (-H, --hostfile or localhost:<np> in an elastic job); pool::PoolClient lists what a
// shared pool grants the job (pool/pool_client.h). The elastic driver's tests need none: they
// give it ScriptResults directly. Run from one thread.
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

// A "script" that always prints the same hosts: done runs at once, on the caller's thread.
class FixedHosts : public ScriptRunner {
 public:
  explicit FixedHosts(std::string output) : output_(std::move(output)) {}
  void Run(std::function<void(ScriptResult)> done) override { done({true, output_, "", ""}); }

 private:
  std::string output_;
};

}  // namespace etrun::discovery

#endif  // ETRUN_DISCOVERY_SCRIPT_RUNNER_H_
