#include "launcher/process/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "launcher/process/child.h"

namespace etrun::launcher {
namespace {

// Messages are native ints: +pgid watch, -pgid forget, 0 dismiss.
// Runs in the child made by ForkChild: own session (a terminal's Ctrl-C or a kill of etrun's
// process group does not reach it), stdio on /dev/null (no terminal fd held open).
[[noreturn]] void GuardianMain(void* arg) {
  int fd = *static_cast<int*>(arg);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU}) {
    signal(sig, SIG_IGN);
  }
  // Hold no descriptor of etrun's but the command pipe (moved to 3), so a pipe reader sees EOF
  // when etrun exits.
  if (fd != 3) {
    dup2(fd, 3);
    close(fd);
    fd = 3;
  }
  close_range(4, ~0U, 0);
  std::set<pid_t> groups;
  while (true) {
    int message;
    ssize_t n = read(fd, &message, sizeof(message));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(message))) break;  // EOF: etrun is gone
    if (message == 0) _exit(0);
    if (message > 0) groups.insert(message);
    if (message < 0) groups.erase(-message);
  }
  for (pid_t pgid : groups) kill(-pgid, SIGKILL);
  _exit(0);
}

}  // namespace

Guardian::~Guardian() { Dismiss(); }

bool Guardian::Start(std::string* err) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *err = std::string("cannot create the guardian's pipe: ") + strerror(errno);
    return false;
  }
  ChildOptions options;
  options.own_session = true;
  options.devnull_output = true;
  int read_end = fds[0];
  // The child closes its copy of the write end with everything else above 3 (close_range).
  pid_t pid = ForkChild(options, GuardianMain, &read_end, err);
  close(fds[0]);
  if (pid < 0) {
    *err = "cannot fork the guardian: " + *err;
    close(fds[1]);
    return false;
  }
  pid_ = pid;
  fd_ = fds[1];
  return true;
}

void Guardian::Send(int message) {
  if (fd_ < 0) return;
  ssize_t n;
  do {
    n = write(fd_, &message, sizeof(message));
  } while (n < 0 && errno == EINTR);
}

void Guardian::Watch(pid_t pgid) { Send(static_cast<int>(pgid)); }
void Guardian::Forget(pid_t pgid) { Send(-static_cast<int>(pgid)); }

void Guardian::Dismiss() {
  if (fd_ < 0) return;
  Send(0);
  close(fd_);
  fd_ = -1;
  // Reap it so it does not linger as a zombie; it exits at once after the message.
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace etrun::launcher
