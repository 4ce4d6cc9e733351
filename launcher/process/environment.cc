#include "launcher/process/environment.h"

#include <unistd.h>

namespace etrun::launcher {

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::string EnvValue(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' && kv.starts_with(name)) {
      return kv.substr(name.size() + 1);
    }
  }
  return "";
}

}  // namespace etrun::launcher
