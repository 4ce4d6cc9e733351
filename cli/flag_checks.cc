#include "cli/flag_checks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "cli/flag_validators.h"
#include "launcher/process/environment.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/ssh/remote_shell.h"
#include "rendezvous/access_list.h"

namespace etrun::cli {
namespace {

// Flags whose feature lands in a later release: parsed and validated, then refused. Delete a row
// when its feature lands.
struct NotSupportedYet {
  const char* option;  // the option's first long name
  const char* reason;
  const char* fix;
};
constexpr NotSupportedYet kNotSupportedYet[] = {
    {"--jsrun", "jsrun mode comes in a later etrun release",
     "leave it out to launch with Gloo, or use --mpi"},
    {"--config-file", "YAML config files come in a later etrun release",
     "give the settings as flags instead"},
};

// horovodrun's argparse mutually exclusive groups: at most one member of each may be given.
std::vector<std::vector<std::string>> ExclusiveGroups() {
  return {
      {"--hosts", "--hostfile", "--host-discovery-script", "--pool"},
      {"--pool", "--mpi"},
      {"--gloo", "--mpi", "--jsrun"},
      {"--gpus-per-rank", "--ranks-per-gpu"},
      {"--prefix-output-with-timestamp", "--log-without-timestamp", "--log-with-timestamp",
       "--log-hide-timestamp", "--no-log-hide-timestamp"},
      {"--hierarchical-allreduce", "--no-hierarchical-allreduce"},
      {"--hierarchical-allgather", "--no-hierarchical-allgather"},
      {"--torus-allreduce", "--no-torus-allreduce"},
      {"--autotune", "--no-autotune"},
      {"--timeline-mark-cycles", "--no-timeline-mark-cycles"},
      {"--no-stall-check", "--stall-check"},
      {"--mpi-threads-disable", "--no-mpi-threads-disable"},
  };
}

template <typename T>
bool CheckAtLeast(const FlagTable& table, const std::string& name, const std::optional<T>& value,
                  T min, std::string* err) {
  if (!value || *value >= min) return true;
  const auto text = [](T v) {
    if constexpr (std::is_integral_v<T>)
      return std::to_string(v);
    else
      return FormatNumber(v);
  };
  *err = table.Display(name) + ": expected at least " + text(min) + ", got " + text(*value);
  return false;
}

}  // namespace

bool CheckExclusions(const FlagTable& table, std::string* err) {
  for (const std::vector<std::string>& group : ExclusiveGroups()) {
    std::vector<std::string> given;
    for (const std::string& name : group) {
      if (table.Given(name)) given.push_back(table.Display(name));
    }
    if (given.size() > 1) {
      *err = given[0] + " and " + given[1] + " cannot be used together: give only one of them";
      return false;
    }
  }
  return true;
}

bool CheckLaunchValues(const FlagTable& t, const JobConfig& c, std::string* err) {
  if (!c.num_proc) {
    *err = t.Display("--num-proc") +
           " is required: say how many processes to start, e.g. etrun -np 4 python3 train.py";
    return false;
  }
  if (!CheckAtLeast(t, "--num-proc", c.num_proc, 1, err) ||
      !CheckAtLeast(t, "--min-np", c.min_np, 1, err) ||
      !CheckAtLeast(t, "--max-np", c.max_np, 1, err) ||
      !CheckAtLeast(t, "--slots-per-host", c.slots_per_host, 1, err) ||
      !CheckAtLeast(t, "--elastic-timeout", c.elastic_timeout_s, 1, err) ||
      !CheckAtLeast(t, "--start-timeout", c.start_timeout_s, 1, err) ||
      !CheckAtLeast(t, "--reset-limit", c.reset_limit, 0, err) ||
      !CheckAtLeast(t, "--grace-period", std::optional<double>(c.grace_period_s), 0.0, err) ||
      !CheckAtLeast(t, "--discovery-interval", c.discovery_interval_s, 0.1, err) ||
      !CheckAtLeast(t, "--ssh-connect-timeout", std::optional<int>(c.ssh_connect_timeout_s), 1, err) ||
      !CheckAtLeast(t, "--lost-host-timeout", std::optional<double>(c.host_timeout_s), 2.0, err) ||
      !CheckAtLeast(t, "--unresponsive-host-timeout", c.unresponsive_host_timeout_s, c.host_timeout_s, err) ||
      !CheckAtLeast(t, "--discovery-timeout", c.discovery_timeout_s, 0.1, err) ||
      !CheckAtLeast(t, "--recovery-grace", c.recovery_grace_s, 0.0, err) ||
      !CheckAtLeast(t, "--gpus-per-rank", c.gpus_per_rank, 1, err) ||
      !CheckAtLeast(t, "--ranks-per-gpu", c.ranks_per_gpu, 1, err) ||
      !CheckAtLeast(t, "--rendezvous-threads", c.rendezvous_threads, 1, err)) {
    return false;
  }
  if (!c.start.command.empty() && !launcher::CheckRemoteShell(c.start.command, err)) return false;
  if (c.priority && c.pool.empty()) {
    *err = "--priority is a weight in a shared pool: give --pool NAME too";
    return false;
  }
  if (c.priority && (*c.priority < 1 || *c.priority > 1000000)) {
    *err = "--priority: expected 1..1000000, got " + std::to_string(*c.priority);
    return false;
  }
  if (c.min_np && *c.min_np > *c.num_proc) {
    *err = t.Display("--min-np") + ": expected at most -np (" + std::to_string(*c.num_proc) +
           "), got " + std::to_string(*c.min_np);
    return false;
  }
  if (c.max_np && *c.num_proc > *c.max_np) {
    *err = t.Display("--num-proc") + ": expected at most --max-np (" + std::to_string(*c.max_np) +
           "), got " + std::to_string(*c.num_proc);
    return false;
  }
  if (c.cooldown_range) {
    const auto [min, max] = *c.cooldown_range;
    std::string expected;
    if (min < 1) {
      expected = "MIN of at least 1";
    } else if (max > 3600) {
      expected = "MAX of at most 3600";
    } else if (min > max) {
      expected = "MIN <= MAX";
    }
    if (!expected.empty()) {
      *err = "--blacklist-cooldown-range: expected " + expected + ", got " + std::to_string(min) +
             " " + std::to_string(max);
      return false;
    }
  }
  if (c.ssh_port && (*c.ssh_port < 1 || *c.ssh_port > 65535)) {
    *err = t.Display("--ssh-port") + ": expected a port from 1 to 65535, got " +
           std::to_string(*c.ssh_port);
    return false;
  }
  return true;
}

bool CheckTunables(const FlagTable& t, const Tunables& u, std::string* err) {
  const std::pair<const char*, const std::optional<int64_t>*> counts[] = {
      {"--fusion-threshold-mb", &u.fusion_threshold_mb},
      {"--cache-capacity", &u.cache_capacity},
      {"--autotune-warmup-samples", &u.autotune_warmup_samples},
      {"--autotune-steps-per-sample", &u.autotune_steps_per_sample},
      {"--autotune-bayes-opt-max-samples", &u.autotune_bayes_opt_max_samples},
      {"--stall-check-warning-time-seconds", &u.stall_check_warning_time_seconds},
      {"--stall-check-shutdown-time-seconds", &u.stall_check_shutdown_time_seconds},
      {"--num-nccl-streams", &u.num_nccl_streams},
      {"--thread-affinity", &u.thread_affinity},
      {"--gloo-timeout-seconds", &u.gloo_timeout_seconds},
  };
  for (const auto& [name, value] : counts) {
    if (!CheckAtLeast<int64_t>(t, name, *value, 0, err)) return false;
  }
  if (!CheckAtLeast(t, "--cycle-time-ms", u.cycle_time_ms, 0.0, err)) return false;
  const std::optional<double>& noise = u.autotune_gaussian_process_noise;
  if (noise && (*noise < 0 || *noise > 1)) {
    *err = "--autotune-gaussian-process-noise: expected a value from 0 to 1, got " +
           FormatNumber(*noise);
    return false;
  }
  return true;
}

bool CollectNics(const FlagTable& t, std::vector<std::string>* nics, std::string* err) {
  for (const std::string& value : t.NicValues()) {
    bool any = false;
    std::stringstream in(value);
    for (std::string nic; std::getline(in, nic, ',');) {
      nic = Trim(nic);
      if (nic.empty()) continue;
      any = true;
      if (std::find(nics->begin(), nics->end(), nic) == nics->end()) nics->push_back(nic);
    }
    if (!any) {
      *err = "--network-interface: expected an interface name, got '" + value + "'";
      return false;
    }
  }
  return true;
}

bool CollectAllowed(const FlagTable& t, std::vector<rendezvous::Cidr>* networks,
                    std::string* err) {
  for (const std::string& value : t.Results("--rendezvous-allow")) {
    std::stringstream in(value);
    bool any = false;
    for (std::string item; std::getline(in, item, ',');) {
      item = Trim(item);
      if (item.empty()) continue;
      any = true;
      rendezvous::Cidr cidr;
      std::string why;
      if (!rendezvous::ParseCidr(item, &cidr, &why)) {
        *err = "--rendezvous-allow: " + why;
        return false;
      }
      networks->push_back(cidr);
    }
    if (!any) {
      *err = "--rendezvous-allow: expected a network such as 10.0.0.0/8, got '" + value + "'";
      return false;
    }
  }
  return true;
}

bool ReadHostList(const std::string& hosts, const std::string& hostfile,
                  std::vector<discovery::HostSlots>* list, std::string* err) {
  if (!hosts.empty()) return discovery::ParseHostsFlag(hosts, list, err);
  if (hostfile.empty()) {
    list->clear();
    return true;
  }
  std::ifstream in(hostfile, std::ios::binary);
  if (!in) {
    *err = "cannot read hostfile " + hostfile + ": " + strerror(errno);
    return false;
  }
  std::stringstream contents;
  contents << in.rdbuf();
  return discovery::ParseHostfile(hostfile, contents.str(), list, err);
}

bool CheckMpi(const FlagTable& t, const JobConfig& c, std::string* err) {
  for (const char* name : {"--mpi-args", "--binding-args"}) {
    const std::string& text = std::string(name) == "--mpi-args" ? c.mpi_args : c.binding_args;
    std::vector<std::string> words;
    if (!launcher::SplitShellWords(text, &words, err)) {
      *err = std::string(name) + ": " + *err + " in '" + text + "': close the quote";
      return false;
    }
  }
  if (c.controller != Controller::kMpi) return true;
  if (c.elastic()) {
    *err = "--mpi and " +
           t.Display(t.Given("--min-np") ? "--min-np" : "--host-discovery-script") +
           " cannot be used together: elastic jobs always run with Gloo (horovodrun ignores --mpi "
           "there): leave out --mpi";
    return false;
  }
  if (c.preflight != PreflightMode::kOff) {
    *err = "--mpi and --preflight cannot be used together: mpirun starts the ranks, and etrun's "
           "agents, which check the hosts, do not run: drop one";
    return false;
  }
  for (const char* name : {"--gpus-per-rank", "--ranks-per-gpu"}) {
    if (t.Given(name)) {
      *err = std::string("--mpi and ") + name +
             " cannot be used together: mpirun decides the local ranks; leave out " + name +
             " and pin GPUs by OMPI_COMM_WORLD_LOCAL_RANK in the script";
      return false;
    }
  }
  return true;
}

bool HangTimeoutFromEnv(const FlagTable& t, const std::vector<std::string>& env, JobConfig* c,
                        std::string* err) {
  if (c->hang_timeout_s) {
    if (!(*c->hang_timeout_s >= 0.001 && *c->hang_timeout_s <= 1e9)) {
      *err = "--hang-timeout: expected seconds from 0.001 to 1e9, got " +
             fmt::format("{:g}", *c->hang_timeout_s);
      return false;
    }
  } else if (std::string value = launcher::EnvValue(env, "ETRUN_HANG_TIMEOUT");
             !value.empty() && c->controller != Controller::kMpi) {  // mpirun's ranks: not ours
    char* end = nullptr;
    double seconds = strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || !(seconds >= 0.001) || seconds > 1e9) {
      *err = "ETRUN_HANG_TIMEOUT: expected seconds from 0.001 to 1e9, got '" + value +
             "': set it to a number such as 300, or unset it";
      return false;
    }
    c->hang_timeout_s = seconds;
  }
  if (t.Given("--hang-action") && !c->hang_timeout_s) {
    *err = "--hang-action acts on a hang that --hang-timeout SECONDS (or $ETRUN_HANG_TIMEOUT) "
           "detects: give one";
    return false;
  }
  if (c->hang_action == HangAction::kRestart && !c->elastic()) {
    *err = "--hang-action restart treats the odd ranks' hosts as failed, which only an elastic job "
           "survives: add --min-np (or --host-discovery-script), or use --hang-action abort";
    return false;
  }
  if (c->hang_timeout_s && c->controller == Controller::kMpi) {
    *err = "--mpi and --hang-timeout cannot be used together: mpirun's ranks are not etrun's to "
           "dump; leave out one of them";
    return false;
  }
  return true;
}

bool CheckNotSupportedYet(const FlagTable& t, std::string* err) {
  for (const NotSupportedYet& row : kNotSupportedYet) {
    if (t.Given(row.option)) {
      *err = t.Display(row.option) + " is not supported yet (" + row.reason + "): " + row.fix;
      return false;
    }
  }
  return true;
}

}  // namespace etrun::cli
