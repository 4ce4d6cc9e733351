#include "control/control_wire.h"

#include <cstdint>
#include <limits>

namespace etrun::control {

using nlohmann::json;

namespace {

// The field names, each written once: the *ToJson and *FromJson functions below share them.
constexpr char kJob[] = "job";
constexpr char kPid[] = "pid";
constexpr char kDurationS[] = "duration_s";
constexpr char kState[] = "state";
constexpr char kElastic[] = "elastic";
constexpr char kWorldSize[] = "world_size";
constexpr char kNp[] = "np";
constexpr char kMinNp[] = "min_np";
constexpr char kMaxNp[] = "max_np";
constexpr char kResets[] = "resets";
constexpr char kRound[] = "round";
constexpr char kRanks[] = "ranks";
constexpr char kWorldReady[] = "world_ready";
constexpr char kPool[] = "pool";
constexpr char kOverrides[] = "overrides";
constexpr char kRank[] = "rank";
constexpr char kLabel[] = "label";
constexpr char kHost[] = "host";
constexpr char kLocalRank[] = "local_rank";
constexpr char kRestarts[] = "restarts";
constexpr char kUptimeS[] = "uptime_s";
constexpr char kAdd[] = "add";
constexpr char kRemove[] = "remove";
constexpr char kTo[] = "to";
constexpr char kOk[] = "ok";
constexpr char kError[] = "error";

// The endpoint's answer to every malformed POST /overrides body (tests pin it).
constexpr char kOverridesShape[] =
    "expected {\"add\": {host: slots}, \"remove\": [hosts], \"to\": N|null}";

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// An integer JSON value in lo..hi (int range).
bool Integer(const json& v, int64_t lo, int64_t hi, int* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) return false;
    *out = static_cast<int>(u);
    return true;
  }
  int64_t s = v.get<int64_t>();
  if (s < lo || s > hi) return false;
  *out = static_cast<int>(s);
  return true;
}

json Nullable(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

// Readers of one present value, and what they expect (for *err).
bool Read(const json& v, std::string* out) {
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  return true;
}
const char* Expected(const std::string*) { return "a string"; }

bool Read(const json& v, bool* out) {
  if (!v.is_boolean()) return false;
  *out = v.get<bool>();
  return true;
}
const char* Expected(const bool*) { return "a boolean"; }

bool Read(const json& v, int* out) {
  return Integer(v, std::numeric_limits<int>::min(), kIntMax, out);
}
const char* Expected(const int*) { return "an integer"; }

bool Read(const json& v, double* out) {
  if (!v.is_number()) return false;
  *out = v.get<double>();
  return true;
}
const char* Expected(const double*) { return "a number"; }

bool Read(const json& v, std::variant<int, std::string>* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  int n = 0;
  if (!Read(v, &n)) return false;
  *out = n;
  return true;
}
const char* Expected(const std::variant<int, std::string>*) { return "an integer or a string"; }

template <typename T>
bool Read(const json& v, std::optional<T>* out) {
  if (v.is_null()) {
    out->reset();
    return true;
  }
  T value{};
  if (!Read(v, &value)) return false;
  *out = std::move(value);
  return true;
}
const char* Expected(const std::optional<int>*) { return "an integer or null"; }
const char* Expected(const std::optional<std::string>*) { return "a string or null"; }

// Field `key` of object `j`, optional: absent, *out is unchanged; present, it must be a T.
template <typename T>
bool Optional(const json& j, const char* key, T* out, std::string* err) {
  auto it = j.find(key);
  if (it == j.end() || Read(*it, out)) return true;
  *err = std::string("\"") + key + "\" is not " + Expected(out);
  return false;
}

// A pid: null or <= 0 is none on this machine.
bool OptionalPid(const json& j, int* pid, std::string* err) {
  std::optional<int> value = *pid > 0 ? std::optional<int>(*pid) : std::nullopt;
  if (!Optional(j, kPid, &value, err)) return false;
  *pid = value.value_or(0);
  return true;
}

}  // namespace

json OverridesToJson(const Overrides& overrides) {
  return {{kAdd, overrides.add}, {kRemove, overrides.remove}, {kTo, Nullable(overrides.to)}};
}

bool OverridesFromJson(const json& j, HostNameCheck valid_host, Overrides* overrides,
                       std::string* err) {
  *overrides = Overrides{};
  auto fail = [err] {
    *err = kOverridesShape;
    return false;
  };
  if (!j.is_object()) return fail();
  auto add = j.find(kAdd);
  auto remove = j.find(kRemove);
  auto to = j.find(kTo);
  if (add == j.end() || !add->is_object() || remove == j.end() || !remove->is_array() ||
      to == j.end()) {
    return fail();
  }
  if (!to->is_null()) {
    int n = 0;
    if (!Integer(*to, 0, kIntMax, &n)) return fail();
    overrides->to = n;
  }
  for (const auto& [host, slots] : add->items()) {
    int n = 0;
    if ((valid_host != nullptr && !valid_host(host)) || !Integer(slots, 1, kIntMax, &n)) {
      return fail();
    }
    overrides->add[host] = n;
  }
  for (const json& host : *remove) {
    if (!host.is_string()) return fail();
    overrides->remove.push_back(host.get<std::string>());
  }
  return true;
}

