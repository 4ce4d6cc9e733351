#include "launcher/job_config.h"

#include <algorithm>

namespace etrun {

std::string JobName(const JobConfig& config) {
  if (!config.job_name.empty()) return config.job_name;
  auto base = [](const std::string& path) {
    std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    size_t dot = name.rfind('.');
    return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  };
  // Skip interpreters, their options and VAR=value words: the script is the interesting name.
  static const std::vector<std::string> kInterpreters = {"python", "sh", "bash", "env", "torchrun"};
  for (const std::string& arg : config.command) {
    if (arg.starts_with("-") || arg.find('=') != std::string::npos) continue;
    std::string name = base(arg);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
        std::string::npos) {
      continue;  // a `sh -c` script text, not a name
    }
    bool interpreter = std::any_of(kInterpreters.begin(), kInterpreters.end(),
                                   [&](const std::string& i) { return name.starts_with(i); });
    if (!interpreter && !name.empty()) return name;
  }
  return config.command.empty() ? "etrun" : base(config.command[0]);
}

bool JobHosts(const JobConfig& config, std::vector<discovery::HostSlots>* hosts, std::string* err) {
  if (!config.host_list_error.empty()) {
    *err = config.host_list_error;
    return false;
  }
  *hosts = config.host_list.empty()
               ? std::vector<discovery::HostSlots>{{"localhost", config.num_proc.value_or(1)}}
               : config.host_list;
  return true;
}

}  // namespace etrun
