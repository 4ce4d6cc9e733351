// The pool's wire format: the values a job (pool/pool_client.h) and the pool daemon
// (pool/pool_daemon.h) exchange as JSON bodies, and the pool's book as the daemon keeps it on
// disk (pool/pool_state.h). Every field name is written here and nowhere else.
//
//   POST /jobs            JoinRequest  {"name", "priority", "min_np", "max_np", "pid", "pid_start",
//                                       "machine", "held": HostLists, "releasing": [Releasing]}
//                         JoinReply    {"id", "version"}
//   POST /jobs/ID/sync    SyncRequest  {"live": HostLists, "seen"}
//                         Grant        {"hosts": [{"host", "slots", "devices", "start_through",
//                                                  "start_kind"}],
//                                       "target", "queued", "version"}
//   POST /priority        PriorityRequest {"job", "priority"}
//   DELETE /jobs/ID, POST /priority, POST /stop: {"ok": true}
//   any failure           {"error": text}
//   the book (a file)     Book         {"pool", "jobs": [BookJob]}
//
// The *ToJson functions write exactly these shapes. The *FromJson functions never throw: they
// return false for any other shape (a missing field, a wrong type, an integer out of range) and
// then leave their output partly written, to be thrown away. A field marked optional that is
// absent keeps the value the output held before the call; present, it must have its type.
// Thread-compatible (plain values).
#ifndef ETRUN_POOL_POOL_WIRE_H_
#define ETRUN_POOL_POOL_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/control_wire.h"
#include "pool/allocation.h"

