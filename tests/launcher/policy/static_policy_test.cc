// StaticPolicy driven through a FakeJobContext: which ranks start, how the first failure, a stop
// signal or a rank that cannot start ends the job, and with what code and cause.
#include "launcher/policy/static_policy.h"

#include <signal.h>

#include <doctest/doctest.h>

#include "events/schema.h"
#include "tests/launcher/fake_job_context.h"

namespace etrun::launcher {
namespace {

// A static job of `np` ranks of `command` on this machine, prepared and begun.
struct StaticJob {
  explicit StaticJob(int np, std::vector<std::string> command = {"/bin/true"}) {
    context.job.num_proc = np;
    context.job.command = std::move(command);
    policy.set_context(&context);
  }
  bool Prepare() { return policy.Prepare(&prepare_result); }
  void Start() {
    REQUIRE(Prepare());
    policy.Begin(4242);
  }
  FakeJobContext context;
  StaticPolicy policy;
  JobResult prepare_result;
};

TEST_CASE("static: -np ranks start at once on the hosts' slots and the job succeeds when all exit 0") {
  // Given -H localhost:2,127.0.0.1:2 and -np 3, ranks 0-2 fill localhost then 127.0.0.1, each
  // told the rendezvous port; when all exit 0 the job is over with code 0 and no cause.
  StaticJob job(3);
  job.context.SetHosts("localhost:2,127.0.0.1:2");
  job.Start();
  REQUIRE(job.context.started.size() == 3);
  for (int r = 0; r < 3; ++r) {
    const RankRequest& req = job.context.started[r].request;
    CHECK(req.slot.rank == r);
    CHECK(req.slot.size == 3);
    CHECK(req.run.rendezvous_port == 4242);
  }
  CHECK(job.context.started[0].host == "localhost");
  CHECK(job.context.started[1].request.slot.local_rank == 1);
  CHECK(job.context.started[2].host == "127.0.0.1");
  CHECK(job.context.started[2].request.group_rank == 1);
  job.context.FinishAll(&job.policy, ExitStatus::Exited(0));
  CHECK(job.policy.Finished());
  CHECK(job.context.stops.empty());
  JobResult result = job.policy.Result();
  CHECK(result.code == 0);
  CHECK(result.cause.empty());
}

TEST_CASE("static: hosts elsewhere: the server listens on every address, ranks find theirs") {
  // Given -H localhost:1,127.0.0.2:1 (127.0.0.2 is another host) and no --network-interface:
  // listen on every address; this machine's rank 0 uses the route toward 127.0.0.2 (lo here) and
  // is MASTER_ADDR, which remote ranks are told as they reach it. All local: the loopback only.
  StaticJob job(2);
  job.context.SetHosts("localhost:1,127.0.0.2:1");
  job.Start();
  CHECK(job.policy.listen_address() == "0.0.0.0");
  REQUIRE(job.context.started.size() == 2);
  for (const FakeJobContext::Started& s : job.context.started) {
    CHECK(s.request.run.per_host);
    CHECK(s.request.run.nics == std::vector<std::string>{"lo"});
    CHECK(s.request.run.master_addr == "127.0.0.1");
    CHECK(s.request.run.master_is_launcher);
  }
  StaticJob remote0(2);
  remote0.context.SetHosts("127.0.0.2:1,localhost:1");
  remote0.Start();
  REQUIRE(remote0.context.started.size() == 2);
  CHECK(remote0.context.started[0].request.run.master_addr == "127.0.0.2");
  CHECK_FALSE(remote0.context.started[0].request.run.master_is_launcher);
  StaticJob local(2);
  local.context.SetHosts("localhost:2");
  local.Start();
  CHECK(local.policy.listen_address() == "127.0.0.1");
  CHECK_FALSE(local.context.started[0].request.run.per_host);
}

TEST_CASE("static: in a cascade the rank that ended first is named, with its last stderr line, whatever came first") {
  // Rank 2's end reaches etrun after rank 0's (its output was still open), but its process ended
  // first: it is the job's failure, its code etrun's. A rank ending later changes nothing.
  StaticJob job(3);
  job.Start();
  auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
  job.context.Finish(&job.policy, 0, ExitStatus::Exited(1), t0 + std::chrono::milliseconds(200),
                     "RuntimeError: Connection closed by peer");
  job.context.Finish(&job.policy, 2, ExitStatus::Exited(7), t0, "ValueError: bad batch 17");
  job.context.Finish(&job.policy, 1, ExitStatus::Exited(1), t0 + std::chrono::milliseconds(300),
                     "RuntimeError: Connection closed by peer");
  CHECK(job.context.stops.size() == 1);
  JobResult result = job.policy.Result();
  CHECK(result.code == 7);
  CHECK(result.cause == "rank 2 on localhost exited with code 7: \"ValueError: bad batch 17\"; "
                        "stopped the other 2 ranks");
}

TEST_CASE("static: the first failing rank stops the others and its code and cause are the job's") {
  // Given 3 ranks, when rank 1 exits 3, the others get SIGTERM (one StopAll); their own exits
  // (SIGTERM, or a later failure) do not change the result.
  StaticJob job(3);
  job.Start();
  job.context.Finish(&job.policy, 1, ExitStatus::Exited(3));
  REQUIRE(job.context.stops == std::vector<std::string>{"a rank failed"});
  CHECK(job.context.SignalsTo(0) == std::vector<int>{SIGTERM});
  job.context.Finish(&job.policy, 0, ExitStatus::Exited(5));
  job.context.Finish(&job.policy, 2, ExitStatus::Signaled(SIGTERM));
  CHECK(job.context.stops.size() == 1);
  JobResult result = job.policy.Result();
  CHECK(result.code == 3);
  CHECK(result.cause == "rank 1 on localhost exited with code 3; stopped the other 2 ranks");
}

TEST_CASE("static: a rank killed by a signal gives 128+N, the shell's code") {
  StaticJob job(1);
  job.Start();
  job.context.Finish(&job.policy, 0, ExitStatus::Signaled(SIGKILL));
  JobResult result = job.policy.Result();
  CHECK(result.code == 128 + SIGKILL);
  CHECK(result.cause == "rank 0 on localhost was killed by signal 9 (SIGKILL)");
}

TEST_CASE("static: SIGINT stops every rank and ends the job with 130; a second one kills them") {
  StaticJob job(2);
  job.Start();
  job.policy.OnStopSignal(SIGINT);
  REQUIRE(job.context.stops.size() == 1);
  job.policy.OnRepeatedStopSignal(SIGINT);
  CHECK(job.context.signals.back() == std::pair<int, int>{FakeJobContext::kSignalAll, SIGKILL});
  job.context.FinishAll(&job.policy, ExitStatus::Signaled(SIGINT));
  JobResult result = job.policy.Result();
  CHECK(result.code == 130);
  CHECK(result.cause == "received SIGINT: stopped 2 ranks");
}

TEST_CASE("static: SIGUSR1 is forwarded to every rank and changes nothing else") {
  StaticJob job(2);
  job.Start();
  job.policy.OnUserSignal(SIGUSR1);
  CHECK(job.context.signals == std::vector<std::pair<int, int>>{{FakeJobContext::kSignalAll, SIGUSR1}});
  CHECK(job.context.stops.empty());
  job.context.FinishAll(&job.policy, ExitStatus::Exited(0));
  CHECK(job.policy.Result().code == 0);
}

TEST_CASE("static: a rank that cannot be started stops the job with 1; an exec that fails with 127") {
  SUBCASE("start refused") {
    StaticJob job(2);
    job.context.refuse_start = true;
    job.Start();
    CHECK(job.context.started.empty());
    CHECK(job.context.stops == std::vector<std::string>{"a rank could not be started"});
    JobResult result = job.policy.Result();
    CHECK(result.code == kExitFailure);
    CHECK(result.cause == "rank 0 on localhost: refused by the fake");
  }
  SUBCASE("exec failed") {
    StaticJob job(2);
    job.context.exec_fails = true;
    job.Start();
    CHECK(job.context.started.size() == 2);
    CHECK(job.context.stops.size() == 1);
    job.context.FinishAll(&job.policy, ExitStatus::Exited(kExitCommandNotFound));
    JobResult result = job.policy.Result();
    CHECK(result.code == kExitCommandNotFound);
    CHECK(result.cause.find("Exec format error") != std::string::npos);
  }
}

TEST_CASE("static: nothing starts when the hosts lack slots or the command is not there") {
  SUBCASE("too few slots") {
    StaticJob job(3);
    job.context.SetHosts("localhost:2");
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitUsage);
    CHECK(job.prepare_result.cause.find("the hosts provide only 2 slots") != std::string::npos);
  }
  SUBCASE("no such command") {
    StaticJob job(1, {"/no/such/program"});
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitCommandNotFound);
    CHECK(job.prepare_result.cause.starts_with("cannot run '/no/such/program'"));
  }
  SUBCASE("-H that does not parse") {
    StaticJob job(1);
    job.context.SetHosts("a:x");
    CHECK_FALSE(job.Prepare());
    CHECK(job.prepare_result.code == kExitUsage);
  }
}

