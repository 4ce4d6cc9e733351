// MpirunReport over the boxes Open MPI 4.1's mpirun prints (captured from Debian 12's, as
// mpirun wrote them on stderr): which it says in etrun's words, with which exit code, and what
// of mpirun's own text is still shown.
#include "launcher/mpi/mpirun_report.h"

#include <doctest/doctest.h>

#include "launcher/mpi/mpi_output.h"

namespace etrun::launcher {
namespace {

constexpr char kRule[] = "--------------------------------------------------------------------------\n";

std::string Box(const std::string& body) { return kRule + body + kRule; }

const std::string kNotFound = Box(
    "mpirun was unable to find the specified executable file, and therefore\n"
    "did not launch the job.  This error was first reported for process\n"
    "rank 0; it may have occurred for other processes as well.\n"
    "\n"
    "NOTE: A common cause for this error is misspelling a mpirun command\n"
    "      line parameter option (remember that mpirun interprets the first\n"
    "      unrecognized command line token as the executable).\n"
    "\n"
    "Node:       vm\n"
    "Executable: nosuchcmd-xyz\n");

const std::string kNotExecutable = Box(
    "mpirun was unable to launch the specified application as it could not access\n"
    "or execute an executable:\n"
    "\n"
    "Executable: /tmp/noexec.txt\n"
    "Node: vm\n"
    "\n"
    "while attempting to start process rank 0.\n");

const std::string kNoWorkingDirectory = Box(
    "mpirun was unable to launch the specified application as it could not\n"
    "change to the specified working directory:\n"
    "\n"
    "Working directory: /nonexist\n"
    "Node: vm\n"
    "\n"
    "while attempting to start process rank 0.\n");

const std::string kNoDaemons = Box(
    "ORTE was unable to reliably start one or more daemons.\n"
    "This usually is caused by:\n"
    "\n"
    "* not finding the required libraries and/or binaries on\n"
    "  one or more nodes. Please check your PATH and LD_LIBRARY_PATH\n"
    "  settings, or configure OMPI with --enable-orterun-prefix-by-default\n"
    "\n"
    "* an inability to create a connection back to mpirun due to a\n"
    "  lack of common network interfaces and/or no route found between\n"
    "  them. Please check network connectivity (including firewalls\n"
    "  and network routing requirements).\n");

const std::string kNotEnoughSlots = Box(
    "There are not enough slots available in the system to satisfy the 5\n"
    "slots that were requested by the application:\n"
    "\n"
    "  true\n"
    "\n"
    "Either request fewer slots for your application, or make more slots\n"
    "available for use.\n");

const std::string kRankFailed = Box(
    "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
    "the job to be terminated. The first process to do so was:\n"
    "\n"
    "  Process name: [[21843,1],1]\n"
    "  Exit code:    3\n");

// Feeds `text` to a report as mpirun's stream, line by line; returns what is shown.
std::string Feed(MpirunReport* report, bool is_stderr, const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    report->Line(is_stderr, std::string_view(text).substr(start, end - start), &out);
    start = end;
  }
  report->Finish(is_stderr, &out);
  return out;
}

TEST_CASE("mpirun's launch-failure boxes become etrun's one line and code; the box is not shown") {
  // Given each box mpirun prints when it cannot launch (with ssh's line before the daemons' box).
  struct Case {
    const char* name;
    std::string text;
    int code;
    std::string cause;
  };
  const Case cases[] = {
      {"command not found", kNotFound, 127,
       "cannot run 'nosuchcmd-xyz' on vm: command not found in PATH (mpirun): check the command "
       "and PATH there"},
      {"not executable", kNotExecutable, 127,
       "cannot run '/tmp/noexec.txt' on vm: not an executable file (mpirun): check the command "
       "there"},
      {"no working directory", kNoWorkingDirectory, 127,
       "cannot run the command on vm: no working directory '/nonexist' there (mpirun): check "
       "-wdir in --mpi-args"},
      {"unreachable host", "ssh: Could not resolve hostname nosuchhost: Name or service not known\n" +
                               kNoDaemons,
       255,
       "mpirun could not start or reach its daemon on every host (ssh: Could not resolve "
       "hostname nosuchhost: Name or service not known): check that each host answers ssh "
       "without a password and has Open MPI installed"},
      {"daemon that fails silently", kNoDaemons, 255,
       "mpirun could not start or reach its daemon on every host: check that each host answers "
       "ssh without a password and has Open MPI installed"},
      {"too few slots", kNotEnoughSlots, 2,
       "-np is more than the slots of the hosts (mpirun): add hosts or slots, or lower -np"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    MpirunReport report;
    std::string shown = Feed(&report, /*is_stderr=*/true, c.text);
    REQUIRE(report.failure());
    CHECK(report.failure()->code == c.code);
    CHECK(report.failure()->cause == c.cause);
    // Only what came outside the box (ssh's own line) is shown.
    CHECK(shown == c.text.substr(0, c.text.find(kRule)));
  }
}

TEST_CASE("boxes etrun does not know, lines outside boxes and a box left open pass through unchanged") {
  MpirunReport report;
  std::string text = "[vm:01882] some warning of mpirun's\n" + kRankFailed + "after\n";
  CHECK(Feed(&report, true, text) == text);
  std::string open = std::string(kRule) + "mpirun was unable to find the specified executable file";
  CHECK(Feed(&report, true, open) == open);
  CHECK_FALSE(report.failure());
}

TEST_CASE("mpirun's summary of a failed launch is held back for the caller") {
  MpirunReport report;
  CHECK(Feed(&report, false, "2 total processes failed to start\n").empty());
  CHECK(report.held() == "2 total processes failed to start\n");
  CHECK(Feed(&report, false, "not 2 total processes failed to start\n") ==
        "not 2 total processes failed to start\n");
}

TEST_CASE("the first launch failure is the one reported; a later box is held back too") {
  MpirunReport report;
  CHECK(Feed(&report, true, kNoWorkingDirectory + kNotFound).empty());
  REQUIRE(report.failure());
  CHECK(report.failure()->cause.starts_with("cannot run the command on vm: no working directory"));
}

TEST_CASE("the assembler passes mpirun's own lines through the report, ranks' tagged lines past it") {
  // Given a stream of tagged output with mpirun's box in the middle, in pieces.
  MpirunReport report;
  MpiLineAssembler assembler(false);
  assembler.set_report(&report, true);
  std::string out;
  auto emit = [&out](std::string_view text) { out.append(text); };
  std::string stream = "[1,0]<stderr>:oops\n" + kNotFound + "[1,1]<stderr>:late";
  for (size_t i = 0; i < stream.size(); i += 7) assembler.Feed(std::string_view(stream).substr(i, 7), emit);
  assembler.Finish(emit);
  CHECK(out == "[1,0]<stderr>:oops\n[1,1]<stderr>:late\n");
  REQUIRE(report.failure());
  CHECK(report.failure()->code == 127);
}

}  // namespace
}  // namespace etrun::launcher
