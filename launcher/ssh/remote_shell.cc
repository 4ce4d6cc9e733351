#include "launcher/ssh/remote_shell.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

std::vector<std::string> RemoteShellRankArgs(const std::string& host,
                                             const std::string& command_line) {
  return {kRemoteShellRankMode, host, command_line};
}

int RunRemoteShellRank(const std::string& host_text, const std::string& command_line) {
  const char* host = host_text.c_str();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
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
  Child child;
  std::string err;
  bool started = StartChild("/bin/sh", {"sh", "-c", command_line}, CurrentEnvironment(), options,
                            &child, &err) && AwaitExec(&child, &err);
  close(fds[0]);
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
  pid_t pid = child.pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "etrun: error: remote shell for %s was killed by signal %d: the host's ranks "
            "are lost\n", host, WTERMSIG(status));
    return kRemoteShellFailure;
  }
  return WEXITSTATUS(status);
}

}  // namespace etrun::launcher