json RankStatusToJson(const RankStatus& rank) {
  json label = std::holds_alternative<int>(rank.label) ? json(std::get<int>(rank.label))
                                                       : json(std::get<std::string>(rank.label));
  return {{kRank, Nullable(rank.rank)},
          {kLabel, label},
          {kHost, rank.host},
          {kLocalRank, Nullable(rank.local_rank)},
          {kPid, rank.pid > 0 ? json(rank.pid) : json(nullptr)},
          {kState, rank.state},
          {kRestarts, rank.restarts},
          {kUptimeS, rank.uptime_s}};
}

json JobStatusToJson(const JobStatus& status) {
  json ranks = json::array();
  for (const RankStatus& rank : status.ranks) ranks.push_back(RankStatusToJson(rank));
  json j = {{kJob, status.job},
            {kPid, status.pid},
            {kDurationS, status.duration_s},
            {kState, status.state},
            {kElastic, status.elastic},
            {kWorldSize, status.world_size},
            {kNp, status.np},
            {kMinNp, Nullable(status.min_np)},
            {kMaxNp, Nullable(status.max_np)},
            {kResets, status.resets},
            {kRound, status.round},
            {kRanks, ranks}};
  if (status.elastic) {
    j[kWorldReady] = status.world_ready;
    j[kPool] = status.pool ? json(*status.pool) : json(nullptr);
  }
  if (status.overrides) j[kOverrides] = OverridesToJson(*status.overrides);
  return j;
}

bool RankStatusFromJson(const json& j, RankStatus* rank, std::string* err) {
  if (!j.is_object()) {
    *err = "not an object";
    return false;
  }
  return Optional(j, kRank, &rank->rank, err) && Optional(j, kLabel, &rank->label, err) &&
         Optional(j, kHost, &rank->host, err) &&
         Optional(j, kLocalRank, &rank->local_rank, err) && OptionalPid(j, &rank->pid, err) &&
         Optional(j, kState, &rank->state, err) && Optional(j, kRestarts, &rank->restarts, err) &&
         Optional(j, kUptimeS, &rank->uptime_s, err);
}

bool JobStatusFromJson(const json& j, JobStatus* status, std::string* err) {
  if (!j.is_object()) {
    *err = "not an object";
    return false;
  }
  if (!Optional(j, kJob, &status->job, err) || !Optional(j, kPid, &status->pid, err) ||
      !Optional(j, kDurationS, &status->duration_s, err) ||
      !Optional(j, kState, &status->state, err) || !Optional(j, kElastic, &status->elastic, err) ||
      !Optional(j, kWorldSize, &status->world_size, err) || !Optional(j, kNp, &status->np, err) ||
      !Optional(j, kMinNp, &status->min_np, err) || !Optional(j, kMaxNp, &status->max_np, err) ||
      !Optional(j, kResets, &status->resets, err) || !Optional(j, kRound, &status->round, err) ||
      !Optional(j, kWorldReady, &status->world_ready, err) ||
      !Optional(j, kPool, &status->pool, err)) {
    return false;
  }
  if (auto ranks = j.find(kRanks); ranks != j.end()) {
    if (!ranks->is_array()) {
      *err = std::string("\"") + kRanks + "\" is not an array";
      return false;
    }
    status->ranks.clear();
    for (size_t i = 0; i < ranks->size(); ++i) {
      RankStatus rank;
      if (!RankStatusFromJson((*ranks)[i], &rank, err)) {
        *err = std::string("\"") + kRanks + "\"[" + std::to_string(i) + "]: " + *err;
        return false;
      }
      status->ranks.push_back(std::move(rank));
    }
  }
  if (auto overrides = j.find(kOverrides); overrides != j.end()) {
    Overrides read;
    if (!OverridesFromJson(*overrides, nullptr, &read, err)) {
      *err = std::string("\"") + kOverrides + "\": " + *err;
      return false;
    }
    status->overrides = std::move(read);
  }
  return true;
}

json UnreachableToJson(const std::string& job, int pid) {
  return {{kJob, job}, {kState, kUnreachable}, {kPid, pid}};
}

json OkToJson() { return {{kOk, true}}; }

json ErrorToJson(const std::string& text) { return {{kError, text}}; }

std::string ErrorText(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    auto error = j.find(kError);
    if (error != j.end() && error->is_string()) return error->get<std::string>();
  }
  return body;
}

}  // namespace etrun::control
