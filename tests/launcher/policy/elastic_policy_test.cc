// ElasticPolicy driven through a FakeJobContext and a scripted host source: which ranks start
// (and for which round, with which slot facts) as grants grow and shrink, how removed, failed and
// unreachable hosts are stopped and blacklisted, how --reset-limit and SIGINT end the job, and
// which `etrun scale` requests are refused. Workers are played through the rendezvous handler
// (GET rank_and_size, DELETE /global/<rank>); rank 0 never registers, so no notification is sent
// and the survivors come to the reset as they would once told.
#include "launcher/policy/elastic_policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>

#include <cstring>
#include <sstream>

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "events/schema.h"
#include "tests/launcher/fake_job_context.h"
#include "tests/launcher/fake_remote.h"

namespace etrun::launcher {
namespace {

using discovery::HostGrant;
using discovery::HostSlots;
using discovery::SlotFacts;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kNoRank[] = "-1,-1,-1,-1,-1,-1";

HostGrant Grant(std::vector<HostSlots> hosts) {
  HostGrant grant;
  grant.ok = true;
  grant.hosts = std::move(hosts);
  return grant;
}

// A rank's extra variables, one string, so a failed check shows them.
std::string Env(const RankRequest& request) {
  std::string out;
  for (const std::string& kv : request.extra_env) out += (out.empty() ? "" : " ") + kv;
  return out;
}

// A pool slot's facts as pool/pool_client.cc writes them.
SlotFacts PoolSlot(const std::string& host, int slot, const std::string& device) {
  return {device,
          {"ETRUN_POOL_SLOT=" + host + "/" + std::to_string(slot), "ETRUN_POOL_GPU=" + device}};
}

// A host source whose polls answer `grant` at once; records ReportLive and Poll in order.
class ScriptedSource : public discovery::HostSource {
 public:
  void Poll(std::function<void(HostGrant)> done) override {
    ++polls;
    calls.push_back("poll");
    done(grant);
  }
  void ReportLive(std::map<std::string, std::vector<int>> live) override {
    std::string text = "live";
    for (const auto& [host, ranks] : live) {
      text += " " + host + ":";
      for (size_t i = 0; i < ranks.size(); ++i) text += (i ? "," : "") + std::to_string(ranks[i]);
    }
    calls.push_back(text);
  }
  discovery::HostSourceTraits traits() const override { return source_traits; }

  HostGrant grant;
  discovery::HostSourceTraits source_traits;
  int polls = 0;
  std::vector<std::string> calls;  // "live host:0,1 ..." and "poll", in order
};

// What etrun logs (warnings and errors) while it lives, one "level: text" string per line.
class LoggedLines {
 public:
  LoggedLines() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_pattern("%l: %v");
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::warn);
    spdlog::set_default_logger(logger);
  }
  ~LoggedLines() { spdlog::set_default_logger(previous_); }
  LoggedLines(const LoggedLines&) = delete;
  LoggedLines& operator=(const LoggedLines&) = delete;

  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(stream_.str());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

// An elastic job over the fake context; `source` is used once Start() is called with it set.
struct ElasticJob {
  ElasticJob() {
    context.job.command = {"/bin/true"};
    context.job.num_proc = 2;
    context.job.min_np = 1;
    policy.set_context(&context);
  }
  void Start(bool use_source = true) {
    if (use_source) context.source = &source;
    JobResult result;
    REQUIRE(policy.Prepare(&result));
    policy.Begin(4242);
    context.RunPosted();  // the first grant reaches the loop
  }
  // A worker's requests, as Horovod makes them. The handler runs on the store's threads and
  // posts what the driver owns to the loop; the loop then runs it.
  std::shared_ptr<std::string> RankAndSize(const std::string& slot) {
    auto body = std::make_shared<std::string>();  // empty while held
    policy.rendezvous_handler()->Handle({"GET", "/rank_and_size/" + slot, "", ""},
                                        [body](rendezvous::HttpResponse r) { *body = r.body; });
    context.RunPosted();
    return body;
  }
  int Request(const std::string& method, const std::string& target) {
    int status = 0;
    policy.rendezvous_handler()->Handle(
        {method, target, "", ""}, [&status](rendezvous::HttpResponse r) { status = r.status; });
    context.RunPosted();
    return status;
  }
  // `etrun scale`: the status and error of POST /overrides, once answered.
  std::pair<int, std::string> Scale(const std::string& body) {
    std::pair<int, std::string> answer{0, ""};
    policy.OnControl({"POST", "/overrides", body, ""}, [&answer](int status, nlohmann::json j) {
      answer = {status, j.contains("error") ? j["error"].get<std::string>() : ""};
    });
    context.RunPosted();
    return answer;
  }
  // The latest process started for a slot.
  const FakeJobContext::Started& Latest(const std::string& host, int local_rank) const {
    for (auto it = context.started.rbegin(); it != context.started.rend(); ++it) {
      if (it->host == host && it->request.slot.local_rank == local_rank) return *it;
    }
    FAIL("no rank started on " << host << "[" << local_rank << "]");
    return context.started.front();
  }
  int IdOf(const std::string& host, int local_rank) const { return Latest(host, local_rank).id; }

