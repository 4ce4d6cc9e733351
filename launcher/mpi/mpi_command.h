// MpiCommand: the mpirun command line horovodrun builds for Open MPI (spec §8.3), as an argv.
// horovodrun pastes the pieces into one string for /bin/sh -c; etrun runs mpirun directly, so
// each piece is one argv word and nothing is re-parsed: "-mca plm_rsh_args" takes "-p 22 -i k"
// as a single word, the command's words arrive exactly as given. --mpi-args and --binding-args,
// which horovodrun's shell splits, are split here as a shell would (SplitShellWords). Pure;
// thread-safe.
#ifndef ETRUN_LAUNCHER_MPI_MPI_COMMAND_H_
#define ETRUN_LAUNCHER_MPI_MPI_COMMAND_H_

#include <string>
#include <vector>

#include "launcher/job_config.h"

namespace etrun::launcher {

// horovodrun adds Open MPI's large-cluster flags from this many hosts on.
inline constexpr int kLargeClusterHosts = 64;

// What the job decides beyond JobConfig.
struct MpiJob {
  std::string hosts;               // the -H value: -H as given, else built from the hostfile
                                   // ("a:4,b:4"), else "localhost:<np>"
  int num_hosts = 1;               // hosts in that list
  std::vector<std::string> nics;   // -mca btl_tcp_if_include and NCCL_SOCKET_IFNAME; empty: neither
  std::vector<std::string> env;    // mpirun's environment ("K=V"): launcher's + tunables'
};

// Splits `text` into words as a POSIX shell does, without expansions: blanks separate words;
// '...' keeps everything; "..." keeps everything but \" \\ \$ \` (and drops \newline);
// a backslash outside quotes keeps the next character. $VAR, globs and ~ stay as written.
// Returns false and sets *err ("unterminated ' quote") on an unclosed quote.
bool SplitShellWords(const std::string& text, std::vector<std::string>* words, std::string* err);

// The mpirun argv (argv[0] "mpirun"), in horovodrun's order:
//   mpirun --allow-run-as-root --tag-output -np N -H HOSTS <binding> -mca pml ob1 -mca btl ^openib
//   [large-cluster flags] [--timestamp-output] [-mca plm_rsh_args "-p P -i F"]
//   [-mca btl_tcp_if_include NICS] [-x NCCL_SOCKET_IFNAME=NICS] [--output-filename DIR]
//   -x K ... (every exportable name of job.env, sorted) <--mpi-args words> <command>
// <binding> is "-bind-to none -map-by slot", or the words of --binding-args. Returns false and
// sets *err (naming the flag) when --mpi-args or --binding-args does not split.
bool BuildMpirunArgv(const JobConfig& config, const MpiJob& job, std::vector<std::string>* argv,
                     std::string* err);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_MPI_MPI_COMMAND_H_
