#include "launcher/ssh/remote_shell.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "launcher/child.h"

namespace etrun::launcher {
namespace {

int g_stdin_w = -1;  // the command's stdin; closing it asks the remote wrapper to stop

void OnStop(int) {
  int saved = errno;
  if (g_stdin_w >= 0) close(g_stdin_w);
  g_stdin_w = -1;
  errno = saved;
}

}  // namespace

bool CheckRemoteShell(const std::string& remote_shell, std::string* err) {
  if (remote_shell.find("{host}") != std::string::npos) return true;
  *err = "--remote-shell '" + remote_shell + "' does not name the host: write {host} where it "
         "goes, e.g. --remote-shell 'kubectl exec -i {host} --'";
  return false;
}

std::string RemoteShellCommand(const std::string& remote_shell, const std::string& host,
                               const std::string& remote_command) {
  std::string line = remote_shell;
  for (size_t at = line.find("{host}"); at != std::string::npos; at = line.find("{host}", at)) {
    std::string quoted = ShellQuote(host);
    line.replace(at, 6, quoted);
    at += quoted.size();
  }
  // exec: the stub waits for the remote shell itself and sees it die (no shell in between).
  return "exec " + line + " sh -c " + ShellQuote(remote_command);
}

bool UsesExitRecord(const std::string& remote_shell) {
  size_t begin = remote_shell.find_first_not_of(" \t");
  if (begin == std::string::npos) return false;
  size_t end = remote_shell.find_first_of(" \t", begin);
  std::string program = remote_shell.substr(begin, end == std::string::npos ? end : end - begin);
  size_t slash = program.rfind('/');
  return (slash == std::string::npos ? program : program.substr(slash + 1)) == "srun";
}

std::string ExitRecordFilter::Feed(std::string_view piece) {
  static constexpr std::string_view kLead = kRecordLead;
  static constexpr std::string_view kExit = std::string_view(kExitRecord).substr(kLead.size());
  held_.append(piece);
  std::string out;
  size_t from = 0;
  while (true) {
    size_t at = held_.find(kLead, from);
    if (at == std::string::npos) break;
    size_t nl = held_.find('\n', at + kLead.size());
    if (nl == std::string::npos) {  // the rest of the record comes with the next piece
      out.append(held_, from, at - from);
      held_.erase(0, at);
      return out;
    }
    out.append(held_, from, at - from);
    std::string_view body = std::string_view(held_).substr(at + kLead.size(), nl - at - kLead.size());
    bool known = false;
    if (body == kAliveWord) {
      ++alive_;
      known = true;
    } else if (body == kTermWord) {
      ++term_;
      known = true;
    } else if (body.starts_with(kExit) && body.size() > kExit.size() && body.size() <= kExit.size() + 3) {
      int code = 0;
      known = true;
      for (char c : body.substr(kExit.size())) {
        known = known && c >= '0' && c <= '9';
        code = code * 10 + (c - '0');
      }
      if (known) code_ = code;
    }
    if (!known) out.append(held_, at, nl + 1 - at);  // not a record after all: passed on as it is
    from = nl + 1;
  }
  // Hold back a tail that may be the start of a record.
  size_t keep = 0;
  for (size_t n = std::min(kLead.size() - 1, held_.size() - from); n > 0; --n) {
    if (std::string_view(held_).substr(held_.size() - n) == kLead.substr(0, n)) {
      keep = n;
      break;
    }
  }
  out.append(held_, from, held_.size() - from - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string ExitRecordFilter::Finish() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

std::vector<std::string> RemoteShellRankArgs(const std::string& host,
                                             const std::string& command_line, bool exit_record,
                                             double lost_after_s, bool pass_term) {
  if (!exit_record) return {kRemoteShellRankMode, host, command_line, "status"};
  char mode[64];
  snprintf(mode, sizeof(mode), "record:%g%s", lost_after_s, pass_term ? ":term" : "");
  return {kRemoteShellRankMode, host, command_line, mode};
}

bool ParseStatusMode(const std::string& text, RecordMode* mode) {
  *mode = RecordMode();
  if (text == "status") return true;
  if (!text.starts_with("record:")) return false;
  char* end = nullptr;
  mode->lost_after_s = strtod(text.c_str() + 7, &end);
  mode->exit_record = true;
  if (end == text.c_str() + 7 || mode->lost_after_s < 0) return false;
  if (strcmp(end, ":term") == 0) {
    mode->pass_term = true;
    return true;
  }
  return *end == '\0';
}

namespace {

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // etrun is gone: the rest has no reader
    done += static_cast<size_t>(n);
  }
}

double Now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Passes the command's stderr on to ours without its records; returns at its end (true), or
// false when, after its first alive record, nothing came for `lost_after_s` (0: never).
bool PassStderr(int fd, ExitRecordFilter* filter, double lost_after_s, bool pass_term) {
  char buffer[16384];
  double last = Now();
  pid_t etrun = getppid();
  bool passed_term = false;
  while (true) {
    struct pollfd p = {fd, POLLIN, 0};
    int ready = poll(&p, 1, 200);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0) {
      ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      last = Now();
      WriteAll(STDERR_FILENO, filter->Feed(std::string_view(buffer, static_cast<size_t>(n))));
      if (pass_term && filter->term() > 0 && !passed_term) {
        passed_term = true;
        if (getppid() == etrun && etrun > 1) kill(etrun, SIGTERM);  // not whoever adopted us
      }
    } else if (lost_after_s > 0 && filter->alive() > 0 && Now() - last > lost_after_s) {
      WriteAll(STDERR_FILENO, filter->Finish());
      return false;
    }
  }
  WriteAll(STDERR_FILENO, filter->Finish());
  return true;
}

}  // namespace

