// report_main: the `etrun report EVENTS.jsonl [MORE.jsonl...] [-o OUT.svg] [--json]` verb. Reads
// events files (written by --events-file, or by `etrun pool start --events-file`: a pool's file is
// told apart by its pool_* events) and prints a summary of each on stdout (text, or one JSON
// object per file and line with --json). With -o it writes a picture as SVG: one job's timeline;
// or a pool's stacked chart of held slots with the timeline of each job file given drawn below
// it. The work is in report/report.h and report/pool_report.h; this is the file and
// flag handling around it.
#ifndef ETRUN_CLI_REPORT_MAIN_H_
#define ETRUN_CLI_REPORT_MAIN_H_

namespace etrun::cli {

// The word that selects the verb; only as etrun's first argument, so that horovodrun-style
// command lines (`etrun -np 2 report`, `etrun -- report`) still run a program named "report".
inline constexpr char kReportVerb[] = "report";

// argv[0] is the verb itself. Returns the exit code: 0 on success; 1 when an events file cannot be
// read or has a malformed line, or OUT.svg cannot be written (one "etrun: error:" line naming the
// file, and the line for a malformed one; nothing on stdout); 2 for bad flags (one line, nothing
// read), or for files that make no one picture with -o (two pools', or several jobs' without
// their pool's).
int ReportMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_REPORT_MAIN_H_