TEST_CASE("static: each exit is an event with its reason, and scaling is refused") {
  StaticJob job(2);
  job.Start();
  job.context.Finish(&job.policy, 0, ExitStatus::Exited(2));
  job.context.Finish(&job.policy, 1, ExitStatus::Signaled(SIGTERM));
  std::vector<nlohmann::json> exits = job.context.EventsNamed("rank_exited");
  REQUIRE(exits.size() == 2);
  CHECK(exits[0]["rank"] == 0);
  CHECK(exits[0][events::field::kCode] == 2);
  CHECK(exits[0]["reason"] == "failed");
  CHECK(exits[1]["reason"] == "stopped");
  int status = 0;
  job.policy.OnControl({"POST", "/scale", "{}", ""}, [&status](int s, nlohmann::json) { status = s; });
  CHECK(status == 409);
}

}  // namespace
}  // namespace etrun::launcher

namespace etrun::launcher {
namespace {

TEST_CASE("static: a rank etrun stopped never goes before the failure that made it stop, whatever the clocks say") {
  // Rank 3 is refused on its host; etrun stops the others, and rank 2 there ends on the SIGTERM.
  // Its time, an agent's translated, reads a millisecond before rank 3's: still rank 3 is named.
  StaticJob job(4);
  job.Start();
  auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
  job.context.Finish(&job.policy, 3, ExitStatus::Exited(2), t0, "etrun: error: agent on a2: too few GPUs");
  job.context.Finish(&job.policy, 2, ExitStatus::Signaled(SIGTERM), t0 - std::chrono::milliseconds(1), "",
                     /*stopped=*/true);
  JobResult result = job.policy.Result();
  CHECK(result.code == 2);
  CHECK(result.cause.starts_with("rank 3 on localhost exited with code 2"));
}

}  // namespace
}  // namespace etrun::launcher

