// What main() builds for a job beside its flags: the policy for the job's mode. Kept apart from
// main.cc so the runtime's tests build jobs the way etrun does.
#ifndef ETRUN_CLI_WIRING_H_
#define ETRUN_CLI_WIRING_H_

#include <memory>

#include "launcher/job_config.h"
#include "launcher/job_policy.h"

namespace etrun::cli {

// The policy for `config`'s mode: mpirun for --mpi, the elastic driver for --min-np or a
// discovery script, fixed hosts otherwise.
std::unique_ptr<launcher::JobPolicy> MakePolicy(const JobConfig& config);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_WIRING_H_
