#include "cli/flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>

#include "cli/cluster_hosts.h"
#include "cli/cluster_kinds.h"
#include "cli/flag_checks.h"
#include "cli/flag_table.h"
#include "cli/flag_validators.h"
#include "launcher/mpi/mpi_policy.h"

#ifndef ETRUN_VERSION
#define ETRUN_VERSION "0.1.0"
#endif

namespace etrun::cli {
namespace {

constexpr char kHorovodRelease[] = "0.28.1";

// Shows argparse-only spellings ("-np") beside CLI11's names in --help.
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(const std::map<std::string, std::string>* dash_aliases)
      : dash_aliases_(dash_aliases) {
    column_width(42);
  }

  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::vector<std::string> names;
    if (auto it = dash_aliases_->find("--" + opt->get_lnames().front());
        it != dash_aliases_->end()) {
      names.push_back(it->second);
    }
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    return Join(names, ", ");
  }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    return "Usage: " + name + " [OPTIONS] -np N COMMAND [ARGS...]\n";
  }

 private:
  const std::map<std::string, std::string>* dash_aliases_;  // long name -> "-np"; not owned
};

}  // namespace

template <typename T>
CLI::Option* FlagTable::Value(const std::string& names, std::function<void(const T&)> store,
                              const std::string& help, const char* dash_alias) {
  CLI::Option* opt = Finish(app_.add_option_function<T>(names, std::move(store), help), dash_alias);
  opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // argparse: the last one wins
  const std::string display = Display("--" + opt->get_lnames().front());
  if constexpr (std::is_floating_point_v<T>) {
    opt->transform(FiniteNumber(display));
  } else if constexpr (std::is_integral_v<T>) {
    opt->transform(WholeNumber<T>(display));
  } else if constexpr (std::is_same_v<T, std::pair<int, int>>) {
    opt->transform(WholeNumber<int>(display));
  }
  return opt;
}

CLI::Option* FlagTable::Switch(const std::string& names, const std::string& help,
                               std::function<void()> on, const char* dash_alias) {
  return Finish(app_.add_flag_callback(names, std::move(on), help), dash_alias);
}

void FlagTable::SwitchPair(const std::string& name, const std::string& negation,
                           std::optional<bool>* field, const std::string& help,
                           bool negation_hidden) {
  Switch(name, help, [field] { *field = true; });
  CLI::Option* off =
      Switch(negation, "Explicitly disables " + name + ".", [field] { *field = false; });
  if (negation_hidden) off->group("");
}

CLI::Option* FlagTable::Finish(CLI::Option* opt, const char* dash_alias) {
  opt->group(group_);
  if (dash_alias != nullptr) dash_aliases_["--" + opt->get_lnames().front()] = dash_alias;
  return opt;
}

FlagTable::FlagTable(JobConfig* c)
    : app_("etrun: runs a Horovod job, as horovodrun does.", "etrun") {
  app_.set_help_flag();  // -h/--help is an ordinary flag here: the normalizer must know it
  app_.formatter(std::make_shared<HelpFormatter>(&dash_aliases_));
  app_.footer(
      "Syntax as horovodrun's: -np, -cb, -hostfile and -prefix-timestamp take one dash; long\n"
      "options may be abbreviated to a unique prefix (--slots = --slots-per-host); values attach\n"
      "with '=' (-np=4) and, for -H -p -i, directly (-Ha:1). The command starts at the first word\n"
      "that is neither an option nor an option's value, and takes everything after it:\n"
      "  etrun -np 4 -H a:2,b:2 python3 train.py --lr 0.1\n"
      "A '--' before the command ends the options explicitly.");
  AddGeneral(c);
  AddHostsAndElastic(c);
  AddTunables(&c->tunables);
  AddLibraryAndLogging(c);
}

void FlagTable::AddGeneral(JobConfig* c) {
  AddOptions(c);
  AddController(c);
  AddSsh(c);
}

