// report: events file -> JobTimeline. Summaries are in report_summary.cc, the picture in
// report_svg.cc.
#include "report/report.h"

#include "events/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "report/event_reader.h"

namespace etrun::report {
namespace {

namespace field = events::field;

using nlohmann::json;

// The event types the report reads; anything else is skipped.
enum class EventType {
  kJobStart,
  kDiscovery,
  kHostBlacklisted,
  kHostResurrected,
  kRound,
  kRankStarted,
  kRankExited,
  kReset,
  kResetBegin,
  kWorldReady,
  kJobEnd,
};

bool TypeFromName(const std::string& name, EventType* type) {
  static const std::pair<const char*, EventType> kNames[] = {
      {events::kJobStart, EventType::kJobStart},
      {events::kDiscovery, EventType::kDiscovery},
      {events::kHostBlacklisted, EventType::kHostBlacklisted},
      {events::kHostResurrected, EventType::kHostResurrected},
      {events::kRound, EventType::kRound},
      {events::kRankStarted, EventType::kRankStarted},
      {events::kRankExited, EventType::kRankExited},
      {events::kReset, EventType::kReset},
      {events::kResetBegin, EventType::kResetBegin},
      {events::kWorldReady, EventType::kWorldReady},
      {events::kJobEnd, EventType::kJobEnd},
  };
  for (const auto& [n, t] : kNames) {
    if (name == n) {
      *type = t;
      return true;
    }
  }
  return false;
}

// One known event with the fields the report uses, checked and decoded.
struct Event {
  EventType type = EventType::kJobStart;
  double t = 0;
  std::string ts, job, host, reason, cause, pool_job;
  std::vector<std::string> command;
  std::vector<std::string> hosts;  // job_start/discovery host lists, round assignments
  int np = 0, rank = 0, local_rank = 0, pid = 0, round = 0, world_size = 0, count = 0;
  int exit_code = 0;
  std::optional<int> min_np, max_np, code, signal;
  std::optional<double> cooldown_s;
  bool elastic = false;
};

// Decodes one known event; returns false with *err (without the line prefix) on a bad field.
bool DecodeEvent(const json& object, EventType type, const std::string& type_name, Event* event,
                 std::string* err) {
  FieldReader f(object, type_name);
  event->type = type;
  event->t = f.Num(field::kT);
  event->ts = f.Str(field::kTs, /*required=*/false);
  switch (type) {
    case EventType::kJobStart:
      event->job = f.Str(field::kJob, false);
      event->command = f.Strings(field::kCommand);
      event->np = f.OptInt(field::kNp).value_or(0);
      event->min_np = f.OptInt(field::kMinNp);
      event->max_np = f.OptInt(field::kMaxNp);
      event->elastic = f.Bool(field::kElastic);
      event->hosts = f.HostNames(field::kHosts, false);
      event->pool_job = f.Str(field::kPoolJob, false);
      break;
    case EventType::kDiscovery:
      event->hosts = f.HostNames(field::kHosts, true);
      break;
    case EventType::kHostBlacklisted:
      event->host = f.Str(field::kHost);
      event->reason = f.Str(field::kReason, false);
      event->cooldown_s = f.OptNum(field::kCooldownS);
      break;
    case EventType::kHostResurrected:
      event->host = f.Str(field::kHost);
      break;
    case EventType::kRound:
      event->round = f.OptInt(field::kRound).value_or(0);
      event->world_size = f.Int(field::kWorldSize);
      event->hosts = f.HostNames(field::kAssignment, false);
      break;
    case EventType::kRankStarted:
    case EventType::kRankExited:
      event->rank = f.Int(field::kRank);
      event->host = f.Str(field::kHost);
      event->local_rank = f.OptInt(field::kLocalRank).value_or(0);
      event->pid = f.OptInt(field::kPid).value_or(0);
      event->round = f.OptInt(field::kRound).value_or(0);
      if (type == EventType::kRankExited) {
        event->code = f.OptInt(field::kCode);
        event->signal = f.OptInt(field::kSignal);
        event->reason = f.Str(field::kReason);
      }
      break;
    case EventType::kReset:
      event->count = f.OptInt(field::kResets).value_or(0);
      event->reason = f.Str(field::kReason, false);
      break;
    case EventType::kResetBegin:
      event->round = f.OptInt(field::kRound).value_or(0);
      event->reason = f.Str(field::kReason, false);
      break;
    case EventType::kWorldReady:
      event->round = f.OptInt(field::kRound).value_or(0);
      event->world_size = f.Int(field::kWorldSize);
      break;
    case EventType::kJobEnd:
      event->exit_code = f.Int(field::kExitCode);
      event->cause = f.Str(field::kCause, false);
      break;
  }
  *err = f.error();
  return err->empty();
}

// Turns events (sorted by t, clamped to [0, end]) into the timeline's model, one event at a time.
class TimelineBuilder {
 public:
  TimelineBuilder(const std::vector<Event>& events, JobTimeline* tl) : tl_(tl) {
    // Writers since issue 13 mark when training stops (reset_begin) and goes on (world_ready):
    // a world trains from its world_ready, not from its round's assignment.
    world_ready_events_ = std::any_of(events.begin(), events.end(), [](const Event& e) {
      return e.type == EventType::kWorldReady;
    });
    // World size: static jobs have one world from the start; elastic ones start without one.
    current_.start = 0;
    if (tl->elastic) {
      current_.state = SizeSegment::State::kStarting;
    } else {
      std::set<int> labels;
      for (const Event& e : events) {
        if (e.type == EventType::kRankStarted) labels.insert(e.rank);
      }
      current_.size = tl->np > 0 ? tl->np : static_cast<int>(labels.size());
    }
  }

