#include "discovery/cluster_kind.h"

#include <algorithm>

namespace etrun::discovery {

namespace {

// The last part of the first word's path: "srun" for "/usr/bin/srun --overlap ...".
std::string Program(const std::string& command) {
  size_t begin = command.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = command.find_first_of(" \t", begin);
  std::string program = command.substr(begin, end == std::string::npos ? end : end - begin);
  size_t slash = program.rfind('/');
  return slash == std::string::npos ? program : program.substr(slash + 1);
}

}  // namespace

const ClusterKind* KindInside(const std::vector<const ClusterKind*>& kinds,
                              const std::vector<std::string>& env) {
  for (const ClusterKind* kind : kinds) {
    if (kind->Inside(env)) return kind;
  }
  return nullptr;
}

bool FindAllocation(const std::vector<const ClusterKind*>& kinds, const std::vector<std::string>& env,
                    const std::vector<std::string>& ignored, const ClusterKind** kind,
                    ClusterAllocation* allocation, std::string* err) {
  *kind = nullptr;
  for (const ClusterKind* k : kinds) {
    if (!k->Inside(env)) continue;
    if (std::find(ignored.begin(), ignored.end(), k->words().name) != ignored.end()) return true;
    *kind = k;
    break;
  }
  if (*kind == nullptr) return true;
  if (!(*kind)->Read(env, allocation, err)) {
    *err = std::string("inside ") + (*kind)->words().title + " allocation " + allocation->id + ": " + *err;
    return false;
  }
  return true;
}

const ClusterKind* KindNamed(const std::vector<const ClusterKind*>& kinds, const std::string& name) {
  for (const ClusterKind* kind : kinds) {
    if (name == kind->words().name) return kind;
  }
  return nullptr;
}

StartRoute UserRoute(const std::vector<const ClusterKind*>& kinds, const std::string& remote_shell) {
  if (remote_shell.empty()) return {};
  std::string program = Program(remote_shell);
  for (const ClusterKind* kind : kinds) {
    if (!program.empty() && program == kind->words().step) return {remote_shell, kind, true};
  }
  return {remote_shell, nullptr, true};
}

}  // namespace etrun::discovery
