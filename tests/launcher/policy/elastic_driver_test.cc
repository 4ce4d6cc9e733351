// Elastic driver scenarios over fakes: no processes, sockets or sleeps (spec §6).
#include "launcher/policy/elastic_driver.h"

#include <algorithm>
#include <set>

#include <doctest/doctest.h>

using etrun::ExitStatus;
using etrun::discovery::HostManager;
using etrun::discovery::ScriptResult;
using etrun::launcher::CoordinatorNotifier;
using etrun::launcher::ElasticDriver;
using etrun::launcher::ElasticOptions;
using etrun::launcher::SlotKey;
using etrun::launcher::TimePoint;
using etrun::launcher::WorkerControl;
using etrun::rendezvous::HostUpdateResult;
using etrun::rendezvous::KvStore;
using etrun::rendezvous::SlotInfo;
using etrun::rendezvous::WorkerRegistration;
using std::chrono::seconds;

namespace {

class FakeWorkers : public WorkerControl {
 public:
  bool Start(const SlotInfo& slot, int round, const std::vector<SlotInfo>&,
             etrun::launcher::Shortage* shortage) override {
    if (short_after >= 0 && static_cast<int>(started.size()) >= short_after) {
      *shortage = {"too many open files", affordable};
      return false;
    }
    started.push_back(slot);
    rounds.push_back(round);
    live.insert({slot.hostname, slot.local_rank});
    return true;
  }
  // The rank table's part, as RankSet's is: a slot runs from its start until its exit is given
  // to the driver, which the tests do through Exit.
  bool Running(const SlotKey& slot) const override { return live.count(slot) != 0; }
  std::vector<SlotKey> RunningSlots() const override { return {live.begin(), live.end()}; }
  bool AnyRunning() const override { return !live.empty(); }
  void Exit(ElasticDriver& driver, const SlotKey& slot, ExitStatus status, TimePoint now,
            bool was_stopped = false) {
    live.erase(slot);
    driver.OnWorkerExit(slot, status, now, was_stopped);
  }
  std::set<SlotKey> live;
  int short_after = -1;  // once this many were started, the next start fails for a shortage
  int affordable = 1 << 20;  // what that shortage says etrun can afford
  std::vector<int> rounds;  // the round each start was for
  void Stop(const SlotKey& slot) override { stopped.push_back(slot); }
  std::vector<SlotInfo> started;
  std::vector<SlotKey> stopped;
};

class FakeNotifier : public CoordinatorNotifier {
 public:
  void Register(const WorkerRegistration& reg, std::function<void(bool, std::string)> done) override {
    registered.push_back({reg.host, reg.local_rank});
    done(true, "");
  }
  bool IsRegistered(const SlotKey& slot) const override {
    return std::find(registered.begin(), registered.end(), slot) != registered.end();
  }
  void Notify(const SlotKey& slot, HostUpdateResult res, std::function<void(bool, std::string)> done) override {
    notified.push_back({slot, static_cast<int>(res)});
    done(deliver, deliver ? "" : "refused");
  }
  std::vector<SlotKey> registered;
  std::vector<std::pair<SlotKey, int>> notified;
  bool deliver = true;
};

// A discovery script's run as the driver gets it from its source.
etrun::discovery::HostGrant Script(const ScriptResult& result) {
  return etrun::discovery::GrantFromScript(result, 1);
}
etrun::discovery::HostGrant Hosts(const std::string& output) { return Script({true, output, "", ""}); }

// A job with its fakes, a clock, and shorthands for what workers do.
struct Job {
  explicit Job(ElasticOptions o = Options())
      : hosts(std::nullopt, [] { return 0.0; }),
        driver(o, &hosts, &workers, &notifier, &store, now) {}

  static ElasticOptions Options() {
    ElasticOptions o;
    o.np = 2;
    o.min_np = 1;
    o.max_np = 8;
    o.elastic_timeout = std::chrono::milliseconds(60000);
    return o;
  }

  void Discover(const std::string& output) { driver.OnDiscovery(Hosts(output), now); }
  void Advance(int s) {
    now += seconds(s);
    driver.OnTick(now);
  }
  void Register(const std::string& host, int lr) {
    WorkerRegistration reg;
    reg.host = host;
    reg.local_rank = lr;
    driver.RegisterWorker(reg, [](bool) {});
  }
  // The worker asks for its rank; returns where the answer will land.
  std::shared_ptr<std::optional<std::optional<SlotInfo>>> Ready(const std::string& host, int lr) {
    auto answer = std::make_shared<std::optional<std::optional<SlotInfo>>>();
    driver.RecordReady(host, lr, [answer](std::optional<SlotInfo> s) { *answer = s; });
    return answer;
  }
  void Exit(const std::string& host, int lr, int code) { workers.Exit(driver, {host, lr}, ExitStatus::Exited(code), now); }

  std::vector<std::string> StartedNames() const {
    std::vector<std::string> out;
    for (const SlotInfo& s : workers.started) out.push_back(s.hostname + ":" + std::to_string(s.local_rank) + "=r" + std::to_string(s.rank));
    return out;
  }

  std::optional<std::pair<int, int>> cooldown;
  TimePoint now = TimePoint() + seconds(1000);
  HostManager hosts;
  FakeWorkers workers;
  FakeNotifier notifier;
  KvStore store;
  ElasticDriver driver;
};

std::string Csv(const std::optional<std::optional<SlotInfo>>& answer) {
  REQUIRE(answer.has_value());
  return etrun::rendezvous::FormatRankAndSize(*answer);
}

}  // namespace