void FlagTable::AddOptions(JobConfig* c) {
  group_ = "Options";
  Switch("-h,--help", "Shows this help and exits.", [] {});
  Switch("-v,--version", "Shows etrun's version and the Horovod protocol it speaks, and exits.",
         [] {});
  Optional<int>("--num-proc", &c->num_proc,
                "Total number of training processes (required). In elastic mode, the number of "
                "processes required before training can start.",
                "-np")
      ->type_name("N");
  Switch(
      "--check-build", "Shows what this etrun build supports, and exits.", [] {}, "-cb");
  Switch("--disable-cache", "Accepted for compatibility; etrun keeps no cache of start-up checks.",
         [c] { c->disable_cache = true; });
  Optional<int>("--start-timeout", &c->start_timeout_s,
                "Seconds allowed for start-up checks (default: $HOROVOD_START_TIMEOUT or 30).")
      ->type_name("SECONDS");
  // Both collect every value, split on commas and union into one list (see NicValues).
  Finish(app_.add_option("--network-interfaces"), nullptr)
      ->description("Network interfaces to use, comma-separated: \"eth0,eth1\". Repeatable.")
      ->type_name("NICS")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  Finish(app_.add_option("--network-interface"), nullptr)
      ->description(
          "A network interface to use. Repeatable: --network-interface eth0 "
          "--network-interface eth1.")
      ->type_name("NIC")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  Finish(app_.add_option("--rendezvous-allow"), nullptr)
      ->description(
          "Also admits rendezvous connections from this IPv4 network (CIDR, e.g. 10.0.0.0/8; "
          "comma-separated, repeatable). By default only this machine and the job's hosts are "
          "admitted; others get 403.")
      ->type_name("CIDR")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  Optional<int>("--rendezvous-threads", &c->rendezvous_threads,
                "Threads that serve the rendezvous store, off the loop that supervises the ranks "
                "(default: $ETRUN_RENDEZVOUS_THREADS, else one per core).")
      ->type_name("N");
  Text("--output-filename", &c->output_filename,
       "Also writes each rank's raw stdout and stderr to DIR/rank.<rank>/<stdout|stderr>.")
      ->type_name("DIR");
  Switch("--verbose", "Prints extra messages, such as each worker's command line.",
         [c] { c->verbose = true; });
  Text("--config-file", &c->config_file, "YAML file of tunable parameters (not supported yet).")
      ->type_name("FILE");
}

void FlagTable::AddController(JobConfig* c) {
  group_ = "Controller arguments";
  Switch("--gloo", "Runs Horovod with the Gloo controller (the default).",
         [c] { c->controller = Controller::kGloo; });
  Switch("--mpi", "Runs Horovod with the MPI controller, via Open MPI's mpirun.",
         [c] { c->controller = Controller::kMpi; });
  Switch("--jsrun", "Launches with jsrun and the MPI controller (not supported yet).",
         [c] { c->controller = Controller::kJsrun; });
}

void FlagTable::AddSsh(JobConfig* c) {
  group_ = "SSH arguments";
  Optional<int>("-p,--ssh-port", &c->ssh_port, "SSH port on all the hosts.")->type_name("PORT");
  Text("-i,--ssh-identity-file", &c->ssh_identity_file,
       "File from which the SSH identity (private key) is read.")
      ->type_name("FILE");
  Value<int>(
      "--ssh-connect-timeout", [c](const int& v) { c->ssh_connect_timeout_s = v; },
      "Seconds to reach a host and log in over SSH before giving up on it (default: 10).")
      ->type_name("SECONDS");
  Value<double>(
      "--lost-host-timeout", [c](const double& v) { c->host_timeout_s = v; },
      "Seconds a host's agent may stay silent once it runs (its heartbeat comes every second) "
      "before the host is declared lost when its link is dead (a cut, a crash: its kernel no "
      "longer answers): its ranks fail, elastic jobs go on without it (default: 3).")
      ->type_name("SECONDS");
  Value<double>(
      "--unresponsive-host-timeout", [c](const double& v) { c->unresponsive_host_timeout_s = v; },
      "Seconds a host that is still reachable but whose agent is silent (busy, short of memory, "
      "stopped) is waited for before it is declared lost (default: 20; at least "
      "--lost-host-timeout).")
      ->type_name("SECONDS");
  Text("--remote-shell", &c->start.command,
       "Starts remote ranks by running this command instead of SSH, {host} replaced by the "
       "host, e.g. 'kubectl exec -i {host} -n ns --' (as mpirun's plm_rsh_agent).")
      ->type_name("COMMAND");
  AddClusterKinds(c);
  Switch("--ssh-strict-host-keys",
         "Refuses hosts missing from ~/.ssh/known_hosts (default: accept them and record their "
         "keys there, as OpenSSH's StrictHostKeyChecking=accept-new, with one warning; a changed "
         "key is always refused).",
         [c] { c->ssh_strict_host_keys = true; });
}