  // Destroyed in reverse: the policy goes first.
  ScriptedSource source;
  FakeRemote remote;
  FakeJobContext context;
  ElasticPolicy policy;
};

TEST_CASE("elastic policy: a grant that adds a host starts its rank, ahead of round 2 once the world trains") {
  // Given localhost:2 in round 1, a grant adding 198.18.0.5:1 starts rank 2 there; when it
  // comes, depends on whether round 1's world has formed.
  ElasticJob job;
  job.context.job.max_np = 4;
  job.source.grant = Grant({{"localhost", 2}});
  job.Start();
  REQUIRE(job.context.started.size() == 2);
  for (int r = 0; r < 2; ++r) {
    const RankRequest& req = job.context.started[r].request;
    CHECK(req.slot.rank == r);
    CHECK(req.slot.hostname == "localhost");
    CHECK(req.slot.local_rank == r);
    CHECK(req.round == 1);
    CHECK(req.run.rendezvous_port == 4242);
    CHECK(Env(req).empty());
  }
  HostGrant grown = Grant({{"localhost", 2}, {"198.18.0.5", 1}});

  SUBCASE("formed: started ahead with round 2 and a Gloo timeout raised to --elastic-timeout") {
    CHECK(job.Request("DELETE", "/global/0") == 200);
    CHECK(job.Request("DELETE", "/global/1") == 200);
    CHECK(job.context.EventsNamed(events::kWorldReady).size() == 1);
    job.source.grant = grown;
    job.context.Advance(seconds(1));  // the next poll
    REQUIRE(job.context.started.size() == 3);
    const RankRequest& ahead = job.context.started[2].request;
    CHECK(ahead.slot.rank == 2);
    CHECK(ahead.slot.size == 3);
    CHECK(ahead.slot.hostname == "198.18.0.5");
    CHECK(ahead.slot.local_rank == 0);
    CHECK(ahead.group_rank == 1);
    CHECK(ahead.round == 2);
    CHECK(Env(ahead) == "HOROVOD_GLOO_TIMEOUT_SECONDS=600");
    // It makes its first request; the survivors, told by rank 0, come to the reset: round 2
    // opens as planned, with nobody started again.
    CHECK(job.Request("PUT", "/global/rank_2") == 200);
    auto r0 = job.RankAndSize("localhost:0");
    auto r1 = job.RankAndSize("localhost:1");
    CHECK(*r0 == "0,3,0,2,0,2");
    CHECK(*r1 == "1,3,1,2,0,1");
    CHECK(job.context.started.size() == 3);
    CHECK(job.policy.Status().round == 2);
    CHECK(job.policy.Status().world_size == 3);
  }
  SUBCASE("not formed yet: started when round 2 opens, after the survivors' reset") {
    job.source.grant = grown;
    job.context.Advance(seconds(1));
    CHECK(job.context.started.size() == 2);
    auto r0 = job.RankAndSize("localhost:0");
    CHECK(r0->empty());  // held until every party is in
    auto r1 = job.RankAndSize("localhost:1");
    CHECK(*r0 == "0,3,0,2,0,2");
    REQUIRE(job.context.started.size() == 3);
    const RankRequest& added = job.context.started[2].request;
    CHECK(added.slot.rank == 2);
    CHECK(added.slot.hostname == "198.18.0.5");
    CHECK(added.round == 2);
    CHECK(Env(added).empty());
  }
}

TEST_CASE("elastic policy: a host missing from a grant has its ranks drained, SIGKILL after the grace period") {
  // Given localhost:1 and 198.18.0.3:1, a grant without 198.18.0.3 leaves its worker without a
  // slot at the reset: it is answered -1, gets SIGTERM, SIGKILL 5 s later, and exits "drained".
  ElasticJob job;
  job.context.job.grace_period_s = 5;
  job.source.grant = Grant({{"localhost", 1}, {"198.18.0.3", 1}});
  job.Start();
  REQUIRE(job.context.started.size() == 2);
  int gone = job.IdOf("198.18.0.3", 0);
  job.source.grant = Grant({{"localhost", 1}});
  job.context.Advance(seconds(1));
  CHECK(job.context.signals.empty());  // until the workers come to the reset
  auto kept = job.RankAndSize("localhost:0");
  auto removed = job.RankAndSize("198.18.0.3:0");
  CHECK(*kept == "0,1,0,1,0,1");
  CHECK(*removed == kNoRank);
  CHECK(job.context.signals == std::vector<std::pair<int, int>>{{gone, SIGTERM}});
  CHECK(job.policy.Status().ranks.at(1).state == "draining");
  job.context.Advance(milliseconds(4900));
  CHECK(job.context.SignalsTo(gone) == std::vector<int>{SIGTERM});
  job.context.Advance(milliseconds(100));
  CHECK(job.context.SignalsTo(gone) == std::vector<int>{SIGTERM, SIGKILL});
  job.context.Finish(&job.policy, gone, ExitStatus::Signaled(SIGKILL));
  std::vector<nlohmann::json> exits = job.context.EventsNamed(events::kRankExited);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0]["host"] == "198.18.0.3");
  CHECK(exits[0]["reason"] == "drained");
  CHECK(job.context.started.size() == 2);  // nothing started in its place
  CHECK_FALSE(job.policy.Finished());
  CHECK(job.context.signals.size() == 2);  // the kept rank was never signalled
}

