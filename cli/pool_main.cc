#include "cli/pool_main.h"

#include <string.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/cluster_kinds.h"
#include "cli/flag_checks.h"
#include "cli/verb_common.h"
#include "control/control.h"
#include "discovery/host_slots.h"
#include "discovery/host_source.h"
#include "launcher/gpu_slots.h"
#include "launcher/process/environment.h"
#include "launcher/process/shell_script_runner.h"
#include "pool/pool_client.h"
#include "pool/pool_daemon.h"
#include "pool/pool_wire.h"

namespace etrun::cli {

namespace {

using control::JobEntry;
using nlohmann::json;

// "Slurm": the clusters whose allocation a pool started with no hosts takes.
std::string ClusterTitles() {
  std::string titles;
  for (const discovery::ClusterKind* kind : ClusterKinds()) {
    titles += std::string(titles.empty() ? "" : " or ") + kind->words().title;
  }
  return titles;
}

std::string Usage() {
  return "usage: etrun pool start NAME [-H HOSTS | --hostfile FILE | --host-discovery-script "
         "SCRIPT (none: inside " + ClusterTitles() + ", its allocation)] [options] | status [NAME] "
         "[--json] | priority JOB N [--pool NAME] | stop [NAME] | token [NAME]";
}

// One request to a pool. Returns false and sets *err (unreachable, or its error line).
bool Ask(const JobEntry& pool, const std::string& method, const std::string& target,
         const json& body, json* reply, std::string* err) {
  std::string text;
  int code = control::ControlRequest(pool, method, target, body.is_null() ? "" : body.dump(), &text, err);
  if (code == 0) return false;
  if (code != 200) {
    *err = fmt::format("pool '{}': {}", pool.job, pool::ErrorText(text));
    return false;
  }
  *reply = json::parse(text, nullptr, false);
  if (reply->is_discarded()) {
    *err = "pool '" + pool.job + "' sent a malformed reply";
    return false;
  }
  return true;
}

// Seconds from "5s", "1m", "2.5" or "0".
bool Seconds(const std::string& flag, const std::string& text, std::chrono::milliseconds* out,
             std::string* err) {
  double s = 0;
  if (text != "0" && !ParseDuration(text, &s)) {
    *err = flag + ": expected a duration such as 5s, 2m or 0, got '" + text + "'";
    return false;
  }
  *out = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  return true;
}

void PoolLogging() {
  auto logger = std::make_shared<spdlog::logger>("etrun", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("etrun pool [%H:%M:%S.%e]: %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

// `etrun pool start`'s flags as given; the daemon's options once checked (CheckStartFlags).
struct StartFlags {
  pool::DaemonOptions options;
  std::string hosts, hostfile, min_hold = "5s", lease = "15s", interval = "1";
  int ranks_per_gpu = 1;
};

// Declares `etrun pool start`'s flags, in --help's order; their values land in *flags, which
// must outlive `app`.
void AddStartFlags(CLI::App* app, StartFlags* flags) {
  pool::DaemonOptions& o = flags->options;
  app->add_option("name", o.name, "The pool's name.")->required();
  auto* h = app->add_option("-H,--hosts", flags->hosts,
                            "Hosts and their slots, host1:4,host2:4 (none of -H, --hostfile, "
                            "--host-discovery-script: inside " + ClusterTitles() +
                            ", the allocation's nodes).");
  auto* f = app->add_option("--hostfile", flags->hostfile,
                            "File with one \"<hostname> slots=<slots>\" per line.");
  auto* d = app->add_option("--host-discovery-script", o.discovery_script,
                            "Prints the pool's host[:slots] lines (a Slurm or Kubernetes "
                            "allocation); polled.");
  h->excludes(f)->excludes(d);
  f->excludes(d);
  app->add_option("--gpus", o.gpus,
                  "GPU ids per host: auto (nvidia-smi or CUDA_VISIBLE_DEVICES here), none (plain "
                  "slots), or a count per host (default auto).");
  app->add_option("--ranks-per-gpu", flags->ranks_per_gpu,
                  "Slots sharing one GPU (default 1: none shared).");
  app->add_option("--min-hold", flags->min_hold,
                  "A job that grew keeps its slots this long before it can be shrunk (default "
                  "5s; 0: off).");
  app->add_option("--lease", flags->lease,
                  "A job on another machine silent this long is counted gone (default 15s).");
  app->add_option("--discovery-interval", flags->interval,
                  "Seconds between discovery script runs (default 1).");
  app->add_option("--events-file", o.events_file,
                  "Writes the pool's events (JSON Lines) for `etrun report`.");
  app->add_option("--listen", o.listen, "ADDRESS:PORT to listen on instead of 127.0.0.1 (opens the "
                                        "pool to other machines; they need `etrun pool token`).");
}

// Checks the parsed flags and completes flags->options from them: slots per GPU, the durations,
// the -H or --hostfile hosts. Returns false and sets *err (one line) at the first bad one.
bool CheckStartFlags(StartFlags* flags, std::string* err) {
  pool::DaemonOptions& o = flags->options;
  if (flags->ranks_per_gpu < 1 || flags->ranks_per_gpu > 1024) {
    *err = "--ranks-per-gpu: expected 1..1024, got " + std::to_string(flags->ranks_per_gpu);
    return false;
  }
  if (o.gpus != "auto" && o.gpus != "none" &&
      (o.gpus.size() > 4 || o.gpus.find_first_not_of("0123456789") != std::string::npos ||
       std::stoi(o.gpus) < 1 || std::stoi(o.gpus) > 4096)) {
    *err = "--gpus " + o.gpus + ": give auto, none or a count of GPUs per host (1..4096)";
    return false;
  }
  o.ranks_per_gpu = flags->ranks_per_gpu;
  if (o.name.empty() || o.name.find('/') != std::string::npos ||
      o.name.find(':') != std::string::npos) {
    *err = "pool name '" + o.name + "': give a plain name without '/' or ':'";
    return false;
  }
  std::chrono::milliseconds poll{};
  if (!Seconds("--min-hold", flags->min_hold, &o.min_hold, err) ||
      !Seconds("--lease", flags->lease, &o.lease, err) ||
      !Seconds("--discovery-interval", flags->interval, &poll, err)) {
    return false;
  }
  if (poll < std::chrono::milliseconds(100)) {
    *err = "--discovery-interval: expected at least 0.1 s";
    return false;
  }
  o.discovery_interval = poll;
  return ReadHostList(flags->hosts, flags->hostfile, &o.hosts, err);
}

// --gpus auto: this machine's GPUs (nvidia-smi or CUDA_VISIBLE_DEVICES in `env`), else those of
// the cluster allocation's nodes the pool took; neither: plain slots. Says which on the log.
void FindGpus(const std::vector<std::string>& env, const PoolCluster& cluster,
              pool::DaemonOptions* o) {
  launcher::GpuSlots gpus;
  gpus.ranks_per_gpu = 1;
  std::string warning, err;
  if (!launcher::DetectLocalGpus(env, &gpus, &warning, &err)) {
    // nvidia-smi failed or found none: a CPU machine as far as the pool can tell.
    if (cluster.gpus_per_node == 0) {
      spdlog::info("no GPUs on this machine ({}): the pool hands out plain slots", err);
    }
  } else if (gpus.counted) {  // else no nvidia-smi: plain slots
    o->local_gpus = gpus.pool;
    o->local_gpus_source = gpus.source;
  }
  if (o->local_gpus.empty() && cluster.gpus_per_node > 0) {
    // A GPU allocation seen from a machine without GPUs (salloc on a login node): each node's
    // GPUs as its cluster's steps number them.
    o->gpus = std::to_string(cluster.gpus_per_node);
    spdlog::info("GPUs 0..{} on each node, from {}'s variables", cluster.gpus_per_node - 1,
                 cluster.kind->words().title);
  }
}

int StartMain(int argc, char** argv) {
  CLI::App app("Runs a shared slot pool in the foreground until stopped (Ctrl-C, SIGTERM or "
               "`etrun pool stop`). Elastic jobs join it with `etrun --pool NAME`.",
               "pool start");
  StartFlags flags;
  AddStartFlags(&app, &flags);
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  std::string err;
  if (!CheckStartFlags(&flags, &err)) return Error(err, 2);
  pool::DaemonOptions& o = flags.options;
  std::vector<std::string> env = launcher::CurrentEnvironment();
  PoolCluster cluster;
  if (flags.hosts.empty() && flags.hostfile.empty() && o.discovery_script.empty() &&
      !PoolOnCluster(ClusterKinds(), env, &o, &cluster, &err)) {
    return Error(err, 2);
  }
  PoolLogging();
  if (cluster.kind != nullptr) {
    spdlog::info("the slots of {} allocation {}: {}", cluster.kind->words().title, cluster.job,
                 discovery::FormatHosts(o.hosts));
  }
  if (o.gpus == "auto") FindGpus(env, cluster, &o);
  launcher::ShellScriptRunner discovery(o.discovery_script, o.discovery_timeout);
  discovery::ScriptHostSource discovered(&discovery, /*default_slots=*/1);
  return pool::RunPoolDaemon(o, &discovered);
}

int StatusMain(int argc, char** argv) {
  CLI::App app("Shows a pool: its slots, the jobs that hold them, and the queue.", "pool status");
  std::string name;
  bool as_json = false;
  app.add_option("name", name, "The pool; optional when only one runs.");
  app.add_flag("--json", as_json, "Prints the status as one JSON object.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  JobEntry entry;
  json status;
  std::string err;
  if (!pool::FindPool(name, &entry, &err) || !Ask(entry, "GET", "/status", nullptr, &status, &err)) return Error(err, 1);
  if (as_json) {
    std::cout << status.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("Pool {}: {} slots, {} free; hosts:", entry.job, status.value("total", 0),
                           status.value("free", 0));
  for (const json& host : status["hosts"]) {
    std::string devices;
    for (const json& d : host["devices"]) devices += (devices.empty() ? "" : ",") + d.get<std::string>();
    std::cout << fmt::format(" {}:{}{}", host["host"].get<std::string>(), host["slots"].get<int>(),
                             devices.empty() ? "" : " (GPUs " + devices + ")");
  }
  std::cout << "\n";
  std::string through;  // the same on every host (a pool inside a cluster allocation)
  for (const json& host : status["hosts"]) through = host.value("start_through", through);
  if (!through.empty()) std::cout << "Ranks elsewhere start through: " << through << "\n";
  std::vector<std::vector<std::string>> rows = {{"JOB", "PRIORITY", "STATE", "HELD", "TARGET", "MIN", "MAX", "SLOTS"}};
  for (const json& job : status["jobs"]) {
    std::string slots;
    for (const auto& [host, list] : job["slots"].items()) {
      std::string ids;
      for (const json& s : list) {
        ids += (ids.empty() ? "" : ",") + std::to_string(s["slot"].get<int>());
        if (s.contains("gpu")) ids += "=gpu" + s["gpu"].get<std::string>();
      }
      slots += (slots.empty() ? "" : " ") + host + "[" + ids + "]";
    }
    int releasing = job.value("releasing", 0);
    rows.push_back({Text(job["job"]), Text(job["priority"]), Text(job["state"]),
                    Text(job["held"]) + (releasing > 0 ? "+" + std::to_string(releasing) + " leaving" : ""),
                    Text(job["target"]), Text(job["min_np"]), Text(job["max_np"]), slots.empty() ? "-" : slots});
  }
  if (rows.size() == 1) {
    std::cout << "No jobs.\n";
  } else {
    std::cout << Table(rows);
  }
  return 0;
}

int PriorityMain(int argc, char** argv) {
  CLI::App app("Changes a pool job's priority (its weight in the fair share); slots move at the "
               "jobs' next commits.", "pool priority");
  std::string pool_name, job;
  int64_t priority = 0;
  app.add_option("job", job, "The job's name in the pool (see etrun pool status).")->required();
  app.add_option("priority", priority, "The new priority, 1..1000000 (default of a job: 5000).")->required();
  app.add_option("--pool", pool_name, "The pool; optional when only one runs.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  if (priority < 1 || priority > 1000000) {
    return Error("priority: expected 1..1000000, got " + std::to_string(priority), 2);
  }
  JobEntry entry;
  json reply;
  std::string err;
  if (!pool::FindPool(pool_name, &entry, &err) ||
      !Ask(entry, "POST", "/priority", pool::PriorityRequestToJson({job, priority}), &reply, &err)) {
    return Error(err, 1);
  }
  std::cout << fmt::format("job '{}' of pool '{}' now has priority {}\n", job, entry.job, priority);
  return 0;
}

int StopMain(int argc, char** argv) {
  CLI::App app("Stops a pool. Its jobs train on with the slots they hold and join again when a "
               "pool of that name is back.", "pool stop");
  std::string name;
  app.add_option("name", name, "The pool; optional when only one runs.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  JobEntry entry;
  json reply;
  std::string err;
  if (!pool::FindPool(name, &entry, &err) || !Ask(entry, "POST", "/stop", nullptr, &reply, &err)) return Error(err, 1);
  std::cout << "pool '" << entry.job << "' stops\n";
  return 0;
}

int TokenMain(int argc, char** argv) {
  CLI::App app("Prints a pool's token, for jobs on other machines (ETRUN_POOL_TOKEN; only with "
               "`pool start --listen`). Keep it secret: it lets its holder join and steer the pool. "
               "It is new at every start of the pool.",
               "pool token");
  std::string name;
  app.add_option("name", name, "The pool; optional when only one runs.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  JobEntry entry;
  std::string err;
  if (!pool::FindPool(name, &entry, &err)) return Error(err, 1);
  std::cout << entry.token << "\n";
  return 0;
}

}  // namespace

bool PoolOnCluster(const std::vector<const discovery::ClusterKind*>& kinds,
                   const std::vector<std::string>& env, pool::DaemonOptions* options,
                   PoolCluster* cluster, std::string* err) {
  const discovery::ClusterKind* kind = nullptr;
  discovery::ClusterAllocation allocation;
  if (!discovery::FindAllocation(kinds, env, {}, &kind, &allocation, err)) {
    *err = "pool start " + options->name + " " + *err + " (or give -H)";
    return false;
  }
  if (kind == nullptr) {
    std::string inside;
    for (const discovery::ClusterKind* k : kinds) {
      inside += std::string(inside.empty() ? "" : " or ") + "a " + k->words().title +
                " allocation (" + k->words().allocators + ")";
    }
    *err = "pool start " + options->name + ": say where the slots are: -H HOST:SLOTS,..., --hostfile "
           "FILE or --host-discovery-script SCRIPT, or start the pool inside " + inside +
           " to take its nodes";
    return false;
  }
  *cluster = {kind, allocation.id, 0};
  if (allocation.gpus_per_node > 0 && options->gpus != "none") {
    cluster->gpus_per_node = allocation.gpus_per_node;  // the same on every node
    for (discovery::HostSlots& h : allocation.hosts) h.slots *= options->ranks_per_gpu;
  }
  options->hosts = std::move(allocation.hosts);
  options->start_through = kind->Route(allocation.id, /*job_own=*/false);
  return true;
}

int PoolMain(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    std::cout << Usage() << "\n";
    return argc < 2 ? 2 : 0;
  }
  std::string verb = argv[1];
  if (verb == "start") return StartMain(argc - 1, argv + 1);
  if (verb == "status") return StatusMain(argc - 1, argv + 1);
  if (verb == "priority") return PriorityMain(argc - 1, argv + 1);
  if (verb == "stop") return StopMain(argc - 1, argv + 1);
  if (verb == "token") return TokenMain(argc - 1, argv + 1);
  return Error("etrun pool: unknown command '" + verb + "': " + Usage(), 2);
}

}  // namespace etrun::cli