void FlagTable::AddClusterKinds(JobConfig* c) {
  for (const discovery::ClusterKind* kind : ClusterKinds()) {  // --ignore-slurm, --add-slurm-jobs
    const discovery::ClusterWords w = kind->words();
    std::string name = w.name;
    Switch("--ignore-" + name,
           fmt::format("Inside a {} allocation with no -H, --hostfile or discovery script: run on "
                       "this machine only, as outside one (default: the allocation's nodes, ranks "
                       "through {}).", w.title, w.step),
           [c, name] { c->ignore_clusters.push_back(name); });
    if (*w.grow_example == '\0') continue;
    Value<std::string>(
        "--add-" + name + "-jobs",
        [c, name](const std::string& v) { c->add_cluster_jobs[name] = v; },
        fmt::format("Elastic jobs inside a {} allocation: also run on the nodes of your other "
                    "running jobs with this name (e.g. {}), through {} in their allocations; when "
                    "such a job ends its nodes leave this one.", w.title, w.grow_example, w.step))
        ->type_name("NAME");
  }
}

void FlagTable::AddHostsAndElastic(JobConfig* c) {
  group_ = "Host arguments";
  Text("-H,--hosts", &c->hosts_flag, "Hosts and their slots, host1:2,host2:4 (default: localhost:<np>).")
      ->type_name("HOST:SLOTS,...");
  Value<std::string>(
      "--hostfile", [this](const std::string& v) { hostfile_ = v; },
      "File with one \"<hostname> slots=<slots>\" per line.", "-hostfile")
      ->type_name("FILE");
  Text("--host-discovery-script", &c->host_discovery_script,
       "Executable that prints one available host[:slots] per line; enables elastic training "
       "(etrun polls it every --discovery-interval).")
      ->type_name("SCRIPT");

  Text("--pool", &c->pool,
       "Runs on slots of the shared pool NAME (`etrun pool start NAME`) instead of a host "
       "list: the pool gives the job --min-np..--max-np slots by fair share and --priority, "
       "and moves them between jobs through the elastic path (etrun). HOST:PORT reaches a pool "
       "on another machine, with its token in $ETRUN_POOL_TOKEN.")
      ->type_name("NAME");
  Optional<int>("--priority", &c->priority,
                "The job's weight in --pool's fair share, 1..1000000 (etrun; default 5000).")
      ->type_name("N");

  group_ = "Elastic arguments";
  Optional<int>("--min-np,--min-num-proc", &c->min_np,
                "Minimum number of processes to keep training; enables elastic training "
                "(default: -np).")
      ->type_name("N");
  Optional<int>("--max-np,--max-num-proc", &c->max_np,
                "Maximum number of processes (default: unbounded).")
      ->type_name("N");
  Optional<int>("--slots-per-host", &c->slots_per_host,
                "Slots per host for discovered hosts that print no slot count.")
      ->type_name("N");
  Optional<int>("--elastic-timeout", &c->elastic_timeout_s,
                "Seconds to wait for enough slots (default: $HOROVOD_ELASTIC_TIMEOUT or 600).")
      ->type_name("SECONDS");
  Optional<int>("--reset-limit", &c->reset_limit,
                "Times the job may scale up or down before it fails (default: unlimited).")
      ->type_name("N");
  Optional<std::pair<int, int>>("--blacklist-cooldown-range", &c->cooldown_range,
                                "Seconds a failing host stays blacklisted, e.g. 60 300 "
                                "(default: for good).")
      ->type_name("MIN MAX");
  Optional<double>("--discovery-interval", &c->discovery_interval_s,
                   "Seconds between the end of one discovery script run and the next "
                   "(default: 1, as horovodrun; at least 0.1).")
      ->type_name("SECONDS");
  Value<std::string>(
      "--elastic-mode", [c](const std::string& v) { c->restart_mode = v == "restart"; },
      "horovod (default): workers speak Horovod's elastic protocol (hvd.elastic.run); restart: "
      "torchrun semantics for other workers, e.g. torch.distributed: every change or failure "
      "restarts all ranks with the new world.")
      ->type_name("MODE")
      ->check(OneOf("--elastic-mode", {"horovod", "restart"}));
  Optional<double>("--discovery-timeout", &c->discovery_timeout_s,
                   "Seconds a discovery script run may take before it is killed (default: 30).")
      ->type_name("SECONDS");
  Optional<double>("--recovery-grace", &c->recovery_grace_s,
                   "After a worker fails, seconds the survivors get to come back for a reset; "
                   "those still stuck in a collective then are replaced by fresh processes, so "
                   "the job does not wait for Gloo's timeout (default: 2; 0: wait).")
      ->type_name("SECONDS");
}