TEST_CASE("the job waits for -np slots, then starts every slot up to --max-np in script order") {
  Job job;
  job.Discover("b:1\n");
  CHECK(job.workers.started.empty());  // 1 slot < -np 2
  job.Discover("b:1\na:2\n");
  CHECK(job.StartedNames() == std::vector<std::string>{"b:0=r0", "a:0=r1", "a:1=r2"});
  CHECK(job.driver.round() == 1);
  CHECK(job.store.planned_size("global") == 3);
}

TEST_CASE("waiting for slots times out with a message naming what is missing") {
  Job job;
  job.Discover("a:1\n");
  job.Advance(59);
  CHECK_FALSE(job.driver.finished());
  job.Advance(1);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 1);
  CHECK(job.driver.summary() ==
        "timed out after 60 s waiting for 2 slots (-np); available: 1 (a:1): add hosts, or lower -np or raise --elastic-timeout");
}

TEST_CASE("a failing first discovery fails the job with the script's stderr; later ones keep hosts") {
  Job first;
  first.driver.OnDiscovery(Script({false, "", "cannot reach scheduler\n", "exit code 3"}), first.now);
  REQUIRE(first.driver.finished());
  CHECK(first.driver.summary() ==
        "the host discovery script failed (exit code 3): cannot reach scheduler: fix the script; it must print host:slots lines");

  Job later;
  later.Discover("a:2\n");
  later.driver.OnDiscovery(Script({false, "", "flaky\n", "exit code 1"}), later.now);
  later.Discover("a:x\n");
  CHECK_FALSE(later.driver.finished());
  CHECK(later.driver.assignment().size() == 2);
}

TEST_CASE("scale up: rank 0 is notified, survivors get new ranks, only the new slot starts") {
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  job.Discover("a:1\nb:1\nc:1\n");
  REQUIRE(job.notifier.notified.size() == 1);
  CHECK(job.notifier.notified[0] == std::pair{SlotKey{"a", 0}, 2});  // added
  auto a = job.Ready("a", 0);
  CHECK_FALSE(a->has_value());  // held until every party is in
  auto b = job.Ready("b", 0);
  CHECK(Csv(*a) == "0,3,0,1,0,3");
  CHECK(Csv(*b) == "1,3,0,1,1,3");
  CHECK(job.StartedNames() == std::vector<std::string>{"a:0=r0", "b:0=r1", "c:0=r2"});
  CHECK(job.driver.round() == 2);
  CHECK(job.driver.resets() == 1);
}

TEST_CASE("a change is kept until the coordinator registers, and sent once") {
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Discover("a:1\nb:1\nc:1\n");
  CHECK(job.notifier.notified.empty());
  job.Register("b", 0);  // not the coordinator
  CHECK(job.notifier.notified.empty());
  job.Register("a", 0);
  CHECK(job.notifier.notified.size() == 1);
  job.Advance(1);
  CHECK(job.notifier.notified.size() == 1);
}

TEST_CASE("a refused notification is retried on the next tick") {
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  job.notifier.deliver = false;
  job.Discover("a:1\nb:1\nc:1\n");
  job.notifier.deliver = true;
  job.Advance(1);
  CHECK(job.notifier.notified.size() == 2);
  job.Advance(1);
  CHECK(job.notifier.notified.size() == 2);
}

TEST_CASE("scale down: the removed host's workers get -1 and are drained, not failed") {
  Job job;
  job.Discover("a:1\nb:1\nc:1\n");
  job.Register("a", 0);
  job.Discover("a:1\nc:1\n");
  CHECK(job.notifier.notified.back() == std::pair{SlotKey{"a", 0}, 1});  // removed
  auto a = job.Ready("a", 0), b = job.Ready("b", 0), c = job.Ready("c", 0);
  CHECK(Csv(*a) == "0,2,0,1,0,2");
  CHECK(Csv(*b) == "-1,-1,-1,-1,-1,-1");
  CHECK(Csv(*c) == "1,2,0,1,1,2");
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"b", 0}});  // SIGTERM, not left to abort
  job.workers.Exit(job.driver, {"b", 0}, ExitStatus::Signaled(15), job.now);
  CHECK_FALSE(job.driver.finished());
  job.Exit("a", 0, 0);
  job.Exit("c", 0, 0);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 0);
}

TEST_CASE("removing the coordinator's host moves rank 0 to the next host") {
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  job.Discover("b:1\n");
  CHECK(job.notifier.notified.back() == std::pair{SlotKey{"a", 0}, 1});
  auto a = job.Ready("a", 0), b = job.Ready("b", 0);
  CHECK(Csv(*a) == "-1,-1,-1,-1,-1,-1");
  CHECK(Csv(*b) == "0,1,0,1,0,1");
  CHECK(job.driver.assignment().front().hostname == "b");
}

TEST_CASE("a failed rank blacklists its host and the others continue without it") {
  Job job;
  job.Discover("a:1\nb:2\nc:1\n");
  job.Exit("b", 1, 3);  // b[1] crashes; its peers see a collective fail and reset
  auto a = job.Ready("a", 0), b0 = job.Ready("b", 0), c = job.Ready("c", 0);
  CHECK(job.hosts.IsBlacklisted("b"));
  CHECK(Csv(*b0) == "-1,-1,-1,-1,-1,-1");
  CHECK(Csv(*a) == "0,2,0,1,0,2");
  CHECK(Csv(*c) == "1,2,0,1,1,2");
  CHECK(std::find(job.workers.stopped.begin(), job.workers.stopped.end(), SlotKey{"b", 0}) != job.workers.stopped.end());
  CHECK_FALSE(job.driver.finished());
}

