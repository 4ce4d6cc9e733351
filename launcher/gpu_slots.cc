#include "launcher/gpu_slots.h"

#include <algorithm>
#include <sstream>

#include <spdlog/spdlog.h>

#include "launcher/process/environment.h"
#include "launcher/process/program_output.h"
#include "launcher/process/program_path.h"

namespace etrun::launcher {
namespace {

std::string FlagText(const GpuSlots& gpus) {
  return gpus.gpus_per_rank > 0 ? "--gpus-per-rank " + std::to_string(gpus.gpus_per_rank)
                                : "--ranks-per-gpu " + std::to_string(gpus.ranks_per_gpu);
}

// Index of the first GPU of `local_rank` and how many it gets.
std::pair<int, int> Range(const GpuSlots& gpus, int local_rank) {
  if (gpus.gpus_per_rank > 0) return {local_rank * gpus.gpus_per_rank, gpus.gpus_per_rank};
  return {local_rank / gpus.ranks_per_gpu, 1};
}

}  // namespace

int GpusNeeded(const GpuSlots& gpus, int local_size) {
  if (local_size <= 0 || !gpus.enabled()) return 0;
  if (gpus.gpus_per_rank > 0) return local_size * gpus.gpus_per_rank;
  return (local_size + gpus.ranks_per_gpu - 1) / gpus.ranks_per_gpu;
}

bool GpuDevices(const GpuSlots& gpus, int local_rank, std::string* devices, std::string* err) {
  auto [first, count] = Range(gpus, local_rank);
  if (gpus.counted && first + count > static_cast<int>(gpus.pool.size())) {
    *err = FlagText(gpus) + ": local rank " + std::to_string(local_rank) + " needs GPU" +
           (count > 1 ? "s " + std::to_string(first) + "-" + std::to_string(first + count - 1)
                      : " " + std::to_string(first)) +
           " but this host has " + std::to_string(gpus.pool.size()) + " (" + gpus.source + ")";
    return false;
  }
  std::string list;
  for (int i = first; i < first + count; ++i) {
    if (!list.empty()) list += ',';
    list += gpus.counted ? gpus.pool[i] : std::to_string(i);
  }
  *devices = std::move(list);
  return true;
}

bool CheckGpusFit(const GpuSlots& gpus, int local_size, std::string* err) {
  int needed = GpusNeeded(gpus, local_size);
  int have = static_cast<int>(gpus.pool.size());
  if (!gpus.counted || needed <= have) return true;
  *err = FlagText(gpus) + ": " + std::to_string(local_size) + " rank" +
         (local_size == 1 ? "" : "s") + " on this host need " + std::to_string(needed) + " GPU" +
         (needed == 1 ? "" : "s") + " but it has " + std::to_string(have) + " (" + gpus.source +
         "): lower -np, " +
         (gpus.gpus_per_rank > 0 ? "lower --gpus-per-rank" : "raise --ranks-per-gpu") +
         " or add hosts";
  return false;
}

int CountNvidiaSmiGpus(const std::string& output) {
  std::istringstream in(output);
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("GPU ", 0) == 0 && line.find(':') != std::string::npos) ++count;
  }
  return count;
}

