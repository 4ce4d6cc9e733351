// `etrun __agent ...` and `etrun __agent-id`: a remote host's agent (launcher/agent/agent.h) and
// the query its bootstrap asks of each etrun it finds (launcher/agent/agent_bootstrap.h), started
// by etrun itself, never by users. Their argv is parsed here.
#ifndef ETRUN_CLI_AGENT_MAIN_H_
#define ETRUN_CLI_AGENT_MAIN_H_

namespace etrun::cli {

// Runs the mode argv[1] names and returns its exit code; -1 when argv[1] names none.
// REQUIRES: argc > 1.
int AgentMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_AGENT_MAIN_H_
