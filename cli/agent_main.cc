// etrun-agent: a remote host's agent (launcher/agent/agent.h), the program the launcher's
// bootstrap runs there (launcher/agent/agent_bootstrap.h), never users. Built on its own and
// statically linked, so it runs in any x86-64 Linux with a POSIX sh (a container image of another
// distribution, a busybox pod); etrun carries a copy of it to bring to hosts that lack it
// (cli/agent_image.h). Its argv is parsed here.
#include <cstdio>
#include <string>

#include "launcher/agent/agent.h"

int main(int argc, char** argv) {
  using namespace etrun::launcher::agent;
  if (argc == 2 && std::string(argv[1]) == "--version") {
    printf("etrun-agent %s (build %s)\n", ETRUN_VERSION, AgentId().c_str());
    return 0;
  }
  AgentOptions options;
  std::string err;
  if (!ParseAgentArgs(argc - 1, argv + 1, &options, &err)) {
    fprintf(stderr, "etrun-agent: error: %s (it is started by etrun on each remote host, not by hand)\n",
            err.c_str());
    return 2;
  }
  return RunAgent(options);
}
