// Driver: runs a job from a JobConfig to an exit code. This is the static path: resolve hosts,
// assign ranks, build each rank's environment, start every rank, forward output, stop on the
// first failure or on a signal, and summarize. Elastic mode will drive the same pieces from host
// updates. Single-threaded: everything happens on one io_context.
#ifndef ETRUN_LAUNCHER_DRIVER_H_
#define ETRUN_LAUNCHER_DRIVER_H_

#include <chrono>
#include <string>
#include <vector>

#include "discovery/host_slots.h"
#include "discovery/network.h"
#include "launcher/events.h"
#include "launcher/job_config.h"
#include "launcher/spawner.h"
#include "launcher/worker_env.h"
#include "rendezvous/access_list.h"
#include "rendezvous/assign.h"

namespace etrun::launcher {

// What a static job will run, decided before anything starts.
struct StaticPlan {
  std::vector<discovery::HostSlots> hosts;
  std::vector<rendezvous::SlotInfo> slots;  // in rank order
  std::vector<int> group_ranks;             // per slot: index of its host among used hosts
  std::vector<std::string> remote_hosts;    // hosts that are not this machine (SSH)
  RunVars run;
};

// Reads the job's hosts: -H, --hostfile, or localhost:<np>. Returns false and sets *err.
bool ResolveHosts(const JobConfig& config, std::vector<discovery::HostSlots>* hosts,
                  std::string* err);

// Decides hosts, ranks and run variables for a static job on these interfaces: exactly -np ranks
// filling the hosts in order. Remote hosts are reached over SSH; the rendezvous address is then
// the one the route toward them leaves from (or --network-interface's). Fails when the hosts lack
// slots. Does not start anything except a port probe.
bool PlanStaticJob(const JobConfig& config, const std::vector<discovery::Interface>& interfaces,
                   StaticPlan* plan, std::string* err);

// Zero-padded rank directory name for --output-filename (spec §7.2, without its -np 1 crash):
// rank.<r> padded to the digits of np-1, at least one.
std::string RankDirName(int rank, int np);

// Opens DIR/rank.<N>/{stdout,stderr} for writing, truncated. Returns false and sets *err.
bool OpenRankFiles(const std::string& dir, int rank, int np, int* out_fd, int* err_fd,
                   std::string* err);

// The command as a shell would show it, quoting what needs quoting (for --verbose).
std::string JoinCommand(const std::vector<std::string>& argv);

// The local stub that runs `slot` on its remote host over SSH (launcher/ssh_rank.h), through the
// host's shared connection in `ssh` (started on first use; throws std::runtime_error when its
// socket cannot be made). `extra_env` ("K=V") is set remotely after the worker environment.
LaunchSpec RemoteLaunchSpec(const JobConfig& config, const std::vector<std::string>& environment,
                            const rendezvous::SlotInfo& slot, int group_rank, const RunVars& run,
                            class SshHosts* ssh, const std::vector<std::string>& extra_env = {});

// Registers etrun's stdout and stderr on `sink` and returns the console output settings of
// `config` (timestamps), for ranks to copy and add their files to.
struct RankOutput ConsoleOutput(const JobConfig& config, class OutputSink* sink);

// Who may use the rendezvous server before any job host is admitted: this machine's addresses
// and --rendezvous-allow's networks (validated by the CLI).
rendezvous::AccessList BaseAccessList(const JobConfig& config,
                                      const std::vector<discovery::Interface>& interfaces);

// --grace-period as a duration.
std::chrono::milliseconds GracePeriod(const JobConfig& config);

// Runs an elastic job (launcher/elastic_run.cc); returns etrun's exit code.
// Events go to `events` (job_end included; job_start is the caller's).
int RunElastic(const JobConfig& config, Spawner* spawner, const std::vector<std::string>& environment,
               EventLog* events);

// Raises the soft open-file limit when `ranks` local ranks need more descriptors than it allows.
// Returns false and sets *err when even the hard limit is too low.
bool EnsureFileLimit(int ranks, bool rank_files, std::string* err);

// --job-name, or a name derived from the command: the script's or program's base name without
// its extension (`python3 /x/train.py` -> "train"); used by events and the control endpoint.
std::string JobName(const JobConfig& config);

// Sets spdlog's default logger: stderr, "etrun: <level>: <message>", level from --verbose and
// --log-level.
void ConfigureLogging(const JobConfig& config);

class Driver {
 public:
  // `environment` is the launcher's environment ("K=V"), the base of every rank's.
  Driver(const JobConfig& config, Spawner* spawner, std::vector<std::string> environment);

  // Runs the job; returns etrun's exit code (see exit_status.h).
  int Run();

 private:
  int RunStatic();
  int End(int code, std::string cause);

  const JobConfig& config_;
  Spawner* spawner_;
  std::vector<std::string> environ_;
  EventLog events_;
  std::string cause_;  // why the job ended, for the job_end event; empty on success
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_DRIVER_H_
