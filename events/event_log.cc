#include "events/event_log.h"

#include "events/schema.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <ctime>

#include <spdlog/spdlog.h>

namespace etrun::events {

namespace {

std::string UtcNow() {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct tm utc;
  gmtime_r(&now.tv_sec, &utc);
  char date[32];
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  snprintf(out, sizeof(out), "%s.%03ldZ", date, now.tv_nsec / 1000000);
  return out;
}

}  // namespace

EventLog::EventLog() : start_(std::chrono::steady_clock::now()) {}

EventLog::~EventLog() {
  if (fd_ >= 0) close(fd_);
}

bool EventLog::Open(const std::string& path, std::string* err) {
  // Never through a symbolic link someone put at the name: it would truncate what it points to.
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND | O_NOFOLLOW, 0644);
  if (fd_ < 0 && errno == ELOOP) {
    *err = "the events file " + path + " is a symbolic link, which etrun does not write through: "
           "remove it, or choose another --events-file path";
    return false;
  }
  if (fd_ < 0) {
    *err = "cannot write the events file " + path + ": " + strerror(errno) +
           ": choose a writable --events-file path";
    return false;
  }
  start_ = std::chrono::steady_clock::now();
  return true;
}

void EventLog::Emit(std::string_view event, nlohmann::json fields) {
  if (!enabled()) return;
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  nlohmann::json line = {{"ts", UtcNow()}, {"t", std::round(t * 1000.0) / 1000.0},
                         {"event", std::string(event)}};
  for (auto& [key, value] : fields.items()) line[key] = value;
  if (capture_) {
    captured_.push_back(line);
    return;
  }
  // nlohmann keeps insertion order only with ordered_json; put ts, t, event first by hand.
  std::string text = "{\"ts\":" + line["ts"].dump() + ",\"t\":" + line["t"].dump() +
                     ",\"event\":" + line["event"].dump();
  for (auto& [key, value] : fields.items()) {
    text += "," + nlohmann::json(key).dump() + ":" + value.dump(-1, ' ', false,
                                                              nlohmann::json::error_handler_t::replace);
  }
  text += "}\n";
  // One write per line with O_APPEND: a reader never sees half a line from us.
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!failed_) spdlog::error("cannot write the events file: {}; no more events are written", strerror(errno));
      failed_ = true;
      close(fd_);
      fd_ = -1;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string ExitReason(const ExitStatus& status, bool stopped_by_etrun, bool removed) {
  if (removed) return kDrained;
  if (stopped_by_etrun) return kStopped;
  return status.success() ? kFinished : kFailed;
}

nlohmann::json ExitFields(const ExitStatus& status) {
  nlohmann::json fields = nlohmann::json::object();
  if (status.kind == ExitStatus::Kind::kExited) {
    fields[field::kCode] = status.code;
    fields[field::kSignal] = nullptr;
  } else {
    fields[field::kCode] = nullptr;
    fields[field::kSignal] = status.signal;
  }
  return fields;
}

}  // namespace etrun::events
