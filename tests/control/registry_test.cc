// The registry (control/registry.h) with real processes and files: an entry is alive only while
// its pid runs the very process that wrote it (the pid and its start time), so a pid reused by
// another process, or an entry of an older etrun without a start time, is never a job.
#include "control/registry.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/control/temp_registry.h"

using etrun::control::JobEntry;
using etrun::control::TempRegistry;
namespace control = etrun::control;

namespace {

// A child that waits until killed; its name may be changed to one with spaces and parentheses.
class Child {
 public:
  explicit Child(const char* name = nullptr) {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      if (name != nullptr) prctl(PR_SET_NAME, name);
      char c = 'x';
      (void)!write(ready[1], &c, 1);
      pause();
      _exit(0);
    }
    close(ready[1]);
    char c;
    REQUIRE(read(ready[0], &c, 1) == 1);
    close(ready[0]);
  }
  ~Child() { Stop(); }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
};

JobEntry Entry(const std::string& name, int pid, int64_t start) {
  JobEntry e;
  e.job = name;
  e.pid = pid;
  e.pid_start = start;
  e.port = 1;
  e.token = std::string(64, 'a');
  return e;
}

}  // namespace

TEST_CASE("registry: a process is known by its pid and start time") {
  // Given this process and a child, each has one start time; another start time, an unknown
  // one, or a pid that is gone is not that process.
  int64_t self = control::ProcessStartTime(getpid());
  CHECK(self > 0);
  CHECK(control::ProcessStartTime(getpid()) == self);
  CHECK(control::ProcessAlive(getpid(), self));
  CHECK_FALSE(control::ProcessAlive(getpid(), self + 1));
  CHECK_FALSE(control::ProcessAlive(getpid(), -1));
  CHECK_FALSE(control::ProcessAlive(0, self));
  CHECK(control::ProcessStartTime(0) == -1);
  CHECK(control::ProcessStartTime(-5) == -1);

  Child child;
  int64_t start = control::ProcessStartTime(child.pid());
  CHECK(start >= self);
  CHECK(control::ProcessAlive(child.pid(), start));
  child.Stop();
  CHECK(control::ProcessStartTime(child.pid()) == -1);
  CHECK_FALSE(control::ProcessAlive(child.pid(), start));
}

TEST_CASE("registry: a name with spaces and parentheses does not shift the fields") {
  // Given a process named "a) b (c" (its comm in /proc/<pid>/stat), its start time is the one
  // of a plain child started just before it, or later.
  Child plain;
  Child odd("a) b (c 1 2 3");
  int64_t before = control::ProcessStartTime(plain.pid());
  int64_t start = control::ProcessStartTime(odd.pid());
  CHECK(before > 0);
  CHECK(start >= before);
  CHECK(control::ProcessAlive(odd.pid(), start));
}

TEST_CASE("registry: only entries of live processes are listed; stale files go") {
  // Given entries of this process (alive), of this pid with another start time (the pid was
  // reused), of a live pid without a start time (an older etrun) and of a pid that is gone,
  // only the first is listed; the files of the reused and the gone ones are removed, the older
  // etrun's is left.
  TempRegistry registry;
  std::string err;
  std::string dir = control::RegistryDir(&err);
  REQUIRE(err.empty());
  Child gone_child;
  int gone = gone_child.pid();
  gone_child.Stop();
  int64_t self = control::ProcessStartTime(getpid());
  for (const JobEntry& e : {Entry("live", getpid(), self), Entry("reused", getpid(), self + 7),
                            Entry("older", getpid(), -1), Entry("gone", gone, 12)}) {
    REQUIRE_FALSE(control::WriteEntry(dir, e, &err).empty());
  }
  // An older etrun's file has no "pid_start" at all.
  nlohmann::json older = {{"job", "older"}, {"pid", getpid()}, {"port", 1}, {"token", "t"}};
  {
    std::ofstream out(dir + "/older.json");
    out << older.dump();
  }
  std::vector<JobEntry> jobs = control::ListJobs(&err);
  CHECK(err.empty());
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].job == "live");
  CHECK(jobs[0].kind == "job");
  CHECK(jobs[0].pid_start == self);
  CHECK(std::filesystem::exists(dir + "/live.json"));
  CHECK_FALSE(std::filesystem::exists(dir + "/reused.json"));
  CHECK(std::filesystem::exists(dir + "/older.json"));
  CHECK_FALSE(std::filesystem::exists(dir + "/gone.json"));
  JobEntry found;
  CHECK_FALSE(control::FindJob("reused", &found, &err));
  CHECK(err == "no running job named 'reused' (running: live)");
}

TEST_CASE("registry: an entry is written 0600 with the pid's start time, and pools are pools") {
  TempRegistry registry;
  std::string err;
  std::string dir = control::RegistryDir(&err, control::kPoolRegistry);
  REQUIRE(err.empty());
  std::string path = control::WriteEntry(dir, Entry("p", getpid(), control::ProcessStartTime(getpid())), &err);
  REQUIRE_FALSE(path.empty());
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  JobEntry back;
  REQUIRE(control::ReadEntry(path, &back));
  CHECK(back.pid_start == control::ProcessStartTime(getpid()));
  std::vector<JobEntry> pools = control::ListJobs(&err, control::kPoolRegistry);
  REQUIRE(pools.size() == 1);
  CHECK(pools[0].kind == "pool");
}
