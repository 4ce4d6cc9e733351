// The pool's book (pool/pool_state.h): jobs simulated by their reports. A simulated job runs a
// process on every slot of its grant and stops the ones the grant no longer has only at its next
// report (drain at the next commit), which is what the real elastic path does.
#include "pool/pool_state.h"

#include <random>

#include <doctest/doctest.h>

#include "events/schema.h"
#include "slurm/kind.h"

using etrun::pool::Book;
using etrun::pool::Grant;
using etrun::pool::HostLists;
using etrun::pool::JoinRequest;
using etrun::pool::PoolHost;
using etrun::pool::PoolState;
using etrun::pool::PoolTime;
using namespace std::chrono_literals;

namespace {

struct Recorder {
  std::vector<std::pair<std::string, nlohmann::json>> events;
  PoolState::EventSink sink() {
    return [this](const char* event, nlohmann::json fields) { events.emplace_back(event, fields); };
  }
  int Count(const std::string& event) const {
    int n = 0;
    for (const auto& [e, f] : events) n += e == event;
    return n;
  }
};

// A job as the pool sees it: local ranks alive per host. Sync reports them, then applies the
// grant: new slots start, slots gone stop (they show up as gone at the following report).
struct FakeJob {
  std::string id;
  HostLists live;
  Grant grant;

