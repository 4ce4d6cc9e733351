// The agent: `etrun __agent ...`, one per remote host of a job, started by the launcher over the
// host's one connection (agent_link.h: SSH, a --remote-shell command, a Slurm step). It starts,
// signals and reaps that host's ranks with the same RankSet etrun uses on its own machine (own
// process groups, parent-death signal, the guardian), and sends back over its stdout, as frames
// (wire.h), each rank's output as read, its exit status once its output is complete, a heartbeat
// every second and the host's facts (its GPUs among them, when the job hands GPUs out). It runs
// what the launcher asks: a rank ('S', with its share of the host's GPUs after a 'G'), a signal to
// one ('K'), a detached command ('R', fencing).
// It outlives nothing: when its stdin closes, or nothing comes from the launcher for
// --launcher-timeout seconds, it stops its ranks (SIGTERM, SIGKILL after the grace period) and
// exits; if it is killed, its guardian kills their process groups.
// SIGTERM (Slurm signalling the step's processes) is passed on to the launcher as a frame; the
// ranks got it from Slurm themselves.
#ifndef ETRUN_LAUNCHER_AGENT_AGENT_H_
#define ETRUN_LAUNCHER_AGENT_AGENT_H_

#include <string>

namespace etrun::launcher::agent {

// argv[1] of the agent, and of the query the bootstrap asks each candidate binary (prints
// AgentId() and a newline).
inline constexpr char kAgentMode[] = "__agent";
inline constexpr char kAgentIdMode[] = "__agent-id";

// This binary's identity: its GNU build id in hex (the linker's note), else the SHA-256 of the
// file. Two binaries with the same id are the same build.
const std::string& AgentId();

struct AgentOptions {
  std::string host;              // for messages
  double launcher_timeout_s = 10;  // nothing from the launcher this long: stop and exit
  double grace_s = 5;            // SIGTERM to SIGKILL when stopping
  // The job's --gpus-per-rank / --ranks-per-gpu (0: not given). With either, the agent counts
  // the host's GPUs as it starts (its CUDA_VISIBLE_DEVICES, a Slurm step's, else nvidia-smi -L),
  // says them in its facts, and gives each rank its share of them (kGpus).
  int gpus_per_rank = 0;
  int ranks_per_gpu = 0;
};

// Parses the agent's arguments (after the mode). Returns false and sets *err on a bad one.
bool ParseAgentArgs(int argc, char** argv, AgentOptions* options, std::string* err);

// The agent's arguments for `options` (after the mode), for the launcher.
std::string AgentArgs(const AgentOptions& options);

// Runs the agent on stdin/stdout until it is done; returns the exit code.
int RunAgent(const AgentOptions& options);

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_AGENT_H_
