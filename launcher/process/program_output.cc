#include "launcher/process/program_output.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "events/exit_status.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {
namespace {

constexpr size_t kMaxKept = 1 << 20;

// Reads what is there; returns false at EOF or on an error other than "try again".
bool Drain(int fd, std::string* into) {
  char buffer[4096];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      size_t room = kMaxKept - std::min(kMaxKept, into->size());
      into->append(buffer, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace

bool RunForOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  std::chrono::milliseconds timeout, ProgramOutput* result, std::string* err) {
  LaunchSpec spec;
  spec.argv = argv;
  spec.env = env;
  SpawnedProcess child;
  LocalSpawner spawner;
  int err_no = 0;
  if (!spawner.Start(spec, &child, err, &err_no)) return false;
  std::string exec_err;
  bool exec_ok = spawner.AwaitStart(&child, &exec_err, &err_no);
  ProgramOutput output;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  pollfd fds[2] = {{child.stdout_fd, POLLIN, 0}, {child.stderr_fd, POLLIN, 0}};
  std::string* sinks[2] = {&output.out, &output.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!Drain(fds[i].fd, sinks[i])) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (timed_out) kill(-child.pid, SIGKILL);
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!exec_ok) {
    *err = "cannot run '" + argv.at(0) + "': " + exec_err;
    return false;
  }
  if (timed_out) {
    *err = "'" + argv.at(0) + "' did not finish within " + std::to_string(timeout.count() / 1000) +
           " s and was killed";
    return false;
  }
  output.exit_code = ExitStatus::FromWaitStatus(status).ShellCode();
  *result = std::move(output);
  return true;
}

}  // namespace etrun::launcher