  int Running() const {
    int n = 0;
    for (const auto& [host, ranks] : live) n += static_cast<int>(ranks.size());
    return n;
  }
  void Sync(PoolState* pool, PoolTime now) {
    std::string err;
    REQUIRE(pool->Sync(id, live, grant.version, now, &grant, &err));
    live.clear();
    for (const Grant::Host& h : grant.hosts) {
      for (size_t k = 0; k < h.slots.size(); ++k) live[h.name].push_back(static_cast<int>(k));
    }
  }
};

JoinRequest Request(const std::string& name, int min_np, int max_np, int priority = 5000) {
  JoinRequest r;
  r.name = name;
  r.min_np = min_np;
  r.max_np = max_np;
  r.priority = priority;
  return r;
}

// Slots that two simulated jobs use at once (host/slot of live processes), via their grants.
bool Overlap(const std::vector<FakeJob*>& jobs, std::string* which) {
  std::map<std::pair<std::string, int>, std::string> owner;
  for (const FakeJob* j : jobs) {
    for (const Grant::Host& h : j->grant.hosts) {
      auto live = j->live.find(h.name);
      for (size_t k = 0; k < h.slots.size(); ++k) {
        if (live == j->live.end()) continue;
        auto [it, fresh] = owner.emplace(std::make_pair(h.name, h.slots[k]), j->id);
        if (!fresh) {
          *which = h.name + "/" + std::to_string(h.slots[k]) + ": " + it->second + " and " + j->id;
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

TEST_CASE("pool: WMLA's scenario, shrink first: 8; 4/4; 5/3; 8, no slot in two jobs") {
  Recorder rec;
  PoolState pool("gpus", 1, 0ms, rec.sink());
  PoolTime t{};
  pool.SetHosts({{"localhost", 8, {}}}, t);
  std::string err;
  FakeJob one{pool.Join(Request("train1", 1, 8), t, &err), {}, {}};
  REQUIRE(one.id == "train1");
  one.Sync(&pool, t);
  CHECK(one.grant.total() == 8);
  CHECK(one.Running() == 8);

  FakeJob two{pool.Join(Request("train2", 1, 8), t, &err), {}, {}};
  two.Sync(&pool, t);
  CHECK(two.grant.total() == 0);  // train1 still runs on all 8: nothing is free yet
  CHECK(two.grant.target == 4);
  one.Sync(&pool, t);             // train1 learns its grant is 4 and drains 4 ranks
  CHECK(one.grant.total() == 4);
  two.Sync(&pool, t);
  CHECK(two.grant.total() == 0);  // train1's drained ranks are not reported gone yet
  one.Sync(&pool, t);             // now they are
  two.Sync(&pool, t);
  CHECK(two.grant.total() == 4);
  std::string which;
  CHECK_FALSE(Overlap({&one, &two}, &which));

  REQUIRE(pool.SetPriority("train2", 10000, t, &err));
  one.Sync(&pool, t);
  one.Sync(&pool, t);
  two.Sync(&pool, t);
  CHECK(one.grant.total() == 3);
  CHECK(two.grant.total() == 5);
  CHECK_FALSE(Overlap({&one, &two}, &which));

  REQUIRE(pool.Leave("train1", etrun::events::kEnded, t));
  two.Sync(&pool, t);
  CHECK(two.grant.total() == 8);
  CHECK(pool.Consistent(&err));
  CHECK(rec.Count(etrun::events::kPoolJobLeft) == 1);
  CHECK(rec.Count(etrun::events::kPoolPriority) == 1);
  // The last allocation event: train2 holds all 8.
  nlohmann::json last;
  for (const auto& [e, f] : rec.events) {
    if (e == etrun::events::kPoolAllocation) last = f;
  }
  CHECK(last["held"] == nlohmann::json({{"train2", 8}}));
}

TEST_CASE("pool: a job gets nothing until its whole minimum is free (gang), queued in order") {
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"a", 4, {}}, {"b", 4, {}}}, t);
  std::string err;
  FakeJob big{pool.Join(Request("big", 6, 8), t, &err), {}, {}};
  big.Sync(&pool, t);
  CHECK(big.grant.total() == 8);
  FakeJob wide{pool.Join(Request("wide", 4, 4), t, &err), {}, {}};
  wide.Sync(&pool, t);
  CHECK(wide.grant.queued);  // 6 + 4 > 8: waits rather than starting short
  CHECK(wide.grant.total() == 0);
  FakeJob small{pool.Join(Request("small", 2, 2), t, &err), {}, {}};
  small.Sync(&pool, t);
  CHECK(small.grant.queued);  // no overtaking of the queued job ahead of it
  REQUIRE(pool.Leave("big", etrun::events::kCrashed, t));
  wide.Sync(&pool, t);
  small.Sync(&pool, t);
  CHECK(wide.grant.total() == 4);
  CHECK(small.grant.total() == 2);
  nlohmann::json status = pool.Status(t);
  CHECK(status["free"] == 2);
}

TEST_CASE("pool: a job that just grew is not shrunk before the minimum hold") {
  PoolState pool("p", 1, 10s, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"h", 8, {}}}, t);
  std::string err;
  FakeJob one{pool.Join(Request("one", 1, 8), t, &err), {}, {}};
  one.Sync(&pool, t);
  FakeJob two{pool.Join(Request("two", 1, 8), t + 2s, &err), {}, {}};
  one.Sync(&pool, t + 3s);
  CHECK(one.grant.total() == 8);  // grew at t: held until t + 10 s
  pool.Tick(t + 11s);
  one.Sync(&pool, t + 11s);
  CHECK(one.grant.total() == 4);
  one.Sync(&pool, t + 12s);
  two.Sync(&pool, t + 12s);
  CHECK(two.grant.total() == 4);
}

TEST_CASE("pool: GPU devices per slot; ranks-per-gpu shares a device among slots") {
  PoolState pool("p", 2, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"h", 4, {"GPU-a", "GPU-b"}}}, t);
  std::string err;
  FakeJob one{pool.Join(Request("one", 1, 3), t, &err), {}, {}};
  one.Sync(&pool, t);
  REQUIRE(one.grant.hosts.size() == 1);
  CHECK(one.grant.hosts[0].devices == std::vector<std::string>{"GPU-a", "GPU-a", "GPU-b"});
  FakeJob two{pool.Join(Request("two", 1, 1), t, &err), {}, {}};
  one.Sync(&pool, t);
  two.Sync(&pool, t);
  REQUIRE(two.grant.hosts.size() == 1);
  CHECK(two.grant.hosts[0].devices == std::vector<std::string>{"GPU-b"});
}