void FlagTable::AddTunables(Tunables* t) {
  group_ = "Tunable parameter arguments";
  Optional<int64_t>("--fusion-threshold-mb", &t->fusion_threshold_mb,
                    "Fusion buffer threshold in MB; 0 disables tensor fusion (default: 128).")
      ->type_name("MB");
  Optional<double>("--cycle-time-ms", &t->cycle_time_ms,
                   "Delay between tensor fusion cycles in ms (default: 1).")
      ->type_name("MS");
  Optional<int64_t>("--cache-capacity", &t->cache_capacity,
                    "Number of tensor names cached to save coordination (default: 1024).")
      ->type_name("N");
  SwitchPair("--hierarchical-allreduce", "--no-hierarchical-allreduce", &t->hierarchical_allreduce,
             "Performs hierarchical allreduce instead of ring allreduce.", false);
  SwitchPair("--hierarchical-allgather", "--no-hierarchical-allgather", &t->hierarchical_allgather,
             "Performs hierarchical allgather instead of ring allgather.", false);
  SwitchPair("--torus-allreduce", "--no-torus-allreduce", &t->torus_allreduce,
             "Performs torus allreduce.", false);

  group_ = "Autotune arguments";
  SwitchPair("--autotune", "--no-autotune", &t->autotune,
             "Autotunes the parameters not given explicitly, for throughput.", true);
  Optional<std::string>("--autotune-log-file", &t->autotune_log_file,
                        "CSV log of autotuning trials.")
      ->type_name("FILE");
  Optional<int64_t>("--autotune-warmup-samples", &t->autotune_warmup_samples,
                    "Samples discarded before autotuning starts (default: 3).")
      ->type_name("N");
  Optional<int64_t>("--autotune-steps-per-sample", &t->autotune_steps_per_sample,
                    "Steps recorded per autotuning sample (default: 10).")
      ->type_name("N");
  Optional<int64_t>("--autotune-bayes-opt-max-samples", &t->autotune_bayes_opt_max_samples,
                    "Samples per Bayesian optimization process (default: 20).")
      ->type_name("N");
  Optional<double>("--autotune-gaussian-process-noise", &t->autotune_gaussian_process_noise,
                   "Noise regularization in [0, 1] (default: 0.8).")
      ->type_name("X");

  group_ = "Timeline arguments";
  Optional<std::string>("--timeline-filename", &t->timeline_filename,
                        "Records a JSON timeline of Horovod events to FILE.")
      ->type_name("FILE");
  SwitchPair("--timeline-mark-cycles", "--no-timeline-mark-cycles", &t->timeline_mark_cycles,
             "Marks cycles on the timeline.", true);

  group_ = "Stall check arguments";
  Switch("--no-stall-check", "Disables the stall check.", [t] { t->no_stall_check = true; });
  Switch("--stall-check", "", [t] { t->no_stall_check = false; })->group("");
  Optional<int64_t>("--stall-check-warning-time-seconds", &t->stall_check_warning_time_seconds,
                    "Seconds until a stall warning (default: 60).")
      ->type_name("SECONDS");
  Optional<int64_t>("--stall-check-shutdown-time-seconds", &t->stall_check_shutdown_time_seconds,
                    "Seconds until a stalled job shuts down (default: 0, never).")
      ->type_name("SECONDS");
}

