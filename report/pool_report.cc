// pool_report: a pool's events file -> PoolTimeline. Summaries are in pool_summary.cc, the
// picture in pool_svg.cc.
#include "report/pool_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "events/schema.h"
#include "report/event_reader.h"

namespace etrun::report {
namespace {

namespace field = events::field;
using nlohmann::json;

enum class PoolEventType { kStart, kHosts, kJobJoined, kPriority, kJobLeft, kAllocation, kStop };

bool PoolTypeFromName(const std::string& name, PoolEventType* type) {
  static const std::pair<const char*, PoolEventType> kNames[] = {
      {events::kPoolStart, PoolEventType::kStart},
      {events::kPoolHosts, PoolEventType::kHosts},
      {events::kPoolJobJoined, PoolEventType::kJobJoined},
      {events::kPoolPriority, PoolEventType::kPriority},
      {events::kPoolJobLeft, PoolEventType::kJobLeft},
      {events::kPoolAllocation, PoolEventType::kAllocation},
      {events::kPoolStop, PoolEventType::kStop},
  };
  for (const auto& [n, t] : kNames) {
    if (name == n) {
      *type = t;
      return true;
    }
  }
  return false;
}

// One pool event with the fields the report uses, checked and decoded.
struct PoolEvent {
  PoolEventType type = PoolEventType::kStart;
  double t = 0;
  std::string ts, pool, job, reason;
  std::vector<PoolHost> hosts;
  std::optional<int> total, priority, min_np, max_np;
  std::map<std::string, int> held;
  std::optional<std::map<std::string, int>> target;  // nullopt: the event has none
  std::vector<std::string> queued;
};

// Decodes one pool event; returns false with *err (without the line prefix) on a bad field.
bool DecodePoolEvent(const json& object, PoolEventType type, const std::string& type_name,
                     PoolEvent* event, std::string* err) {
  FieldReader f(object, type_name);
  event->type = type;
  event->t = f.Num(field::kT);
  event->ts = f.Str(field::kTs, /*required=*/false);
  switch (type) {
    case PoolEventType::kStart:
    case PoolEventType::kHosts:
      if (type == PoolEventType::kStart) event->pool = f.Str(field::kPool, false);
      for (auto& [host, slots] : f.HostSlots(field::kHosts, false)) {
        event->hosts.push_back({std::move(host), slots});
      }
      event->total = f.Int(field::kTotal);
      break;
    case PoolEventType::kJobJoined:
      event->job = f.Str(field::kJob);
      event->priority = f.OptInt(field::kPriority);
      event->min_np = f.OptInt(field::kMinNp);
      event->max_np = f.OptInt(field::kMaxNp);
      break;
    case PoolEventType::kPriority:
      event->job = f.Str(field::kJob);
      event->priority = f.Int(field::kPriority);
      break;
    case PoolEventType::kJobLeft:
      event->job = f.Str(field::kJob);
      event->reason = f.Str(field::kReason, false);
      break;
    case PoolEventType::kAllocation:
      event->total = f.OptInt(field::kTotal);
      event->held = f.IntMap(field::kHeld, /*required=*/true);
      if (const auto target = object.find(field::kTarget);
          target != object.end() && !target->is_null()) {
        event->target = f.IntMap(field::kTarget, false);
      }
      event->queued = f.Strings(field::kQueued);
      break;
    case PoolEventType::kStop:
      break;
  }
  *err = f.error();
  return err->empty();
}

// Sets the series to `slots` from t on: a step only where the value changes; a second value at
// the same t replaces the first (events at one instant count as one change).
void Step(std::vector<SlotStep>* steps, double t, int slots) {
  if (!steps->empty() && steps->back().t == t) {
    steps->back().slots = slots;
    if (steps->size() >= 2 && (*steps)[steps->size() - 2].slots == slots) steps->pop_back();
    return;
  }
  if (steps->empty() || steps->back().slots != slots) steps->push_back({t, slots});
}

// Turns pool events (sorted by t, clamped to [0, end]) into the timeline, one event at a time.
class PoolBuilder {
 public:
  explicit PoolBuilder(PoolTimeline* tl) : tl_(tl) {}

