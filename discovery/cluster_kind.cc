#include "discovery/cluster_kind.h"

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

const ClusterKind* KindStarting(const std::vector<const ClusterKind*>& kinds,
                                const std::string& remote_shell) {
  std::string program = Program(remote_shell);
  for (const ClusterKind* kind : kinds) {
    if (!program.empty() && program == kind->words().step) return kind;
  }
  return nullptr;
}

}  // namespace etrun::discovery
