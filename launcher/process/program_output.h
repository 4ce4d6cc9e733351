// RunForOutput: runs a short helper program to completion (`mpirun --version`, `nvidia-smi -L`)
// and captures what it prints. Not for ranks: no prefixes, no signal forwarding. The program runs
// through LocalSpawner (own process group, stdin from /dev/null, killed if etrun dies). Blocking;
// reaps only its own child. Thread-compatible.
#ifndef ETRUN_LAUNCHER_PROCESS_PROGRAM_OUTPUT_H_
#define ETRUN_LAUNCHER_PROCESS_PROGRAM_OUTPUT_H_

#include <chrono>
#include <string>
#include <vector>

namespace etrun::launcher {

struct ProgramOutput {
  int exit_code = 0;   // the shell convention: 128+N when signal N ended it
  std::string out;     // stdout (at most 1 MiB kept)
  std::string err;     // stderr (at most 1 MiB kept)
};

// Runs argv (argv[0] looked up in the PATH of `env`) with environment `env` and waits for it.
// Returns false and sets *err when it cannot be started or runs longer than `timeout` (it is then
// killed with its process group); otherwise fills *result, whatever its exit code.
bool RunForOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  std::chrono::milliseconds timeout, ProgramOutput* result, std::string* err);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_PROGRAM_OUTPUT_H_
