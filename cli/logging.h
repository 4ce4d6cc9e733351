// etrun's own log lines: stderr, "etrun: <level>: <message>", the level from --verbose and
// --log-level. Call once, before anything logs.
#ifndef ETRUN_CLI_LOGGING_H_
#define ETRUN_CLI_LOGGING_H_

#include "launcher/job_config.h"

namespace etrun::cli {

void ConfigureLogging(const JobConfig& config);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_LOGGING_H_
