// control_main: the verbs that look at running jobs through their control endpoints
// (control/control.h): `etrun status [JOB] [--json]`, `etrun list [--json]` and
// `etrun scale [JOB] --add HOST:SLOTS | --remove HOST | --to N [--timeout DURATION]` and
// `etrun dump [JOB] [--json]` (every rank's stack and where each is: launcher/hang/).
// Like `report`, they are verbs only as etrun's first argument.
#ifndef ETRUN_CLI_CONTROL_MAIN_H_
#define ETRUN_CLI_CONTROL_MAIN_H_

namespace etrun::cli {

inline constexpr char kStatusVerb[] = "status";
inline constexpr char kListVerb[] = "list";
inline constexpr char kScaleVerb[] = "scale";
inline constexpr char kDumpVerb[] = "dump";

// argv[0] is the verb. Exit codes: 0 done; 1 the job cannot be found or reached, or (scale) the
// change was rolled back; 2 bad flags. Errors are one "etrun: error:" line.
int StatusMain(int argc, char** argv);
int ListMain(int argc, char** argv);
int ScaleMain(int argc, char** argv);
int DumpMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_CONTROL_MAIN_H_
