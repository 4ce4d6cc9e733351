// MpiPolicy driven through a FakeJobContext: mpirun as the job's one process, its exit code,
// forwarded signals, launch failures and the per-rank files etrun writes itself. `mpirun
// --version` is the one real process these tests run (Debian's Open MPI, or a stand-in script).
#include "launcher/mpi/mpi_policy.h"

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "tests/launcher/fake_job_context.h"

namespace etrun::launcher {
namespace {

namespace fs = std::filesystem;

struct MpiJob {
  explicit MpiJob(int np) {
    context.job.controller = Controller::kMpi;
    context.job.num_proc = np;
    context.job.command = {"/bin/true"};
    policy.set_context(&context);
  }
  bool Prepare() { return policy.Prepare(&prepare_result); }
  void Start() {
    REQUIRE(Prepare());
    policy.Begin(0);
  }
  FakeJobContext context;
  MpiPolicy policy;
  JobResult prepare_result;
};

// A directory with an `mpirun` whose --version prints `version`.
fs::path FakeMpirun(const std::string& name, const std::string& version) {
  fs::path dir = fs::temp_directory_path() / ("etrun-mpi-policy-" + name + "-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "mpirun") << "#!/bin/sh\necho '" << version << "'\n";
  chmod((dir / "mpirun").c_str(), 0755);
  return dir;
}

TEST_CASE("mpi policy: mpirun is the job's one process, with horovodrun's command line") {
  // Given --mpi -np 2 on this machine, one supervised process starts: mpirun with --tag-output
  // and -np 2, its ranks' tagged output put back together by a framer.
  MpiJob job(2);
  job.Start();
  REQUIRE(job.context.started.size() == 1);
  const FakeJobContext::Started& mpirun = job.context.started[0];
  CHECK(mpirun.host == "localhost");
  CHECK(mpirun.spec.supervisor);
  REQUIRE(mpirun.spec.argv.size() > 4);
  CHECK(fs::path(mpirun.spec.argv[0]).filename() == "mpirun");
  CHECK(std::find(mpirun.spec.argv.begin(), mpirun.spec.argv.end(), "--tag-output") != mpirun.spec.argv.end());
  auto np = std::find(mpirun.spec.argv.begin(), mpirun.spec.argv.end(), "-np");
  REQUIRE(np != mpirun.spec.argv.end());
  CHECK(*(np + 1) == "2");
  CHECK(mpirun.spec.argv.back() == "/bin/true");
  REQUIRE(mpirun.output.framer);
  CHECK(mpirun.output.framer(false) != nullptr);
}

TEST_CASE("mpi policy: mpirun's exit code is the job's") {
  SUBCASE("success") {
    MpiJob job(2);
    job.Start();
    job.context.Finish(&job.policy, 0, ExitStatus::Exited(0));
    CHECK(job.policy.Finished());
    CHECK(job.policy.Result().code == 0);
  }
  SUBCASE("failure") {
    MpiJob job(2);
    job.Start();
    job.context.Finish(&job.policy, 0, ExitStatus::Exited(3));
    JobResult result = job.policy.Result();
    CHECK(result.code == 3);
    CHECK(result.cause.empty());  // mpirun said why itself
  }
}

TEST_CASE("mpi policy: every stop signal is forwarded to mpirun, never SIGKILL, and sets the code") {
  // mpirun stops its ranks itself; SIGKILL would orphan them. A second signal is forwarded too.
  MpiJob job(2);
  job.Start();
  job.policy.OnStopSignal(SIGINT);
  job.policy.OnRepeatedStopSignal(SIGTERM);
  job.policy.OnUserSignal(SIGUSR1);
  CHECK(job.context.signals == std::vector<std::pair<int, int>>{{FakeJobContext::kSignalAll, SIGINT},
                                                                {FakeJobContext::kSignalAll, SIGTERM},
                                                                {FakeJobContext::kSignalAll, SIGUSR1}});
  CHECK(job.context.stops.empty());
  job.context.Finish(&job.policy, 0, ExitStatus::Exited(1));
  JobResult result = job.policy.Result();
  CHECK(result.code == 130);
  CHECK(result.cause == "received SIGINT: stopped mpirun, which exited with code 1");
}

TEST_CASE("mpi policy: mpirun that cannot be started ends the job with 1, naming why") {
  SUBCASE("start refused") {
    MpiJob job(2);
    job.context.refuse_start = true;
    job.Start();
    CHECK(job.policy.Finished());
    JobResult result = job.policy.Result();
    CHECK(result.code == kExitFailure);
    CHECK(result.cause == "refused by the fake");
  }
  SUBCASE("exec failed") {
    MpiJob job(2);
    job.context.exec_fails = true;
    job.Start();
    job.context.Finish(&job.policy, 0, ExitStatus::Exited(kExitCommandNotFound));
    JobResult result = job.policy.Result();
    CHECK(result.code == kExitFailure);
    CHECK(result.cause.starts_with("cannot run "));
    CHECK(result.cause.ends_with("mpirun: Exec format error"));
  }
}

TEST_CASE("mpi policy: no mpirun, or one that is not Open MPI, is refused before anything starts") {
  SUBCASE("none on PATH") {
    MpiJob job(1);
    job.context.env = {"PATH=/nonexistent"};
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitCommandNotFound);
    CHECK(job.prepare_result.cause.find("install Open MPI") != std::string::npos);
  }
  SUBCASE("MPICH") {
    MpiJob job(1);
    fs::path dir = FakeMpirun("mpich", "HYDRA build details: MPICH 4.0");
    job.context.env = {"PATH=" + dir.string()};
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitFailure);
    CHECK(job.prepare_result.cause.find("is MPICH") != std::string::npos);
    fs::remove_all(dir);
  }
  SUBCASE("a command this machine does not have: the other modes' line and 127, not mpirun's box") {
    MpiJob job(2);
    job.context.job.command = {"nosuchcmd-xyz"};
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitCommandNotFound);
    CHECK(job.prepare_result.cause ==
          "cannot run 'nosuchcmd-xyz': command not found in PATH: check the command and PATH");
  }
  SUBCASE("-H that does not parse") {
    MpiJob job(1);
    job.context.SetHosts("a:x");
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitUsage);
  }
}

