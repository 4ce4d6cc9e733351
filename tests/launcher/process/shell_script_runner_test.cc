// The real discovery script runner with real /bin/sh scripts.
#include "launcher/process/child.h"
#include "launcher/process/shell_script_runner.h"

#include <sys/resource.h>

#include <future>

#include <doctest/doctest.h>

using etrun::discovery::ScriptResult;
using etrun::launcher::ShellScriptRunner;
using std::chrono::milliseconds;

TEST_CASE("a script's stdout and stderr are captured separately") {
  ScriptResult r = ShellScriptRunner::RunOnce("echo a:2; echo note >&2; printf 'b:1'", milliseconds(10000), -1);
  CHECK(r.ok);
  CHECK(r.output == "a:2\nb:1");
  CHECK(r.errors == "note\n");
  CHECK(r.failure.empty());
}

TEST_CASE("failures say why: exit code, signal, timeout") {
  ScriptResult exit3 = ShellScriptRunner::RunOnce("echo oops >&2; exit 3", milliseconds(10000), -1);
  CHECK_FALSE(exit3.ok);
  CHECK(exit3.failure == "exit code 3");
  CHECK(exit3.errors == "oops\n");
  ScriptResult killed = ShellScriptRunner::RunOnce("kill -9 $$", milliseconds(10000), -1);
  CHECK(killed.failure == "killed by signal 9");
  auto start = std::chrono::steady_clock::now();
  ScriptResult hung = ShellScriptRunner::RunOnce("echo partial; sleep 60", milliseconds(300), -1);
  CHECK(hung.failure == "timed out after 0.3 s");
  CHECK(hung.output == "partial\n");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("a script that leaves a child holding its output still finishes") {
  // The background sleep keeps stdout open; the runner gives up at the timeout, kills the group.
  ScriptResult r = ShellScriptRunner::RunOnce("echo a:1; sleep 60 & exit 0", milliseconds(500), -1);
  CHECK(r.output == "a:1\n");
  CHECK(r.failure == "timed out after 0.5 s");
}

TEST_CASE("Run reports from a helper thread, and runs again") {
  ShellScriptRunner runner("echo localhost:2", milliseconds(10000));
  for (int i = 0; i < 2; ++i) {
    std::promise<ScriptResult> got;
    runner.Run([&got](ScriptResult r) { got.set_value(std::move(r)); });
    ScriptResult r = got.get_future().get();
    CHECK(r.ok);
    CHECK(r.output == "localhost:2\n");
  }
}

TEST_CASE("destroying the runner cancels a hung script promptly") {
  auto start = std::chrono::steady_clock::now();
  std::promise<ScriptResult> got;
  {
    ShellScriptRunner runner("sleep 60", milliseconds(60000));
    runner.Run([&got](ScriptResult r) { got.set_value(std::move(r)); });
  }
  CHECK(got.get_future().get().failure == "cancelled");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("the script gets the open-file limit etrun started with, not the raised one") {
  // Given a soft limit of 256 that etrun raises, the script still sees 256.
  struct rlimit before;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  REQUIRE((before.rlim_max == RLIM_INFINITY || before.rlim_max > 256));
  struct rlimit low = before;
  low.rlim_cur = 256;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  etrun::launcher::FileLimit limit;
  limit.Raise();
  ScriptResult raised = ShellScriptRunner::RunOnce("ulimit -n", milliseconds(10000), -1);
  ScriptResult kept =
      ShellScriptRunner::RunOnce("ulimit -n", milliseconds(10000), -1, limit.for_children());
  setrlimit(RLIMIT_NOFILE, &before);
  CHECK(raised.output != "256\n");
  CHECK(kept.output == "256\n");
}
