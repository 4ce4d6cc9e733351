// The control endpoint's wire format (control/control_wire.h): the status and the scale
// request written and read back, their exact bytes pinned (users script `etrun status --json`),
// and malformed bodies refused without an exception, with the texts the endpoint answers.
#include "control/control_wire.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "discovery/host_slots.h"

using etrun::control::JobStatus;
using etrun::control::Overrides;
using etrun::control::RankStatus;
using nlohmann::json;
namespace wire = etrun::control;

namespace {

json Parse(const std::string& text) { return json::parse(text, nullptr, false); }

// What the endpoint answers every malformed POST /overrides body with (since `etrun scale`
// began; elastic_policy_test pins it at the endpoint too).
const char kShape[] = R"(expected {"add": {host: slots}, "remove": [hosts], "to": N|null})";

// A table row: a body and why it is not the message.
struct Bad {
  std::string body;
  std::string why;
};

// An elastic job's status as ElasticPolicy and the runtime write it: one rank on this machine,
// one on another host (no pid here), one between rounds.
JobStatus ElasticStatus() {
  JobStatus s;
  s.job = "grow";
  s.pid = 4242;
  s.duration_s = 12.5;
  s.state = "running";
  s.elastic = true;
  s.world_size = 2;
  s.np = 2;
  s.min_np = 1;
  s.max_np = 4;
  s.resets = 1;
  s.round = 2;
  s.world_ready = false;
  s.pool = "p1";
  s.overrides = Overrides{{{"127.0.0.1", 2}}, {"gone"}, 3};
  s.ranks = {{0, 0, "localhost", 0, 100, "running", 0, 1.25},
             {1, 1, "198.18.0.2", 0, 0, "running", 2, 0.5},
             {-1, 2, "localhost", 1, 101, "draining", 0, 0.0}};
  return s;
}

}  // namespace

TEST_CASE("control wire: a scale request goes both ways, exactly as etrun scale sends it") {
  // Given hosts added, one removed and a target, the body is the one the job reads back.
  Overrides o{{{"a", 2}, {"b-1.x", 1}}, {"c"}, 3};
  json j = wire::OverridesToJson(o);
  CHECK(j.dump() == R"({"add":{"a":2,"b-1.x":1},"remove":["c"],"to":3})");
  Overrides back;
  std::string err;
  REQUIRE(wire::OverridesFromJson(j, etrun::discovery::IsValidHostName, &back, &err));
  CHECK(back == o);

  SUBCASE("no target is null, and empty sets are empty") {
    Overrides none;
    CHECK(wire::OverridesToJson(none).dump() == R"({"add":{},"remove":[],"to":null})");
    back.to = 7;  // read fresh: nothing of the output's old value is kept
    REQUIRE(wire::OverridesFromJson(wire::OverridesToJson(none), nullptr, &back, &err));
    CHECK(back == none);
  }
  SUBCASE("the bounds are accepted: one slot, INT32_MAX slots, a target of 0 and of INT32_MAX") {
    REQUIRE(wire::OverridesFromJson(Parse(R"({"add":{"a":1,"b":2147483647},"remove":[],"to":0})"),
                                    etrun::discovery::IsValidHostName, &back, &err));
    CHECK(back.add == std::map<std::string, int>{{"a", 1}, {"b", 2147483647}});
    CHECK(back.to == 0);
    REQUIRE(wire::OverridesFromJson(Parse(R"({"add":{},"remove":[],"to":2147483647})"),
                                    etrun::discovery::IsValidHostName, &back, &err));
    CHECK(back.to == 2147483647);
  }
}

