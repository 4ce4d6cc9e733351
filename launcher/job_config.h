// JobConfig: everything a launch needs, as plain values. cli/ fills it from argv (the only code
// that sees argv); launcher/ reads it. Defaults live in the declarations. Values are exactly what
// the user gave (host lists and networks already parsed): std::nullopt means "not given", so
// later stages can tell "unset" from a default (horovodrun only exports tunables that were set,
// spec §1.3). Not thread-safe; copy freely.
#ifndef ETRUN_LAUNCHER_JOB_CONFIG_H_
#define ETRUN_LAUNCHER_JOB_CONFIG_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "discovery/host_slots.h"
#include "discovery/start_route.h"
#include "launcher/output/line_splitter.h"
#include "rendezvous/access_list.h"

namespace etrun {

using launcher::TimestampFormat;

namespace discovery {
class ClusterKind;  // discovery/cluster_kind.h
}  // namespace discovery

// Defaults of flags whose JobConfig value stays "not given" (std::nullopt) until used.
inline constexpr int kDefaultElasticTimeoutS = 600;       // --elastic-timeout
inline constexpr double kDefaultPoolSyncIntervalS = 0.1;    // --discovery-interval with --pool
inline constexpr double kDefaultDiscoveryIntervalS = 1.0;  // --discovery-interval
inline constexpr double kDefaultDiscoveryTimeoutS = 30.0;  // --discovery-timeout
inline constexpr double kDefaultRecoveryGraceS = 2.0;      // --recovery-grace
inline constexpr double kDefaultUnresponsiveHostTimeoutS = 20.0;  // --unresponsive-host-timeout

// Static-mode controller (spec §1.5). kDefault behaves as Gloo: a standalone launcher cannot ask
// whether Horovod was built with MPI.
enum class Controller { kDefault, kGloo, kMpi, kJsrun };

// --hang-action: what the hang watchdog (launcher/hang/hang_watch.h) does after its dump.
enum class HangAction { kDump, kAbort, kRestart };
// --preflight: off; on (a sick host stops a static job before it starts, and is left out of an
// elastic one); warn (sick hosts are named, and the job runs on all).
enum class PreflightMode { kOff, kOn, kWarn };

// The tunable flags of spec §1.3; each becomes a worker environment variable when set.
struct Tunables {
  std::optional<int64_t> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int64_t> cache_capacity;
  std::optional<bool> hierarchical_allreduce;
  std::optional<bool> hierarchical_allgather;
  std::optional<bool> torus_allreduce;
  std::optional<bool> autotune;
  std::optional<std::string> autotune_log_file;
  std::optional<int64_t> autotune_warmup_samples;
  std::optional<int64_t> autotune_steps_per_sample;
  std::optional<int64_t> autotune_bayes_opt_max_samples;
  std::optional<double> autotune_gaussian_process_noise;
  std::optional<std::string> timeline_filename;
  std::optional<bool> timeline_mark_cycles;
  std::optional<bool> no_stall_check;
  std::optional<int64_t> stall_check_warning_time_seconds;
  std::optional<int64_t> stall_check_shutdown_time_seconds;
  std::optional<bool> mpi_threads_disable;
  std::optional<int64_t> num_nccl_streams;
  std::optional<int64_t> thread_affinity;
  std::optional<int64_t> gloo_timeout_seconds;
  bool tcp = false;                           // --tcp: NCCL_IB_DISABLE=1
  std::optional<std::string> log_level;       // TRACE DEBUG INFO WARNING ERROR FATAL
  std::optional<bool> log_hide_timestamp;     // --log-without-timestamp (true) / --log-with-timestamp
};

struct JobConfig {
  // Launch flags (spec §1.2).
  std::optional<int> num_proc;                 // -np / --num-proc
  std::optional<int> min_np;                   // --min-np; presence switches to elastic mode
  std::optional<int> max_np;                   // --max-np
  std::optional<int> slots_per_host;           // --slots-per-host (abbreviated --slots)
  // The job's fixed hosts, one list: -H or --hostfile (read when the CLI parsed the flags) in
  // the order given, or the nodes of the cluster allocation etrun runs inside (cli/cluster_hosts);
  // empty when none was given, or when they did not parse: then host_list_error says why (one
  // line naming the flag or file), for the runtime to report as the job's cause.
  std::vector<discovery::HostSlots> host_list;
  std::string host_list_error;
  std::string hosts_flag;                      // -H / --hosts as typed, read by --mpi only: mpirun
                                               // gets it verbatim, as from horovodrun
  std::string host_discovery_script;           // --host-discovery-script, a shell command line
  std::string pool;                            // --pool NAME or HOST:PORT (etrun): hosts from a pool
  std::optional<int> priority;                 // --priority (etrun): weight in the pool
  std::optional<int> elastic_timeout_s;        // --elastic-timeout
  std::optional<int> reset_limit;              // --reset-limit
  std::optional<std::pair<int, int>> cooldown_range;  // --blacklist-cooldown-range MIN MAX
  std::optional<int> start_timeout_s;          // --start-timeout
  std::optional<double> discovery_interval_s;  // --discovery-interval (etrun; default 1)
  std::optional<double> discovery_timeout_s;   // --discovery-timeout (etrun; default 30)
  bool restart_mode = false;                   // --elastic-mode restart (etrun): torchrun semantics
  std::optional<double> recovery_grace_s;      // --recovery-grace (etrun; default 2, 0: off)
  std::vector<std::string> network_interfaces; // --network-interface(s), in order, no duplicates
  std::vector<rendezvous::Cidr> rendezvous_allow;  // --rendezvous-allow networks, in order
  std::string output_filename;                 // --output-filename DIR
  bool verbose = false;                        // --verbose
  bool prefix_timestamp = false;               // -prefix-timestamp
  TimestampFormat timestamp_format = TimestampFormat::kAsctime;  // --timestamp-format (etrun)
  std::optional<int> ssh_port;                 // -p / --ssh-port
  std::string ssh_identity_file;               // -i / --ssh-identity-file
  int ssh_connect_timeout_s = 10;              // --ssh-connect-timeout (etrun)
  double host_timeout_s = 3;                   // --lost-host-timeout (etrun)
  std::optional<double> unresponsive_host_timeout_s;  // --unresponsive-host-timeout (etrun)
  bool ssh_strict_host_keys = false;           // --ssh-strict-host-keys (etrun)
  std::vector<std::string> ignore_clusters;    // --ignore-slurm (etrun): kinds left alone ("slurm")
  std::map<std::string, std::string> add_cluster_jobs;  // --add-slurm-jobs NAME (etrun), by kind:
                                               // also the user's other jobs named so
  const discovery::ClusterKind* cluster = nullptr;  // the kind of allocation the hosts came from
  std::string cluster_job;                     // that allocation's id (cli/cluster_hosts); "": none
  // How ranks on other hosts start when not over SSH: --remote-shell CMD with {host} (etrun), or
  // the step of the allocation etrun runs inside; one route, filled by cli/cluster_hosts.
  discovery::StartRoute start;
  Controller controller = Controller::kDefault;  // --gloo / --mpi / --jsrun
  bool disable_cache = false;                  // --disable-cache (etrun keeps no cache)
  std::string config_file;                     // --config-file
  std::string mpi_args;                        // --mpi-args
  std::string binding_args;                    // --binding-args
  Tunables tunables;

