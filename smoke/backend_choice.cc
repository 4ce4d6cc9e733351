#include "smoke/backend_choice.h"

#include <map>

namespace etrun::smoke {
namespace {

// The entries of a CUDA_VISIBLE_DEVICES value, empty ones dropped.
std::vector<std::string> SplitDevices(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The first two ranks that name the same GPU, with it; false when every GPU is named once.
bool FirstShared(const std::vector<std::string>& gpus, int* first, int* second, std::string* gpu) {
  std::map<std::string, int> seen;
  for (size_t r = 0; r < gpus.size(); ++r) {
    if (gpus[r].empty()) continue;
    auto [it, fresh] = seen.emplace(gpus[r], static_cast<int>(r));
    if (fresh) continue;
    *first = it->second;
    *second = static_cast<int>(r);
    *gpu = gpus[r];
    return true;
  }
  return false;
}

// "GPU 0 on h1" for the key "h1/0".
std::string Describe(const std::string& key) {
  size_t slash = key.rfind('/');
  return "GPU " + key.substr(slash + 1) + " on " + key.substr(0, slash);
}

}  // namespace

std::string GpuKey(const std::string& host, const std::string& visible, int devices,
                   int local_rank) {
  if (devices < 1) return "";
  int index = local_rank % devices;
  std::vector<std::string> ids = SplitDevices(visible);
  std::string id = static_cast<size_t>(index) < ids.size() ? ids[index] : std::to_string(index);
  return host + "/" + id;
}

BackendChoice ChooseBackend(const std::string& requested, const std::vector<std::string>& gpus,
                            std::string* err) {
  if (requested == "tcp") return {"tcp", ""};
  int first = -1, second = -1;
  std::string gpu;
  bool shared = FirstShared(gpus, &first, &second, &gpu);
  std::string ranks = "ranks " + std::to_string(first) + " and " + std::to_string(second);
  if (requested == "nccl") {
    if (!shared) return {"nccl", ""};
    *err = "--backend nccl: " + ranks + " share " + Describe(gpu) + " (etrun --ranks-per-gpu), "
           "and NCCL allows one rank per GPU: use --backend tcp, or run without --ranks-per-gpu";
    return {"", ""};
  }
  if (gpus.empty() || gpus[0].empty()) return {"tcp", ""};
  if (!shared) return {"nccl", ""};
  return {"tcp", ranks + " share " + Describe(gpu) + " (etrun --ranks-per-gpu), and NCCL allows "
                 "one rank per GPU: backend tcp"};
}

}  // namespace etrun::smoke
