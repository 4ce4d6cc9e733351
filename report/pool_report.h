// pool_report: what `etrun report` knows about a shared GPU pool (`etrun pool start
// --events-file`). Reads a pool's events file (JSON Lines; the pool_* events of events/schema.h),
// builds a PoolTimeline (per job: slots held and targeted over time, priority changes, joining
// and leaving, queueing; the pool's total slots over time) and renders it as a stacked chart of
// held slots (IBM WMLA's resource chart) in SVG, and as a summary in text or JSON. Pure: no files,
// no clocks, no global state; thread-compatible. The verb's main() is cli/report_main.cc.
//
// Reading rules, as for a job's file (report.h): unknown events and fields are ignored; events
// are placed by "t", not by line; a last line cut short is skipped with a warning; a file without
// pool_stop ends at its last event. Besides:
//   * held and target change with pool_allocation: a job that an allocation's "held" (or
//     "target", when it has one) does not name has 0 from then on;
//   * a job holds and targets 0 from its pool_job_left on, unless a later allocation still names
//     it (the pool's word on the slots it is still giving back wins);
//   * a job that joins again after it left starts a new PoolJobHistory under the same name.
#ifndef ETRUN_REPORT_POOL_REPORT_H_
#define ETRUN_REPORT_POOL_REPORT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.h"

namespace etrun::report {

// A value of a step series: `slots` from t until the next step (or the end of the file).
struct SlotStep {
  double t = 0;
  int slots = 0;
};

struct PriorityChange {
  double t = 0;
  int priority = 0;
};

struct TimeSpan {
  double start = 0;
  double end = 0;
};

// One job's stay in the pool, from pool_job_joined (or the first event that names it) to
// pool_job_left (or the end of the file).
struct PoolJobHistory {
  std::string name;
  double joined = 0;
  std::optional<int> min_np;
  std::optional<int> max_np;
  std::vector<PriorityChange> priorities;  // at joining, then each pool_priority; may be empty
  bool has_left = false;                   // false: still in the pool when the file ends
  double left = 0;                         // pool_job_left's t, else the pool's end
  std::string left_reason;                 // "ended", "crashed", "lost" (or what the file said)
  std::vector<SlotStep> held;    // from `joined`, one step per change (never two equal in a row)
  std::vector<SlotStep> target;  // likewise
  std::vector<TimeSpan> queued;  // while pool_allocation listed it in "queued"
};

// One pool_allocation event, as written.
struct PoolAllocation {
  double t = 0;
  int total = 0;  // the event's "total", else the pool's total at that time
  std::map<std::string, int> held;
  std::map<std::string, int> target;
  std::vector<std::string> queued;
};

struct PoolHost {
  std::string host;
  int slots = 0;
};

struct PoolTimeline {
  // From pool_start (defaults when the file has none).
  bool has_pool_start = false;
  std::string pool;
  std::string start_ts;         // pool_start's "ts"
  std::vector<PoolHost> hosts;  // as pool_start listed them

  bool has_pool_stop = false;  // false: the pool is still running, or was killed
  double end = 0;              // pool_stop's t, else the last event's t (seconds since start)

  std::vector<SlotStep> total;       // the pool's slots (pool_start, pool_hosts, allocations)
  std::vector<PoolJobHistory> jobs;  // in order of joining
  std::vector<PoolAllocation> allocations;  // by time
  std::vector<std::string> warnings;        // a partial last line; jobs holding more than the total
};

// Whether the text is a pool's events file: one of its events is a pool_* event. Lines that are
// not JSON are passed over (ParsePoolEvents reports them).
bool IsPoolEvents(std::string_view text);

// Parses the text of a pool's events file into *timeline; `name` starts error messages. Returns
// false and sets *err to one line ("<name> line <n>: <what>") for a line that is not a JSON
// object or a pool event with a missing or mistyped field; *timeline is then unspecified. Job
// events are ignored, as any unknown event. An empty file gives an empty timeline.
bool ParsePoolEvents(std::string_view text, const std::string& name, PoolTimeline* timeline,
                     std::string* err);

// The value of a step series at time t: the last step at or before t, 0 before the first.
int SlotsAt(const std::vector<SlotStep>& steps, double t);

// The numbers of the pool's text and JSON summaries, one per PoolJobHistory (same order).
struct PoolJobSummary {
  double seconds_in_pool = 0;  // joined to left (or the end)
  double slot_seconds = 0;     // held slots integrated over time
  double average_held = 0;     // slot_seconds / seconds_in_pool (0 for no time)
  int peak_held = 0;
};
std::vector<PoolJobSummary> SummarizePool(const PoolTimeline& timeline);

// The summary `etrun report POOL.jsonl` prints: the pool, each job (joined, left, priorities,
// slot-seconds, average and peak held), then every allocation change. Ends with a newline.
std::string PoolSummaryText(const PoolTimeline& timeline);
// The same as one JSON object on one line (with a trailing newline).
std::string PoolSummaryJson(const PoolTimeline& timeline);

// The pool as a standalone SVG document: title, legend (jobs and their priorities), the held
// slots of every job stacked over time with the total as a dashed line, and markers where jobs
// join, leave and change priority; then, when `jobs` are given, the timeline of each job (as
// RenderSvg draws it) below, in order. A job whose job_start "ts" and the pool's pool_start "ts"
// are both known is drawn on the pool's time axis (seconds since the pool started, so that its
// ranks line up with its slots); otherwise on its own. Every text from the files is escaped.
std::string RenderPoolSvg(const PoolTimeline& timeline, const std::vector<JobTimeline>& jobs = {});

}  // namespace etrun::report

#endif  // ETRUN_REPORT_POOL_REPORT_H_
