// The agent etrun brings to remote hosts that have none (the etrun-agent program), embedded in
// etrun's own image when it is built: the bytes sent are those of the build that runs, whatever
// happens to the files on disk during a job.
#ifndef ETRUN_CLI_AGENT_IMAGE_H_
#define ETRUN_CLI_AGENT_IMAGE_H_

#include <string_view>

namespace etrun::cli {

// The embedded etrun-agent's bytes (static storage).
std::string_view EmbeddedAgent();

}  // namespace etrun::cli

#endif  // ETRUN_CLI_AGENT_IMAGE_H_
