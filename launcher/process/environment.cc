#include "launcher/process/environment.h"

#include <unistd.h>

#include <algorithm>

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

std::vector<std::string> OverlayEnvironment(std::vector<std::string> base,
                                            const std::vector<std::string>& over) {
  for (const std::string& kv : over) {
    size_t eq = kv.find('=');
    std::string_view name(kv.data(), eq == std::string::npos ? kv.size() : eq + 1);  // "K="
    auto first = std::find_if(base.begin(), base.end(),
                              [name](const std::string& entry) { return entry.starts_with(name); });
    if (first == base.end()) {
      base.push_back(kv);
      continue;
    }
    *first = kv;
    base.erase(std::remove_if(first + 1, base.end(),
                              [name](const std::string& entry) { return entry.starts_with(name); }),
               base.end());
  }
  return base;
}

}  // namespace etrun::launcher
