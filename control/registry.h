// The registry of this user's running jobs and pools: $XDG_RUNTIME_DIR/etrun/ or
// /tmp/etrun-<uid>/ (0700), one <job>.json per running job (0600) and one per pool under
// "pools/": {"job", "pid", "pid_start", "port", "token", "started", "address"}, written by the
// job's or pool's ControlServer (control.h) and removed when it ends.
//
// An entry is its etrun's only while that process runs: readers take it as alive only when its
// pid exists AND that process started when the entry says ("pid_start": /proc/<pid>/stat's
// starttime, field 22, clock ticks since boot). A pid given to another process since (another
// user's, whose listener may sit on the old port) does not count, and neither does an entry
// without "pid_start" (an older etrun's). Readers remove the files of entries whose etrun is
// gone; one without "pid_start" is only skipped while its pid exists (it may be a running older
// etrun's).
// Functions are thread-safe (they share nothing but the files).
#ifndef ETRUN_CONTROL_REGISTRY_H_
#define ETRUN_CONTROL_REGISTRY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace etrun::control {

// One running job (or pool: the registry subdirectory kPoolRegistry) as its registry file
// describes it.
struct JobEntry {
  std::string job;
  std::string kind = "job";  // "job" or "pool": what it is, for messages (not in the file)
  std::string address = "127.0.0.1";  // where its endpoint listens, as seen from this machine
  int pid = 0;
  int64_t pid_start = -1;  // the pid's start time (ProcessStartTime); -1: unknown
  int port = 0;
  std::string token;
  std::string started;  // ISO 8601 UTC
  std::string path;     // the registry file
};

// Registry subdirectory of the shared slot pools (`etrun pool`).
inline constexpr char kPoolRegistry[] = "pools";

// When process `pid` started: /proc/<pid>/stat's field 22 (clock ticks since boot). -1 when
// there is no such process or its stat cannot be read.
int64_t ProcessStartTime(int pid);

// True when process `pid` exists and started at `start` (ProcessStartTime): the same process,
// not a later one given the pid again. False for start -1 (unknown).
bool ProcessAlive(int pid, int64_t start);

// This machine's hostname ("" if unknown).
std::string MachineName();

// The registry directory (or its subdirectory `sub`), created 0700 if missing. Returns "" and
// sets *err when it cannot be made or is not private to this user.
std::string RegistryDir(std::string* err, const std::string& sub = "");

// Reads one registry file. False when it is missing or malformed.
bool ReadEntry(const std::string& path, JobEntry* out);

// Publishes `entry` as `dir`/<entry.job>.json (0600, replaced atomically). Returns the file's
// path, or "" with *err.
std::string WriteEntry(const std::string& dir, const JobEntry& entry, std::string* err);

// Live jobs (or, with kPoolRegistry, pools) of this user, sorted by name; stale files are
// removed (see the top).
std::vector<JobEntry> ListJobs(std::string* err, const std::string& sub = "");

// Picks the job named `name`, or the only one when `name` is empty. Returns false and sets *err
// (no job, several jobs: name one, no such job).
bool FindJob(const std::string& name, JobEntry* out, std::string* err);

}  // namespace etrun::control

#endif  // ETRUN_CONTROL_REGISTRY_H_