TEST_CASE("pool: a status asked before the first allocation shows the pool, nothing queued") {
  // `etrun pool status` right after `pool start`, before any host or job: it threw (value() of
  // the null allocation), found in review.
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  nlohmann::json status = pool.Status(PoolTime{});
  CHECK(status["pool"] == "p");
  CHECK(status["queued"] == nlohmann::json::array());
  CHECK(status["total"] == 0);
}

TEST_CASE("pool: each grant says how its hosts' ranks start; the status shows it") {
  // Given a pool inside Slurm (every host through srun) but h3 without a template, a job's
  // grant carries each held host's template, and none for h3.
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  const std::string srun = "srun --overlap --jobid=7 --nodes=1 --ntasks=1 --nodelist={host} --quiet";
  const etrun::discovery::StartRoute route{srun, &etrun::slurm::kKind, false};
  pool.SetHosts({{"h1", 1, {}, route}, {"h2", 1, {}, route}, {"h3", 1, {}, {}}}, t);
  std::string err;
  FakeJob job{pool.Join(Request("job", 1, 3), t, &err), {}, {}};
  job.Sync(&pool, t);
  REQUIRE(job.grant.hosts.size() == 3);
  for (const Grant::Host& h : job.grant.hosts) {
    CAPTURE(h.name);
    CHECK(h.start_through == (h.name == "h3" ? "" : srun));
    CHECK(h.start_kind == (h.name == "h3" ? "" : "slurm"));
  }
  nlohmann::json hosts = pool.Status(t)["hosts"];
  CHECK(hosts[0]["start_through"] == srun);
  CHECK_FALSE(hosts[2].contains("start_through"));
}

TEST_CASE("pool: re-registration keeps free slots, cuts at a taken one") {
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"h", 4, {}}}, t);
  std::string err;
  JoinRequest first = Request("a", 1, 2);
  first.held = {{"h", {0, 1}}};
  FakeJob a{pool.Join(first, t, &err), {}, {}};
  a.live = {{"h", {0, 1}}};
  JoinRequest second = Request("b", 1, 4);
  second.held = {{"h", {2, 1, 3}}};  // slot 1 is a's: b keeps local rank 0; rank 2 drains slot 3
  FakeJob b{pool.Join(second, t, &err), {}, {}};
  b.live = {{"h", {0, 1, 2}}};
  a.Sync(&pool, t);
  b.Sync(&pool, t);
  CHECK(pool.Consistent(&err));
  CHECK(a.grant.total() == 2);
  REQUIRE(b.grant.hosts.size() == 1);
  CHECK(b.grant.hosts[0].slots == std::vector<int>{2});  // no growth there while rank 2 drains
  CHECK(pool.Status(t)["free"] == 0);                    // slot 3 is still b's
  b.Sync(&pool, t);                                      // rank 2 is gone now
  CHECK(b.grant.hosts[0].slots == std::vector<int>{2, 3});
  CHECK(pool.Join(Request("bad", 3, 2), t, &err).empty());
  CHECK(err.find("min-np") != std::string::npos);
  CHECK_FALSE(pool.SetPriority("nope", 10, t, &err));
  CHECK(err.find("no job 'nope'") != std::string::npos);
  CHECK_FALSE(pool.SetPriority("a", 0, t, &err));
}

TEST_CASE("pool: a host that leaves takes its slots out of every job") {
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"a", 2, {}}, {"b", 2, {}}}, t);
  std::string err;
  FakeJob j{pool.Join(Request("j", 1, 4), t, &err), {}, {}};
  j.Sync(&pool, t);
  CHECK(j.grant.total() == 4);
  pool.SetHosts({{"a", 1, {}}}, t);
  CHECK(pool.Consistent(&err));
  j.Sync(&pool, t);
  CHECK(j.grant.total() == 1);
  CHECK(pool.total() == 1);
}