TEST_CASE("elastic policy: a rank whose remote host cannot be reached blacklists the host for the next round") {
  // Given --max-np 2 over localhost, 198.18.0.2 and a spare 198.18.0.4, when the rank on
  // 198.18.0.2 ends and the remote starter says the host was unreachable, the host is
  // blacklisted at once; after the reset the spare host takes rank 1, and later polls that still
  // list 198.18.0.2 start nothing there.
  ElasticJob job;
  job.context.job.max_np = 2;
  job.context.remote_starter = &job.remote;
  job.source.grant = Grant({{"localhost", 1}, {"198.18.0.2", 1}, {"198.18.0.4", 1}});
  job.Start();
  REQUIRE(job.context.started.size() == 2);
  CHECK(job.context.started[1].host == "198.18.0.2");
  job.context.Finish(&job.policy, job.IdOf("198.18.0.2", 0), ExitStatus::Exited(255));
  CHECK(job.remote.asked == std::vector<std::string>{"198.18.0.2"});
  std::vector<nlohmann::json> blacklisted = job.context.EventsNamed(events::kHostBlacklisted);
  REQUIRE(blacklisted.size() == 1);
  CHECK(blacklisted[0]["host"] == "198.18.0.2");
  CHECK(blacklisted[0]["reason"] == "cannot be reached");
  CHECK(job.context.EventsNamed(events::kRankExited)[0]["reason"] == "failed");
  auto survivor = job.RankAndSize("localhost:0");
  CHECK(*survivor == "0,2,0,1,0,2");
  REQUIRE(job.context.started.size() == 3);
  const RankRequest& spare = job.context.started[2].request;
  CHECK(spare.slot.hostname == "198.18.0.4");
  CHECK(spare.slot.rank == 1);
  CHECK(spare.round == 2);
  std::vector<nlohmann::json> rounds = job.context.EventsNamed(events::kRound);
  REQUIRE(rounds.size() == 2);
  CHECK(rounds[1]["assignment"].dump().find("198.18.0.2") == std::string::npos);
  job.context.Advance(seconds(3));  // three more polls, 198.18.0.2 still listed
  CHECK(job.context.started.size() == 3);
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).size() == 1);
  CHECK_FALSE(job.policy.Finished());
}

TEST_CASE("elastic policy: with --reset-limit 0 a failure ends the job with the failed rank's code") {
  // Given -H localhost:1,127.0.0.1:1 (no source: the fixed hosts), when 127.0.0.1's rank exits
  // 3 and the survivor comes to the reset, no reset is allowed: the survivor is released (-1)
  // and stopped, and once it exits the job ends with 3 and says why.
  ElasticJob job;
  job.context.SetHosts("localhost:1,127.0.0.1:1");
  job.context.job.reset_limit = 0;
  job.Start(/*use_source=*/false);
  REQUIRE(job.context.started.size() == 2);
  job.context.Finish(&job.policy, job.IdOf("127.0.0.1", 0), ExitStatus::Exited(3));
  CHECK_FALSE(job.policy.Finished());
  auto survivor = job.RankAndSize("localhost:0");
  CHECK(*survivor == kNoRank);
  int id = job.IdOf("localhost", 0);
  CHECK(job.context.SignalsTo(id) == std::vector<int>{SIGTERM});
  CHECK_FALSE(job.policy.Finished());  // until the survivor has exited
  job.context.Finish(&job.policy, id, ExitStatus::Signaled(SIGTERM));
  REQUIRE(job.policy.Finished());
  JobResult result = job.policy.Result();
  CHECK(result.code == 3);
  CHECK(result.cause == "stopped because the number of resets exceeded the limit: 0 (--reset-limit); "
                        "last failure: worker 127.0.0.1[0] exited with code 3");
  std::vector<nlohmann::json> exits = job.context.EventsNamed(events::kRankExited);
  REQUIRE(exits.size() == 2);
  CHECK(exits[0]["reason"] == "failed");
  CHECK(exits[1]["reason"] == "stopped");
  CHECK(job.context.EventsNamed(events::kReset).empty());
  CHECK(job.context.started.size() == 2);
}

TEST_CASE("elastic policy: a lent slot's rank gets its facts; a given-back one's exit polls at once; a new grant brings new facts") {
  // Given pool "p1" lending localhost slots 4 and 5 (GPUs 2 and 3) with a 30 s interval: each
  // poll follows a report of the live ranks; each rank gets its slot's variables and sees its own
  // GPU at its local rank; a grant giving slot 5 back stops local rank 1 at the reset, and its
  // exit polls at once; a grant that lends local rank 1 again (slot 9, GPU 6) starts it, ahead
  // of round 3, with the new facts.
  ElasticJob job;
  job.context.job.max_np = 4;
  job.context.job.discovery_interval_s = 30;
  job.source.source_traits = {true, "p1", "job-1"};
  job.source.grant = Grant({{"localhost", 2}});
  job.source.grant.slots["localhost"] = {PoolSlot("localhost", 4, "2"),
                                         PoolSlot("localhost", 5, "3")};
  job.Start();
  CHECK(job.source.calls == std::vector<std::string>{"live", "poll"});
  REQUIRE(job.context.started.size() == 2);  // --min-np 1 was enough to start; all lent slots run
  CHECK(Env(job.context.started[0].request) ==
        "ETRUN_POOL_SLOT=localhost/4 ETRUN_POOL_GPU=2 CUDA_VISIBLE_DEVICES=2,3");
  CHECK(Env(job.context.started[1].request) ==
        "ETRUN_POOL_SLOT=localhost/5 ETRUN_POOL_GPU=3 CUDA_VISIBLE_DEVICES=2,3");
  CHECK(job.policy.Status().pool == "p1");

  // Slot 5 is given back (the pool keeps both local ranks' entries); the workers come to the
  // reset as rank 0 would tell them.
  HostGrant shrunk = job.source.grant;
  shrunk.hosts = {{"localhost", 1}};
  job.source.grant = shrunk;
  job.context.Advance(seconds(30));
  CHECK(job.source.calls == std::vector<std::string>{"live", "poll", "live localhost:0,1", "poll"});
  auto r0 = job.RankAndSize("localhost:0");
  auto r1 = job.RankAndSize("localhost:1");
  CHECK(*r0 == "0,1,0,1,0,1");
  CHECK(*r1 == kNoRank);
  int given_back = job.IdOf("localhost", 1);
  CHECK(job.context.SignalsTo(given_back) == std::vector<int>{SIGTERM});
  CHECK(job.Request("DELETE", "/global/0") == 200);  // round 2's world of one forms

  // Its exit polls at once, with the clock where it was; the answer lends local rank 1 again.
  HostGrant grown = Grant({{"localhost", 2}});
  grown.slots["localhost"] = {PoolSlot("localhost", 4, "2"), PoolSlot("localhost", 9, "6")};
  job.source.grant = grown;
  TimePoint before = job.context.now;
  job.context.Finish(&job.policy, given_back, ExitStatus::Signaled(SIGTERM));
  CHECK(job.context.now == before);
  CHECK(job.source.polls == 3);
  CHECK(job.source.calls.back() == "poll");
  CHECK(job.source.calls[job.source.calls.size() - 2] == "live localhost:0");
  REQUIRE(job.context.started.size() == 3);
  const RankRequest& again = job.context.started[2].request;
  CHECK(again.slot.local_rank == 1);
  CHECK(again.slot.rank == 1);
  CHECK(again.round == 3);
  CHECK(Env(again) == "HOROVOD_GLOO_TIMEOUT_SECONDS=600 ETRUN_POOL_SLOT=localhost/9 "
                     "ETRUN_POOL_GPU=6 CUDA_VISIBLE_DEVICES=2,6");
}

