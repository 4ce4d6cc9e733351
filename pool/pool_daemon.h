// The shared slot pool daemon (`etrun pool start NAME ...`): one process per pool, in the
// foreground, that owns the PoolState and serves it over HTTP beside etrun's job control
// endpoints (control/control.h: a random token, new at every start, in a 0600 registry file
// under "pools/"; requests authenticated by control/control_auth.h's exchange, bodies up to
// pool_wire.h's kMaxBodyBytes), so only its user (and root) can join or steer it. Listens on
// 127.0.0.1 unless --listen opens it to other machines; then jobs there pass --pool HOST:PORT
// with the token in ETRUN_POOL_TOKEN (a restarted pool has a new one: `etrun pool token`).
//
// Endpoints (JSON): GET /status; POST /jobs (join); POST /jobs/ID/sync (report live ranks, get
// the grant); DELETE /jobs/ID (the job ended); POST /priority {"job", "priority"}; POST /stop.
// A job's etrun on this machine is watched by its pid and that process's start time (a pid
// given to another process does not keep the job alive): when it is gone its slots are free at
// once (its guardian has killed its ranks). Jobs elsewhere are counted gone after --lease
// without a sync. Stopping the pool (SIGINT, SIGTERM, `etrun pool stop`) leaves jobs training on what they
// hold; they join again when a pool of that name is back.
#ifndef ETRUN_POOL_POOL_DAEMON_H_
#define ETRUN_POOL_POOL_DAEMON_H_

#include <chrono>
#include <string>
#include <vector>

#include "discovery/host_slots.h"
#include "discovery/host_source.h"

namespace etrun::pool {

inline constexpr int kDefaultMinHoldMs = 5000;
inline constexpr int kDefaultLeaseMs = 15000;

struct DaemonOptions {
  std::string name;
  std::vector<discovery::HostSlots> hosts;  // -H / --hostfile / a Slurm allocation; empty with a
                                            // discovery script
  // The route jobs on other machines start their ranks on every host through, sent with each
  // grant (Grant::Host::start_through and start_kind); none: each job's own way (SSH). Inside a
  // cluster allocation: its kind's step there (discovery::ClusterKind::Route: srun).
  discovery::StartRoute start_through;
  std::string discovery_script;
  std::chrono::milliseconds discovery_interval{1000};
  std::chrono::milliseconds discovery_timeout{30000};
  // GPU ids per host: "auto" (this machine's GPUs by CUDA_VISIBLE_DEVICES or nvidia-smi; other
  // hosts 0..n-1 when this machine has GPUs; plain slots when it has none), "none", or a count.
  std::string gpus = "auto";
  int ranks_per_gpu = 1;
  std::chrono::milliseconds min_hold{kDefaultMinHoldMs};
  std::chrono::milliseconds lease{kDefaultLeaseMs};
  std::string events_file;
  std::string listen;  // "ADDR:PORT"; empty: 127.0.0.1, any port
  // With --gpus auto: this machine's GPU ids as found by the caller (CUDA_VISIBLE_DEVICES or
  // nvidia-smi) and where they came from; empty: none found, the pool hands out plain slots.
  std::vector<std::string> local_gpus;
  std::string local_gpus_source;
};

// Runs the pool until stopped. Returns the exit code: 0 stopped, 1 failed to start (one error
// line logged), 2 bad options. `hosts` is polled for the pool's hosts when
// options.discovery_script is set (required then: the caller builds a ScriptHostSource over the
// script; each grant's slot counts are used, its facts are the pool's own) and must outlive the
// call.
int RunPoolDaemon(const DaemonOptions& options, discovery::HostSource* hosts);

}  // namespace etrun::pool

#endif  // ETRUN_POOL_POOL_DAEMON_H_