TEST_CASE("when every rank fails the job ends with the code of the failure that ended it") {
  // The last failure ends the job (issue 13: it used to be the first's code, 7).
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Exit("a", 0, 7);
  job.Exit("b", 0, 9);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 9);
  CHECK(job.driver.summary() ==
        "every rank failed; last: worker b[0] exited with code 9; first: worker a[0] exited with code 7");
}

TEST_CASE("below --min-np after a failure the job waits, then times out") {
  ElasticOptions o = Job::Options();
  o.min_np = 2;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Exit("b", 0, 1);
  auto a = job.Ready("a", 0);
  CHECK_FALSE(a->has_value());  // held while waiting for slots
  job.Advance(30);
  job.Discover("a:1\nb:1\nc:1\n");  // c arrives in time
  CHECK(Csv(*a) == "0,2,0,1,0,2");
  CHECK(job.StartedNames().back() == "c:0=r1");

  Job late(o);
  late.Discover("a:1\nb:1\n");
  late.Exit("b", 0, 1);
  auto a2 = late.Ready("a", 0);
  late.Advance(60);
  CHECK(Csv(*a2) == "-1,-1,-1,-1,-1,-1");
  CHECK_FALSE(late.driver.finished());  // until the released worker has exited
  late.Exit("a", 0, 134);
  REQUIRE(late.driver.finished());
  CHECK(late.driver.exit_code() == 1);
  CHECK(late.driver.summary().starts_with("timed out after 60 s waiting for 2 slots (--min-np); available: 1 (a:1)"));
}

TEST_CASE("--reset-limit N allows N resets and stops at the next") {
  ElasticOptions o = Job::Options();
  o.reset_limit = 1;
  Job job(o);
  job.Discover("a:1\nb:1\nc:1\n");
  job.Exit("c", 0, 1);
  job.Ready("a", 0);
  job.Ready("b", 0);
  CHECK(job.driver.resets() == 1);
  CHECK_FALSE(job.driver.finished());
  job.Exit("b", 0, 1);
  job.Ready("a", 0);
  CHECK(job.workers.stopped.back() == SlotKey{"a", 0});
  job.Exit("a", 0, 143);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.summary() == "stopped because the number of resets exceeded the limit: 1 "
                                "(--reset-limit); last failure: worker b[0] exited with code 1");
  CHECK(job.driver.exit_code() == 1);
}

TEST_CASE("a job stopped by --reset-limit exits with the code of the failure past the limit") {
  // Given failures with codes 3 then 4 and a limit of 1 reset, the job ends with 4, the code of
  // the failure that needed the reset it may not do (issue 13: it used to be 3, the first).
  ElasticOptions o = Job::Options();
  o.reset_limit = 1;
  Job job(o);
  job.Discover("a:1\nb:1\nc:1\n");
  job.Exit("c", 0, 3);
  job.Ready("a", 0);
  job.Ready("b", 0);
  job.Exit("b", 0, 4);
  job.Ready("a", 0);
  job.Exit("a", 0, 143);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 4);
}

TEST_CASE("a blacklisted host comes back after its cooldown, as an added host") {
  Job job;
  job.cooldown = std::pair{10, 100};
  HostManager hosts(job.cooldown, [] { return 0.0; });
  ElasticDriver driver(Job::Options(), &hosts, &job.workers, &job.notifier, &job.store, job.now);
  driver.OnDiscovery(Hosts("a:1\nb:1\n"), job.now);
  job.workers.Exit(driver, {"b", 0}, ExitStatus::Exited(1), job.now);
  driver.RecordReady("a", 0, [](std::optional<SlotInfo>) {});
  CHECK(hosts.IsBlacklisted("b"));
  WorkerRegistration reg;
  reg.host = "a";
  driver.RegisterWorker(reg, [](bool) {});
  driver.OnDiscovery(Hosts("a:1\nb:1\n"), job.now + seconds(19));
  CHECK(job.notifier.notified.empty());
  driver.OnDiscovery(Hosts("a:1\nb:1\n"), job.now + seconds(20));  // 10 * 2^1 + 0
  REQUIRE(job.notifier.notified.size() == 1);
  CHECK(job.notifier.notified[0] == std::pair{SlotKey{"a", 0}, 2});
}

TEST_CASE("a change during a reset is not notified; the new round already reflects it") {
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  job.Exit("b", 0, 1);       // a reset starts
  job.Discover("a:1\nb:1\nc:1\n");
  CHECK(job.notifier.notified.empty());
  auto a = job.Ready("a", 0);
  CHECK(Csv(*a) == "0,2,0,1,0,2");  // b blacklisted, c in
}

TEST_CASE("hosts beyond --max-np change nothing and notify nobody") {
  ElasticOptions o = Job::Options();
  o.max_np = 2;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  job.Discover("a:1\nb:1\nc:4\n");
  CHECK(job.notifier.notified.empty());
}

TEST_CASE("a rank that finishes while others wait in a reset ends the job successfully") {
  Job job;
  job.Discover("a:1\nb:1\n");
  auto a = job.Ready("a", 0);
  job.Exit("b", 0, 0);
  CHECK(Csv(*a) == "-1,-1,-1,-1,-1,-1");
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"a", 0}});
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Exited(134), job.now);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 0);
}

