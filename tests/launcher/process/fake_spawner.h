// FakeSpawner: a Spawner that starts no process. It records each LaunchSpec, hands back pipes
// whose write ends are already closed (the "rank" printed nothing) and a pid no process can have
// (kill and waitpid on it fail harmlessly), or refuses to start when told to.
#ifndef ETRUN_TESTS_LAUNCHER_FAKE_SPAWNER_H_
#define ETRUN_TESTS_LAUNCHER_FAKE_SPAWNER_H_

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launcher/process/environment.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {

class FakeSpawner : public Spawner {
 public:
  static constexpr pid_t kFirstPid = 1 << 30;  // above any pid_max

  bool Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err, int* err_no) override {
    started.push_back(spec);
    *err_no = 0;
    if (refuse) {
      *err_no = refuse_errno;
      *err = "refused by the fake spawner";
      return false;
    }
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    if (pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    close(out_pipe[1]);
    close(err_pipe[1]);
    out->pid = kFirstPid + static_cast<pid_t>(started.size()) - 1;
    out->stdout_fd = out_pipe[0];
    out->stderr_fd = err_pipe[0];
    return true;
  }
  bool AwaitStart(SpawnedProcess*, std::string* err, int* err_no) override {
    *err_no = 0;
    if (!exec_fails) return true;
    *err_no = ENOEXEC;
    *err = "Exec format error";
    return false;
  }

  std::vector<LaunchSpec> started;  // every spec asked for, refused ones too
  bool refuse = false;
  int refuse_errno = 0;  // the errno a refused start reports
  bool exec_fails = false;
};

// The value of `name` in a spec's environment ("" if unset).
inline std::string EnvOf(const LaunchSpec& spec, const std::string& name) {
  return EnvValue(spec.env, name);
}

}  // namespace etrun::launcher

#endif  // ETRUN_TESTS_LAUNCHER_FAKE_SPAWNER_H_
