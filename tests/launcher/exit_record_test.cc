// Exit records (remote_shell.h): the filter over a stream cut anywhere, and the remote-shell stub
// run for real in a child process with a stand-in for srun (a shell command that passes the
// wrapper's output through, or ends without its record as srun does when its node fails).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <doctest/doctest.h>

#include "launcher/child.h"
#include "launcher/ssh/remote_shell.h"
#include "launcher/ssh/ssh_rank.h"

namespace etrun::launcher {
namespace {

std::string Filtered(const std::string& stream, size_t piece, ExitRecordFilter* filter) {
  std::string out;
  for (size_t at = 0; at < stream.size(); at += piece) out += filter->Feed(stream.substr(at, piece));
  return out + filter->Finish();
}

TEST_CASE("the exit record is taken out of stderr wherever the stream is cut") {
  const std::string record = std::string(kExitRecord) + "42\n";
  const std::string stream = "line one\npartial" + record + "late\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    CAPTURE(piece);
    ExitRecordFilter filter;
    CHECK(Filtered(stream, piece, &filter) == "line one\npartiallate\n");
    CHECK(filter.seen());
    CHECK(filter.code() == 42);
  }
}

TEST_CASE("output that only looks like an exit record is passed on as it is") {
  const std::string cut = std::string(kExitRecord).substr(0, 4);  // held, then given back at the end
  for (const std::string& stream :
       {std::string("text ") + kExitRecord + "x1\n", std::string("\036\036etrun\n"), "tail" + cut,
        std::string(kExitRecord) + "\n"}) {
    for (size_t piece = 1; piece <= stream.size(); ++piece) {
      CAPTURE(piece);
      ExitRecordFilter filter;
      CHECK(Filtered(stream, piece, &filter) == stream);
      CHECK_FALSE(filter.seen());
    }
  }
}

TEST_CASE("alive and term records are counted and taken out too") {
  const std::string stream = std::string("a") + kRecordLead + kAliveWord + "\nb" + kRecordLead +
                             kTermWord + "\n" + kRecordLead + kAliveWord + "\nc" + kExitRecord + "0\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    CAPTURE(piece);
    ExitRecordFilter filter;
    CHECK(Filtered(stream, piece, &filter) == "abc");
    CHECK(filter.alive() == 2);
    CHECK(filter.term() == 1);
    CHECK(filter.code() == 0);
  }
}

TEST_CASE("the stub's status mode reads back as written") {
  RecordMode m;
  REQUIRE(ParseStatusMode(RemoteShellRankArgs("h", "c", true, 3, true)[3], &m));
  CHECK((m.exit_record && m.lost_after_s == 3 && m.pass_term));
  REQUIRE(ParseStatusMode(RemoteShellRankArgs("h", "c", true, 2.5, false)[3], &m));
  CHECK((m.exit_record && m.lost_after_s == 2.5 && !m.pass_term));
  REQUIRE(ParseStatusMode(RemoteShellRankArgs("h", "c", false)[3], &m));
  CHECK_FALSE(m.exit_record);
  CHECK_FALSE(ParseStatusMode("record:", &m));
  CHECK_FALSE(ParseStatusMode("record:3:x", &m));
  CHECK_FALSE(ParseStatusMode("record", &m));
}

TEST_CASE("ranks through srun use exit records; other remote shells do not") {
  CHECK(UsesExitRecord("srun --overlap --jobid=7 --nodelist={host}"));
  CHECK(UsesExitRecord("  /usr/bin/srun -w {host}"));
  CHECK_FALSE(UsesExitRecord("kubectl exec -i {host} --"));
  CHECK_FALSE(UsesExitRecord("ssh {host} srun"));
  CHECK_FALSE(UsesExitRecord("sruns {host}"));
  CHECK_FALSE(UsesExitRecord(""));
}

struct Stub {
  int code = -1;
  std::string err;
};

// RunRemoteShellRank in a child whose stderr is a pipe; `shell` stands in for `srun ... sh -c`.
Stub RunStub(const std::string& command_line, bool exit_record) {
  int err[2];
  REQUIRE(pipe(err) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    close(err[1]);
    RecordMode mode;
    mode.exit_record = exit_record;
    _exit(RunRemoteShellRank("h3", command_line, mode));
  }
  close(err[1]);
  Stub stub;
  char buf[4096];
  ssize_t n;
  while ((n = read(err[0], buf, sizeof(buf))) > 0) stub.err.append(buf, static_cast<size_t>(n));
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  stub.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return stub;
}

TEST_CASE("the stub exits with the recorded status, and says the host is lost when there is none") {
  RemoteRank rank;
  rank.host = "h3";
  rank.cwd = "/";
  rank.exit_record = true;
  rank.argv = {"sh", "-c", "echo to-stderr >&2; exit 7"};
  // srun passes the status on: the record decides.
  Stub s = RunStub("exec sh -c " + ShellQuote(RemoteCommand(rank, false)), true);
  CHECK(s.code == 7);
  CHECK(s.err == "to-stderr\n");
  // srun's exit after a node failure: 0, the wrapper's record never came.
  s = RunStub("echo 'srun: error: Node failure on h3' >&2; exit 0", true);
  CHECK(s.code == kRemoteShellFailure);
  CHECK(s.err == "srun: error: Node failure on h3\n"
                 "etrun: error: the srun step on h3 ended (exit 0) without the rank's exit status: "
                 "its node failed, or its step or allocation was cancelled; the host's ranks are lost\n");
  // Without records the remote shell's own status is the rank's.
  s = RunStub("echo plain >&2; exit 0", false);
  CHECK(s.code == 0);
  CHECK(s.err == "plain\n");
}

}  // namespace
}  // namespace etrun::launcher
