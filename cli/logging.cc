#include "cli/logging.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace etrun::cli {

void ConfigureLogging(const JobConfig& config) {
  auto logger = std::make_shared<spdlog::logger>(
      "etrun", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("etrun: %l: %v");
  spdlog::level::level_enum level = spdlog::level::warn;
  if (config.verbose) level = spdlog::level::debug;
  if (config.tunables.log_level) {
    static const std::map<std::string, spdlog::level::level_enum> kLevels = {
        {"TRACE", spdlog::level::trace}, {"DEBUG", spdlog::level::debug},
        {"INFO", spdlog::level::info},   {"WARNING", spdlog::level::warn},
        {"ERROR", spdlog::level::err},   {"FATAL", spdlog::level::critical}};
    auto it = kLevels.find(*config.tunables.log_level);
    if (it != kLevels.end()) level = std::min(level, it->second);
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

}  // namespace etrun::cli
