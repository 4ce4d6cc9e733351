// report: what `etrun report` knows about a finished (or still running) job. Reads an events file
// (JSON Lines, one event per line, the format of --events-file), builds a JobTimeline (world size
// over time, one lane of rank runs per host, failures, blacklists, resets), and renders it as an
// SVG picture and as a summary in text or JSON. Pure: no files, no clocks, no global state;
// thread-compatible. The verb's main() (file reading, flags) is cli/report_main.cc; a shared GPU
// pool's events file has its own model, pool_report.h.
//
// Reading rules, so that a report of a live or killed job works:
//   * unknown event types and unknown fields are ignored (the format may grow);
//   * a file without "job_end" ends at its last event's time, and ranks that never exited run
//     until then;
//   * a last line without a newline that is not valid JSON is a write cut short (the job is
//     still writing, or was killed mid-line): it is skipped with a warning, not an error;
//   * events are ordered by "t" (stable), not by line, so a writer that flushes from several
//     threads cannot make a world end before it began.
#ifndef ETRUN_REPORT_REPORT_H_
#define ETRUN_REPORT_REPORT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::report {

// One process of one rank, from rank_started to rank_exited (or to the end of the file).
struct RankRun {
  int rank = 0;  // launch label
  std::string host;
  int local_rank = 0;
  int round = 0;  // 0 in static mode
  double start = 0;
  double end = 0;
  bool exited = false;  // false: still running when the file ends
  std::string reason;   // "finished", "failed", "drained", "stopped" (or what the file said)
  std::optional<int> code;
  std::optional<int> signal;
};

// A stretch of time with one world size. kStarting/kResetting have no world (size 0).
struct SizeSegment {
  enum class State { kStarting, kRunning, kResetting };
  double start = 0;
  double end = 0;
  int size = 0;
  State state = State::kRunning;
  int round = 0;  // the round that opened it (kRunning in elastic mode), else 0
};

struct RankFailure {
  double t = 0;
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::optional<int> code;
  std::optional<int> signal;
};

struct HostBlacklisting {
  double t = 0;
  std::string host;
  std::string reason;
  std::optional<double> cooldown_s;  // nullopt: for the rest of the job
  double end = 0;                    // resurrection, end of cooldown or end of the job
};

struct JobReset {
  double t = 0;
  int count = 0;  // the event's "resets"
  std::string reason;
};

// A span of time during which a host was in the job's host list (discovery or -H).
struct HostPresence {
  double start = 0;
  double end = 0;
};

struct JobTimeline {
  // From job_start (defaults when the file has none).
  bool has_job_start = false;
  std::string job;
  std::vector<std::string> command;
  std::string start_ts;  // job_start's "ts"
  std::string pool_job;  // job_start's "pool_job": its id in a shared pool ("" if none)
  int np = 0;
  std::optional<int> min_np;
  std::optional<int> max_np;
  bool elastic = false;  // job_start says so, or the file has round events

  // From job_end; has_job_end false: the job was still running or was killed.
  bool has_job_end = false;
  int exit_code = 0;
  std::string cause;

  double end = 0;  // job_end's t, else the last event's t (seconds since job start)

  std::vector<std::string> hosts;  // every host named anywhere, in order of first mention
  std::map<std::string, std::vector<HostPresence>> presence;
  std::vector<RankRun> runs;       // by start time
  std::vector<SizeSegment> sizes;  // consecutive, covering [0, end]
  std::vector<RankFailure> failures;
  std::vector<HostBlacklisting> blacklists;
  std::vector<JobReset> resets;
  std::vector<std::string> warnings;  // e.g. a partial last line that was skipped
};

// Parses the text of an events file into *timeline. `name` (the file's name) starts error
// messages. Returns false and sets *err to one line ("<name> line <n>: <what>") for a line that is
// not a JSON object or a known event with a missing or mistyped field; *timeline is then
// unspecified. An empty file gives an empty timeline, not an error.
bool ParseEvents(std::string_view text, const std::string& name, JobTimeline* timeline,
                 std::string* err);

// The numbers of the text and JSON summaries.
struct JobSummary {
  double duration = 0;
  std::map<int, double> time_at_size;  // world size -> seconds; 0 = starting or resetting
  double reset_lost = 0;  // seconds from each reset_begin (or reset) to the next world_ready (or round, or the end)
  int resets = 0;
  int ranks_started = 0;
};
JobSummary Summarize(const JobTimeline& timeline);

// The summary `etrun report` prints: a few "key: value" lines, a line per world size, failure
// and blacklisting. Ends with a newline.
std::string SummaryText(const JobTimeline& timeline);
// The same as one JSON object on one line (with a trailing newline).
std::string SummaryJson(const JobTimeline& timeline);

// The timeline as a standalone SVG document (UTF-8): title, legend, world size panel, host lanes,
// time axis. Every text from the file is escaped; the result is well-formed XML.
std::string RenderSvg(const JobTimeline& timeline);

// "42.0 s", "3.25 s", "754.0 s (12:34)", "3725.4 s (1:02:05)": durations in summaries.
std::string FormatDuration(double seconds);

}  // namespace etrun::report

#endif  // ETRUN_REPORT_REPORT_H_
