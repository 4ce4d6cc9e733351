// RankLauncher: the rank-start policy shared by static and elastic jobs. For one slot of one
// round it decides the process (the command with the slot's environment on this machine, or the
// agent's command for another host), GPUs, per-rank log files (--output-filename) and admission to the
// rendezvous server, starts it through the RankSet and writes `rank_started`. Plan() is the pure
// part (no process, no file), unit-tested. Host facts come from the HostDirectory's cache, so no
// name lookup runs on the event loop. Driver thread only.
#ifndef ETRUN_LAUNCHER_RANK_LAUNCHER_H_
#define ETRUN_LAUNCHER_RANK_LAUNCHER_H_

#include <string>
#include <vector>

#include "discovery/network.h"
#include "events/event_log.h"
#include "launcher/job_config.h"
#include "launcher/process/rank_set.h"
#include "launcher/process/spawner.h"
#include "launcher/remote_starter.h"
#include "launcher/worker_env.h"
#include "rendezvous/access_list.h"
#include "rendezvous/assign.h"

namespace etrun::launcher {

class OutputSink;

// Zero-padded rank directory name for --output-filename (spec §7.2, without its -np 1 crash):
// rank.<r> padded to the digits of np-1, at least one.
std::string RankDirName(int rank, int np);

// Creates `rank_dir` and opens its stdout and stderr files for writing, truncated. Returns false
// and sets *err (then nothing is left open). --mpi's files use it too (Open MPI's layout).
bool OpenLogFiles(const std::string& rank_dir, int* out_fd, int* err_fd, std::string* err);

// OpenLogFiles for DIR/rank.<N> (RankDirName).
bool OpenRankFiles(const std::string& dir, int rank, int np, int* out_fd, int* err_fd,
                   std::string* err);

// Registers etrun's stdout and stderr on `sink` and returns the console output settings of
// `config` (timestamps), for ranks to copy and add their files to.
RankOutput ConsoleOutput(const JobConfig& config, OutputSink* sink);

// One rank to start: its slot, its host's index among the job's hosts (torchrun's GROUP_RANK),
// the run's shared variables, the round it joins and variables set after all others ("K=V").
struct RankRequest {
  rendezvous::SlotInfo slot;
  int group_rank = 0;
  RunVars run;
  int round = 0;
  std::vector<std::string> extra_env;
  discovery::StartRoute start;  // its host's own route (HostGrant::start_through); none: the job's
};

class RankLauncher {
 public:
  // Every pointer must outlive the launcher. `remote` starts ranks on other hosts (null: the
  // job may use this machine only).
  RankLauncher(const JobConfig& config, const std::vector<std::string>& environment,
               RankSet* ranks, OutputSink* sink, RankOutput console, RemoteStarter* remote,
               discovery::HostDirectory* hosts, rendezvous::AccessList* access,
               events::EventLog* events);

  // The process for `request`: the command with its environment here, or the remote starter's
  // plan (the host's agent, its connection started on first use). Returns false and sets *err when
  // the rank cannot run: its GPUs are not there, or the stub cannot be set up.
  bool Plan(const RankRequest& request, LaunchSpec* spec, std::string* err);

  // Plans, opens the rank's files, starts it and waits for its exec, admits its host to the
  // rendezvous server and writes `rank_started`. Returns false and sets *err (naming the rank)
  // when it could not be started: nothing of it is left running, or, if only its exec failed,
  // it exits 127 and is reaped as usual (then *id is set too).
  bool Start(const RankRequest& request, int* id, std::string* err);

 private:
  // How a rank on `host` learns its network facts there (RemoteRank::network); `exported` is
  // the launcher environment it gets.
  HostNetwork RemoteNetwork(const RunVars& run, const std::string& host,
                            const std::vector<std::string>& exported);

  const JobConfig& config_;
  const std::vector<std::string>& environment_;
  RankSet* ranks_;
  OutputSink* sink_;
  RankOutput console_;
  RemoteStarter* remote_;
  discovery::HostDirectory* hosts_;
  rendezvous::AccessList* access_;
  events::EventLog* events_;
  bool hook_warned_ = false;  // the stack-dump hook could not be made here (said once)
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_RANK_LAUNCHER_H_