namespace etrun::pool {

// The largest request body the pool takes (its ControlServer's limit; a bigger one is answered
// 413 unread). The big bodies are a job's join and sync, which name hosts: sized for a job on
// 4,096 hosts with names of up to 64 bytes and 8 slots each. Its sync ("live": 8 local ranks a
// host, ~85 bytes) is 0.35 MB; its join, when every slot is still draining (each a "releasing"
// entry ["<name>",7,7], ~73 bytes), 2.4 MB, the most a join can be (a slot is held or releasing,
// never both). pool_wire_test builds that join and checks it fits.
inline constexpr size_t kMaxBodyBytes = 4 << 20;

// host -> slot indices in local-rank order (a holding), or host -> local ranks (a live report).
// On the wire: {host: [n, ...]}, every n in 0..INT32_MAX.
using HostLists = std::map<std::string, std::vector<int>>;

// A slot a job still runs a process on although it was taken from it (draining).
// On the wire: [host, local rank, slot] (a join request: the pool assigns the version) or
// [host, local rank, slot, version] (the book).
struct Releasing {
  std::string host;
  int local_rank = 0;
  int slot = 0;
  // The job's grant version that no longer has it: the slot is free only once the job reported
  // that version seen (its driver works from it) and no live process in that local rank. Before,
  // a rank gone for another reason (a crash) could be restarted there from the older grant.
  int64_t version = 0;
};

struct JoinRequest {
  std::string name;               // the job's name; made unique by the pool
  int priority = kDefaultPriority;
  int min_np = 1;
  int max_np = 1;
  int pid = 0;                    // the job's etrun, when `local`
  int64_t pid_start = -1;         // its start time (control::ProcessStartTime); -1: not sent
  bool local = true;              // runs on the pool's machine: its pid is watched (not sent:
                                  // the pool decides it from the job's machine and pid)
  // Re-registration with a pool that lost its book: what it holds, and slots it still drains.
  HostLists held;
  std::vector<Releasing> releasing;
};

struct JoinReply {
  std::string id;        // the job's id in the pool
  int64_t version = 0;   // the job's grant version there (optional on the wire)
};

struct SyncRequest {
  HostLists live;        // local ranks with a live process, per host
  int64_t seen = 0;      // the version of the last grant the job applied (optional on the wire)
};

// What a job may use now (a sync reply): per host, in local-rank order, the slot indices and
// their devices.
struct Grant {
  struct Host {
    std::string name;
    std::vector<int> slots;
    std::vector<std::string> devices;  // per slot; empty strings for plain slots
    // The remote-shell template ({host}) a job on another machine starts its ranks here through
    // (a pool inside Slurm: srun in the pool's allocation); "": its own way (SSH). Optional on
    // the wire, written only when set.
    std::string start_through{};
    // The cluster kind whose step start_through runs (ClusterWords::name: "slurm"), so the job
    // takes the route as that kind's without guessing; "": a plain remote shell. Optional too.
    std::string start_kind{};
  };
  std::vector<Host> hosts;
  int target = 0;
  bool queued = false;
  int64_t version = 0;  // changes whenever slots are taken from the job; the job echoes it back
  int total() const;
};

struct PriorityRequest {
  std::string job;
  int64_t priority = 0;  // any integer: the pool checks the range
};

// One job of the book: what the pool knew of it when the book was written.
struct BookJob {
  std::string id;
  int64_t version = 0;  // optional on the wire
  int priority = kDefaultPriority;
  int min_np = 1;
  int max_np = 1;
  int64_t arrival = 0;
  int pid = 0;
  int64_t pid_start = -1;  // with pid, the process watched (optional on the wire)
  bool local = true;
  HostLists held;
  std::vector<Releasing> releasing;  // entries without a version take the job's
};

// The pool's token is not in it: a pool's token is new at every start.
struct Book {
  std::string pool;
  std::vector<BookJob> jobs;
};

nlohmann::json HostListsToJson(const HostLists& lists);
bool HostListsFromJson(const nlohmann::json& j, HostLists* lists);

// With `with_version` the four-element form, else the three-element one. From JSON, an entry
// without a version gets `version`.
nlohmann::json ReleasingToJson(const Releasing& r, bool with_version);
bool ReleasingFromJson(const nlohmann::json& j, int64_t version, Releasing* r);

// `machine` is the job's machine (control::MachineName()); `r.local` is not sent, "pid_start"
// only when known (>= 0). From JSON, "pid", "pid_start", "machine" (else ""), "held" and
// "releasing" are optional; the entries of "releasing" get version 0 and `r->local` is left as
// it was.
nlohmann::json JoinRequestToJson(const JoinRequest& r, const std::string& machine);
bool JoinRequestFromJson(const nlohmann::json& j, JoinRequest* r, std::string* machine);

nlohmann::json JoinReplyToJson(const JoinReply& reply);
bool JoinReplyFromJson(const nlohmann::json& j, JoinReply* reply);

nlohmann::json SyncRequestToJson(const SyncRequest& request);
bool SyncRequestFromJson(const nlohmann::json& j, SyncRequest* request);

// The sync reply. From JSON, "target", "queued" and "version" are optional. When `j` is not a
// grant at all (no "hosts" list: an error reply, say) *err is left empty; when its hosts or
// another field are malformed, *err is that part as JSON text (the "hosts" list, or the reply).
// A host whose name begins with '-' (discovery::StartsLikeOption) makes the grant bad: *err is the
// hosts list and why.
nlohmann::json GrantToJson(const Grant& grant);
bool GrantFromJson(const nlohmann::json& j, Grant* grant, std::string* err);

nlohmann::json PriorityRequestToJson(const PriorityRequest& request);
bool PriorityRequestFromJson(const nlohmann::json& j, PriorityRequest* request);

// The pool's endpoint is a control endpoint: its replies {"ok": true} and {"error": text} are
// the control wire's (control/control_wire.h).
using control::ErrorText;
using control::ErrorToJson;
using control::OkToJson;

// From JSON, false only when `j` is not an object: "pool" and "jobs" are optional, and one of a
// wrong type counts as absent ("token", an older etrun's, is ignored). A job's "pid_start" is
// written when known (>= 0). A damaged job entry (a field other than "version"
// missing, or any of a wrong type) is left out of book->jobs: that job joins again as a new one.
nlohmann::json BookToJson(const Book& book);
bool BookFromJson(const nlohmann::json& j, Book* book);
bool BookJobFromJson(const nlohmann::json& j, BookJob* job);

}  // namespace etrun::pool

#endif  // ETRUN_POOL_POOL_WIRE_H_