TEST_CASE("elastic policy: SIGINT stops every worker and the job ends with 130 once they finished") {
  // Given two ranks, SIGINT sends each SIGTERM (SIGKILL to those left after the grace period);
  // the job is over, with 130, only when both have exited, each exit reported "stopped".
  ElasticJob job;
  job.context.job.min_np = 2;
  job.Start(/*use_source=*/false);  // localhost:2
  REQUIRE(job.context.started.size() == 2);
  job.policy.OnStopSignal(SIGINT);
  CHECK(job.context.signals == std::vector<std::pair<int, int>>{{0, SIGTERM}, {1, SIGTERM}});
  CHECK_FALSE(job.policy.Finished());
  job.context.Finish(&job.policy, 0, ExitStatus::Signaled(SIGTERM));
  CHECK_FALSE(job.policy.Finished());
  job.context.Advance(seconds(5));
  CHECK(job.context.SignalsTo(1) == std::vector<int>{SIGTERM, SIGKILL});
  job.context.Finish(&job.policy, 1, ExitStatus::Signaled(SIGKILL));
  REQUIRE(job.policy.Finished());
  JobResult result = job.policy.Result();
  CHECK(result.code == 130);
  CHECK(result.cause == "received SIGINT");
  for (const nlohmann::json& e : job.context.EventsNamed(events::kRankExited)) {
    CHECK(e["reason"] == "stopped");
  }
  CHECK(job.context.started.size() == 2);
}

TEST_CASE("elastic policy: etrun scale may not add or remove a lent source's hosts, nor go below --min-np") {
  // POST /overrides carries the whole set {"add", "remove", "to"}; refusals are 400 with a
  // message and leave the overrides as they were.
  ElasticJob job;
  job.context.job.min_np = 2;
  job.context.job.max_np = 4;
  SUBCASE("lent: add and remove refused, --to accepted") {
    job.source.source_traits = {true, "p1", "job-1"};
    job.source.grant = Grant({{"localhost", 2}});
    job.Start();
    for (const char* body : {R"({"add": {"198.18.0.9": 2}, "remove": [], "to": null})",
                             R"({"add": {}, "remove": ["localhost"], "to": null})"}) {
      CAPTURE(body);
      auto [status, error] = job.Scale(body);
      CHECK(status == 400);
      CHECK(error.starts_with("the job's hosts are lent by pool 'p1': "));
      CHECK(error.ends_with("change its share with `etrun pool priority`, or cap it with --to N"));
    }
    CHECK(job.policy.Status().overrides->add.empty());
    CHECK(job.policy.Status().overrides->remove.empty());
    CHECK(job.Scale(R"({"add": {}, "remove": [], "to": 3})") ==
          std::pair<int, std::string>{200, ""});
    CHECK(job.policy.Status().overrides->to == 3);
  }
  SUBCASE("--to below --min-np refused") {
    job.source.grant = Grant({{"localhost", 2}});
    job.Start();
    CHECK(job.Scale(R"({"add": {}, "remove": [], "to": 1})") ==
          std::pair<int, std::string>{400, "--to 1 is below --min-np 2"});
    CHECK(job.policy.Status().overrides->to == std::nullopt);
    CHECK(job.Scale(R"({"add": {}, "remove": []})").first == 400);  // "to" is required
    CHECK(job.context.stops.empty());
    CHECK(job.context.signals.empty());
  }
}

TEST_CASE("elastic policy: a command that cannot run on this machine ends the job before any rank starts there") {
  // Given a command not on PATH: the first grant offering this machine ends the job with 127
  // and the cause the other modes give, nothing started; a grant of other hosts only starts
  // their ranks (the command may be there), until this machine is offered too.
  ElasticJob job;
  job.context.job.command = {"nosuchcmd-xyz"};
  SUBCASE("this machine at once") {
    job.source.grant = Grant({{"198.18.0.5", 1}, {"localhost", 2}});
    job.Start();
    CHECK(job.context.started.empty());
  }
  SUBCASE("other hosts first") {
    job.source.grant = Grant({{"198.18.0.5", 2}});
    job.Start();
    CHECK(job.context.started.size() == 2);
    job.source.grant = Grant({{"198.18.0.5", 2}, {"localhost", 2}});
    job.context.Advance(seconds(1));
    CHECK(job.context.started.size() == 2);
    CHECK(job.context.SignalsTo(0) == std::vector<int>{SIGTERM});
    job.context.FinishAll(&job.policy, ExitStatus::Signaled(SIGTERM));
  }
  REQUIRE(job.policy.Finished());
  JobResult result = job.policy.Result();
  CHECK(result.code == 127);
  CHECK(result.cause == "cannot run 'nosuchcmd-xyz': command not found in PATH: check the command and PATH");
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).empty());
}