  void Add(const PoolEvent& e) {
    switch (e.type) {
      case PoolEventType::kStart:
        if (!tl_->has_pool_start) {
          tl_->has_pool_start = true;
          tl_->pool = e.pool;
          tl_->start_ts = e.ts;
          tl_->hosts = e.hosts;
        }
        Step(&tl_->total, e.t, *e.total);
        break;
      case PoolEventType::kHosts:
        Step(&tl_->total, e.t, *e.total);
        break;
      case PoolEventType::kJobJoined:
        Joined(e);
        break;
      case PoolEventType::kPriority:
        SetPriority(&Job(e.job, e.t), e.t, *e.priority);
        break;
      case PoolEventType::kJobLeft:
        Left(e);
        break;
      case PoolEventType::kAllocation:
        Allocation(e);
        break;
      case PoolEventType::kStop:
        break;
    }
  }

  void Finish() {
    for (const auto& [index, since] : queued_since_) {
      tl_->jobs[index].queued.push_back({since, tl_->end});
    }
    for (PoolJobHistory& job : tl_->jobs) {
      if (!job.has_left) job.left = tl_->end;
    }
  }

 private:
  // The latest stay of the job called `name`, begun at t if the file has not named it before.
  PoolJobHistory& Job(const std::string& name, double t) {
    if (auto it = latest_.find(name); it != latest_.end()) return tl_->jobs[it->second];
    return NewStay(name, t);
  }

  PoolJobHistory& NewStay(const std::string& name, double t) {
    latest_[name] = tl_->jobs.size();
    PoolJobHistory& job = tl_->jobs.emplace_back();
    job.name = name;
    job.joined = t;
    job.held.push_back({t, 0});
    job.target.push_back({t, 0});
    return job;
  }

  static void SetPriority(PoolJobHistory* job, double t, int priority) {
    if (job->priorities.empty() || job->priorities.back().priority != priority) {
      job->priorities.push_back({t, priority});
    }
  }

  void Joined(const PoolEvent& e) {
    auto it = latest_.find(e.job);
    PoolJobHistory& job = it == latest_.end() || tl_->jobs[it->second].has_left
                              ? NewStay(e.job, e.t)
                              : tl_->jobs[it->second];
    if (e.priority) SetPriority(&job, e.t, *e.priority);
    if (e.min_np) job.min_np = e.min_np;
    if (e.max_np) job.max_np = e.max_np;
  }

  void Left(const PoolEvent& e) {
    PoolJobHistory& job = Job(e.job, e.t);
    job.has_left = true;
    job.left = e.t;
    job.left_reason = e.reason;
    Step(&job.held, e.t, 0);
    Step(&job.target, e.t, 0);
    if (auto it = queued_since_.find(latest_[e.job]); it != queued_since_.end()) {
      job.queued.push_back({it->second, e.t});
      queued_since_.erase(it);
    }
  }

  void Allocation(const PoolEvent& e) {
    if (e.total) Step(&tl_->total, e.t, *e.total);
    // Name every job first, so that the loops below see the ones this event introduces.
    for (const auto& [name, slots] : e.held) Job(name, e.t);
    if (e.target) {
      for (const auto& [name, slots] : *e.target) Job(name, e.t);
    }
    for (const std::string& name : e.queued) Job(name, e.t);

    const std::set<std::string> queued(e.queued.begin(), e.queued.end());
    for (const auto& [name, index] : latest_) {
      PoolJobHistory& job = tl_->jobs[index];
      const auto held = e.held.find(name);
      Step(&job.held, e.t, held == e.held.end() ? 0 : held->second);
      if (e.target) {
        const auto target = e.target->find(name);
        Step(&job.target, e.t, target == e.target->end() ? 0 : target->second);
      }
      const auto open = queued_since_.find(index);
      if (queued.count(name) > 0 && open == queued_since_.end()) {
        queued_since_[index] = e.t;
      } else if (queued.count(name) == 0 && open != queued_since_.end()) {
        job.queued.push_back({open->second, e.t});
        queued_since_.erase(open);
      }
    }
    tl_->allocations.push_back({e.t, SlotsAt(tl_->total, e.t), e.held,
                                e.target.value_or(std::map<std::string, int>()), e.queued});
  }