  void Add(const Event& e) {
    switch (e.type) {
      case EventType::kJobStart:
        if (!e.hosts.empty()) SetHostList(e.t, e.hosts);
        break;
      case EventType::kDiscovery:
        SetHostList(e.t, e.hosts);
        break;
      case EventType::kHostBlacklisted:
        Blacklisted(e);
        break;
      case EventType::kHostResurrected:
        Resurrected(e);
        break;
      case EventType::kRound:
      case EventType::kWorldReady:
        for (const std::string& host : e.hosts) AddHost(host);
        if (world_ready_events_ == (e.type == EventType::kWorldReady)) NewWorld(e);
        break;
      case EventType::kReset:
        tl_->resets.push_back({e.t, e.count, e.reason});
        BeginReset(e.t);
        break;
      case EventType::kResetBegin:
        BeginReset(e.t);
        break;
      case EventType::kRankStarted:
        RankStarted(e);
        break;
      case EventType::kRankExited:
        RankExited(e);
        break;
      case EventType::kJobEnd:
        break;
    }
  }

  void Finish() {
    SwitchTo(tl_->end, SizeSegment{});
    for (const auto& [host, since] : present_since_) tl_->presence[host].push_back({since, tl_->end});
    for (const auto& [host, index] : open_blacklist_) {
      HostBlacklisting& b = tl_->blacklists[index];
      b.end = b.cooldown_s ? std::min(tl_->end, b.t + *b.cooldown_s) : tl_->end;
    }
  }

 private:
  void AddHost(const std::string& host) {
    if (seen_.insert(host).second) tl_->hosts.push_back(host);
  }

  void SetHostList(double t, const std::vector<std::string>& hosts) {
    const std::set<std::string> next(hosts.begin(), hosts.end());
    for (auto it = present_since_.begin(); it != present_since_.end();) {
      if (next.count(it->first) == 0) {
        tl_->presence[it->first].push_back({it->second, t});
        it = present_since_.erase(it);
      } else {
        ++it;
      }
    }
    for (const std::string& host : hosts) {
      AddHost(host);
      present_since_.emplace(host, t);
    }
  }

  void Blacklisted(const Event& e) {
    AddHost(e.host);
    if (auto it = open_blacklist_.find(e.host); it != open_blacklist_.end()) {
      tl_->blacklists[it->second].end = e.t;  // blacklisted again: the first one ends here
    }
    open_blacklist_[e.host] = tl_->blacklists.size();
    tl_->blacklists.push_back({e.t, e.host, e.reason, e.cooldown_s, tl_->end});
  }

  void Resurrected(const Event& e) {
    AddHost(e.host);
    if (auto it = open_blacklist_.find(e.host); it != open_blacklist_.end()) {
      tl_->blacklists[it->second].end = e.t;
      open_blacklist_.erase(it);
    }
  }

  void SwitchTo(double t, SizeSegment next) {
    current_.end = t;
    if (current_.end > current_.start) tl_->sizes.push_back(current_);
    next.start = t;
    current_ = next;
  }

  void NewWorld(const Event& e) {
    SizeSegment next;
    next.size = e.world_size;
    next.round = e.round;
    SwitchTo(e.t, next);
  }

  void BeginReset(double t) {
    if (current_.state == SizeSegment::State::kResetting) return;
    SizeSegment next;
    next.state = SizeSegment::State::kResetting;
    SwitchTo(t, next);
  }

  void RankStarted(const Event& e) {
    AddHost(e.host);
    RankRun run;
    run.rank = e.rank;
    run.host = e.host;
    run.local_rank = e.local_rank;
    run.round = e.round;
    run.start = e.t;
    run.end = tl_->end;
    open_by_pid_[{e.host, e.pid}] = tl_->runs.size();
    tl_->runs.push_back(run);
  }

