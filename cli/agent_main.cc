#include "cli/agent_main.h"

#include <cstdio>
#include <string>

#include "launcher/agent/agent.h"

namespace etrun::cli {

int AgentMain(int argc, char** argv) {
  std::string mode = argv[1];
  if (mode == launcher::agent::kAgentIdMode) {
    printf("%s\n", launcher::agent::AgentId().c_str());
    return 0;
  }
  if (mode != launcher::agent::kAgentMode) return -1;
  launcher::agent::AgentOptions options;
  std::string err;
  if (!launcher::agent::ParseAgentArgs(argc - 2, argv + 2, &options, &err)) {
    fprintf(stderr, "etrun: error: %s is etrun's internal agent mode (%s)\n", launcher::agent::kAgentMode,
            err.c_str());
    return 2;
  }
  return launcher::agent::RunAgent(options);
}

}  // namespace etrun::cli