TEST_CASE("mpi policy: with --output-filename etrun writes each rank's whole lines to its files") {
  // mpirun does not get the flag; etrun makes DIR/1/rank.N/{stdout,stderr} and sends each whole
  // tagged line to its rank's file.
  fs::path dir = fs::temp_directory_path() / ("etrun-mpi-policy-out-" + std::to_string(getpid()));
  MpiJob job(2);
  job.context.job.output_filename = dir.string();
  job.Start();
  REQUIRE(job.context.started.size() == 1);
  const std::vector<std::string>& argv = job.context.started[0].spec.argv;
  CHECK(std::find(argv.begin(), argv.end(), "--output-filename") == argv.end());
  CHECK(fs::exists(dir / "1" / "rank.0" / "stdout"));
  CHECK(fs::exists(dir / "1" / "rank.1" / "stderr"));
  std::unique_ptr<LineFramer> framer = job.context.started[0].output.framer(false);
  std::string console;
  framer->Feed("[1,1]<stdout>:hel[1,0]<stderr>:oops\n[1,1]<stdout>:lo\n",
               [&console](std::string_view text) { console.append(text); });
  CHECK(console == "[1,0]<stderr>:oops\n[1,1]<stdout>:hello\n");
  CHECK(job.context.written == "[1,0]<stderr>:oops\n[1,1]<stdout>:hello\n");
  fs::remove_all(dir);
}

TEST_CASE("mpi policy: a launch failure mpirun explains is etrun's one cause with the other modes' code") {
  // Given mpirun's box for a command it cannot find (on stderr) and its summary (on stdout),
  // then its exit 134: the job ends with 127 and etrun's cause; neither the box nor the summary
  // is shown. Without a box etrun knows, the summary is shown and mpirun's code stays.
  const std::string rule(74, '-');
  const std::string box = rule + "\nmpirun was unable to find the specified executable file, and "
                          "therefore\ndid not launch the job.\n\nNode:       vm\nExecutable: "
                          "nosuchcmd\n" + rule + "\n";
  MpiJob job(2);
  job.Start();
  std::string shown;
  auto emit = [&shown](std::string_view text) { shown.append(text); };
  std::unique_ptr<LineFramer> out = job.context.started[0].output.framer(false);
  std::unique_ptr<LineFramer> err = job.context.started[0].output.framer(true);
  out->Feed("2 total processes failed to start\n", emit);
  SUBCASE("recognized") {
    err->Feed(box, emit);
    out->Finish(emit);
    err->Finish(emit);
    job.context.Finish(&job.policy, 0, ExitStatus::Exited(134));
    CHECK(shown.empty());
    CHECK(job.context.written.empty());
    JobResult result = job.policy.Result();
    CHECK(result.code == kExitCommandNotFound);
    CHECK(result.cause == "cannot run 'nosuchcmd' on vm: command not found in PATH (mpirun): "
                          "check the command and PATH there");
  }
  SUBCASE("not recognized") {
    err->Feed(rule + "\nsomething else went wrong\n" + rule + "\n", emit);
    out->Finish(emit);
    err->Finish(emit);
    job.context.Finish(&job.policy, 0, ExitStatus::Exited(1));
    CHECK(shown == rule + "\nsomething else went wrong\n" + rule + "\n");
    CHECK(job.context.written == "2 total processes failed to start\n");
    JobResult result = job.policy.Result();
    CHECK(result.code == 1);
    CHECK(result.cause.empty());
  }
}

}  // namespace
}  // namespace etrun::launcher
