// The control endpoint's wire format: the JSON bodies a running job (launcher/runtime.h and its
// policies) and the verbs `etrun status`, `etrun list` and `etrun scale` (cli/control_main.cc)
// exchange through control.h's ControlServer and ControlRequest. Every field name is written
// here and nowhere else.
//
//   GET /status       JobStatus  {"job", "pid", "duration_s", "state", "elastic", "world_size",
//                                 "np", "min_np", "max_np", "resets", "round",
//                                 "ranks": [RankStatus],
//                                 elastic jobs only: "world_ready", "pool", "overrides": Overrides}
//                     RankStatus {"rank", "label", "host", "local_rank", "pid", "state",
//                                 "restarts", "uptime_s"}
//   POST /overrides   Overrides  {"add": {host: slots}, "remove": [host], "to": N|null}
//                     {"ok": true}
//   any failure       {"error": text}
//
// Users script `etrun status --json`, which prints the status as the job sent it: the *ToJson
// functions write exactly these shapes and values. The *FromJson functions never throw; they
// return false, say what is wrong in *err and leave their output partly written, to be thrown
// away.
// Thread-compatible (plain values).
#ifndef ETRUN_CONTROL_CONTROL_WIRE_H_
#define ETRUN_CONTROL_CONTROL_WIRE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace etrun::control {

// `etrun scale`'s overrides of an elastic job: the whole set, sent by `etrun scale` (which reads
// the current set from the status, changes it and posts it back) and shown in the status.
struct Overrides {
  std::map<std::string, int> add;  // host -> slots (1..INT32_MAX), added or resized
  std::vector<std::string> remove;
  std::optional<int> to;           // the world size to aim for (0..INT32_MAX); null: none
  bool operator==(const Overrides&) const = default;
};

// Whether a host name is one the job accepts (discovery::IsValidHostName; control/ does not
// include discovery/, so the caller hands the rule in).
using HostNameCheck = bool (*)(std::string_view name);

nlohmann::json OverridesToJson(const Overrides& overrides);
// Every field is required. A host of "add" must pass `valid_host` (null: any name). On any other
// shape *err is the one text the endpoint answers every malformed body with:
//   expected {"add": {host: slots}, "remove": [hosts], "to": N|null}
bool OverridesFromJson(const nlohmann::json& j, HostNameCheck valid_host, Overrides* overrides,
                       std::string* err);

// One rank process of a running job: a row of `etrun status`.
struct RankStatus {
  // The rank in the current world; -1: none yet (an elastic worker between rounds); null: the
  // process is no rank (an --mpi job's mpirun).
  std::optional<int> rank;
  // What the process was started as: its rank at start (an integer), or a program ("mpirun").
  std::variant<int, std::string> label = 0;
  std::string host;
  std::optional<int> local_rank = 0;  // null: the process is no rank (mpirun)
  int pid = 0;                        // <= 0: none on this machine (null on the wire)
  std::string state;                  // "running", "stopping", "draining", ...
  int restarts = 0;
  double uptime_s = 0;
  bool operator==(const RankStatus&) const = default;
};

// A running job's GET /status. The policy fills all but job, pid and duration_s, which the
// runtime adds.
struct JobStatus {
  std::string job;
  int pid = 0;            // etrun's
  double duration_s = 0;
  std::string state;      // "running", "waiting", "resetting", "finishing", ...
  bool elastic = false;
  int world_size = 0;
  int np = 0;
  std::optional<int> min_np;  // null: not elastic
  std::optional<int> max_np;  // null: none
  int resets = 0;
  int round = 0;
  std::vector<RankStatus> ranks;
  // Written only when `elastic`: whether the round's world has formed (every worker met the
  // others), and the pool lending the job its hosts (null: none).
  bool world_ready = true;
  std::optional<std::string> pool;
  // Written when set (elastic jobs set it): the job's `etrun scale` overrides.
  std::optional<Overrides> overrides;
  bool operator==(const JobStatus&) const = default;
};

nlohmann::json RankStatusToJson(const RankStatus& rank);
nlohmann::json JobStatusToJson(const JobStatus& status);

// Every field is optional, so a status of an older or newer etrun reads too: an absent one keeps
// the value the output held before the call; present, it must have its type (null where the
// field may be null; "pid" null reads as 0). Other fields are ignored. "overrides" is read with
// any host name. *err names the field: `"ranks"[1]: "pid" is not an integer or null`.
bool RankStatusFromJson(const nlohmann::json& j, RankStatus* rank, std::string* err);
bool JobStatusFromJson(const nlohmann::json& j, JobStatus* status, std::string* err);

// The state `etrun list` gives a job whose endpoint does not answer (or answers no status), and
// its entry in `etrun list --json`: {"job", "state": "unreachable", "pid"}.
inline constexpr char kUnreachable[] = "unreachable";
nlohmann::json UnreachableToJson(const std::string& job, int pid);

// {"ok": true}: a request that needs no other answer was done.
nlohmann::json OkToJson();

// {"error": text}. ErrorText is the error of a reply body, or the body itself when it has none.
nlohmann::json ErrorToJson(const std::string& text);
std::string ErrorText(const std::string& body);

}  // namespace etrun::control

#endif  // ETRUN_CONTROL_CONTROL_WIRE_H_
