// Real processes through StartChild: what etrun's Boost.Process handler gives every child.
#include "launcher/process/child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

using etrun::launcher::AwaitExec;
using etrun::launcher::Child;
using etrun::launcher::ChildOptions;
using etrun::launcher::StartChild;

namespace {

// A scratch directory, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/etrun-child-test-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    path_ = dir;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to `name` with `mode`; returns its path.
  std::string Write(const std::string& name, const std::string& text, mode_t mode) const {
    std::string path = path_ + "/" + name;
    std::ofstream(path) << text;
    REQUIRE(chmod(path.c_str(), mode) == 0);
    return path;
  }

 private:
  std::string path_;
};

int Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The descriptors `pid` holds, from /proc.
std::set<int> Descriptors(pid_t pid) {
  std::set<int> fds;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    fds.insert(std::stoi(entry.path().filename().string()));
  }
  return fds;
}

// A "Name:\tvalue" line of /proc/PID/status.
std::string StatusField(pid_t pid, const std::string& name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(name + ":")) return line.substr(name.size() + 2);
  }
  return "";
}

}  // namespace

TEST_CASE("a child leads its own group and has no descriptor, blocked or ignored signal of ours") {
  // Given etrun with a descriptor open that is not close-on-exec (as an Asio socket or one its
  // parent left open is), SIGUSR1 ignored and SIGUSR2 blocked: the child has only 0, 1 and 2,
  // no signal blocked or ignored, its own process group, and etrun's signal mask is as it was.
  int stray = open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  REQUIRE(stray >= 0);
  struct sigaction ignore = {}, saved_action = {};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(sigaction(SIGUSR1, &ignore, &saved_action) == 0);
  sigset_t usr2, saved_mask, mask_after;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &usr2, &saved_mask) == 0);

  Child child;
  std::string err;
  bool started = StartChild("/bin/sleep", {"sleep", "30"}, {}, ChildOptions(), &child, &err);
  pthread_sigmask(SIG_SETMASK, &saved_mask, &mask_after);
  sigaction(SIGUSR1, &saved_action, nullptr);
  close(stray);
  REQUIRE(started);
  CHECK(AwaitExec(&child, &err));
  CHECK(sigismember(&mask_after, SIGUSR2) == 1);  // etrun's mask restored
  CHECK(sigismember(&mask_after, SIGTERM) == 0);
  // A vforking parent resumes as the exec replaces the child's memory, a moment before the
  // kernel closes its close-on-exec descriptors; a leaked one would stay.
  std::set<int> fds;
  for (int i = 0; i < 500 && (fds = Descriptors(child.pid)) != std::set<int>{0, 1, 2}; ++i) {
    usleep(10000);
  }
  INFO("descriptors: ", fmt::format("{}", fmt::join(fds, " ")));
  CHECK(fds == std::set<int>{0, 1, 2});
  CHECK(StatusField(child.pid, "SigBlk") == "0000000000000000");
  CHECK(StatusField(child.pid, "SigIgn") == "0000000000000000");
  CHECK(getpgid(child.pid) == child.pid);
  kill(child.pid, SIGKILL);
  CHECK(WTERMSIG(Reap(child.pid)) == SIGKILL);
}

TEST_CASE("a program that cannot be executed exits 127 and AwaitExec says why") {
  // Given a file without execute permission and a path to nothing: each child is started,
  // exits 127, and AwaitExec reports the exec's errno and its text.
  TempDir dir;
  struct Case {
    std::string path;
    int err_no;
    std::string text;
  };
  std::vector<Case> cases = {
      {dir.Write("plain", "#!/bin/sh\nexit 0\n", 0644), EACCES, "Permission denied"},
      {"/nonexistent/etrun-child-test", ENOENT, "No such file or directory"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    Child child;
    std::string err;
    REQUIRE(StartChild(c.path, {c.path}, {}, ChildOptions(), &child, &err));
    REQUIRE(child.pid > 0);
    int err_no = 0;
    CHECK_FALSE(AwaitExec(&child, &err, &err_no));
    CHECK(err_no == c.err_no);
    CHECK(err == c.text);
    CHECK(AwaitExec(&child, &err));  // the failure is handed out once
    int status = Reap(child.pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 127);
  }
}

TEST_CASE("a file without #! runs under /bin/sh only when the caller asks for it") {
  // Given an executable file of shell commands with no "#!" line: with shell_fallback it runs
  // (and exits 7), argv after the first reaching it; without, the exec fails with ENOEXEC.
  TempDir dir;
  std::string script = dir.Write("script", "exit $1\n", 0755);
  SUBCASE("with the fallback") {
    ChildOptions options;
    options.shell_fallback = true;
    Child child;
    std::string err;
    REQUIRE(StartChild(script, {"script", "7"}, {}, options, &child, &err));
    CHECK(AwaitExec(&child, &err));
    int status = Reap(child.pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);
  }
  SUBCASE("without") {
    Child child;
    std::string err;
    REQUIRE(StartChild(script, {"script", "7"}, {}, ChildOptions(), &child, &err));
    int err_no = 0;
    CHECK_FALSE(AwaitExec(&child, &err, &err_no));
    CHECK(err_no == ENOEXEC);
    CHECK(WEXITSTATUS(Reap(child.pid)) == 127);
  }
}

TEST_CASE("a child with a death signal dies when the process that started it does") {
  // Given a process that starts `sleep 30` with death_signal SIGKILL and exits at once: the
  // sleep is killed by SIGKILL. This test process becomes a subreaper for the while, so that
  // the orphaned sleep is reparented to it and its end can be waited for.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  int report[2];
  REQUIRE(pipe2(report, O_CLOEXEC) == 0);
  pid_t middle = fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    ChildOptions options;
    options.death_signal = SIGKILL;
    Child child;
    std::string err;
    bool started = StartChild("/bin/sleep", {"sleep", "30"}, {}, options, &child, &err);
    pid_t pid = started ? child.pid : -1;
    (void)!write(report[1], &pid, sizeof(pid));
    _exit(0);
  }
  close(report[1]);
  pid_t sleeper = -1;
  CHECK(read(report[0], &sleeper, sizeof(sleeper)) == static_cast<ssize_t>(sizeof(sleeper)));
  close(report[0]);
  CHECK(WEXITSTATUS(Reap(middle)) == 0);
  REQUIRE(sleeper > 0);
  int status = Reap(sleeper);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}
