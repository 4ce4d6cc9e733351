// The pool's wire format (pool/pool_wire.h): every message written and read back, its exact
// bytes pinned (a job and a pool of one version must agree on them), and malformed bodies
// refused without an exception.
#include "pool/pool_wire.h"

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "pool/pool_state.h"

using etrun::pool::Book;
using etrun::pool::BookJob;
using etrun::pool::Grant;
using etrun::pool::HostLists;
using etrun::pool::JoinReply;
using etrun::pool::JoinRequest;
using etrun::pool::PoolState;
using etrun::pool::PoolTime;
using etrun::pool::PriorityRequest;
using etrun::pool::Releasing;
using etrun::pool::SyncRequest;
using nlohmann::json;
namespace wire = etrun::pool;

namespace {

json Parse(const std::string& text) { return json::parse(text); }

// A table row: a body and why it is not the message.
struct Bad {
  std::string body;
  std::string why;
};

void CheckSameReleasing(const std::vector<Releasing>& a, const std::vector<Releasing>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].host == b[k].host);
    CHECK(a[k].local_rank == b[k].local_rank);
    CHECK(a[k].slot == b[k].slot);
    CHECK(a[k].version == b[k].version);
  }
}

}  // namespace

TEST_CASE("pool wire: host lists go both ways and only as host -> small non-negative integers") {
  // Given lists of two hosts, they come back equal; any other shape is refused.
  HostLists lists{{"a", {0, 3}}, {"b", {}}};
  json j = wire::HostListsToJson(lists);
  CHECK(j.dump() == R"({"a":[0,3],"b":[]})");
  HostLists back;
  REQUIRE(wire::HostListsFromJson(j, &back));
  CHECK(back == lists);
  const Bad bad[] = {
      {"[]", "not an object"},
      {R"({"a": 1})", "a list that is no array"},
      {R"({"a": ["1"]})", "a string"},
      {R"({"a": [1.5]})", "a fraction"},
      {R"({"a": [true]})", "a bool"},
      {R"({"a": [-1]})", "negative"},
      {R"({"a": [2147483648]})", "past INT32_MAX"},
      {R"({"a": [18446744073709551615]})", "past INT64_MAX"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    HostLists out;
    bool ok = true;
    CHECK_NOTHROW(ok = wire::HostListsFromJson(Parse(b.body), &out));
    CHECK_FALSE(ok);
  }
}

TEST_CASE("pool wire: a releasing entry has three fields in a join and four in the book") {
  Releasing r{"h", 1, 2, 7};
  CHECK(wire::ReleasingToJson(r, false).dump() == R"(["h",1,2])");
  CHECK(wire::ReleasingToJson(r, true).dump() == R"(["h",1,2,7])");
  Releasing back;
  REQUIRE(wire::ReleasingFromJson(Parse(R"(["h",1,2])"), 5, &back));
  CHECK(back.version == 5);  // no version: the one given
  REQUIRE(wire::ReleasingFromJson(wire::ReleasingToJson(r, true), 5, &back));
  CheckSameReleasing({back}, {r});
  const Bad bad[] = {
      {R"({"host": "h"})", "not an array"},
      {R"(["h", 1])", "too short"},
      {R"([1, 1, 2])", "a host that is no string"},
      {R"(["h", "1", 2])", "a local rank that is a string"},
      {R"(["h", 1, 2.5])", "a slot that is a fraction"},
      {R"(["h", 1, 2, "7"])", "a version that is a string"},
      {R"(["h", 1, 4294967296])", "a slot past int"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    bool ok = true;
    CHECK_NOTHROW(ok = wire::ReleasingFromJson(Parse(b.body), 0, &back));
    CHECK_FALSE(ok);
  }
}

TEST_CASE("pool wire: a join request goes both ways; the pool decides `local` itself") {
  // Given a job re-registering with what it holds, its body is exactly the one the pool reads.
  JoinRequest r;
  r.name = "train";
  r.priority = 10;
  r.min_np = 2;
  r.max_np = 4;
  r.pid = 42;
  r.held = {{"h", {0, 1}}};
  r.releasing = {{"h", 2, 3, 9}};  // the version is the pool's: not sent
  json j = wire::JoinRequestToJson(r, "box");
  CHECK(j.dump() ==
        R"({"held":{"h":[0,1]},"machine":"box","max_np":4,"min_np":2,"name":"train","pid":42,)"
        R"("priority":10,"releasing":[["h",2,3]]})");
  JoinRequest back;
  back.local = false;
  std::string machine;
  REQUIRE(wire::JoinRequestFromJson(j, &back, &machine));
  CHECK(back.name == "train");
  CHECK(back.priority == 10);
  CHECK(back.min_np == 2);
  CHECK(back.max_np == 4);
  CHECK(back.pid == 42);
  CHECK_FALSE(back.local);  // left as it was
  CHECK(back.held == r.held);
  CheckSameReleasing(back.releasing, {{"h", 2, 3, 0}});
  CHECK(machine == "box");

  SUBCASE("pid, machine, held and releasing may be left out") {
    JoinRequest least;
    REQUIRE(wire::JoinRequestFromJson(Parse(R"({"name":"a","priority":1,"min_np":1,"max_np":1})"),
                                      &least, &machine));
    CHECK(least.pid == 0);
    CHECK(least.pid_start == -1);
    CHECK(machine.empty());
    CHECK(least.held.empty());
    CHECK(least.releasing.empty());
  }
  SUBCASE("the pid's start time goes with it when known") {
    r.pid_start = 123456;
    json with_start = wire::JoinRequestToJson(r, "box");
    CHECK(with_start["pid_start"] == 123456);
    REQUIRE(wire::JoinRequestFromJson(with_start, &back, &machine));
    CHECK(back.pid_start == 123456);
    with_start["pid_start"] = "123456";
    CHECK_FALSE(wire::JoinRequestFromJson(with_start, &back, &machine));
  }
}

TEST_CASE("pool wire: the body limit holds a join and a sync of a job on 4,096 hosts") {
  // Given a job on 4,096 hosts with 64-byte names and 8 slots each, its sync (every local rank
  // live), its join holding every slot, and its join with every slot still draining (the
  // biggest a join gets: a slot is held or releasing, never both), each fits kMaxBodyBytes.
  JoinRequest held, draining;
  held.name = draining.name = std::string(200, 'j');
  held.pid = draining.pid = 2147483647;
  held.pid_start = draining.pid_start = 999999999999;
  SyncRequest sync;
  sync.seen = INT64_MAX;
  for (int h = 0; h < 4096; ++h) {
    std::string name = std::string(59, 'n') + std::to_string(10000 + h);  // 64 bytes
    REQUIRE(name.size() == 64);
    held.held[name] = {0, 1, 2, 3, 4, 5, 6, 7};
    sync.live[name] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int k = 0; k < 8; ++k) draining.releasing.push_back({name, k, k, 0});
  }
  size_t sync_size = wire::SyncRequestToJson(sync).dump().size();
  size_t held_size = wire::JoinRequestToJson(held, std::string(64, 'm')).dump().size();
  size_t draining_size = wire::JoinRequestToJson(draining, std::string(64, 'm')).dump().size();
  MESSAGE("sync ", sync_size, ", join holding ", held_size, ", join draining ", draining_size);
  CHECK(sync_size < wire::kMaxBodyBytes);
  CHECK(held_size < wire::kMaxBodyBytes);
  CHECK(draining_size < wire::kMaxBodyBytes);
  CHECK(draining_size > wire::kMaxBodyBytes / 2);  // the limit is not much more than needed
}

TEST_CASE("pool wire: malformed join requests are refused without an exception") {
  const Bad bad[] = {
      {R"([])", "not an object"},
      {R"({"priority":1,"min_np":1,"max_np":1})", "no name"},
      {R"({"name":"a","min_np":1,"max_np":1})", "no priority"},
      {R"({"name":"a","priority":1,"max_np":1})", "no min_np"},
      {R"({"name":"a","priority":1,"min_np":1})", "no max_np"},
      {R"({"name":7,"priority":1,"min_np":1,"max_np":1})", "a name that is a number"},
      {R"({"name":"a","priority":"1","min_np":1,"max_np":1})", "a priority that is a string"},
      {R"({"name":"a","priority":1.5,"min_np":1,"max_np":1})", "a priority that is a fraction"},
      {R"({"name":"a","priority":1,"min_np":null,"max_np":1})", "a min_np that is null"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":true})", "a max_np that is a bool"},
      {R"({"name":"a","priority":4294967296,"min_np":1,"max_np":1})", "a priority past int"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":1,"pid":"42"})", "a pid that is a string"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":1,"machine":7})", "a machine that is a number"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":1,"held":[]})", "held that is an array"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":1,"held":{"h":[-1]}})", "a negative slot held"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":1,"releasing":{"x":["h",0,1]}})",
       "releasing that is an object"},
      {R"({"name":"a","priority":1,"min_np":1,"max_np":1,"releasing":[["h","0",1]]})",
       "a releasing entry with a string"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    JoinRequest r;
    std::string machine;
    bool ok = true;
    CHECK_NOTHROW(ok = wire::JoinRequestFromJson(Parse(b.body), &r, &machine));
    CHECK_FALSE(ok);
  }
}

TEST_CASE("pool wire: a join reply carries the id and, optionally, the version") {
  json j = wire::JoinReplyToJson({"train-2", 3});
  CHECK(j.dump() == R"({"id":"train-2","version":3})");
  JoinReply back;
  REQUIRE(wire::JoinReplyFromJson(j, &back));
  CHECK(back.id == "train-2");
  CHECK(back.version == 3);
  JoinReply old;
  old.version = 11;
  REQUIRE(wire::JoinReplyFromJson(Parse(R"({"id":"a"})"), &old));
  CHECK(old.version == 11);  // absent: as it was
  const Bad bad[] = {
      {R"({"error":"no"})", "an error reply"},
      {R"({"id":5})", "an id that is a number"},
      {R"({"id":"a","version":"3"})", "a version that is a string"},
      {R"("a")", "not an object"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    bool ok = true;
    CHECK_NOTHROW(ok = wire::JoinReplyFromJson(Parse(b.body), &back));
    CHECK_FALSE(ok);
  }
}

TEST_CASE("pool wire: a sync request carries the live local ranks and the version seen") {
  SyncRequest s{{{"h", {0, 2}}}, 4};
  json j = wire::SyncRequestToJson(s);
  CHECK(j.dump() == R"({"live":{"h":[0,2]},"seen":4})");
  SyncRequest back;
  REQUIRE(wire::SyncRequestFromJson(j, &back));
  CHECK(back.live == s.live);
  CHECK(back.seen == 4);
  SyncRequest least;
  REQUIRE(wire::SyncRequestFromJson(Parse(R"({"live":{}})"), &least));
  CHECK(least.seen == 0);
  const Bad bad[] = {
      {R"({})", "no live"},
      {R"({"live":[]})", "live that is an array"},
      {R"({"live":{"h":["0"]}})", "a live rank that is a string"},
      {R"({"live":{},"seen":"4"})", "seen that is a string"},
      {R"({"live":{},"seen":1.5})", "seen that is a fraction"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    bool ok = true;
    CHECK_NOTHROW(ok = wire::SyncRequestFromJson(Parse(b.body), &back));
    CHECK_FALSE(ok);
  }
}

TEST_CASE("pool wire: a grant goes both ways, hosts in the pool's order") {
  Grant g;
  g.hosts = {{"z", {1, 0}, {"gpu1", "gpu0"}}, {"a", {}, {}}, {"m", {2}, {""}}};
  g.target = 3;
  g.queued = false;
  g.version = 6;
  json j = wire::GrantToJson(g);
  CHECK(j.dump() ==
        R"({"hosts":[{"devices":["gpu1","gpu0"],"host":"z","slots":[1,0]},{"devices":[],"host":"a",)"
        R"("slots":[]},{"devices":[""],"host":"m","slots":[2]}],"queued":false,"target":3,"version":6})");
  Grant back;
  std::string err;
  REQUIRE(wire::GrantFromJson(j, &back, &err));
  REQUIRE(back.hosts.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(back.hosts[k].name == g.hosts[k].name);
    CHECK(back.hosts[k].slots == g.hosts[k].slots);
    CHECK(back.hosts[k].devices == g.hosts[k].devices);
  }
  CHECK(back.target == 3);
  CHECK_FALSE(back.queued);
  CHECK(back.version == 6);
  CHECK(err.empty());

  SUBCASE("target, queued and version may be left out: they keep what the caller had") {
    Grant least;
    least.version = 9;
    REQUIRE(wire::GrantFromJson(Parse(R"({"hosts":[]})"), &least, &err));
    CHECK(least.version == 9);
    CHECK(least.hosts.empty());
  }
}

TEST_CASE("pool wire: a host's start_through (a pool inside Slurm) is sent only when set") {
  // Given a grant whose first host starts ranks through srun, only that host carries the fields
  // (the template and its kind); a grant from a pool that sends none reads as the job's own way ("").
  Grant g;
  g.hosts = {{"h1", {0}, {""}, "srun --jobid=7 --nodelist={host}", "slurm"}, {"h2", {0}, {""}, ""}};
  json j = wire::GrantToJson(g);
  CHECK(j["hosts"].dump() ==
        R"([{"devices":[""],"host":"h1","slots":[0],"start_kind":"slurm",)"
        R"("start_through":"srun --jobid=7 --nodelist={host}"},)"
        R"({"devices":[""],"host":"h2","slots":[0]}])");
  Grant back;
  std::string err;
  REQUIRE(wire::GrantFromJson(j, &back, &err));
  REQUIRE(back.hosts.size() == 2);
  CHECK(back.hosts[0].start_through == "srun --jobid=7 --nodelist={host}");
  CHECK(back.hosts[0].start_kind == "slurm");
  CHECK(back.hosts[1].start_through.empty());
  CHECK(back.hosts[1].start_kind.empty());
}

TEST_CASE("pool wire: a malformed grant is refused and says which part is bad") {
  // An error reply is no grant at all (err stays empty: the caller shows the error); bad hosts
  // name the hosts list; another bad field names the reply.
  const struct {
    std::string body;
    std::string err;
  } bad[] = {
      {R"({"error":"no job 'x'"})", ""},
      {R"({"hosts":{}})", ""},
      {R"([1])", ""},
      {R"({"hosts":[{"host":"h","slots":[0]}]})", R"([{"host":"h","slots":[0]}])"},
      {R"({"hosts":[{"host":1,"slots":[],"devices":[]}]})", R"([{"devices":[],"host":1,"slots":[]}])"},
      {R"({"hosts":[{"host":"h","slots":["0"],"devices":[]}]})",
       R"([{"devices":[],"host":"h","slots":["0"]}])"},
      {R"({"hosts":[{"host":"h","slots":[0],"devices":[0]}]})", R"([{"devices":[0],"host":"h","slots":[0]}])"},
      {R"({"hosts":["h"]})", R"(["h"])"},
      {R"({"hosts":[{"host":"h","slots":[],"devices":[],"start_through":1}]})",
       R"([{"devices":[],"host":"h","slots":[],"start_through":1}])"},
      {R"({"hosts":[],"version":"6"})", R"({"hosts":[],"version":"6"})"},
      {R"({"hosts":[],"queued":1})", R"({"hosts":[],"queued":1})"},
      // A host that ssh or srun would read as an option is no host (issue 35).
      {R"({"hosts":[{"host":"-G","slots":[0],"devices":[""]}]})",
       R"([{"devices":[""],"host":"-G","slots":[0]}]: host names cannot begin with '-' (ssh or a )"
       R"(remote shell would read '-G' as an option))"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.body);
    Grant g;
    std::string err = "stale";
    bool ok = true;
    CHECK_NOTHROW(ok = wire::GrantFromJson(Parse(b.body), &g, &err));
    CHECK_FALSE(ok);
    CHECK(err == b.err);
  }
}

TEST_CASE("pool wire: a priority request, ok and error replies") {
  json j = wire::PriorityRequestToJson({"train", 7});
  CHECK(j.dump() == R"({"job":"train","priority":7})");
  PriorityRequest back;
  REQUIRE(wire::PriorityRequestFromJson(j, &back));
  CHECK(back.job == "train");
  CHECK(back.priority == 7);
  REQUIRE(wire::PriorityRequestFromJson(Parse(R"({"job":"a","priority":-3})"), &back));
  CHECK(back.priority == -3);  // the pool checks the range, with its own message
  for (std::string body : {R"({"priority":1})", R"({"job":"a"})", R"({"job":"a","priority":"1"})",
                           R"({"job":["a"],"priority":1})", R"({"job":"a","priority":1.0})"}) {
    CAPTURE(body);
    bool ok = true;
    CHECK_NOTHROW(ok = wire::PriorityRequestFromJson(Parse(body), &back));
    CHECK_FALSE(ok);
  }
  CHECK(wire::OkToJson().dump() == R"({"ok":true})");
  CHECK(wire::ErrorToJson("no job 'x'").dump() == R"({"error":"no job 'x'"})");
  CHECK(wire::ErrorText(wire::ErrorToJson("no job 'x'").dump()) == "no job 'x'");
  CHECK(wire::ErrorText("Bad Gateway") == "Bad Gateway");              // not JSON: as it is
  CHECK(wire::ErrorText(R"({"error":5})") == R"({"error":5})");        // no error text: as it is
}

TEST_CASE("pool wire: the book goes to disk and back, and a new pool restores from it") {
  // Given a pool with a job holding slots and one still draining, its book read back from
  // JSON gives a new pool the same holdings.
  PoolState first("p", 1, std::chrono::milliseconds(0), [](const char*, json) {});
  PoolTime t{};
  first.SetHosts({{"h", 4, {}}}, t);
  JoinRequest a;
  a.name = "a";
  a.min_np = 1;
  a.max_np = 2;
  a.pid = 100;
  a.pid_start = 777;
  a.held = {{"h", {0, 1}}};
  a.releasing = {{"h", 2, 3}};
  std::string err;
  REQUIRE(first.Join(a, t, &err) == "a");
  Book book = first.Holdings();
  json j = wire::BookToJson(book);
  CHECK(j.dump() ==
        R"({"jobs":[{"arrival":0,"held":{"h":[0,1]},"id":"a","local":true,"max_np":2,"min_np":1,)"
        R"("pid":100,"pid_start":777,"priority":5000,"releasing":[["h",2,3,0]],"version":0}],)"
        R"("pool":"p"})");
  Book back;
  REQUIRE(wire::BookFromJson(json::parse(j.dump()), &back));
  CHECK(back.pool == "p");
  REQUIRE(back.jobs.size() == 1);
  const BookJob& job = back.jobs[0];
  CHECK(job.id == "a");
  CHECK(job.pid == 100);
  CHECK(job.pid_start == 777);
  CHECK(job.local);
  CHECK(job.held == HostLists{{"h", {0, 1}}});
  CheckSameReleasing(job.releasing, {{"h", 2, 3, 0}});
  PoolState second("p", 1, std::chrono::milliseconds(0), [](const char*, json) {});
  second.SetHosts({{"h", 4, {}}}, t);
  second.Restore(back, t);
  CHECK(wire::BookToJson(second.Holdings()).dump() == wire::BookToJson(first.Holdings()).dump());
  CHECK(wire::BookToJson(Book{"p", {}}).dump() == R"({"jobs":[],"pool":"p"})");
  // An older etrun's book kept the pool's token: it is not read (a token is new at every start).
  CHECK(wire::BookFromJson(Parse(R"({"pool":"p","jobs":[],"token":"secret"})"), &back));
}

TEST_CASE("pool wire: a damaged book entry is left out, the others kept") {
  const char* good = R"({"id":"ok","priority":1,"min_np":1,"max_np":1,"arrival":0,"pid":0,)"
                     R"("local":false,"held":{},"releasing":[["h",0,1]],"version":4})";
  const Bad damaged[] = {
      {R"({"priority":1,"min_np":1,"max_np":1,"arrival":0,"pid":0,"local":false,"held":{},"releasing":[]})",
       "no id"},
      {R"({"id":"x","priority":"1","min_np":1,"max_np":1,"arrival":0,"pid":0,"local":false,"held":{},"releasing":[]})",
       "a priority that is a string"},
      {R"({"id":"x","priority":1,"min_np":1,"max_np":1,"arrival":0,"pid":0,"local":1,"held":{},"releasing":[]})",
       "local that is a number"},
      {R"({"id":"x","priority":1,"min_np":1,"max_np":1,"arrival":0,"pid":0,"local":false,"held":{}})",
       "no releasing"},
      {R"({"id":"x","priority":1,"min_np":1,"max_np":1,"arrival":0,"pid":0,"local":false,"held":[],"releasing":[]})",
       "held that is an array"},
      {R"({"id":"x","priority":1,"min_np":1,"max_np":1,"arrival":0,"pid":0,"local":false,"held":{},"releasing":[],"version":"1"})",
       "a version that is a string"},
      {R"({"id":"x","priority":1,"min_np":1,"max_np":1,"arrival":0.5,"pid":0,"local":false,"held":{},"releasing":[]})",
       "an arrival that is a fraction"},
      {R"("x")", "not an object"},
  };
  for (const Bad& d : damaged) {
    CAPTURE(d.why);
    Book book;
    bool ok = false;
    CHECK_NOTHROW(ok = wire::BookFromJson(json::parse(std::string(R"({"jobs":[)") + good + "," +
                                                      d.body + "]}"),
                                          &book));
    CHECK(ok);
    REQUIRE(book.jobs.size() == 1);
    CHECK(book.jobs[0].id == "ok");
    CHECK(book.jobs[0].version == 4);
    CheckSameReleasing(book.jobs[0].releasing, {{"h", 0, 1, 4}});  // the job's version
  }
  // A book with its parts of a wrong type is an empty one; a book that is no object is none.
  Book book;
  CHECK(wire::BookFromJson(Parse(R"({"pool":1,"jobs":{},"token":2})"), &book));
  CHECK(book.jobs.empty());
  CHECK_FALSE(wire::BookFromJson(Parse(R"([])"), &book));
}
