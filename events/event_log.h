// EventLog: the job's events as JSON Lines (--events-file), one object per event, written and
// flushed as it happens so `tail -f` and `etrun report` see a job while it runs and after it is
// killed. Every object carries "ts" (UTC ISO 8601 with ms), "t" (seconds since the job started,
// monotonic) and "event"; the fields of each event are listed in docs/events.md (Events file).
// A default-constructed EventLog is disabled and ignores Emit, so callers need no null checks.
// Driver thread only.
#ifndef ETRUN_EVENTS_EVENT_LOG_H_
#define ETRUN_EVENTS_EVENT_LOG_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "events/exit_status.h"

namespace etrun::events {

class EventLog {
 public:
  EventLog();  // disabled
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Writes to `path` (created or truncated, 0644). Returns false and sets *err.
  bool Open(const std::string& path, std::string* err);
  // Keeps the lines in memory instead (tests).
  void Capture() { capture_ = true; }

  bool enabled() const { return fd_ >= 0 || capture_; }

  // Appends one event: `fields` (an object) plus ts, t and event.
  void Emit(std::string_view event, nlohmann::json fields = nlohmann::json::object());

  // The captured lines, parsed (tests).
  const std::vector<nlohmann::json>& captured() const { return captured_; }

 private:
  int fd_ = -1;
  bool capture_ = false;
  bool failed_ = false;
  std::chrono::steady_clock::time_point start_;
  std::vector<nlohmann::json> captured_;
};

// "finished", "failed", "drained" or "stopped" (docs/events.md, rank_exited), for a rank's exit.
// `stopped_by_etrun`: etrun had asked it to stop; `removed`: because its host left the job.
std::string ExitReason(const ExitStatus& status, bool stopped_by_etrun, bool removed);

// A rank's pid field: its local process id, or null for a rank on another host (its agent's
// process there; not known here).
inline nlohmann::json PidField(int pid) { return pid > 0 ? nlohmann::json(pid) : nlohmann::json(nullptr); }

// The exit fields of a rank_exited event: "code" and "signal" (one of them null).
nlohmann::json ExitFields(const ExitStatus& status);

}  // namespace etrun::events

#endif  // ETRUN_EVENTS_EVENT_LOG_H_