TEST_CASE("pool property: random arrivals, ends, crashes and priorities never double-book") {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 200; ++trial) {
    PoolState pool("p", 1, std::chrono::milliseconds(rng() % 3 * 1000), [](const char*, nlohmann::json) {});
    PoolTime t{};
    pool.SetHosts({{"a", 1 + static_cast<int>(rng() % 6), {}}, {"b", static_cast<int>(rng() % 6), {}}}, t);
    std::vector<FakeJob> jobs;
    jobs.reserve(64);
    for (int step = 0; step < 120; ++step) {
      t += std::chrono::milliseconds(rng() % 700);
      std::string err;
      switch (rng() % 8) {
        case 0: {
          int min_np = 1 + static_cast<int>(rng() % 3);
          std::string id = pool.Join(Request("j" + std::to_string(step), min_np,
                                             min_np + static_cast<int>(rng() % 5),
                                             1000 + static_cast<int>(rng() % 9000)),
                                     t, &err);
          REQUIRE(!id.empty());
          jobs.push_back({id, {}, {}});
          break;
        }
        case 1:
          if (!jobs.empty()) {
            size_t k = rng() % jobs.size();
            pool.Leave(jobs[k].id, rng() % 2 ? etrun::events::kEnded : etrun::events::kCrashed, t);
            jobs.erase(jobs.begin() + static_cast<long>(k));
          }
          break;
        case 2:
          if (!jobs.empty()) pool.SetPriority(jobs[rng() % jobs.size()].id, 1 + static_cast<int>(rng() % 20000), t, &err);
          break;
        case 3:
          pool.SetHosts({{"a", 1 + static_cast<int>(rng() % 6), {}}, {"b", static_cast<int>(rng() % 6), {}}}, t);
          break;
        default:
          if (!jobs.empty()) jobs[rng() % jobs.size()].Sync(&pool, t);
          pool.Tick(t);
      }
      std::string why;
      REQUIRE_MESSAGE(pool.Consistent(&why), why);
      std::vector<FakeJob*> all;
      for (FakeJob& j : jobs) all.push_back(&j);
      REQUIRE_MESSAGE(!Overlap(all, &why), why);
    }
  }
}

