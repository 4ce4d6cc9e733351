#include "pool/pool_wire.h"

#include <cstdint>
#include <limits>

#include "discovery/host_slots.h"

namespace etrun::pool {

using nlohmann::json;

namespace {

// The field names, each written once: the *ToJson and *FromJson functions below share them.
constexpr char kName[] = "name";
constexpr char kPriority[] = "priority";
constexpr char kMinNp[] = "min_np";
constexpr char kMaxNp[] = "max_np";
constexpr char kPid[] = "pid";
constexpr char kPidStart[] = "pid_start";
constexpr char kMachine[] = "machine";
constexpr char kHeld[] = "held";
constexpr char kReleasing[] = "releasing";
constexpr char kId[] = "id";
constexpr char kVersion[] = "version";
constexpr char kLive[] = "live";
constexpr char kSeen[] = "seen";
constexpr char kHosts[] = "hosts";
constexpr char kHost[] = "host";
constexpr char kSlots[] = "slots";
constexpr char kDevices[] = "devices";
constexpr char kStartThrough[] = "start_through";
constexpr char kStartKind[] = "start_kind";
constexpr char kTarget[] = "target";
constexpr char kQueued[] = "queued";
constexpr char kJob[] = "job";
constexpr char kPool[] = "pool";
constexpr char kJobs[] = "jobs";
constexpr char kArrival[] = "arrival";
constexpr char kLocal[] = "local";

constexpr int64_t kIntMin = std::numeric_limits<int>::min();
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// An integer JSON value in lo..hi (REQUIRES: lo <= 0 <= hi).
bool Integer(const json& v, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  int64_t s = v.get<int64_t>();
  if (s < lo || s > hi) return false;
  *out = s;
  return true;
}

bool Integer(const json& v, int64_t lo, int64_t hi, int* out) {
  int64_t wide = 0;
  if (!Integer(v, lo, hi, &wide)) return false;
  *out = static_cast<int>(wide);
  return true;
}

bool Read(const json& v, std::string* out) {
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  return true;
}

bool Read(const json& v, bool* out) {
  if (!v.is_boolean()) return false;
  *out = v.get<bool>();
  return true;
}

bool Read(const json& v, int* out) { return Integer(v, kIntMin, kIntMax, out); }
bool Read(const json& v, int64_t* out) { return Integer(v, kInt64Min, kInt64Max, out); }
bool Read(const json& v, HostLists* out) { return HostListsFromJson(v, out); }

// Field `key` of object `j`: required, or optional (absent: *out unchanged).
template <typename T>
bool Field(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  return it != j.end() && Read(*it, out);
}

template <typename T>
bool Optional(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  return it == j.end() || Read(*it, out);
}

bool ReadReleasingList(const json& j, int64_t version, std::vector<Releasing>* out) {
  if (!j.is_array()) return false;
  for (const json& entry : j) {
    Releasing r;
    if (!ReleasingFromJson(entry, version, &r)) return false;
    out->push_back(std::move(r));
  }
  return true;
}

bool ReadGrantHost(const json& j, Grant::Host* host) {
  if (!j.is_object() || !Field(j, kHost, &host->name)) return false;
  auto slots = j.find(kSlots);
  auto devices = j.find(kDevices);
  if (slots == j.end() || !slots->is_array() || devices == j.end() || !devices->is_array()) return false;
  for (const json& s : *slots) {
    int slot = 0;
    if (!Integer(s, 0, kIntMax, &slot)) return false;
    host->slots.push_back(slot);
  }
  for (const json& d : *devices) {
    std::string device;
    if (!Read(d, &device)) return false;
    host->devices.push_back(std::move(device));
  }
  return Optional(j, kStartThrough, &host->start_through) && Optional(j, kStartKind, &host->start_kind);
}

}  // namespace

int Grant::total() const {
  int n = 0;
  for (const Host& h : hosts) n += static_cast<int>(h.slots.size());
  return n;
}

json HostListsToJson(const HostLists& lists) {
  json j = json::object();
  for (const auto& [host, list] : lists) j[host] = list;
  return j;
}

bool HostListsFromJson(const json& j, HostLists* lists) {
  if (!j.is_object()) return false;
  for (const auto& [host, list] : j.items()) {
    if (!list.is_array()) return false;
    std::vector<int>& out = (*lists)[host];
    for (const json& v : list) {
      int n = 0;
      if (!Integer(v, 0, kIntMax, &n)) return false;
      out.push_back(n);
    }
  }
  return true;
}

json ReleasingToJson(const Releasing& r, bool with_version) {
  json j = {r.host, r.local_rank, r.slot};
  if (with_version) j.push_back(r.version);
  return j;
}

bool ReleasingFromJson(const json& j, int64_t version, Releasing* r) {
  if (!j.is_array() || j.size() < 3 || !Read(j[0], &r->host) || !Read(j[1], &r->local_rank) ||
      !Read(j[2], &r->slot)) {
    return false;
  }
  r->version = version;
  return j.size() == 3 || Read(j[3], &r->version);
}

json JoinRequestToJson(const JoinRequest& r, const std::string& machine) {
  json releasing = json::array();
  for (const Releasing& entry : r.releasing) releasing.push_back(ReleasingToJson(entry, false));
  json j = {{kName, r.name}, {kPriority, r.priority}, {kMinNp, r.min_np}, {kMaxNp, r.max_np},
            {kPid, r.pid}, {kMachine, machine}, {kHeld, HostListsToJson(r.held)},
            {kReleasing, releasing}};
  if (r.pid_start >= 0) j[kPidStart] = r.pid_start;
  return j;
}

bool JoinRequestFromJson(const json& j, JoinRequest* r, std::string* machine) {
  machine->clear();
  if (!j.is_object() || !Field(j, kName, &r->name) || !Field(j, kPriority, &r->priority) ||
      !Field(j, kMinNp, &r->min_np) || !Field(j, kMaxNp, &r->max_np) || !Optional(j, kPid, &r->pid) ||
      !Optional(j, kPidStart, &r->pid_start) || !Optional(j, kMachine, machine) ||
      !Optional(j, kHeld, &r->held)) {
    return false;
  }
  auto releasing = j.find(kReleasing);
  return releasing == j.end() || ReadReleasingList(*releasing, 0, &r->releasing);
}

json JoinReplyToJson(const JoinReply& reply) { return {{kId, reply.id}, {kVersion, reply.version}}; }

bool JoinReplyFromJson(const json& j, JoinReply* reply) {
  return j.is_object() && Field(j, kId, &reply->id) && Optional(j, kVersion, &reply->version);
}

json SyncRequestToJson(const SyncRequest& request) {
  return {{kLive, HostListsToJson(request.live)}, {kSeen, request.seen}};
}

bool SyncRequestFromJson(const json& j, SyncRequest* request) {
  return j.is_object() && Field(j, kLive, &request->live) && Optional(j, kSeen, &request->seen);
}

json GrantToJson(const Grant& grant) {
  json hosts = json::array();
  for (const Grant::Host& h : grant.hosts) {
    json host = {{kHost, h.name}, {kSlots, h.slots}, {kDevices, h.devices}};
    if (!h.start_through.empty()) host[kStartThrough] = h.start_through;
    if (!h.start_kind.empty()) host[kStartKind] = h.start_kind;
    hosts.push_back(std::move(host));
  }
  return {{kHosts, hosts}, {kTarget, grant.target}, {kQueued, grant.queued}, {kVersion, grant.version}};
}

bool GrantFromJson(const json& j, Grant* grant, std::string* err) {
  err->clear();
  if (!j.is_object() || !j.contains(kHosts) || !j[kHosts].is_array()) return false;
  const json& hosts = j[kHosts];
  for (const json& h : hosts) {
    Grant::Host host;
    if (!ReadGrantHost(h, &host)) {
      *err = hosts.dump();
      return false;
    }
    if (discovery::StartsLikeOption(host.name)) {  // it would become an option of ssh or srun
      *err = hosts.dump() + ": " + discovery::OptionLikeHostError(host.name);
      return false;
    }
    grant->hosts.push_back(std::move(host));
  }
  if (!Optional(j, kTarget, &grant->target) || !Optional(j, kQueued, &grant->queued) ||
      !Optional(j, kVersion, &grant->version)) {
    *err = j.dump();
    return false;
  }
  return true;
}

json PriorityRequestToJson(const PriorityRequest& request) {
  return {{kJob, request.job}, {kPriority, request.priority}};
}

bool PriorityRequestFromJson(const json& j, PriorityRequest* request) {
  return j.is_object() && Field(j, kJob, &request->job) && Field(j, kPriority, &request->priority);
}

json BookToJson(const Book& book) {
  json jobs = json::array();
  for (const BookJob& job : book.jobs) {
    json releasing = json::array();
    for (const Releasing& r : job.releasing) releasing.push_back(ReleasingToJson(r, true));
    json entry = {{kId, job.id}, {kVersion, job.version}, {kPriority, job.priority},
                  {kMinNp, job.min_np}, {kMaxNp, job.max_np}, {kArrival, job.arrival},
                  {kPid, job.pid}, {kLocal, job.local}, {kHeld, HostListsToJson(job.held)},
                  {kReleasing, releasing}};
    if (job.pid_start >= 0) entry[kPidStart] = job.pid_start;
    jobs.push_back(std::move(entry));
  }
  return {{kPool, book.pool}, {kJobs, jobs}};
}

bool BookJobFromJson(const json& j, BookJob* job) {
  if (!j.is_object() || !Field(j, kId, &job->id) || !Optional(j, kVersion, &job->version) ||
      !Field(j, kPriority, &job->priority) || !Field(j, kMinNp, &job->min_np) ||
      !Field(j, kMaxNp, &job->max_np) || !Field(j, kArrival, &job->arrival) ||
      !Field(j, kPid, &job->pid) || !Optional(j, kPidStart, &job->pid_start) ||
      !Field(j, kLocal, &job->local) || !Field(j, kHeld, &job->held)) {
    return false;
  }
  auto releasing = j.find(kReleasing);
  return releasing != j.end() && ReadReleasingList(*releasing, job->version, &job->releasing);
}

bool BookFromJson(const json& j, Book* book) {
  if (!j.is_object()) return false;
  if (std::string pool; Field(j, kPool, &pool)) book->pool = pool;
  auto jobs = j.find(kJobs);
  if (jobs == j.end() || !jobs->is_array()) return true;
  for (const json& entry : *jobs) {
    BookJob job;
    if (BookJobFromJson(entry, &job)) book->jobs.push_back(std::move(job));
  }
  return true;
}

}  // namespace etrun::pool