  PoolTimeline* tl_;
  std::map<std::string, size_t> latest_;   // job name -> jobs index of its latest stay
  std::map<size_t, double> queued_since_;  // jobs index -> start of its open queued span
};

// Adds a warning if, at some instant, the jobs together hold more slots than the pool has (the
// writer promises they never do; the chart would draw above the dashed total).
void CheckHeldWithinTotal(const std::string& name, PoolTimeline* tl) {
  if (tl->total.empty()) return;
  std::set<double> times;
  for (const SlotStep& s : tl->total) times.insert(s.t);
  for (const PoolJobHistory& job : tl->jobs) {
    for (const SlotStep& s : job.held) times.insert(s.t);
  }
  int over = 0;
  std::string first;
  for (const double t : times) {
    int held = 0;
    for (const PoolJobHistory& job : tl->jobs) held += SlotsAt(job.held, t);
    const int total = SlotsAt(tl->total, t);
    if (held <= total) continue;
    if (over++ == 0) {
      first = fmt::format("{}: at {} the jobs hold {} slots, more than the pool's {}", name,
                          FormatDuration(t), held, total);
    }
  }
  if (over == 1) tl->warnings.push_back(first);
  if (over > 1) tl->warnings.push_back(fmt::format("{} (and {} more times)", first, over - 1));
}

}  // namespace

int SlotsAt(const std::vector<SlotStep>& steps, double t) {
  const auto after = std::upper_bound(steps.begin(), steps.end(), t,
                                      [](double v, const SlotStep& s) { return v < s.t; });
  return after == steps.begin() ? 0 : std::prev(after)->slots;
}

bool IsPoolEvents(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t newline = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, newline - pos);
    pos = newline + 1;
    if (line.find("pool_") == std::string_view::npos) continue;  // parse only the candidates
    const json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!object.is_object()) continue;
    const auto type = object.find(field::kEvent);
    PoolEventType unused;
    if (type != object.end() && type->is_string() &&
        PoolTypeFromName(type->get<std::string>(), &unused)) {
      return true;
    }
  }
  return false;
}

bool ParsePoolEvents(std::string_view text, const std::string& name, PoolTimeline* timeline,
                     std::string* err) {
  *timeline = PoolTimeline();
  std::vector<PoolEvent> events;
  double last_t = 0;
  const auto on_event = [&events, &last_t](const json& object, const std::string& type_name,
                                           const std::string& where, std::string* e) {
    PoolEventType type;
    if (!PoolTypeFromName(type_name, &type)) {
      // Unknown events (job events too) only move the end, as in a job's file.
      if (const auto t = object.find(field::kT); t != object.end() && t->is_number()) {
        last_t = std::max(last_t, t->get<double>());
      }
      return true;
    }
    PoolEvent event;
    std::string field_err;
    if (!DecodePoolEvent(object, type, type_name, &event, &field_err)) {
      *e = fmt::format("{}: {}", where, field_err);
      return false;
    }
    if (!std::isfinite(event.t)) event.t = 0;  // 1e999 parses as infinity
    event.t = std::max(0.0, event.t);
    last_t = std::max(last_t, event.t);
    events.push_back(std::move(event));
    return true;
  };
  if (!ForEachEvent(text, name, on_event, &timeline->warnings, err)) return false;
  std::stable_sort(events.begin(), events.end(),
                   [](const PoolEvent& a, const PoolEvent& b) { return a.t < b.t; });
  timeline->end = last_t;
  for (const PoolEvent& e : events) {
    if (e.type != PoolEventType::kStop) continue;
    timeline->has_pool_stop = true;
    timeline->end = e.t;
    break;
  }
  PoolBuilder builder(timeline);
  for (PoolEvent& e : events) {
    e.t = std::min(e.t, timeline->end);  // nothing after pool_stop
    builder.Add(e);
  }
  builder.Finish();
  CheckHeldWithinTotal(name, timeline);
  return true;
}

}  // namespace etrun::report