TEST_CASE("a worker silent past the round's deadline is stopped and counted failed") {
  Job job;
  job.Discover("a:1\nb:1\nc:1\n");
  auto a = job.Ready("a", 0);
  auto b = job.Ready("b", 0);
  job.Advance(61);
  CHECK(std::find(job.workers.stopped.begin(), job.workers.stopped.end(), SlotKey{"c", 0}) != job.workers.stopped.end());
  CHECK(job.hosts.IsBlacklisted("c"));
  CHECK(Csv(*a) == "0,2,0,1,0,2");
  CHECK(Csv(*b) == "1,2,0,1,1,2");
}

TEST_CASE("restart mode: a host change stops every worker, then the new world starts afresh") {
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Discover("a:1\nb:1\nc:1\n");
  CHECK(job.notifier.notified.empty());  // torch workers are not notified: they are restarted
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"a", 0}, {"b", 0}});
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.workers.started.size() == 2);  // not before every old worker is gone
  job.workers.Exit(job.driver, {"b", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.StartedNames() == std::vector<std::string>{"a:0=r0", "b:0=r1", "a:0=r0", "b:0=r1", "c:0=r2"});
  CHECK(job.driver.resets() == 1);
  CHECK(job.driver.round() == 2);
  job.Exit("a", 0, 0);
  job.Exit("b", 0, 0);
  CHECK_FALSE(job.driver.finished());
  job.Exit("c", 0, 0);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 0);
}

TEST_CASE("restart mode: a finished job stays finished when a bigger grant comes as its ranks exit 0") {
  // Issue 38 item 5, seen with --pool on an H100: the grant arrives between two ranks' exits.
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Exit("a", 0, 0);
  job.Discover("a:1\nb:1\nc:1\n");
  CHECK(job.workers.stopped.empty());
  CHECK(job.workers.started.size() == 2);
  CHECK_FALSE(job.driver.finished());
  job.Exit("b", 0, 0);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 0);
  CHECK(job.workers.started.size() == 2);  // never started once more
  CHECK(job.driver.resets() == 0);
}

TEST_CASE("restart mode: a grant seen before the finished ranks' exits does not start the world again") {
  // The same race the other way round: the change is handled first (every worker is stopped),
  // then the exits come, with code 0: they had finished training before the stop reached them.
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Discover("a:1\nb:1\nc:1\n");
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"a", 0}, {"b", 0}});
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Exited(0), job.now);
  job.workers.Exit(job.driver, {"b", 0}, ExitStatus::Exited(0), job.now);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 0);
  CHECK(job.workers.started.size() == 2);
}

TEST_CASE("restart mode: a worker that answers the stop with exit 0 is restarted as any other") {
  // A script that checkpoints on SIGTERM and exits 0: its exit came after etrun stopped it.
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Discover("a:1\nb:1\nc:1\n");
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Exited(0), job.now, /*stopped=*/true);
  job.workers.Exit(job.driver, {"b", 0}, ExitStatus::Exited(0), job.now, /*stopped=*/true);
  CHECK_FALSE(job.driver.finished());
  CHECK(job.workers.started.size() == 5);  // the new world of three
  CHECK(job.driver.resets() == 1);
}

TEST_CASE("restart mode: a failure beside a finished rank ends the job with the failure's code") {
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Exit("a", 0, 0);
  job.Exit("b", 0, 5);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 5);
  CHECK(job.driver.summary() == "worker b[0] exited with code 5");
  CHECK(job.workers.started.size() == 2);
}

TEST_CASE("restart mode: a failure restarts everyone, without blacklisting, up to the limit") {
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  o.reset_limit = 1;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.Exit("b", 0, 5);
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"a", 0}});
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Signaled(15), job.now);
  CHECK_FALSE(job.hosts.IsBlacklisted("b"));
  CHECK(job.workers.started.size() == 4);  // both slots again
  job.Exit("a", 0, 6);                      // second failure: the limit of 1 is reached
  CHECK(job.driver.summary() ==
        "worker a[0] exited with code 6, and the number of restarts reached the limit: 1 "
        "(--reset-limit); first failure: worker b[0] exited with code 5");
  job.workers.Exit(job.driver, {"b", 0}, ExitStatus::Signaled(15), job.now);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 6);  // the failure past the limit (issue 13: was b's 5)
}

TEST_CASE("restart mode: an unreachable host is blacklisted and the next world starts without it") {
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  o.np = 2;
  o.min_np = 1;
  Job job(o);
  job.Discover("a:1\nb:1\n");
  job.driver.OnHostUnreachable("b", job.now);
  job.Exit("b", 0, 255);
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.hosts.IsBlacklisted("b"));
  CHECK(job.StartedNames() == std::vector<std::string>{"a:0=r0", "b:0=r1", "a:0=r0"});
  job.Exit("a", 0, 0);
  REQUIRE(job.driver.finished());
  CHECK(job.driver.exit_code() == 0);
}

