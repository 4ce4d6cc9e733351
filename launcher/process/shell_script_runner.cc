#include "launcher/process/shell_script_runner.h"
#include "launcher/process/child.h"
#include "launcher/process/environment.h"

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
#include <vector>

namespace etrun::launcher {

using discovery::kMaxScriptErrors;
using discovery::kMaxScriptOutput;
using discovery::ScriptResult;

namespace {

// How reading a script's output ended.
struct Capture {
  bool timed_out = false;
  bool cancelled = false;
  bool output_overflow = false;
  bool errors_overflow = false;
};

// Reads the script's stdout and stderr into *result until both close, `timeout` passes or
// `cancel_fd` becomes readable. Bounded: a runaway script must not grow etrun without limit;
// the rest is drained (so the script is not blocked) and dropped.
Capture ReadOutput(int out_fd, int err_fd, int cancel_fd, std::chrono::milliseconds timeout,
                   ScriptResult* result) {
  Capture capture;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool open[2] = {true, true};
  const int fd[2] = {out_fd, err_fd};
  std::string* text[2] = {&result->output, &result->errors};
  const size_t cap[2] = {kMaxScriptOutput, kMaxScriptErrors};
  bool* overflow[2] = {&capture.output_overflow, &capture.errors_overflow};
  char buf[65536];
  while (open[0] || open[1]) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      capture.timed_out = true;
      break;
    }
    struct pollfd fds[3] = {{open[0] ? fd[0] : -1, POLLIN, 0},
                            {open[1] ? fd[1] : -1, POLLIN, 0},
                            {cancel_fd, POLLIN, 0}};
    int n = poll(fds, 3, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (fds[2].revents != 0) {
      capture.cancelled = true;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t got = read(fd[i], buf, sizeof(buf));
      if (got > 0) {
        size_t room = text[i]->size() < cap[i] ? cap[i] - text[i]->size() : 0;
        text[i]->append(buf, std::min(room, static_cast<size_t>(got)));
        if (static_cast<size_t>(got) > room) *overflow[i] = true;
      } else if (got == 0 || errno != EINTR) {
        open[i] = false;
      }
    }
  }
  return capture;
}

}  // namespace

ShellScriptRunner::ShellScriptRunner(std::string script, std::chrono::milliseconds timeout,
                                     const FileLimit* limit)
    : script_(std::move(script)), timeout_(timeout), limit_(limit) {
  if (pipe2(cancel_pipe_, O_CLOEXEC) != 0) cancel_pipe_[0] = cancel_pipe_[1] = -1;
}

ShellScriptRunner::~ShellScriptRunner() {
  Stop();
  for (int fd : cancel_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void ShellScriptRunner::Stop() {
  if (cancel_pipe_[1] >= 0) (void)!write(cancel_pipe_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
}

void ShellScriptRunner::Run(std::function<void(ScriptResult)> done) {
  if (thread_.joinable()) thread_.join();  // the previous run has reported already
  thread_ = std::thread([this, done = std::move(done)] {
    done(RunOnce(script_, timeout_, cancel_pipe_[0],
                 limit_ != nullptr ? limit_->for_children() : nullptr));
  });
}

ScriptResult ShellScriptRunner::RunOnce(const std::string& script, std::chrono::milliseconds timeout,
                                        int cancel_fd, const struct rlimit* nofile) {
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
  ChildOptions options;
  options.death_signal = SIGKILL;
  options.stdout_fd = out[1];
  options.stderr_fd = err[1];
  options.nofile = nofile;
  Child child;
  std::string start_err;
  bool started = StartChild("/bin/sh", {"sh", "-c", script}, CurrentEnvironment(), options, &child,
                            &start_err);
  close(out[1]);
  close(err[1]);
  if (!started || !AwaitExec(&child, &start_err)) {
    close(out[0]);
    close(err[0]);
    if (started) waitpid(child.pid, nullptr, 0);
    result.failure = start_err;
    return result;
  }
  Capture capture = ReadOutput(out[0], err[0], cancel_fd, timeout, &result);
  close(out[0]);
  close(err[0]);
  // Leftovers (a background child holding nothing open, or a hung script) die with the group.
  kill(-child.pid, SIGKILL);
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (capture.errors_overflow) result.errors += "\n[etrun: the script's stderr was cut at 64 KiB]\n";
  if (capture.cancelled) {
    result.failure = "cancelled";
  } else if (capture.output_overflow) {
    result.failure = "printed more than " + std::to_string(kMaxScriptOutput >> 20) +
                     " MiB on stdout (etrun reads at most that: one host:slots line per host)";
  } else if (capture.timed_out) {
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

}  // namespace etrun::launcher