TEST_CASE("pool: a restarted pool keeps the old jobs' slots until they join again") {
  PoolState first("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  first.SetHosts({{"h", 4, {}}}, t);
  std::string err;
  JoinRequest a = Request("a", 1, 4);
  a.pid = 100;
  a.pid_start = 5000;
  FakeJob old{first.Join(a, t, &err), {}, {}};
  old.Sync(&first, t);
  REQUIRE(old.grant.total() == 4);
  Book book = first.Holdings();

  PoolState second("p", 1, 0ms, [](const char*, nlohmann::json) {});
  second.SetHosts({{"h", 4, {}}}, t);
  second.Restore(book, t);
  // A new job arriving first gets nothing: the old job's processes still run on all 4.
  FakeJob fresh{second.Join(Request("b", 1, 4), t, &err), {}, {}};
  fresh.Sync(&second, t);
  CHECK(fresh.grant.total() == 0);
  CHECK(second.Status(t)["jobs"][0]["state"] == "rejoining");
  // Another process given the old job's pid since is not the old job: a new one, with nothing.
  JoinRequest impostor = a;
  impostor.name = "c";
  impostor.pid_start = 6000;
  impostor.held = {};
  CHECK(second.Join(impostor, t, &err) == "c");
  CHECK(second.Status(t)["jobs"][0]["state"] == "rejoining");
  CHECK(second.Leave("c", "ended", t));
  // The old job joins again (same pid and start): same id, same slots, then the fair share.
  JoinRequest again = a;
  again.held = {{"h", {3}}};  // its own idea is older than the book's: the book wins
  CHECK(second.Join(again, t, &err) == "a");
  old.Sync(&second, t);
  CHECK(old.grant.total() == 2);
  old.Sync(&second, t);
  fresh.Sync(&second, t);
  CHECK(fresh.grant.total() == 2);
  std::vector<FakeJob*> both{&old, &fresh};
  std::string which;
  CHECK_FALSE(Overlap(both, &which));
  CHECK(second.Consistent(&err));
  // A placeholder nobody claims is dropped by the daemon: by its pid, or after a lease.
  PoolState third("p", 1, 0ms, [](const char*, nlohmann::json) {});
  third.SetHosts({{"h", 4, {}}}, t);
  third.Restore(second.Holdings(), t);
  REQUIRE(third.LocalJobs().size() == 1);  // "a": its process is watched
  CHECK(third.LocalJobs()[0].pid == 100);
  CHECK(third.LocalJobs()[0].pid_start == 5000);
  CHECK(third.RemoteJobs().size() == 1);  // "b" (no pid): a lease
}

TEST_CASE("pool: a job joining a pool that lost its book keeps the slots it still drains") {
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"h", 4, {}}}, t);
  std::string err;
  JoinRequest a = Request("a", 1, 1);
  a.held = {{"h", {0}}};
  a.releasing = {{"h", 1, 2}};  // local rank 1 still runs on slot 2
  FakeJob job{pool.Join(a, t, &err), {{"h", {0, 1}}}, {}};
  FakeJob other{pool.Join(Request("b", 2, 3), t, &err), {}, {}};
  other.Sync(&pool, t);
  REQUIRE(other.grant.total() == 2);  // slots 1 and 3: slot 2 is still a's
  CHECK(std::find(other.grant.hosts[0].slots.begin(), other.grant.hosts[0].slots.end(), 2) ==
        other.grant.hosts[0].slots.end());
  job.Sync(&pool, t);  // a's local rank 1 is gone now
  job.Sync(&pool, t);
  other.Sync(&pool, t);
  CHECK(other.grant.total() == 3);
  CHECK(pool.Consistent(&err));
}

TEST_CASE("pool: ids are safe in URLs and file names; a restored job on a host that left drains") {
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"h", 2, {}}, {"g", 2, {}}}, t);
  std::string err;
  CHECK(pool.Join(Request("exp/1 run", 1, 4), t, &err) == "exp_1_run");
  Book book = pool.Holdings();
  PoolState next("p", 1, 0ms, [](const char*, nlohmann::json) {});
  next.SetHosts({{"h", 2, {}}}, t);  // g is gone
  next.Restore(book, t);
  nlohmann::json status = next.Status(t);
  REQUIRE(status["jobs"].size() == 1);
  CHECK(status["jobs"][0]["held"] == 2);
  CHECK(status["jobs"][0]["releasing"] == 2);  // g's slots: its ranks there still drain
  CHECK(next.Consistent(&err));
}

TEST_CASE("pool: a slot given back is free only once the job saw the grant without it") {
  PoolState pool("p", 1, 0ms, [](const char*, nlohmann::json) {});
  PoolTime t{};
  pool.SetHosts({{"h", 2, {}}}, t);
  std::string err;
  FakeJob a{pool.Join(Request("a", 1, 2), t, &err), {}, {}};
  a.Sync(&pool, t);
  REQUIRE(a.grant.total() == 2);
  FakeJob b{pool.Join(Request("b", 1, 1), t, &err), {}, {}};  // a must give back local rank 1
  // a's rank 1 crashes before a saw its new grant: a reports it gone, with the old version. Its
  // driver could still restart rank 1 from the old grant, so the slot stays a's.
  Grant stale;
  REQUIRE(pool.Sync("a", {{"h", {0}}}, a.grant.version, t, &stale, &err));
  b.Sync(&pool, t);
  CHECK(b.grant.total() == 0);
  CHECK(stale.version > a.grant.version);
  // Once a applied the new grant (its next report carries that version), the slot is b's.
  REQUIRE(pool.Sync("a", {{"h", {0}}}, stale.version, t, &stale, &err));
  b.Sync(&pool, t);
  CHECK(b.grant.total() == 1);
}
