#include "events/exit_status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

using etrun::ExitStatus;

namespace {
// Runs a real child that ends as `how` says and returns its wait status.
int WaitStatusOf(void (*how)()) {
  pid_t pid = fork();
  if (pid == 0) how();
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}
}  // namespace

TEST_CASE("wait statuses map to the shell's exit codes") {
  // Given real children that exit or die by signal, the codes are N and 128+N.
  ExitStatus ok = ExitStatus::FromWaitStatus(WaitStatusOf([] { _exit(0); }));
  ExitStatus three = ExitStatus::FromWaitStatus(WaitStatusOf([] { _exit(3); }));
  ExitStatus killed = ExitStatus::FromWaitStatus(WaitStatusOf([] {
    raise(SIGKILL);
    _exit(0);
  }));
  ExitStatus termed = ExitStatus::FromWaitStatus(WaitStatusOf([] {
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    _exit(0);
  }));
  CHECK(ok.success());
  CHECK(ok.ShellCode() == 0);
  CHECK_FALSE(three.success());
  CHECK(three.ShellCode() == 3);
  CHECK(three.Describe() == "exited with code 3");
  CHECK(killed.ShellCode() == 137);
  CHECK(killed.Describe() == "was killed by signal 9 (SIGKILL)");
  CHECK(termed.ShellCode() == 143);
  CHECK(termed.Describe() == "was killed by signal 15 (SIGTERM)");
}

TEST_CASE("signal names are the SIG forms") {
  CHECK(etrun::SignalName(SIGINT) == "SIGINT");
  CHECK(etrun::SignalName(SIGUSR1) == "SIGUSR1");
  CHECK(etrun::SignalName(200) == "signal 200");
}