// The "event" names of captured events, with one detail each, e.g. "round 2 size=2".
std::vector<std::string> EventNames(const etrun::events::EventLog& log) {
  std::vector<std::string> out;
  for (const auto& e : log.captured()) {
    std::string name = e["event"];
    if (name == "round") name += " " + std::to_string(e["round"].get<int>()) + " size=" + std::to_string(e["world_size"].get<int>());
    if (name == "host_blacklisted" || name == "host_resurrected") name += " " + e["host"].get<std::string>();
    if (name == "reset") name += " " + std::to_string(e["resets"].get<int>()) + ": " + e["reason"].get<std::string>();
    if (name == "reset_begin") name += " " + std::to_string(e["round"].get<int>()) + ": " + e["reason"].get<std::string>();
    if (name == "world_ready") name += " " + std::to_string(e["round"].get<int>()) + " size=" + std::to_string(e["world_size"].get<int>());
    if (name == "discovery") name += " " + std::to_string(e["hosts"].size());
    out.push_back(name);
  }
  return out;
}

TEST_CASE("events: discovery changes, rounds, a blacklist and a reset, with exit reasons") {
  etrun::events::EventLog events;
  events.Capture();
  Job job;
  job.driver.set_events(&events);
  job.Discover("a:1\nb:2\nc:1\n");
  job.Discover("a:1\nb:2\nc:1\n");  // unchanged: no event
  CHECK(job.driver.ExitReasonFor({"b", 1}, ExitStatus::Exited(3)) == "failed");
  job.Exit("b", 1, 3);
  job.Ready("a", 0);
  job.Ready("b", 0);
  job.Ready("c", 0);
  // b[0] was released with -1 because its host left the job: drained, not failed or stopped.
  CHECK(job.driver.ExitReasonFor({"b", 0}, ExitStatus::Signaled(15)) == "drained");
  CHECK(EventNames(events) == std::vector<std::string>{
      "discovery 3", "round 1 size=4", "reset_begin 1: worker b[1] failed", "host_blacklisted b",
      "reset 1: worker b[1] failed", "round 2 size=2"});
  const auto& blacklisted = events.captured()[3];
  CHECK(blacklisted["reason"] == "worker b[1] failed");
  CHECK(blacklisted["cooldown_s"].is_null());  // no --blacklist-cooldown-range: for good
  const auto& round2 = events.captured()[5]["assignment"];
  REQUIRE(round2.size() == 2);
  CHECK(round2[1]["host"] == "c");
  CHECK(round2[1]["rank"] == 1);
  job.driver.Abort(130, "received SIGINT");
  CHECK(job.driver.ExitReasonFor({"a", 0}, ExitStatus::Signaled(15)) == "stopped");
}

TEST_CASE("events: a reset without failures names the host change, not an empty worker list") {
  // Found by scripts/soak.sh: a removed host made the reset read "worker  failed".
  etrun::events::EventLog events;
  events.Capture();
  Job job;
  job.driver.set_events(&events);
  job.Discover("a:1\nb:1\nc:1\n");
  job.Register("a", 0);
  job.Discover("a:1\nc:1\n");
  job.Ready("a", 0);
  job.Ready("b", 0);
  job.Ready("c", 0);
  CHECK(EventNames(events) == std::vector<std::string>{
      "discovery 3", "round 1 size=3", "discovery 2",
      "reset_begin 1: worker a[0] left training for a reset", "reset 1: the hosts changed",
      "round 2 size=2"});
}

TEST_CASE("events: training stops at the first reset request and goes on when the world forms") {
  // Given a running world of a and b, when c is added: the first worker asking for its new rank
  // marks reset_begin (once), and the new round's world is ready only when its global
  // rendezvous completes (OnWorldReady, once), not when the round is assigned.
  etrun::events::EventLog events;
  events.Capture();
  Job job;
  job.driver.set_events(&events);
  job.Discover("a:1\nb:1\n");
  CHECK_FALSE(job.driver.world_ready());
  job.driver.OnWorldReady(job.now);
  CHECK(job.driver.world_ready());
  job.Discover("a:1\nb:1\nc:1\n");
  job.Ready("b", 0);
  job.Ready("a", 0);
  CHECK(job.driver.round() == 2);
  CHECK_FALSE(job.driver.world_ready());  // c has not met the others yet
  job.driver.OnWorldReady(job.now);
  job.driver.OnWorldReady(job.now);
  CHECK(job.driver.world_ready());
  CHECK(EventNames(events) == std::vector<std::string>{
      "discovery 2", "round 1 size=2", "world_ready 1 size=2", "discovery 3",
      "reset_begin 1: worker b[0] left training for a reset", "reset 1: the hosts changed",
      "round 2 size=3", "world_ready 2 size=3"});
}

