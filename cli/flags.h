// flags: etrun's command line. Accepts horovodrun's flags (spec §1.2-1.3) with horovodrun's names,
// arity, defaults and argparse syntax (see argv_normalizer.h), plus etrun's own --grace-period and
// --timestamp-format, and turns them into a validated JobConfig. The only code that links CLI11;
// every CLI11 exception is caught here and becomes a usage error. No global state; thread-safe.
//
// Departures from horovodrun, all deliberate:
//   * Values horovodrun accepts and then trips over are usage errors (spec §9.18): -np < 1,
//     --min-np > -np, -np > --max-np, --slots-per-host < 1, a cooldown range outside 1..3600 or
//     reversed, --elastic-timeout/--start-timeout 0, negative tunables, an SSH port outside
//     1..65535, non-finite floats, a missing command.
//   * Flags of features that land in later etrun releases (--jsrun, --config-file) are parsed and
//     validated, then refused with "<flag> is not supported yet (...)".
//   * --mpi with elastic flags (--min-np, --host-discovery-script) or GPU slots is a usage error
//     (horovodrun ignores --mpi in elastic mode); --mpi-args/--binding-args with an unclosed quote
//     are usage errors, and without --mpi they draw a warning (etrun defaults to Gloo).
//   * --max-np without elastic mode is accepted and kept in JobConfig::max_np; it has no effect
//     in a static job, and warning about that is the launcher's call (it knows the mode).
//   * -h, -v and -cb win over everything else once the argparse syntax is valid: they need no -np
//     and no command, and skip value conversion and checks (argparse acts on -h/-v where it meets
//     them, and horovodrun runs the tunables' >= 0 checks before -cb).
//   * -np is always required: etrun does not read LSF's allocation as horovodrun does.
//   * --log-hide-timestamp/--no-log-hide-timestamp work and print a deprecation warning to stderr,
//     which horovodrun's DeprecationWarning does not (Python hides it by default).
//   * --version prints "etrun <version>" and the Horovod release whose protocol it speaks, not
//     a bare Horovod version; -cb prints what this etrun build supports, not Horovod's build.
#ifndef ETRUN_CLI_FLAGS_H_
#define ETRUN_CLI_FLAGS_H_

#include <string>
#include <vector>

#include "cli/argv_normalizer.h"
#include "launcher/job_config.h"

namespace etrun::cli {

struct ParseOutcome {
  int exit_code = -1;  // -1: go on and launch; otherwise exit with this code now
  std::string out;     // text for stdout (help, version, check-build)
  std::string err;     // text for stderr: one line "etrun: error: ...\n" for a usage error
                       // (exit_code 2); may hold "etrun: warning: ...\n" lines with exit_code -1
};

// Parses `args` (args[0] is the program name) into *config. Pure but for -cb, which runs
// `mpirun --version` if mpirun is on $PATH, and --hostfile, which it reads once the flags are
// valid (a bad -H or hostfile is no usage error: config->host_list_error keeps it for the
// runtime to report): prints nothing, never exits, never throws (a broken flag table, our bug,
// gives exit_code 1 and an "etrun: internal error: ..." line). *config is overwritten only when
// exit_code is -1; after help, version, check-build (exit 0) or a usage error (exit 2) it is
// unchanged.
// `env` ("K=V", the launcher's environment) is read for a cluster allocation only (cli/cluster_hosts.h).
ParseOutcome ParseArgs(const std::vector<std::string>& args, JobConfig* config,
                       const std::vector<std::string>& env = {});

// For main(): ParseArgs on argv, then prints out to stdout and err to stderr. Returns the exit
// code main() should return now, or -1 to go on with *config.
int ParseFlags(int argc, const char* const* argv, JobConfig* config);

// Every option as the normalizer sees it, in table order (hidden ones included); for tests.
std::vector<OptionSpec> OptionSpecs();

}  // namespace etrun::cli

#endif  // ETRUN_CLI_FLAGS_H_
