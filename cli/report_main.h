// report_main: the `etrun report EVENTS.jsonl [-o OUT.svg] [--json]` verb. Reads an events file
// (written by --events-file), prints a summary of the job on stdout (text, or one JSON object with
// --json) and, with -o, writes the job's timeline as an SVG picture. The work is in
// launcher/report.h; this is the file and flag handling around it.
#ifndef ETRUN_CLI_REPORT_MAIN_H_
#define ETRUN_CLI_REPORT_MAIN_H_

namespace etrun::cli {

// The word that selects the verb; only as etrun's first argument, so that horovodrun-style
// command lines (`etrun -np 2 report`, `etrun -- report`) still run a program named "report".
inline constexpr char kReportVerb[] = "report";

// argv[0] is the verb itself. Returns the exit code: 0 on success; 1 when the events file cannot
// be read or has a malformed line, or OUT.svg cannot be written (one "etrun: error:" line naming
// the file, and the line for a malformed one); 2 for bad flags (one line, nothing read).
int ReportMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_REPORT_MAIN_H_