void FlagTable::AddLibraryAndLogging(JobConfig* c) {
  Tunables* t = &c->tunables;
  group_ = "Library arguments";
  SwitchPair("--mpi-threads-disable", "--no-mpi-threads-disable", &t->mpi_threads_disable,
             "Disables MPI threading support (MPI mode only).", true);
  Text("--mpi-args", &c->mpi_args,
       "Extra mpirun arguments, split as a shell would: --mpi-args=\"--map-by ppr:4:node\".")
      ->type_name("ARGS");
  Switch("--tcp", "Uses TCP only for communication (NCCL_IB_DISABLE=1).", [t] { t->tcp = true; });
  Text("--binding-args", &c->binding_args,
       "mpirun process binding arguments, replacing -bind-to none -map-by slot.")
      ->type_name("ARGS");
  Optional<int64_t>("--num-nccl-streams", &t->num_nccl_streams, "Number of NCCL streams.")
      ->type_name("N");
  Optional<int64_t>("--thread-affinity", &t->thread_affinity,
                    "Horovod background thread affinity (default: 0).")
      ->type_name("N");
  Optional<int64_t>("--gloo-timeout-seconds", &t->gloo_timeout_seconds,
                    "Timeout for Gloo operations (default: 30).")
      ->type_name("SECONDS");

  group_ = "Logging arguments";
  Optional<std::string>("--log-level", &t->log_level,
                        "Horovod's minimum log level: TRACE, DEBUG, INFO, WARNING, ERROR or FATAL "
                        "(default: WARNING).")
      ->type_name("LEVEL")
      ->check(OneOf("--log-level", {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"}));
  Switch("--log-with-timestamp", "", [t] { t->log_hide_timestamp = false; })->group("");
  Switch("--log-without-timestamp", "Hides the timestamp of Horovod's log messages.",
         [t] { t->log_hide_timestamp = true; });
  Switch(
      "--prefix-output-with-timestamp", "Prefixes each line of output with a timestamp.",
      [c] { c->prefix_timestamp = true; }, "-prefix-timestamp");
  Switch("--log-hide-timestamp", "", [t] { t->log_hide_timestamp = true; })->group("");
  Switch("--no-log-hide-timestamp", "", [t] { t->log_hide_timestamp = false; })->group("");

  group_ = "etrun arguments";
  Value<double>(
      "--grace-period", [c](const double& v) { c->grace_period_s = v; },
      "Seconds between SIGTERM and SIGKILL when stopping ranks (default: 5).")
      ->type_name("SECONDS");
  Text("--events-file", &c->events_file,
       "Writes the job's events (start, hosts, rounds, rank starts and exits, blacklists, resets, "
       "end) to FILE as JSON Lines, as they happen; `etrun report FILE` draws them.")
      ->type_name("FILE");
  Text("--job-name", &c->job_name,
       "Names the job in events (default: the script's name, e.g. train for python3 train.py).")
      ->type_name("NAME");
  Value<std::string>(
      "--timestamp-format",
      [c](const std::string& v) {
        c->timestamp_format = v == "iso" ? TimestampFormat::kIso : TimestampFormat::kAsctime;
      },
      "Style of -prefix-timestamp: asctime (horovodrun's, the default) or iso (ISO 8601 with "
      "milliseconds).")
      ->type_name("STYLE")
      ->check(OneOf("--timestamp-format", {"asctime", "iso"}));
  Optional<double>("--hang-timeout", &c->hang_timeout_s,
                   "Seconds with no output from any rank and no rank started or ended after which "
                   "etrun dumps every Python rank's stack (all threads, no change to the script), "
                   "shows the others' kernel state and says in one line which ranks are where "
                   "(default: $ETRUN_HANG_TIMEOUT, else off).")
      ->type_name("SECONDS");
  Value<std::string>(
      "--hang-action",
      [c](const std::string& v) {
        c->hang_action = v == "abort"   ? HangAction::kAbort
                         : v == "restart" ? HangAction::kRestart
                                          : HangAction::kDump;
      },
      "What a hang then does: dump (default: the job goes on, dumped again after the next "
      "--hang-timeout of silence), abort (stops every rank; etrun exits 124) or restart (elastic "
      "jobs: the odd ranks' hosts count as failed).")
      ->type_name("ACTION")
      ->check(OneOf("--hang-action", {"dump", "abort", "restart"}));
  Finish(app_.add_option_function<std::string>(
             "--preflight",
             [c](const std::string& v) {
               c->preflight = v == "warn" ? PreflightMode::kWarn : PreflightMode::kOn;
             },
             "Before ranks start, each host checks that the command's program (and script) is "
             "there, that it has the GPUs its slots need and reaches the rendezvous port, and "
             "probes the round trip and bandwidth to the others. A sick host (a failed check, "
             "or a link below a quarter of the median) stops a static job before it starts (exit "
             "3); --preflight=warn only names it."),
         nullptr)
      ->expected(0, 1)
      ->type_name("[=warn]")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->check(OneOf("--preflight", {"warn"}));
  Optional<int>("--gpus-per-rank", &c->gpus_per_rank,
                "Gives each rank N GPUs of its host: local rank i gets CUDA_VISIBLE_DEVICES "
                "i*N..i*N+N-1.")
      ->type_name("N");
  Optional<int>("--ranks-per-gpu", &c->ranks_per_gpu,
                "Lets K ranks share one GPU: local rank i gets CUDA_VISIBLE_DEVICES i/K.")
      ->type_name("K");
}

std::vector<OptionSpec> FlagTable::Specs() const {
  std::vector<OptionSpec> specs;
  for (const CLI::Option* opt : app_.get_options()) {
    OptionSpec spec;
    if (auto it = dash_aliases_.find("--" + opt->get_lnames().front()); it != dash_aliases_.end()) {
      spec.names.push_back(it->second);
    }
    for (const std::string& s : opt->get_snames()) spec.names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) spec.names.push_back("--" + l);
    spec.num_values = opt->get_expected_max() == 0 ? 0 : opt->get_type_size_max();
    spec.value_optional = opt->get_expected_min() == 0 && opt->get_expected_max() == 1;
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string FlagTable::Display(const std::string& long_name) const {
  const CLI::Option* opt = app_.get_option(long_name);
  std::vector<std::string> names;
  if (auto it = dash_aliases_.find(long_name); it != dash_aliases_.end())
    names.push_back(it->second);
  for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  return Join(names, "/");
}

bool FlagTable::Parse(const std::vector<std::string>& tokens, std::string* err) {
  std::vector<std::string> reversed(tokens.rbegin(), tokens.rend());  // CLI11 pops from the back
  try {
    app_.parse(reversed);
    return true;
  } catch (const CLI::ValidationError& e) {
    // CLI11 says "--name: <validator message>"; our validators name the option themselves.
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    *err = colon == std::string::npos ? what : what.substr(colon + 2);
  } catch (const CLI::Error& e) {  // not expected after normalization; still one line
    *err = std::string(e.what()) + ": see etrun --help";
  }
  return false;
}

std::vector<std::string> FlagTable::NicValues() const {
  const CLI::Option* plural = app_.get_option("--network-interfaces");
  const CLI::Option* singular = app_.get_option("--network-interface");
  std::map<const CLI::Option*, size_t> next;
  std::vector<std::string> values;
  for (const CLI::Option* opt : app_.parse_order()) {  // one entry per value given
    if (opt != plural && opt != singular) continue;
    values.push_back(opt->results().at(next[opt]++));
  }
  return values;
}

namespace {

std::string VersionText() {
  return std::string("etrun ") + ETRUN_VERSION + "\nspeaks the launcher protocol of Horovod " +
         kHorovodRelease + " (horovodrun's flags, rendezvous and worker environment)\n";
}

// The MPI line of -cb: available when mpirun on $PATH is Open MPI's.
std::string MpiBuildLine() {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  launcher::MpiInstall mpi;
  std::string err;
  if (!launcher::FindMpirun(environment, &mpi, &err)) {
    return "[ ] MPI (" + err + ")";
  }
  if (mpi.flavor != "Open MPI") {
    return "[ ] MPI (mpirun at " + mpi.path + " is " +
           (mpi.flavor.empty() ? "not Open MPI" : mpi.flavor) +
           "; etrun runs Open MPI's mpirun only)";
  }
  return "[X] MPI (" + mpi.version + " at " + mpi.path + ")";
}

std::string CheckBuildText() {
  const auto mark = [](bool yes) { return yes ? "[X]" : "[ ]"; };
#if defined(ETRUN_HAVE_CUDA) && ETRUN_HAVE_CUDA
  constexpr bool kCuda = true;
#else
  constexpr bool kCuda = false;
#endif
#if defined(ETRUN_HAVE_NCCL) && ETRUN_HAVE_NCCL
  constexpr bool kNccl = true;
#else
  constexpr bool kNccl = false;
#endif
  std::ostringstream out;
  out << "etrun v" << ETRUN_VERSION << " (Horovod " << kHorovodRelease << " launcher protocol):\n\n"
      << "    Available Launch Modes:\n"
      << "        [X] Local processes (static Gloo)\n"
      << "        [X] SSH to remote hosts (libssh2)\n"
      << "        [X] Elastic (Horovod's protocol and restart mode; local and SSH hosts)\n\n"
      << "    Available Controllers:\n"
      << "        [X] Gloo\n"
      << "        " << MpiBuildLine() << "\n\n"
      << "    Found at Build Time:\n"
      << "        " << mark(kCuda) << " CUDA\n"
      << "        " << mark(kNccl) << " NCCL (etrun-smoke's GPU allreduce)\n";
  return out.str();
}

ParseOutcome Exit(int code, std::string out, std::string err) {
  ParseOutcome outcome;
  outcome.exit_code = code;
  outcome.out = std::move(out);
  outcome.err = std::move(err);
  return outcome;
}

ParseOutcome UsageError(const std::string& what) {
  return Exit(2, "", "etrun: error: " + what + "\n");
}

bool Contains(const std::vector<std::string>& tokens, const std::string& token) {
  return std::find(tokens.begin(), tokens.end(), token) != tokens.end();
}

// ParseArgs without the guard against CLI11 errors in building the table.
ParseOutcome ParseArgsUnguarded(const std::vector<std::string>& args, JobConfig* config,
                                const std::vector<std::string>& env) {
  JobConfig parsed;
  FlagTable table(&parsed);
  std::string err;
  NormalizedArgs normalized;
  const std::vector<std::string> rest(args.empty() ? args.end() : args.begin() + 1, args.end());
  if (!NormalizeArgv(table.Specs(), rest, &normalized, &err)) return UsageError(err);
  if (Contains(normalized.options, "--help")) return Exit(0, table.Help(), "");
  if (Contains(normalized.options, "--version")) return Exit(0, VersionText(), "");
  if (Contains(normalized.options, "--check-build")) return Exit(0, CheckBuildText(), "");

  if (!table.Parse(normalized.options, &err) || !CheckExclusions(table, &err) ||
      !UseClusterAllocation(ClusterKinds(), table, env, &parsed, &err) ||
      !CheckLaunchValues(table, parsed, &err) || !CheckTunables(table, parsed.tunables, &err) ||
      !CollectNics(table, &parsed.network_interfaces, &err) ||
      !CollectAllowed(table, &parsed.rendezvous_allow, &err)) {
    return UsageError(err);
  }
  if (normalized.command.empty()) {
    return UsageError(
        "no command to run: put it after the options, e.g. etrun -np 2 python3 train.py");
  }
  if (!CheckNotSupportedYet(table, &err) || !CheckMpi(table, parsed, &err)) return UsageError(err);
  if (!HangTimeoutFromEnv(table, env, &parsed, &err)) return UsageError(err);
  parsed.command = std::move(normalized.command);
  // Read once, here. A bad list is no usage error: the runtime reports host_list_error as the
  // job's cause (job_start and job_end in the events file, exit 2), as it did when it parsed.
  // An allocation's hosts were read by UseClusterAllocation.
  if (parsed.cluster_job.empty()) {
    ReadHostList(parsed.hosts_flag, table.hostfile(), &parsed.host_list, &parsed.host_list_error);
  }

  ParseOutcome outcome;
  const std::pair<const char*, const char*> deprecated[] = {
      {"--log-hide-timestamp", "--log-without-timestamp"},
      {"--no-log-hide-timestamp", "--log-with-timestamp"},
  };
  for (const auto& [name, replacement] : deprecated) {
    if (table.Given(name)) {
      outcome.err +=
          std::string("etrun: warning: ") + name + " is deprecated: use " + replacement + "\n";
    }
  }
  for (const char* name : {"--mpi-args", "--binding-args"}) {
    if (table.Given(name) && parsed.controller != Controller::kMpi) {
      outcome.err += std::string("etrun: warning: ") + name +
                     " has no effect without --mpi (etrun launches with Gloo unless --mpi is "
                     "given)\n";
    }
  }
  *config = std::move(parsed);
  return outcome;
}

}  // namespace

ParseOutcome ParseArgs(const std::vector<std::string>& args, JobConfig* config,
                       const std::vector<std::string>& env) {
  try {
    return ParseArgsUnguarded(args, config, env);
  } catch (const CLI::Error& e) {  // a broken flag table (CLI::ConstructionError): our bug
    return Exit(1, "", std::string("etrun: internal error: flag table: ") + e.what() + "\n");
  }
}

int ParseFlags(int argc, const char* const* argv, JobConfig* config) {
  const std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  const ParseOutcome outcome = ParseArgs(args, config, env);
  std::cout << outcome.out << std::flush;
  std::cerr << outcome.err << std::flush;
  return outcome.exit_code;
}

std::vector<OptionSpec> OptionSpecs() {
  JobConfig scratch;
  return FlagTable(&scratch).Specs();
}

}  // namespace etrun::cli