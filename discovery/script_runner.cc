#include "discovery/script_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace etrun::discovery {

ShellScriptRunner::ShellScriptRunner(std::string script, std::chrono::milliseconds timeout)
    : script_(std::move(script)), timeout_(timeout) {
  if (pipe2(cancel_pipe_, O_CLOEXEC) != 0) cancel_pipe_[0] = cancel_pipe_[1] = -1;
}

ShellScriptRunner::~ShellScriptRunner() {
  if (cancel_pipe_[1] >= 0) (void)!write(cancel_pipe_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : cancel_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void ShellScriptRunner::Run(std::function<void(ScriptResult)> done) {
  if (thread_.joinable()) thread_.join();  // the previous run has reported already
  thread_ = std::thread([this, done = std::move(done)] {
    done(RunOnce(script_, timeout_, cancel_pipe_[0]));
  });
}

ScriptResult ShellScriptRunner::RunOnce(const std::string& script, std::chrono::milliseconds timeout,
                                        int cancel_fd) {
  ScriptResult result;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    result.failure = std::string("cannot create a pipe: ") + strerror(errno);
    return result;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    result.failure = std::string("cannot create a pipe: ") + strerror(errno);
    return result;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    }
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    result.failure = std::string("cannot fork: ") + strerror(errno);
    return result;
  }
  setpgid(pid, pid);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, timed_out = false, cancelled = false;
  char buf[65536];
  bool output_overflow = false, errors_overflow = false;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd fds[3] = {{out_open ? out[0] : -1, POLLIN, 0},
                            {err_open ? err[0] : -1, POLLIN, 0},
                            {cancel_fd, POLLIN, 0}};
    int n = poll(fds, 3, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (fds[2].revents != 0) {
      cancelled = true;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t got = read(i == 0 ? out[0] : err[0], buf, sizeof(buf));
      if (got > 0) {
        // Bounded: a runaway script must not grow etrun without limit. The rest is drained
        // (so the script is not blocked) and dropped.
        std::string& text = i == 0 ? result.output : result.errors;
        size_t cap = i == 0 ? kMaxScriptOutput : kMaxScriptErrors;
        size_t room = text.size() < cap ? cap - text.size() : 0;
        text.append(buf, std::min(room, static_cast<size_t>(got)));
        if (static_cast<size_t>(got) > room) (i == 0 ? output_overflow : errors_overflow) = true;
      } else if (got == 0 || errno != EINTR) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
  }
  close(out[0]);
  close(err[0]);
  // Leftovers (a background child holding nothing open, or a hung script) die with the group.
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (errors_overflow) result.errors += "\n[etrun: the script's stderr was cut at 64 KiB]\n";
  if (cancelled) {
    result.failure = "cancelled";
  } else if (output_overflow) {
    result.failure = "printed more than " + std::to_string(kMaxScriptOutput >> 20) +
                     " MiB on stdout (etrun reads at most that: one host:slots line per host)";
  } else if (timed_out) {
    char text[64];
    snprintf(text, sizeof(text), "timed out after %.1f s", timeout.count() / 1000.0);
    result.failure = text;
  } else if (WIFSIGNALED(status)) {
    result.failure = "killed by signal " + std::to_string(WTERMSIG(status));
  } else if (WEXITSTATUS(status) != 0) {
    result.failure = "exit code " + std::to_string(WEXITSTATUS(status));
  } else {
    result.ok = true;
  }
  return result;
}

}  // namespace etrun::discovery
