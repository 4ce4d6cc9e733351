// etrun: a horovodrun-compatible launcher. main() only parses, builds the real collaborators
// (spawner, discovery script runner, clock, file limit) and runs the job on the runtime.
#include <string.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/agent_image.h"
#include "cli/cluster_kinds.h"
#include "cli/control_main.h"
#include "cli/flags.h"
#include "cli/logging.h"
#include "cli/pool_main.h"
#include "cli/report_main.h"
#include "cli/wiring.h"
#include "control/registry.h"
#include "discovery/discovery_output.h"
#include "discovery/host_source.h"
#include "events/exit_status.h"
#include "launcher/agent/agent_starter.h"
#include "launcher/clock.h"
#include "launcher/job_config.h"
#include "launcher/policy/elastic_policy.h"
#include "launcher/process/child.h"
#include "launcher/process/environment.h"
#include "launcher/process/shell_script_runner.h"
#include "launcher/process/spawner.h"
#include "launcher/runtime.h"
#include "pool/pool_client.h"

namespace {

// Where the etrun-agent of this build stands beside this etrun (the build folder, or the bin
// folder it was installed to), for hosts that share the launcher's files.
std::string AgentBeside() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "etrun-agent";
}

// `etrun VERB ...`: verbs only as the first argument (see cli/control_main.h, report_main.h).
int VerbMain(int argc, char** argv) {
  using namespace etrun;
  if (strcmp(argv[1], cli::kStatusVerb) == 0) return cli::StatusMain(argc - 1, argv + 1);
  if (strcmp(argv[1], cli::kListVerb) == 0) return cli::ListMain(argc - 1, argv + 1);
  if (strcmp(argv[1], cli::kScaleVerb) == 0) return cli::ScaleMain(argc - 1, argv + 1);
  if (strcmp(argv[1], cli::kDumpVerb) == 0) return cli::DumpMain(argc - 1, argv + 1);
  if (strcmp(argv[1], cli::kReportVerb) == 0) return cli::ReportMain(argc - 1, argv + 1);
  if (strcmp(argv[1], cli::kPoolVerb) == 0) return cli::PoolMain(argc - 1, argv + 1);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    if (int code = VerbMain(argc, argv); code >= 0) return code;
  }
  etrun::JobConfig config;
  if (int code = etrun::cli::ParseFlags(argc, argv, &config); code >= 0) return code;
  etrun::cli::ConfigureLogging(config);
  try {
    std::vector<std::string> environment = etrun::launcher::CurrentEnvironment();
    etrun::launcher::FileLimit file_limit;
    file_limit.Raise();
    etrun::launcher::LocalSpawner spawner(&file_limit);
    etrun::launcher::ShellScriptRunner discovery(config.host_discovery_script,
                                                 config.discovery_timeout(), &file_limit);
    etrun::launcher::SteadyClock clock;
    std::unique_ptr<etrun::pool::PoolClient> pool;
    if (!config.pool.empty()) {
      // Joined before anything starts, so a missing pool is one error line and nothing to undo.
      etrun::pool::ClientOptions options;
      options.pool = config.pool;
      options.token = etrun::launcher::EnvValue(environment, "ETRUN_POOL_TOKEN");
      options.trust_start_through =
          etrun::launcher::EnvValue(environment, "ETRUN_POOL_TRUST_START") == "1";
      options.join.name = etrun::JobName(config);
      options.join.priority = config.priority.value_or(etrun::pool::kDefaultPriority);
      options.join.min_np = config.min_np.value_or(*config.num_proc);
      options.join.max_np = config.max_np.value_or(etrun::discovery::kMaxDiscoveredSlots);
      if (!config.max_np) {  // ask for no more slots than etrun can supervise
        if (std::optional<int> can = etrun::launcher::SupervisableRanks(config, &file_limit)) {
          options.join.max_np = std::max(options.join.min_np, std::min(options.join.max_np, *can));
        }
      }
      options.join.pid = getpid();
      options.join.pid_start = etrun::control::ProcessStartTime(options.join.pid);
      options.kinds = etrun::cli::ClusterKinds();
      pool = std::make_unique<etrun::pool::PoolClient>(std::move(options));
      std::string err;
      if (!pool->Join(&err)) {
        spdlog::error("{}", err);
        return etrun::kExitFailure;
      }
    }
    int code;
    {
      // Outlives the runtime and its ranks.
      etrun::launcher::agent::AgentImage agent(etrun::cli::EmbeddedAgent(), AgentBeside());
      etrun::launcher::agent::AgentStarter remote(config, environment, &agent);
      etrun::discovery::ScriptHostSource script(&discovery, config.slots_per_host.value_or(1));
      // An elastic job inside a cluster allocation follows it (and those it may grow onto).
      std::unique_ptr<etrun::launcher::ShellScriptRunner> poll;
      std::unique_ptr<etrun::discovery::HostSource> allocation;
      if (config.cluster != nullptr) {
        auto grow = config.add_cluster_jobs.find(config.cluster->words().name);
        poll = std::make_unique<etrun::launcher::ShellScriptRunner>(
            config.cluster->PollCommand(config.cluster_job,
                                        grow == config.add_cluster_jobs.end() ? "" : grow->second),
            config.discovery_timeout(), &file_limit);
        allocation = config.cluster->Follow(poll.get(), {config.cluster_job, config.host_list});
      }
      etrun::discovery::HostSource* hosts = nullptr;  // none: the fixed hosts of the flags
      if (pool) {
        hosts = pool.get();
      } else if (!config.host_discovery_script.empty()) {
        hosts = &script;
      } else if (allocation != nullptr && config.elastic()) {
        hosts = allocation.get();
      }
      etrun::launcher::JobServices services{&spawner, hosts, &clock, &file_limit, {}, &remote};
      etrun::launcher::Runtime runtime(config, std::move(environment), std::move(services),
                                       etrun::cli::MakePolicy(config));
      code = runtime.Run();
    }  // the runtime's signal handlers are gone: Ctrl-C now ends etrun at once
    if (pool) pool->Leave();  // every rank is gone: the slots are free now
    return code;
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return etrun::kExitFailure;
  }
}