TEST_CASE("elastic policy: a rank etrun lacks the files to start ends the round's starts, is said once, and the job goes on with the ranks it can afford") {
  // Given localhost:40 and room for 30 ranks (-np 40, --min-np 2): the 31st start fails with
  // EMFILE. No further start is tried; one warning names the limit and the fix; the 30 workers
  // started for a world of 40 are stopped, and once they are gone round 2 opens with the ranks
  // whose pipes fit in what the 30 held while keeping room for etrun's own descriptors and a
  // rendezvous connection per rank: (30 * 2 - 16) / 3 = 14. Nothing is blacklisted, and later
  // polls start nothing beyond the 14.
  LoggedLines log;
  ElasticJob job;
  job.context.job.num_proc = 40;
  job.context.job.min_np = 2;
  job.context.short_after = 30;
  job.source.grant = Grant({{"localhost", 40}});
  int unstarted = -1;  // the process of the 31st start, when its exec is what failed
  SUBCASE("the start fails (a pipe, the fork)") { job.Start(); }
  SUBCASE("its exec fails: the process exits 127 and counts for nothing") {
    job.context.short_at_exec = true;
    job.Start();
    REQUIRE(job.context.started.size() == 31);
    unstarted = job.context.started[30].id;
    CHECK(job.context.SignalsTo(unstarted).empty());
    job.context.Finish(&job.policy, unstarted, ExitStatus::Exited(127));
    job.context.started.pop_back();
  }
  REQUIRE(job.context.started.size() == 30);
  CHECK(log.lines() == std::vector<std::string>{
      "warning: cannot start worker localhost[30]: too many open files (ulimit -Hn); going on "
      "with 14 ranks from now on (keeping room for etrun's own work): raise the limit, or cap "
      "the job with --max-np 14"});
  for (int id = 0; id < 30; ++id) CHECK(job.context.SignalsTo(id) == std::vector<int>{SIGTERM});
  CHECK(job.policy.Status().state == "resetting");
  for (int id = 0; id < 29; ++id) job.context.Finish(&job.policy, id, ExitStatus::Signaled(SIGTERM));
  CHECK(job.context.started.size() == 30);  // until the last of them is gone
  job.context.Finish(&job.policy, 29, ExitStatus::Signaled(SIGTERM));
  REQUIRE(job.context.started.size() == 44);
  for (int r = 0; r < 14; ++r) {
    const RankRequest& req = job.context.started[30 + r].request;
    CHECK(req.slot.rank == r);
    CHECK(req.slot.size == 14);
    CHECK(req.round == 2);
  }
  std::vector<nlohmann::json> rounds = job.context.EventsNamed(events::kRound);
  REQUIRE(rounds.size() == 2);
  CHECK(rounds[0]["world_size"] == 40);
  CHECK(rounds[1]["world_size"] == 14);
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).empty());
  for (const nlohmann::json& e : job.context.EventsNamed(events::kRankExited)) {
    CHECK(e["reason"] == (e["pid"] == FakeJobContext::kFirstPid + unstarted ? "failed" : "stopped"));
  }
  job.context.Advance(seconds(3));  // three more polls offering 40 slots
  CHECK(job.context.started.size() == 44);
  CHECK(log.lines().size() == 1);
  job.context.FinishAll(&job.policy, ExitStatus::Exited(0));
  REQUIRE(job.policy.Finished());
  CHECK(job.policy.Result().code == 0);
}

TEST_CASE("elastic policy: fewer ranks than --min-np can run: the job ends with exit 1 and one cause") {
  // Given room for 30 ranks and --min-np 30: what etrun can afford is below it for every
  // resource (files 14, processes 28: a discovery run's, memory 29). The job ends once the 30
  // started are gone, with the resource, its limit and the fix in one cause (the runtime prints
  // it); nothing is logged, nothing blacklisted.
  LoggedLines log;
  ElasticJob job;
  job.context.job.num_proc = 40;
  job.context.job.min_np = 30;
  job.context.short_after = 30;
  std::string resource;
  int ranks = 0;
  SUBCASE("open files") {
    resource = "too many open files (ulimit -Hn)";
    ranks = 14;
  }
  SUBCASE("processes") {
    job.context.short_errno = EAGAIN;
    resource = "no more processes: ";
    ranks = 28;
  }
  SUBCASE("memory") {
    job.context.short_errno = ENOMEM;
    resource = "out of memory: Cannot allocate memory";
    ranks = 29;
  }
  job.source.grant = Grant({{"localhost", 40}});
  job.Start();
  REQUIRE(job.context.started.size() == 30);
  CHECK_FALSE(job.policy.Finished());
  job.context.FinishAll(&job.policy, ExitStatus::Signaled(SIGTERM));
  REQUIRE(job.policy.Finished());
  JobResult result = job.policy.Result();
  CHECK(result.code == 1);
  CAPTURE(result.cause);
  CHECK(result.cause.starts_with("cannot start worker localhost[30]: " + resource));
  CHECK(result.cause.ends_with("; etrun can run only " + std::to_string(ranks) +
                               " ranks and keep room for its own work, fewer than --min-np 30: "
                               "raise the limit, or lower --min-np"));
  CHECK(log.lines().empty());
  CHECK(job.context.started.size() == 30);
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).empty());
}