  void RankExited(const Event& e) {
    AddHost(e.host);
    // Match by (host, pid); a writer without pids still matches the latest open run of the same
    // label on the same host.
    std::optional<size_t> index;
    if (auto it = open_by_pid_.find({e.host, e.pid}); it != open_by_pid_.end()) {
      index = it->second;
      open_by_pid_.erase(it);
    } else {
      for (size_t i = tl_->runs.size(); i-- > 0;) {
        const RankRun& r = tl_->runs[i];
        if (!r.exited && r.host == e.host && r.rank == e.rank) {
          index = i;
          break;
        }
      }
    }
    if (index) {
      RankRun& run = tl_->runs[*index];
      run.end = e.t;
      run.exited = true;
      run.reason = e.reason;
      run.code = e.code;
      run.signal = e.signal;
    }
    if (e.reason == events::kFailed) {
      tl_->failures.push_back({e.t, e.rank, e.host, e.local_rank, e.code, e.signal});
    }
  }

  JobTimeline* tl_;
  bool world_ready_events_ = false;
  SizeSegment current_;
  std::set<std::string> seen_;
  std::map<std::pair<std::string, int>, size_t> open_by_pid_;  // (host, pid) -> runs index
  std::map<std::string, double> present_since_;                // hosts in the current host list
  std::map<std::string, size_t> open_blacklist_;               // host -> blacklists index
};

void Build(const std::vector<Event>& events, JobTimeline* tl) {
  TimelineBuilder builder(events, tl);
  for (const Event& e : events) builder.Add(e);
  builder.Finish();
}

}  // namespace

namespace {

// Decodes one line's event: false with *err on a bad field; *known is false for an unknown event
// (whose "t", if any, still moves *last_t).
bool ReadEvent(const json& object, const std::string& type_name, const std::string& where,
               Event* event, bool* known, double* last_t, std::string* err) {
  *known = false;
  EventType type;
  if (!TypeFromName(type_name, &type)) {
    // Unknown events only move the end of the picture (a later writer's "checkpoint" still
    // happened while the job ran).
    if (const json::const_iterator t = object.find(field::kT); t != object.end() && t->is_number()) {
      *last_t = std::max(*last_t, t->get<double>());
    }
    return true;
  }
  std::string field_err;
  if (!DecodeEvent(object, type, type_name, event, &field_err)) {
    *err = fmt::format("{}: {}", where, field_err);
    return false;
  }
  if (!std::isfinite(event->t)) event->t = 0;  // 1e999 parses as infinity
  event->t = std::max(0.0, event->t);
  *last_t = std::max(*last_t, event->t);
  *known = true;
  return true;
}

// The job's own facts from job_start and job_end (the first of each); job_end's t ends it.
void ReadJob(const std::vector<Event>& events, JobTimeline* tl) {
  for (const Event& e : events) {
    if (e.type == EventType::kJobStart && !tl->has_job_start) {
      tl->has_job_start = true;
      tl->job = e.job;
      tl->command = e.command;
      tl->start_ts = e.ts;
      tl->pool_job = e.pool_job;
      tl->np = e.np;
      tl->min_np = e.min_np;
      tl->max_np = e.max_np;
      tl->elastic = e.elastic;
    } else if (e.type == EventType::kJobEnd && !tl->has_job_end) {
      tl->has_job_end = true;
      tl->exit_code = e.exit_code;
      tl->cause = e.cause;
      tl->end = e.t;
    }
  }
}

}  // namespace

bool ParseEvents(std::string_view text, const std::string& name, JobTimeline* timeline,
                 std::string* err) {
  *timeline = JobTimeline();
  std::vector<Event> events;
  double last_t = 0;
  bool has_round = false;
  const auto on_event = [&events, &last_t, &has_round](const json& object,
                                                       const std::string& type_name,
                                                       const std::string& where, std::string* e) {
    Event event;
    bool known = false;
    if (!ReadEvent(object, type_name, where, &event, &known, &last_t, e)) return false;
    if (!known) return true;
    has_round = has_round || event.type == EventType::kRound;
    events.push_back(std::move(event));
    return true;
  };
  if (!ForEachEvent(text, name, on_event, &timeline->warnings, err)) return false;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.t < b.t; });
  timeline->end = last_t;
  ReadJob(events, timeline);
  timeline->elastic = timeline->elastic || has_round;
  for (Event& e : events) e.t = std::min(e.t, timeline->end);  // nothing after job_end
  Build(events, timeline);
  return true;
}

}  // namespace etrun::report