namespace etrun::launcher {
namespace {

TEST_CASE("static --preflight: each host is checked once, with its first slot, before any rank starts") {
  StaticJob job(3);
  job.context.job.preflight = PreflightMode::kOn;
  job.context.SetHosts("localhost:2,127.0.0.1:2");
  job.Start();
  CHECK(job.context.started.empty());
  CHECK_FALSE(job.policy.Finished());  // nothing runs, yet the job is not over
  REQUIRE(job.context.preflights.size() == 1);
  const std::vector<PreflightRequest>& hosts = job.context.preflights[0];
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[0].first.slot.hostname == "localhost");
  CHECK(hosts[0].first.slot.local_rank == 0);
  CHECK(hosts[0].first.run.rendezvous_port == 4242);
  CHECK(hosts[0].slots == 2);
  CHECK(hosts[1].first.slot.hostname == "127.0.0.1");
  CHECK(hosts[1].slots == 1);  // -np 3: one of its two slots is used
  job.context.RunPosted();
  CHECK(job.context.started.size() == 3);
  job.context.FinishAll(&job.policy, ExitStatus::Exited(0));
  CHECK(job.policy.Result().code == 0);
}

TEST_CASE("static --preflight: a sick host stops the job before it starts (exit 3); warn starts it") {
  for (PreflightMode mode : {PreflightMode::kOn, PreflightMode::kWarn}) {
    CAPTURE(static_cast<int>(mode));
    StaticJob job(2);
    job.context.job.preflight = mode;
    job.context.SetHosts("localhost:1,127.0.0.1:1");
    job.context.preflight_result.sick = {{"127.0.0.1", "slow link: sends at 5.0 Mbit/s to localhost"}};
    job.Start();
    job.context.RunPosted();
    if (mode == PreflightMode::kOn) {
      CHECK(job.context.started.empty());
      CHECK(job.policy.Finished());
      JobResult result = job.policy.Result();
      CHECK(result.code == kExitPreflight);
      CHECK(result.cause == "pre-flight found 1 of 2 hosts sick (127.0.0.1): nothing was started; fix it "
                            "or leave it out, or run anyway with --preflight=warn");
    } else {
      CHECK(job.context.started.size() == 2);
    }
  }
}

TEST_CASE("static --preflight: a stop signal while hosts are checked ends the job; the verdict starts nothing") {
  StaticJob job(2);
  job.context.job.preflight = PreflightMode::kOn;
  job.Start();
  job.policy.OnStopSignal(SIGTERM);
  CHECK(job.policy.Finished());
  job.context.RunPosted();  // the verdict comes
  CHECK(job.context.started.empty());
  CHECK(job.policy.Result().code == 128 + SIGTERM);
}

}  // namespace
}  // namespace etrun::launcher