TEST_CASE("elastic policy: workers started ahead that etrun lacks the files for are dropped; the world shrinks only to what etrun can afford") {
  // Given a training world on localhost and room for 30 ranks, a grant adding 198.18.0.5:40
  // starts workers there ahead of round 2 until one fails: those are stopped, one warning.
  LoggedLines log;
  ElasticJob job;
  job.context.job.max_np = 50;
  job.context.short_after = 30;
  int world = 0;
  int kept = 0;  // (30 * 2 - 16) / 3 = 14 ranks etrun can afford
  SUBCASE("a world of 2 trains on as it is: no reset") {
    world = 2;
    kept = 2;
  }
  SUBCASE("a world of 20 is more than etrun can afford: it resets into 14") {
    world = 20;
    kept = 14;
  }
  job.context.job.num_proc = world;
  job.source.grant = Grant({{"localhost", world}});
  job.Start();
  for (int r = 0; r < world; ++r) CHECK(job.Request("DELETE", "/global/" + std::to_string(r)) == 200);
  REQUIRE(job.context.EventsNamed(events::kWorldReady).size() == 1);
  job.source.grant = Grant({{"localhost", world}, {"198.18.0.5", 40}});
  job.context.Advance(seconds(1));
  REQUIRE(job.context.started.size() == 30);
  std::string plural = kept == 1 ? "" : "s";
  CHECK(log.lines() == std::vector<std::string>{
      "warning: cannot start worker 198.18.0.5[" + std::to_string(30 - world) +
      "]: too many open files (ulimit -Hn); going on with " + std::to_string(kept) +
      " ranks from now on" + (kept < world ? " (keeping room for etrun's own work)" : "") +
      ": raise the limit, or cap the job with --max-np " + std::to_string(kept)});
  for (int id = 0; id < 30; ++id) {
    CHECK(job.context.SignalsTo(id) == (id < world ? std::vector<int>{} : std::vector<int>{SIGTERM}));
  }
  for (int id = world; id < 30; ++id) job.context.Finish(&job.policy, id, ExitStatus::Signaled(SIGTERM));
  job.context.Advance(seconds(3));
  CHECK(job.context.started.size() == 30);
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).empty());
  if (kept == world) {
    CHECK(job.policy.Status().state == "running");
    CHECK(job.policy.Status().round == 1);
    CHECK(job.context.EventsNamed(events::kResetBegin).empty());
  } else {
    // Told (rank 0 would be notified), the workers come to the reset: the first 14 are the new
    // world, the others are released and stopped.
    std::vector<std::shared_ptr<std::string>> answers;
    for (int r = 0; r < world; ++r) answers.push_back(job.RankAndSize("localhost:" + std::to_string(r)));
    CHECK(job.policy.Status().round == 2);
    CHECK(job.policy.Status().world_size == kept);
    for (int r = 0; r < world; ++r) {
      CAPTURE(r);
      CHECK((*answers[r] == kNoRank) == (r >= kept));
      CHECK(job.context.SignalsTo(r) == (r < kept ? std::vector<int>{} : std::vector<int>{SIGTERM}));
    }
  }
  CHECK(job.context.started.size() == 30);
  CHECK(log.lines().size() == 1);
}

}  // namespace
}  // namespace etrun::launcher

namespace etrun::launcher {
namespace {

TEST_CASE("elastic policy: with no --network-interface, hosts elsewhere find their own network") {
  // The server listens on every address (hosts come later, from anywhere); every rank request
  // says so (remote ranks resolve theirs where they start); MASTER_ADDR names rank 0's host when
  // that is another machine, else it is this machine's and remote ranks are told theirs.
  ElasticJob job;
  job.source.grant = Grant({{"198.18.0.5", 1}, {"localhost", 1}});
  job.Start();
  CHECK(job.policy.listen_address() == "0.0.0.0");
  REQUIRE(job.context.started.size() == 2);
  for (const FakeJobContext::Started& s : job.context.started) {
    CHECK(s.request.run.per_host);
    CHECK(s.request.run.rendezvous_addr == "127.0.0.1");  // this machine's ranks' own
    CHECK(s.request.run.master_addr == "198.18.0.5");
    CHECK_FALSE(s.request.run.master_is_launcher);
  }

  ElasticJob here;
  here.source.grant = Grant({{"localhost", 1}, {"198.18.0.5", 1}});
  here.Start();
  REQUIRE(here.context.started.size() == 2);
  for (const FakeJobContext::Started& s : here.context.started) {
    CHECK(s.request.run.master_addr == "127.0.0.1");
    CHECK(s.request.run.master_is_launcher);
  }

  ElasticJob named;
  named.context.job.network_interfaces = {"lo"};
  named.source.grant = Grant({{"198.18.0.5", 2}});
  named.Start();
  CHECK(named.policy.listen_address() == "127.0.0.1");
  REQUIRE(named.context.started.size() == 2);
  CHECK_FALSE(named.context.started[0].request.run.per_host);
  CHECK(named.context.started[0].request.run.nics == std::vector<std::string>{"lo"});
}

}  // namespace
}  // namespace etrun::launcher