TEST_CASE("events: in restart mode a world is ready once its ranks run, and a restart begins a reset") {
  ElasticOptions o = Job::Options();
  o.restart_all = true;
  etrun::events::EventLog events;
  events.Capture();
  Job job(o);
  job.driver.set_events(&events);
  job.Discover("a:1\nb:1\n");
  CHECK(job.driver.world_ready());
  job.Discover("a:1\n");
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Signaled(15), job.now);
  job.workers.Exit(job.driver, {"b", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(EventNames(events) == std::vector<std::string>{
      "discovery 2", "round 1 size=2", "world_ready 1 size=2", "discovery 1",
      "reset_begin 1: the hosts changed", "reset 1: the hosts changed", "round 2 size=1",
      "world_ready 2 size=1"});
}

TEST_CASE("a failing first grant of any source ends the job in that source's words, with its fix") {
  // Not every source is a script: a pool's or Slurm's failure must not say "fix the script".
  Job pool;
  etrun::discovery::HostGrant refused;
  refused.failure = "pool 'p' answered 500: book inconsistent";
  refused.fix = "see `etrun pool status p` and the pool's log";
  pool.driver.OnDiscovery(refused, pool.now);
  REQUIRE(pool.driver.finished());
  CHECK(pool.driver.summary() ==
        "pool 'p' answered 500: book inconsistent: see `etrun pool status p` and the pool's log");

  Job slurm;
  etrun::discovery::HostGrant gone;
  gone.failure = "Slurm job 12 is gone: its allocation has no nodes to run on";
  slurm.driver.OnDiscovery(gone, slurm.now);
  REQUIRE(slurm.driver.finished());
  CHECK(slurm.driver.summary() == "Slurm job 12 is gone: its allocation has no nodes to run on");
}

TEST_CASE("events: a failed discovery run is reported and the hosts are kept") {
  etrun::events::EventLog events;
  events.Capture();
  Job job;
  job.driver.set_events(&events);
  job.Discover("a:2\n");
  etrun::discovery::ScriptResult bad;
  bad.ok = false;
  bad.failure = "exit code 3";
  bad.errors = "scheduler down\n";
  job.driver.OnDiscovery(Script(bad), job.now);
  REQUIRE(events.captured().size() == 3);
  CHECK(events.captured()[2]["event"] == "discovery_failed");
  CHECK(events.captured()[2]["reason"] == "the host discovery script failed (exit code 3): scheduler down");
}

TEST_CASE("scale: an added host overrides discovery until the override changes") {
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  etrun::launcher::HostOverrides add;
  add.add["c"] = 1;
  job.driver.SetOverrides(add, job.now);  // applied at once, not at the next discovery
  REQUIRE(job.notifier.notified.size() == 1);
  CHECK(job.notifier.notified[0] == std::pair{SlotKey{"a", 0}, 2});  // added
  job.Ready("a", 0);
  job.Ready("b", 0);
  CHECK(job.StartedNames() == std::vector<std::string>{"a:0=r0", "b:0=r1", "c:0=r2"});
  job.Discover("a:1\nb:1\n");  // the script does not know c: the override keeps it
  CHECK(job.driver.assignment().size() == 3);
}

TEST_CASE("scale: removing a host drains its worker; --to caps the world size") {
  Job job;
  job.Discover("a:1\nb:1\nc:1\n");
  job.Register("a", 0);
  etrun::launcher::HostOverrides remove;
  remove.remove = {"c"};
  job.driver.SetOverrides(remove, job.now);
  REQUIRE(job.notifier.notified.size() == 1);
  CHECK(job.notifier.notified[0] == std::pair{SlotKey{"a", 0}, 1});  // removed
  job.Ready("a", 0);
  job.Ready("b", 0);
  auto c = job.Ready("c", 0);
  CHECK(Csv(*c) == "-1,-1,-1,-1,-1,-1");
  CHECK(job.driver.WorkerState({"c", 0}) == "draining");
  job.workers.Exit(job.driver, {"c", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.driver.assignment().size() == 2);
  job.Register("a", 0);
  etrun::launcher::HostOverrides to;
  to.remove = {"c"};
  to.to = 1;
  job.driver.SetOverrides(to, job.now);  // no host change, but a smaller world: notified
  REQUIRE(job.notifier.notified.size() == 2);
  CHECK(job.notifier.notified[1] == std::pair{SlotKey{"a", 0}, 1});
  auto a = job.Ready("a", 0);
  auto b = job.Ready("b", 0);
  CHECK(Csv(*a) == "0,1,0,1,0,1");
  CHECK(Csv(*b) == "-1,-1,-1,-1,-1,-1");
  CHECK(job.driver.assignment().size() == 1);
}

TEST_CASE("crash recovery: a survivor stuck in a collective is replaced, and rank 0 goes to the one that came back") {
  // Given a:2, b:1 with --recovery-grace 2 s: b[0] (rank 2) dies; a[1] (rank 1, its ring
  // sender) comes back at once; a[0] (rank 0, its ring receiver) stays blocked in a recv.
  ElasticOptions o = Job::Options();
  o.np = 3;
  o.recovery_grace = std::chrono::milliseconds(2000);
  Job job(o);
  job.Discover("a:2\nb:1\n");
  REQUIRE(job.StartedNames() == std::vector<std::string>{"a:0=r0", "a:1=r1", "b:0=r2"});
  job.Exit("b", 0, 137);
  auto a1 = job.Ready("a", 1);
  job.Advance(1);
  CHECK(job.workers.stopped.empty());  // within the grace: a[0] may still come back
  job.Advance(1);
  // Past the grace: a[0] is stopped (not blacklisted: it did not fail), the round decided.
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"a", 0}});
  CHECK(job.driver.ExitReasonFor({"a", 0}, ExitStatus::Signaled(15)) == "stopped");
  CHECK(job.hosts.IsBlacklisted("b"));
  CHECK_FALSE(job.hosts.IsBlacklisted("a"));
  CHECK(job.driver.round() == 2);
  // The survivor that came back holds the committed state: it is rank 0 now, though it sits in
  // a's second slot; the fresh process for a[0] becomes rank 1.
  CHECK(Csv(*a1) == "0,2,1,2,0,1");
  CHECK(job.driver.assignment().front().hostname == "a");
  CHECK(job.driver.assignment().front().local_rank == 1);
  // a[0]'s slot starts afresh once its old process is gone, with the round's environment.
  CHECK(job.StartedNames().size() == 3);
  job.workers.Exit(job.driver, {"a", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.StartedNames().back() == "a:0=r1");
  CHECK_FALSE(job.driver.finished());
}