TEST_CASE("control wire: malformed scale requests are refused with the one text the endpoint answers") {
  const Bad bad[] = {
      {"not json", "not JSON (the endpoint parses the body leniently: a discarded value)"},
      {"[]", "not an object"},
      {R"("add")", "a string"},
      {R"({"remove": [], "to": null})", "no add"},
      {R"({"add": {}, "to": null})", "no remove"},
      {R"({"add": {}, "remove": []})", "no to"},
      {R"({"add": [], "remove": [], "to": null})", "add that is no object"},
      {R"({"add": {}, "remove": {}, "to": null})", "remove that is no array"},
      {R"({"add": {}, "remove": "h", "to": null})", "remove that is a string"},
      {R"({"add": {}, "remove": [], "to": "3"})", "a target that is a string"},
      {R"({"add": {}, "remove": [], "to": 2.5})", "a fractional target"},
      {R"({"add": {}, "remove": [], "to": true})", "a boolean target"},
      {R"({"add": {}, "remove": [], "to": -1})", "a negative target"},
      {R"({"add": {}, "remove": [], "to": 2147483648})", "a target past INT32_MAX"},
      {R"({"add": {}, "remove": [], "to": 18446744073709551615})", "a target past INT64_MAX"},
      {R"({"add": {"h": 0}, "remove": [], "to": null})", "no slots"},
      {R"({"add": {"h": -2}, "remove": [], "to": null})", "negative slots"},
      {R"({"add": {"h": 2147483648}, "remove": [], "to": null})", "slots past INT32_MAX"},
      {R"({"add": {"h": 18446744073709551615}, "remove": [], "to": null})", "slots past INT64_MAX"},
      {R"({"add": {"h": 1.5}, "remove": [], "to": null})", "fractional slots"},
      {R"({"add": {"h": "2"}, "remove": [], "to": null})", "slots that are a string"},
      {R"({"add": {"h": null}, "remove": [], "to": null})", "slots that are null"},
      {R"({"add": {"": 1}, "remove": [], "to": null})", "an empty host name"},
      {R"({"add": {"a b": 1}, "remove": [], "to": null})", "a host name with a space"},
      {R"({"add": {"h;rm": 1}, "remove": [], "to": null})", "a host name with a semicolon"},
      {R"({"add": {"-G": 1}, "remove": [], "to": null})", "a host name that ssh would read as an option"},
      {R"({"add": {}, "remove": [1], "to": null})", "a removed host that is a number"},
      {R"({"add": {}, "remove": [null], "to": null})", "a removed host that is null"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.why);
    Overrides out;
    std::string err;
    bool ok = true;
    CHECK_NOTHROW(ok = wire::OverridesFromJson(Parse(b.body), etrun::discovery::IsValidHostName,
                                               &out, &err));
    CHECK_FALSE(ok);
    CHECK(err == kShape);
  }

  SUBCASE("host names are checked only by the rule handed in; removed names never") {
    Overrides out;
    std::string err;
    CHECK(wire::OverridesFromJson(Parse(R"({"add": {"a b": 1}, "remove": ["c d"], "to": null})"),
                                  nullptr, &out, &err));
    CHECK(wire::OverridesFromJson(Parse(R"({"add": {}, "remove": ["c d"], "to": null})"),
                                  etrun::discovery::IsValidHostName, &out, &err));
  }
}

TEST_CASE("control wire: an elastic job's status goes both ways, its bytes as etrun status --json shows them") {
  // Given a status with every elastic field, the document has exactly these keys and values, and
  // reads back equal.
  JobStatus s = ElasticStatus();
  json j = wire::JobStatusToJson(s);
  CHECK(j.dump() ==
        R"({"duration_s":12.5,"elastic":true,"job":"grow","max_np":4,"min_np":1,"np":2,)"
        R"("overrides":{"add":{"127.0.0.1":2},"remove":["gone"],"to":3},"pid":4242,"pool":"p1",)"
        R"("ranks":[{"host":"localhost","label":0,"local_rank":0,"pid":100,"rank":0,"restarts":0,)"
        R"("state":"running","uptime_s":1.25},{"host":"198.18.0.2","label":1,"local_rank":0,)"
        R"("pid":null,"rank":1,"restarts":2,"state":"running","uptime_s":0.5},{"host":"localhost",)"
        R"("label":2,"local_rank":1,"pid":101,"rank":-1,"restarts":0,"state":"draining",)"
        R"("uptime_s":0.0}],"resets":1,"round":2,"state":"running","world_ready":false,)"
        R"("world_size":2})");
  JobStatus back;
  std::string err;
  REQUIRE(wire::JobStatusFromJson(j, &back, &err));
  CHECK(back == s);

  SUBCASE("not lent, no cap, no overrides set: pool, max_np and to are null") {
    s.pool.reset();
    s.max_np.reset();
    s.overrides = Overrides{};
    j = wire::JobStatusToJson(s);
    CHECK(j["pool"].is_null());
    CHECK(j["max_np"].is_null());
    CHECK(j["overrides"].dump() == R"({"add":{},"remove":[],"to":null})");
    back = JobStatus{};
    REQUIRE(wire::JobStatusFromJson(j, &back, &err));
    CHECK(back == s);
  }
}