  // etrun's own flags.
  double grace_period_s = 5.0;                 // --grace-period: SIGTERM -> SIGKILL delay
  std::string events_file;                     // --events-file: JSON Lines of the job's events
  std::string job_name;                        // --job-name (default: from the command)
  std::optional<int> gpus_per_rank;            // --gpus-per-rank N: CUDA_VISIBLE_DEVICES per rank
  std::optional<int> ranks_per_gpu;            // --ranks-per-gpu K: K ranks share one GPU
  std::optional<int> rendezvous_threads;       // --rendezvous-threads N: the store's threads
  std::optional<double> hang_timeout_s;        // --hang-timeout, else $ETRUN_HANG_TIMEOUT; none: off
  HangAction hang_action = HangAction::kDump;  // --hang-action
  PreflightMode preflight = PreflightMode::kOff;  // --preflight[=warn]

  // The worker command, argv-style; never re-parsed by a shell.
  std::vector<std::string> command;

  bool elastic() const {
    return min_np.has_value() || !host_discovery_script.empty() || !pool.empty();
  }
  // A pool job's "discovery" is a cheap request to the pool: it syncs more often.
  std::chrono::milliseconds discovery_interval() const {
    return Millis(discovery_interval_s.value_or(pool.empty() ? kDefaultDiscoveryIntervalS
                                                             : kDefaultPoolSyncIntervalS));
  }
  std::chrono::milliseconds discovery_timeout() const {
    return Millis(discovery_timeout_s.value_or(kDefaultDiscoveryTimeoutS));
  }
  std::chrono::milliseconds grace_period() const { return Millis(grace_period_s); }
  // --unresponsive-host-timeout, else 20 s or --lost-host-timeout when that is longer.
  double unresponsive_host_timeout() const {
    return unresponsive_host_timeout_s.value_or(std::max(kDefaultUnresponsiveHostTimeoutS, host_timeout_s));
  }
  // --hang-timeout; zero: no watchdog.
  std::chrono::milliseconds hang_timeout() const { return Millis(hang_timeout_s.value_or(0)); }
  std::chrono::milliseconds recovery_grace() const {
    return Millis(recovery_grace_s.value_or(kDefaultRecoveryGraceS));
  }

 private:
  static std::chrono::milliseconds Millis(double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  }
};

// --job-name, or a name derived from the command: the script's or program's base name without
// its extension (`python3 /x/train.py` -> "train"); used by events and the control endpoint.
std::string JobName(const JobConfig& config);

// The job's fixed hosts: host_list (-H or --hostfile, as the CLI parsed them), or localhost:<np>
// when neither was given. Parses nothing: returns false and sets *err to host_list_error when
// they did not parse.
bool JobHosts(const JobConfig& config, std::vector<discovery::HostSlots>* hosts, std::string* err);

}  // namespace etrun

#endif  // ETRUN_LAUNCHER_JOB_CONFIG_H_