TEST_CASE("a slot that cannot start again for lack of etrun's resources leaves the world at the next reset, blaming no host") {
  // Given a:2, b:1 with --recovery-grace: b[0] dies, a[0] comes back, a[1] stays stuck and is
  // replaced, so round 2 waits for a[1]'s old process to go before starting its slot; then etrun
  // has no room left for it. Nothing is blacklisted for that: the slot counts as not started,
  // and once the survivor comes back the next round keeps to the one rank that runs.
  ElasticOptions o = Job::Options();
  o.np = 3;
  o.recovery_grace = std::chrono::milliseconds(2000);
  Job job(o);
  job.Discover("a:2\nb:1\n");
  job.Exit("b", 0, 137);
  auto a0 = job.Ready("a", 0);
  job.Advance(2);
  REQUIRE(job.driver.round() == 2);
  CHECK(Csv(*a0) == "0,2,0,2,0,1");
  job.workers.short_after = 3;
  job.workers.Exit(job.driver, {"a", 1}, ExitStatus::Signaled(15), job.now);
  CHECK(job.StartedNames().size() == 3);
  CHECK_FALSE(job.hosts.IsBlacklisted("a"));
  CHECK_FALSE(job.driver.finished());
  auto again = job.Ready("a", 0);  // the survivor's collective failed without its peer
  REQUIRE(job.driver.round() == 3);
  CHECK(Csv(*again) == "0,1,0,1,0,1");
  CHECK(job.StartedNames().size() == 3);
  CHECK_FALSE(job.hosts.IsBlacklisted("a"));
  job.Discover("a:2\nb:1\nc:4\n");  // more slots change nothing: the job keeps to 1 rank
  CHECK(job.StartedNames().size() == 3);
  CHECK(job.driver.assignment().size() == 1);
  CHECK_FALSE(job.driver.finished());
}

TEST_CASE("crash recovery waits as before when no survivor came back, and is off at 0") {
  ElasticOptions o = Job::Options();
  o.np = 3;
  o.recovery_grace = std::chrono::milliseconds(2000);
  Job job(o);
  job.Discover("a:2\nb:1\n");
  job.Exit("b", 0, 137);
  job.Advance(5);
  CHECK(job.workers.stopped.empty());  // nobody holds the state in hand: no replacement
  job.Ready("a", 1);
  job.Advance(1);
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"a", 0}});  // now there is one

  o.recovery_grace = std::chrono::milliseconds(0);
  Job off(o);
  off.Discover("a:2\nb:1\n");
  off.Exit("b", 0, 137);
  off.Ready("a", 1);
  off.Advance(30);
  CHECK(off.workers.stopped.empty());
  CHECK(off.driver.round() == 1);
}

TEST_CASE("a fresh process never gets rank 0 while a worker holding the state is in the world") {
  // Given a:1, b:1 where a[0] is drained (removed) and comes back in the same round change: the
  // survivor b[0] keeps rank 0; with a alone left, nothing to swap.
  Job job;
  job.Discover("a:1\nb:1\n");
  job.Register("a", 0);
  job.Discover("c:1\nb:1\n");  // a leaves, c comes: c is first in the host order
  auto a = job.Ready("a", 0);
  auto b = job.Ready("b", 0);
  CHECK(Csv(*a) == "-1,-1,-1,-1,-1,-1");
  REQUIRE(job.driver.round() == 2);
  CHECK(Csv(*b) == "0,2,0,1,0,2");  // b, not the new c, is rank 0
  CHECK(job.StartedNames().back() == "c:0=r1");
}

// Makes `job` a training world of a:1 and b:1: formed, its rank 0 registered.
void StartTraining(Job* job) {
  job->Discover("a:1\nb:1\n");
  job->driver.OnWorldReady(job->now);
  job->Register("a", 0);
}

TEST_CASE("scale-up: new workers start ahead with the next round's ranks, rank 0 is told once they are in") {
  // Given a training world of a and b, when c is added: c starts at once as rank 2 of round 2
  // while a and b train; the notification waits for c's first rendezvous request; the round
  // then opens exactly as planned, without starting c again or wiping what it put.
  Job job;
  StartTraining(&job);
  job.Discover("a:1\nb:1\nc:1\n");
  REQUIRE(job.StartedNames() == std::vector<std::string>{"a:0=r0", "b:0=r1", "c:0=r2"});
  CHECK(job.workers.rounds.back() == 2);
  CHECK(job.driver.round() == 1);
  CHECK(job.notifier.notified.empty());
  job.store.Put("global", "rank_2", "c's host");  // what c's first request does
  job.driver.OnWorkerArrived(2, job.now);
  REQUIRE(job.notifier.notified.size() == 1);  // one notification for the change
  auto a = job.Ready("a", 0);
  auto b = job.Ready("b", 0);
  CHECK(job.driver.round() == 2);
  CHECK(Csv(*a) == "0,3,0,1,0,3");
  CHECK(Csv(*b) == "1,3,0,1,1,3");
  CHECK(job.StartedNames().size() == 3);
  CHECK(job.store.Get("global", "rank_2") == "c's host");
  CHECK(job.store.planned_size("global") == 3);
  CHECK(job.notifier.notified.size() == 1);
}