namespace etrun::launcher {
namespace {

TEST_CASE("elastic policy: a lost host is fenced: its peers' sockets to it are cut, once") {
  // Given ranks on localhost, 198.18.0.2 and 198.18.0.3, when 198.18.0.2 is found unreachable,
  // the survivors (this machine and 198.18.0.3) destroy their sockets to it, so their
  // collectives fail now; its other ranks' exits fence nothing more. A host that merely crashed
  // (reachable) is not fenced: its peers get RSTs.
  ElasticJob job;
  job.context.job.num_proc = 4;
  job.context.remote_starter = &job.remote;
  job.source.grant = Grant({{"localhost", 1}, {"198.18.0.2", 2}, {"198.18.0.3", 1}});
  job.Start();
  REQUIRE(job.context.started.size() == 4);
  job.context.Finish(&job.policy, job.IdOf("198.18.0.2", 0), ExitStatus::Exited(255));
  CHECK(job.remote.detached ==
        std::vector<std::string>{"198.18.0.3: ss -K 'dst 198.18.0.2' >/dev/null 2>&1"});
  CHECK(job.context.fenced_here == std::vector<std::string>{"ss -K 'dst 198.18.0.2' >/dev/null 2>&1"});
  job.context.Finish(&job.policy, job.IdOf("198.18.0.2", 1), ExitStatus::Exited(255));
  CHECK(job.remote.detached.size() == 1);
  CHECK(job.context.fenced_here.size() == 1);

  ElasticJob crashed;
  crashed.context.job.num_proc = 2;
  crashed.remote.unreachable = false;
  crashed.context.remote_starter = &crashed.remote;
  crashed.source.grant = Grant({{"localhost", 1}, {"198.18.0.2", 1}});
  crashed.Start();
  crashed.context.Finish(&crashed.policy, crashed.IdOf("198.18.0.2", 0), ExitStatus::Exited(1));
  CHECK(crashed.remote.detached.empty());
  CHECK(crashed.context.fenced_here.empty());
}

// A Gloo address list as a worker of rank `rank` puts it: one 136-byte record per peer (an
// AF_INET sockaddr_storage at `ip`, ports base+peer), rendezvous/gloo_mesh.h.
std::string GlooList(const char* ip, int rank, int size, uint16_t base) {
  std::string bytes;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::string record(rendezvous::kGlooAddressBytes, '\0');
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<uint16_t>(base + peer));
    inet_pton(AF_INET, ip, &in.sin_addr);
    std::memcpy(record.data(), &in, sizeof(in));
    bytes += record;
  }
  return bytes;
}

TEST_CASE("elastic policy: a failed worker's world has its Gloo mesh cut on every survivor, once") {
  // Given ranks 0..3 on this machine, 198.18.0.2 (two) and 198.18.0.3 whose workers put their
  // Gloo pair addresses and met, when rank 3 fails (its host reachable: no loss), each survivor destroys
  // the mesh connections that have an end on it, so the one waiting on another survivor fails
  // too; a second failure in that world cuts nothing more.
  ElasticJob job;
  job.context.job.num_proc = 4;
  job.context.remote_starter = &job.remote;
  job.remote.unreachable = false;
  job.source.grant = Grant({{"localhost", 1}, {"198.18.0.2", 2}, {"198.18.0.3", 1}});
  job.Start();
  REQUIRE(job.context.started.size() == 4);
  const char* ips[] = {"198.18.0.1", "198.18.0.2", "198.18.0.2", "198.18.0.3"};
  for (int r = 0; r < 4; ++r) {
    int status = 0;
    job.policy.rendezvous_handler()->Handle(
        {"PUT", "/global/" + std::to_string(r), GlooList(ips[r], r, 4, 1000 + 100 * r), ""},
        [&status](rendezvous::HttpResponse resp) { status = resp.status; });
    REQUIRE(status == 200);
  }
  job.context.RunPosted();  // the store's callbacks reach the policy on its loop
  for (int r = 0; r < 4; ++r) CHECK(job.Request("DELETE", "/global/" + std::to_string(r)) == 200);
  job.context.Finish(&job.policy, job.IdOf("198.18.0.3", 0), ExitStatus::Exited(1));
  CHECK(job.remote.detached ==
        std::vector<std::string>{"198.18.0.2: ss -K '( dst 198.18.0.1:1001 or dst 198.18.0.1:1002 or "
                                 "src 198.18.0.2:1102 or dst 198.18.0.2:1102 or src 198.18.0.2:1103 or "
                                 "src 198.18.0.2:1203 )' "
                                 ">/dev/null 2>&1"});
  CHECK(job.context.fenced_here ==
        std::vector<std::string>{"ss -K '( src 198.18.0.1:1001 or src 198.18.0.1:1002 or "
                                 "src 198.18.0.1:1003 )' >/dev/null 2>&1"});
  job.context.Finish(&job.policy, job.IdOf("198.18.0.2", 1), ExitStatus::Exited(1));
  CHECK(job.remote.detached.size() == 1);
  CHECK(job.context.fenced_here.size() == 1);

  // A world that has not formed yet (its workers still meet) stalls nobody: no fence.
  ElasticJob meeting;
  meeting.context.job.num_proc = 2;
  meeting.context.remote_starter = &meeting.remote;
  meeting.remote.unreachable = false;
  meeting.source.grant = Grant({{"localhost", 1}, {"198.18.0.2", 1}});
  meeting.Start();
  for (int r = 0; r < 2; ++r) {
    meeting.policy.rendezvous_handler()->Handle(
        {"PUT", "/global/" + std::to_string(r), GlooList(ips[r], r, 2, 1000), ""},
        [](rendezvous::HttpResponse) {});
  }
  meeting.context.RunPosted();
  meeting.context.Finish(&meeting.policy, meeting.IdOf("198.18.0.2", 0), ExitStatus::Exited(1));
  CHECK(meeting.remote.detached.empty());
  CHECK(meeting.context.fenced_here.empty());
}

}  // namespace
}  // namespace etrun::launcher

