#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "launcher/process/child.h"
#include "launcher/process/environment.h"
#include "launcher/process/program_path.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {

bool LocalSpawner::Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err,
                         int* err_no) {
  *err_no = 0;
  std::string program = FindProgram(spec.argv.at(0), EnvValue(spec.env, "PATH"), err, spec.cwd);
  if (program.empty()) {
    *err = "cannot run '" + spec.argv[0] + "': " + *err;
    return false;
  }
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    *err_no = errno;
    *err = std::string("cannot create pipes: ") + strerror(errno);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    return false;
  }
  ChildOptions options;
  // In etrun's session, a process group of its own. A session per rank (as horovodrun gives
  // its workers) was tried and dropped: where the kernel schedules by session (autogroup), a
  // group per rank made real Horovod's allreduce steps 1.4x slower on an idle machine and over
  // 3x slower beside an idle-priority build (docs/performance.md, "A session per rank").
  options.own_session = false;
  options.death_signal = spec.supervisor ? SIGTERM : SIGKILL;
  options.stdout_fd = out_pipe[1];
  options.stderr_fd = err_pipe[1];
  options.shell_fallback = true;
  options.nofile = limit_ != nullptr ? limit_->for_children() : nullptr;
  options.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  Child child;
  bool started = StartChild(program, spec.argv, spec.env, options, &child, err, err_no);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (!started) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return false;
  }
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  out->pid = child.pid;
  out->stdout_fd = out_pipe[0];
  out->stderr_fd = err_pipe[0];
  out->exec_errno = child.exec_errno;
  return true;
}

bool LocalSpawner::AwaitStart(SpawnedProcess* process, std::string* err, int* err_no) {
  *err_no = 0;
  Child child{process->pid, process->exec_errno};
  bool ok = AwaitExec(&child, err, err_no);
  process->exec_errno = 0;
  return ok;
}

}  // namespace etrun::launcher