int RunRemoteShellRank(const std::string& host_text, const std::string& command_line,
                       const RecordMode& mode) {
  bool exit_record = mode.exit_record;
  double lost_after_s = mode.lost_after_s;
  const char* host = host_text.c_str();
  int fds[2];
  int err_fds[2] = {-1, -1};
  if (pipe2(fds, O_CLOEXEC) != 0 || (exit_record && pipe2(err_fds, O_CLOEXEC) != 0)) {
    fprintf(stderr, "etrun: error: remote shell for %s: cannot create a pipe: %s\n", host,
            strerror(errno));
    return kRemoteShellFailure;
  }
  // The stop signals wait until the handler is in place.
  sigset_t stops, old;
  sigemptyset(&stops);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stops, sig);
  sigprocmask(SIG_BLOCK, &stops, &old);
  // Its own process group: etrun's SIGTERM to the rank's group reaches only this stub, which
  // stops the remote command through the pipe; it dies with the stub (SIGKILL on parent death).
  ChildOptions options;
  options.death_signal = SIGKILL;
  options.stdin_fd = fds[0];
  options.stderr_fd = err_fds[1];
  Child child;
  std::string err;
  bool started = StartChild("/bin/sh", {"sh", "-c", command_line}, CurrentEnvironment(), options,
                            &child, &err) && AwaitExec(&child, &err);
  close(fds[0]);
  if (err_fds[1] >= 0) close(err_fds[1]);
  g_stdin_w = fds[1];
  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (!started) {
    fprintf(stderr, "etrun: error: remote shell for %s: %s\n", host, err.c_str());
    return kRemoteShellFailure;
  }
  ExitRecordFilter filter;
  bool answered = true;
  if (exit_record) {
    answered = PassStderr(err_fds[0], &filter, lost_after_s, mode.pass_term);
    // Silent: the host (or the way to it) is gone. The remote shell may wait for a long time
    // (srun until Slurm declares the node down): it is killed, and the host's ranks are lost.
    if (!answered) kill(-child.pid, SIGKILL);
    close(err_fds[0]);
  }
  pid_t pid = child.pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!answered) {
    fprintf(stderr, "etrun: error: no answer from %s for %g s (--lost-host-timeout): the host's "
            "ranks are lost\n", host, lost_after_s);
    return kRemoteShellFailure;
  }
  if (exit_record) {
    if (filter.seen()) return filter.code();
    if (WIFSIGNALED(status)) {
      fprintf(stderr, "etrun: error: remote shell for %s was killed by signal %d: the host's ranks "
              "are lost\n", host, WTERMSIG(status));
    } else {
      fprintf(stderr, "etrun: error: the srun step on %s ended (exit %d) without the rank's exit "
              "status: its node failed, or its step or allocation was cancelled; the host's "
              "ranks are lost\n", host, WEXITSTATUS(status));
    }
    return kRemoteShellFailure;
  }
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "etrun: error: remote shell for %s was killed by signal %d: the host's ranks "
            "are lost\n", host, WTERMSIG(status));
    return kRemoteShellFailure;
  }
  return WEXITSTATUS(status);
}

}  // namespace etrun::launcher