namespace etrun::launcher {
namespace {

TEST_CASE("elastic policy --preflight: new hosts are checked before the grant counts; a sick one is blacklisted, never started") {
  ElasticJob job;
  job.context.job.preflight = PreflightMode::kOn;
  job.context.job.max_np = 4;
  job.context.remote_starter = &job.remote;
  job.context.preflight_result.sick = {{"198.18.0.6", "no script 'train.py' for python3 in /w"}};
  job.source.grant = Grant({{"localhost", 2}, {"198.18.0.6", 1}});
  LoggedLines logged;
  job.Start();  // the first grant: both hosts are checked, the verdict comes through the loop
  REQUIRE(job.context.preflights.size() == 1);
  std::vector<std::string> checked;
  for (const PreflightRequest& h : job.context.preflights[0]) checked.push_back(h.first.slot.hostname + ":" + std::to_string(h.slots));
  CHECK(checked == std::vector<std::string>{"localhost:2", "198.18.0.6:1"});
  job.context.RunPosted();
  std::vector<std::string> started;
  for (const auto& s : job.context.started) started.push_back(s.host);
  CHECK(started == std::vector<std::string>{"localhost", "localhost"});
  auto blacklisted = job.context.EventsNamed(events::kHostBlacklisted);
  REQUIRE(blacklisted.size() == 1);
  CHECK(blacklisted[0]["host"] == "198.18.0.6");
  CHECK(blacklisted[0]["reason"] == "pre-flight: no script 'train.py' for python3 in /w");
  CHECK(logged.lines() == std::vector<std::string>{
      "warning: pre-flight: 198.18.0.6: no script 'train.py' for python3 in /w; left out of the job"});
  // The next polls bring nothing new: no second check of the hosts that passed.
  job.context.preflight_result.sick.clear();
  job.context.Advance(seconds(1));
  job.context.Advance(seconds(1));
  CHECK(job.context.preflights.size() == 1);
}

TEST_CASE("elastic policy --preflight: a sick host is checked again as its cooldown ends, and kept out while still sick") {
  ElasticJob job;
  job.context.job.preflight = PreflightMode::kOn;
  job.context.job.cooldown_range = std::pair<int, int>{2, 2};
  job.context.remote_starter = &job.remote;
  job.context.preflight_result.sick = {{"198.18.0.6", "slow link"}};
  job.source.grant = Grant({{"localhost", 1}, {"198.18.0.6", 1}});
  LoggedLines logged;
  job.Start();
  job.context.RunPosted();
  REQUIRE(job.context.EventsNamed(events::kHostBlacklisted).size() == 1);
  job.context.Advance(seconds(1));  // polls within its cooldown: no check
  CHECK(job.context.preflights.size() == 1);
  job.context.Advance(seconds(2));  // its cooldown is over: checked before it is let back
  job.context.RunPosted();
  REQUIRE(job.context.preflights.size() == 2);
  CHECK(job.context.preflights[1][0].first.slot.hostname == "198.18.0.6");
  job.context.RunPosted();
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).size() == 2);  // still sick: out again
  for (const auto& started : job.context.started) CHECK(started.host == "localhost");
  job.context.preflight_result.sick.clear();  // well now
  job.context.Advance(seconds(5));
  job.context.RunPosted();
  REQUIRE(job.context.preflights.size() == 3);
  job.context.RunPosted();
  CHECK(job.context.started.back().host == "198.18.0.6");
}

TEST_CASE("elastic policy --preflight: a host `etrun scale` adds is checked before its rank starts") {
  ElasticJob job;
  job.context.job.preflight = PreflightMode::kOn;
  job.context.job.max_np = 4;
  job.context.remote_starter = &job.remote;
  job.source.grant = Grant({{"localhost", 1}});
  LoggedLines logged;
  job.Start();
  job.context.RunPosted();
  REQUIRE(job.context.preflights.size() == 1);
  size_t started = job.context.started.size();
  job.context.preflight_result.sick = {{"198.18.0.9", "no script 'train.py' for python3 in /w"}};
  CHECK(job.Scale(R"({"add": {"198.18.0.9": 2}, "remove": [], "to": null})") ==
        std::pair<int, std::string>{200, ""});
  job.context.RunPosted();
  REQUIRE(job.context.preflights.size() == 2);
  std::vector<std::string> checked;
  for (const PreflightRequest& h : job.context.preflights[1]) checked.push_back(h.first.slot.hostname + ":" + std::to_string(h.slots));
  CHECK(checked == std::vector<std::string>{"198.18.0.9:2", "localhost:1"});  // with a job host as its peer
  job.context.RunPosted();
  CHECK(job.context.started.size() == started);  // never started there
  CHECK(job.policy.Status().overrides->add.count("198.18.0.9") == 1);
  auto blacklisted = job.context.EventsNamed(events::kHostBlacklisted);
  REQUIRE(blacklisted.size() == 1);
  CHECK(blacklisted[0]["host"] == "198.18.0.9");
}

TEST_CASE("elastic policy --preflight=warn: a sick host is named and used") {
  ElasticJob job;
  job.context.job.preflight = PreflightMode::kWarn;
  job.context.remote_starter = &job.remote;
  job.context.preflight_result.sick = {{"198.18.0.6", "slow link"}};
  job.source.grant = Grant({{"localhost", 1}, {"198.18.0.6", 1}});
  LoggedLines logged;
  job.Start();
  job.context.RunPosted();
  CHECK(job.context.started.size() == 2);
  CHECK(logged.lines() == std::vector<std::string>{
      "warning: pre-flight: 198.18.0.6: slow link; its ranks run anyway (--preflight=warn)"});
  CHECK(job.context.EventsNamed(events::kHostBlacklisted).empty());
  auto pre = job.context.EventsNamed(events::kPreflight);
  REQUIRE(pre.size() == 1);
  CHECK(pre[0]["action"] == "warn");
}

}  // namespace
}  // namespace etrun::launcher
