// etrun: a horovodrun-compatible launcher. main() only wires the pieces together.
#include <string.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/control_main.h"
#include "cli/flags.h"
#include "cli/report_main.h"
#include "launcher/driver.h"
#include "launcher/exit_status.h"
#include "launcher/job_config.h"
#include "launcher/spawner.h"
#include "launcher/ssh_rank.h"

int main(int argc, char** argv) {
  // A remote rank's local helper (see launcher/ssh_rank.h), started by etrun itself.
  if (argc > 1 && strcmp(argv[1], etrun::launcher::kSshRankMode) == 0) {
    return etrun::launcher::SshRankMain(argc, argv);
  }
  // `etrun status|list|scale`: only as the first argument (see cli/control_main.h).
  if (argc > 1 && strcmp(argv[1], etrun::cli::kStatusVerb) == 0) return etrun::cli::StatusMain(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], etrun::cli::kListVerb) == 0) return etrun::cli::ListMain(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], etrun::cli::kScaleVerb) == 0) return etrun::cli::ScaleMain(argc - 1, argv + 1);
  // `etrun report EVENTS.jsonl`: only as the first argument (see cli/report_main.h).
  if (argc > 1 && strcmp(argv[1], etrun::cli::kReportVerb) == 0) {
    return etrun::cli::ReportMain(argc - 1, argv + 1);
  }
  etrun::JobConfig config;
  if (int code = etrun::cli::ParseFlags(argc, argv, &config); code >= 0) return code;
  etrun::launcher::ConfigureLogging(config);
  try {
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
    etrun::launcher::LocalSpawner::RaiseOpenFileLimit();
    etrun::launcher::LocalSpawner local;
    return etrun::launcher::Driver(config, &local, std::move(environment)).Run();
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return etrun::kExitFailure;
  }
}