TEST_CASE("control wire: a static and an --mpi job's status carry no elastic fields") {
  // Given a static job's rank and mpirun's row (no rank, a program for a label), the document
  // has no world_ready, pool or overrides, and reads back equal.
  JobStatus s;
  s.job = "static-one";
  s.pid = 7;
  s.state = "finishing";
  s.world_size = 2;
  s.np = 2;
  s.ranks = {{0, 0, "localhost", 0, 11, "stopping", 0, 3.0}};
  json j = wire::JobStatusToJson(s);
  CHECK(j.dump() ==
        R"({"duration_s":0.0,"elastic":false,"job":"static-one","max_np":null,"min_np":null,)"
        R"("np":2,"pid":7,"ranks":[{"host":"localhost","label":0,"local_rank":0,"pid":11,"rank":0,)"
        R"("restarts":0,"state":"stopping","uptime_s":3.0}],"resets":0,"round":0,)"
        R"("state":"finishing","world_size":2})");
  JobStatus back;
  std::string err;
  REQUIRE(wire::JobStatusFromJson(j, &back, &err));
  CHECK(back == s);

  SUBCASE("mpirun's row") {
    RankStatus mpirun{.rank = std::nullopt, .label = "mpirun", .host = "localhost",
                      .local_rank = std::nullopt, .pid = 12, .state = "running", .uptime_s = 1.0};
    CHECK(wire::RankStatusToJson(mpirun).dump() ==
          R"({"host":"localhost","label":"mpirun","local_rank":null,"pid":12,"rank":null,)"
          R"("restarts":0,"state":"running","uptime_s":1.0})");
    s.ranks = {mpirun};
    back = JobStatus{};
    REQUIRE(wire::JobStatusFromJson(wire::JobStatusToJson(s), &back, &err));
    CHECK(back == s);
  }
}

TEST_CASE("control wire: a status with fields missing keeps what the reader set; a wrong type is named") {
  // Given a status of an etrun that wrote fewer fields, the reader's values stay for the rest
  // (etrun status shows "?" for an unknown state, the registry's name for the job).
  JobStatus s;
  s.job = "from-registry";
  s.state = "?";
  std::string err;
  REQUIRE(wire::JobStatusFromJson(Parse(R"({"elastic": true, "world_size": 3, "ranks": [{}]})"), &s,
                                  &err));
  CHECK(s.job == "from-registry");
  CHECK(s.state == "?");
  CHECK(s.elastic);
  CHECK(s.world_size == 3);
  CHECK(s.world_ready);  // etruns without world_ready: formed
  CHECK_FALSE(s.overrides.has_value());
  REQUIRE(s.ranks.size() == 1);
  CHECK(s.ranks[0] == RankStatus{});
  CHECK(wire::JobStatusFromJson(Parse(R"({"unknown": [1, 2]})"), &s, &err));

  const Bad bad[] = {
      {R"([])", "not an object"},
      {R"({"job": 1})", R"("job" is not a string)"},
      {R"({"pid": "1"})", R"("pid" is not an integer)"},
      {R"({"pid": null})", R"("pid" is not an integer)"},
      {R"({"duration_s": "1s"})", R"("duration_s" is not a number)"},
      {R"({"elastic": 1})", R"("elastic" is not a boolean)"},
      {R"({"world_size": 2.5})", R"("world_size" is not an integer)"},
      {R"({"world_size": 2147483648})", R"("world_size" is not an integer)"},
      {R"({"min_np": "1"})", R"("min_np" is not an integer or null)"},
      {R"({"pool": 1})", R"("pool" is not a string or null)"},
      {R"({"ranks": {}})", R"("ranks" is not an array)"},
      {R"({"ranks": [{}, 1]})", R"("ranks"[1]: not an object)"},
      {R"({"ranks": [{"pid": "9"}]})", R"("ranks"[0]: "pid" is not an integer or null)"},
      {R"({"ranks": [{"label": 1.5}]})", R"("ranks"[0]: "label" is not an integer or a string)"},
      {R"({"ranks": [{"rank": "0"}]})", R"("ranks"[0]: "rank" is not an integer or null)"},
      {R"({"ranks": [{"uptime_s": null}]})", R"("ranks"[0]: "uptime_s" is not a number)"},
      {R"({"overrides": {"add": {}}})", std::string(R"("overrides": )") + kShape},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.body);
    JobStatus out;
    bool ok = true;
    err.clear();
    CHECK_NOTHROW(ok = wire::JobStatusFromJson(Parse(b.body), &out, &err));
    CHECK_FALSE(ok);
    CHECK(err == b.why);
  }
}

TEST_CASE("control wire: a reply's error text, or the reply itself") {
  CHECK(wire::OkToJson().dump() == R"({"ok":true})");
  CHECK(wire::ErrorToJson("--to 1 is below --min-np 2").dump() ==
        R"({"error":"--to 1 is below --min-np 2"})");
  const std::pair<std::string, std::string> cases[] = {
      {R"({"error":"no"})", "no"},
      {R"({"error":1})", R"({"error":1})"},
      {R"({"ok":true})", R"({"ok":true})"},
      {"<html>502</html>", "<html>502</html>"},
      {"", ""},
  };
  for (const auto& [body, text] : cases) {
    CAPTURE(body);
    CHECK(wire::ErrorText(body) == text);
  }
}