TEST_CASE("a worker started ahead that fails is dropped without disturbing the world") {
  Job job;
  StartTraining(&job);
  job.Discover("a:1\nb:1\nc:1\n");
  job.Exit("c", 0, 1);
  CHECK(job.hosts.IsBlacklisted("c"));
  CHECK(job.notifier.notified.empty());  // a and b were never told
  CHECK(job.driver.round() == 1);
  CHECK(job.driver.state() == "running");
  CHECK_FALSE(job.driver.finished());
  job.Advance(60);
  CHECK(job.notifier.notified.empty());
}

TEST_CASE("a worker started ahead that never makes a request within --start-timeout is dropped") {
  ElasticOptions o = Job::Options();
  o.start_timeout = std::chrono::milliseconds(30000);
  Job job(o);
  StartTraining(&job);
  job.Discover("a:1\nb:1\nc:1\n");
  job.Advance(29);
  CHECK(job.workers.stopped.empty());
  job.Advance(1);
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"c", 0}});
  CHECK(job.hosts.IsBlacklisted("c"));
  CHECK(job.notifier.notified.empty());
  job.workers.Exit(job.driver, {"c", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.driver.round() == 1);
  CHECK_FALSE(job.driver.finished());
}

TEST_CASE("another change while workers start ahead re-plans; one notification in all") {
  Job job;
  StartTraining(&job);
  job.Discover("a:1\nb:1\nc:1\n");
  job.Discover("a:1\nb:1\nc:1\nd:1\n");  // c was started for a world of 3: replaced
  CHECK(job.workers.stopped == std::vector<SlotKey>{{"c", 0}});
  CHECK(job.StartedNames().back() == "d:0=r3");
  job.workers.Exit(job.driver, {"c", 0}, ExitStatus::Signaled(15), job.now);
  CHECK(job.notifier.notified.empty());
  job.driver.OnWorkerArrived(3, job.now);
  CHECK(job.notifier.notified.size() == 1);
  job.Ready("a", 0);
  job.Ready("b", 0);
  CHECK(job.driver.round() == 2);
  CHECK(job.StartedNames().back() == "c:0=r2");  // c starts with the round it belongs to
  CHECK(job.notifier.notified.size() == 1);
}

TEST_CASE("without a formed world, or when hosts leave, the change is notified at once as before") {
  Job forming;
  forming.Discover("a:1\nb:1\n");
  forming.Register("a", 0);
  forming.Discover("a:1\nb:1\nc:1\n");  // round 1 never formed: no start ahead
  CHECK(forming.notifier.notified.size() == 1);
  CHECK(forming.StartedNames().size() == 2);

  Job mixed;
  StartTraining(&mixed);
  mixed.Discover("a:1\nc:1\n");  // b leaves, c comes
  CHECK(mixed.notifier.notified.size() == 1);
  CHECK(mixed.StartedNames().size() == 2);
}

TEST_CASE("workers started ahead for a plan that changed leave none of their keys to the next round") {
  // Found by scripts/soak.sh: c and d arrived (rank 2 and 3 of a world of 4) and rank 0 was
  // told; then e was added, c and d were replaced, and the round opened with their old mesh
  // addresses still in the store: every rank failed to connect.
  Job job;
  StartTraining(&job);
  job.Discover("a:1\nb:1\nc:1\nd:1\n");
  for (int rank : {2, 3}) {
    job.store.Put("global", "rank_" + std::to_string(rank), "old host");
    job.store.Put("global", std::to_string(rank), "old mesh addresses");
    job.driver.OnWorkerArrived(rank, job.now);
  }
  REQUIRE(job.notifier.notified.size() == 1);
  job.Discover("a:1\nb:1\nc:1\nd:1\ne:1\n");
  CHECK_FALSE(job.store.Get("global", "2").has_value());
  CHECK_FALSE(job.store.Get("global", "rank_3").has_value());
  job.workers.Exit(job.driver, {"c", 0}, ExitStatus::Signaled(15), job.now);
  job.workers.Exit(job.driver, {"d", 0}, ExitStatus::Signaled(15), job.now);
  job.Ready("a", 0);
  job.Ready("b", 0);
  REQUIRE(job.driver.round() == 2);
  CHECK(job.driver.assignment().size() == 5);
  CHECK_FALSE(job.store.Get("global", "2").has_value());  // c and d start afresh for round 2
  CHECK(job.StartedNames().size() == 7);
}

TEST_CASE("a lost host that left for good is not blacklisted again when its worker's exit is decided") {
  // Seen in test_slurm under load: h3 set DOWN was blacklisted as unreachable, left the
  // allocation (its blacklist forgotten, as a source that forgets departed hosts says), and its
  // worker's late failure blacklisted it a second time. A host that is gone is past blacklisting.
  etrun::events::EventLog events;
  events.Capture();
  Job job;
  job.hosts.set_forget_departed(true);
  job.driver.set_events(&events);
  job.Discover("a:1\nb:1\n");
  job.driver.OnHostUnreachable("b", job.now);
  job.Discover("a:1\n");
  job.Exit("b", 0, 255);
  job.Ready("a", 0);
  std::vector<std::string> reasons;
  for (const auto& e : events.captured()) {
    if (e["event"] == "host_blacklisted") reasons.push_back(e["host"].get<std::string>() + ": " + e["reason"].get<std::string>());
  }
  CHECK(reasons == std::vector<std::string>{"b: cannot be reached"});
  CHECK(job.driver.assignment().size() == 1);
}