bool DetectLocalGpus(const std::vector<std::string>& environment, GpuSlots* gpus,
                     std::string* warning, std::string* err) {
  gpus->pool.clear();
  gpus->counted = false;
  gpus->source.clear();
  for (const std::string& kv : environment) {
    if (!kv.starts_with("CUDA_VISIBLE_DEVICES=")) continue;
    gpus->pool = SplitDevices(kv.substr(21));
    if (gpus->pool.empty()) {
      *err = FlagText(*gpus) + ": CUDA_VISIBLE_DEVICES is set but empty, so etrun may use no GPU: "
             "unset it or list the GPUs ranks may use";
      return false;
    }
    gpus->counted = true;
    gpus->source = "CUDA_VISIBLE_DEVICES";
    return true;
  }
  std::string unused;
  if (FindProgram("nvidia-smi", EnvValue(environment, "PATH"), &unused).empty()) {
    *warning = FlagText(*gpus) + ": no nvidia-smi on PATH, so this host's GPUs are not counted; "
               "ranks get GPUs by local rank unchecked";
    return true;
  }
  ProgramOutput result;
  if (!RunForOutput({"nvidia-smi", "-L"}, environment, std::chrono::seconds(30), &result, err)) {
    *err = FlagText(*gpus) + ": cannot count this host's GPUs: " + *err;
    return false;
  }
  int count = CountNvidiaSmiGpus(result.out);
  if (result.exit_code != 0 || count == 0) {
    std::string said = result.out + result.err;
    while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
    if (size_t nl = said.find('\n'); nl != std::string::npos) said.resize(nl);
    *err = FlagText(*gpus) + ": nvidia-smi -L " +
           (result.exit_code != 0 ? "failed (exit code " + std::to_string(result.exit_code) + ")"
                                  : std::string("lists no GPU")) +
           (said.empty() ? "" : ": " + said) + ": check the NVIDIA driver, or leave the flag out";
    return false;
  }
  for (int i = 0; i < count; ++i) gpus->pool.push_back(std::to_string(i));
  gpus->counted = true;
  gpus->source = "nvidia-smi -L";
  return true;
}

bool LocalGpuSlots(const JobConfig& config, const std::vector<std::string>& environment,
                   GpuSlots* gpus, std::string* err) {
  GpuSlots g;
  g.gpus_per_rank = config.gpus_per_rank.value_or(0);
  g.ranks_per_gpu = config.ranks_per_gpu.value_or(0);
  if (g.enabled()) {
    std::string warning;
    if (!DetectLocalGpus(environment, &g, &warning, err)) return false;
    if (!warning.empty()) spdlog::warn("{}", warning);
  }
  *gpus = std::move(g);
  return true;
}

std::string PermutedDevices(const std::vector<std::string>& devices, int local_rank,
                            int horovod_local_rank, int local_size) {
  if (local_rank == horovod_local_rank || local_rank < 0 || horovod_local_rank < 0) return "";
  std::vector<std::string> list = devices;
  int n = std::max({local_size, local_rank + 1, horovod_local_rank + 1});
  for (int i = static_cast<int>(list.size()); i < n; ++i) list.push_back(std::to_string(i));
  std::swap(list[local_rank], list[horovod_local_rank]);
  std::string out;
  for (const std::string& d : list) out += (out.empty() ? "" : ",") + d;
  return out;
}

std::vector<std::string> SplitDevices(const std::string& list) {
  std::vector<std::string> ids;
  std::istringstream in(list);
  for (std::string id; std::getline(in, id, ',');) {
    if (!id.empty()) ids.push_back(id);
  }
  return ids;
}

std::string RankVisibleDevices(const std::vector<std::string>* lent, const std::vector<std::string>& inherited,
                               int local_rank, int horovod_local_rank, int local_size) {
  if (lent == nullptr) return PermutedDevices(inherited, local_rank, horovod_local_rank, local_size);
  if (local_rank < 0 || static_cast<size_t>(local_rank) >= lent->size()) return "";
  const std::string& own = (*lent)[local_rank];
  if (own.empty()) return "";
  std::vector<std::string> devices;
  for (int k = 0; k < local_size && static_cast<size_t>(k) < lent->size(); ++k) {
    const std::string& d = (*lent)[k];
    if (!d.empty() && std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  auto at = std::find(devices.begin(), devices.end(), own);
  if (at == devices.end()) devices.insert(devices.begin(), own), at = devices.begin();
  size_t want = static_cast<size_t>(horovod_local_rank) < devices.size() ? horovod_local_rank : 0;
  std::iter_swap(at, devices.begin() + static_cast<long>(want));
  std::string list;
  for (const std::string& d : devices) list += (list.empty() ? "" : ",") + d;
  return list;
}

}  // namespace etrun::launcher
