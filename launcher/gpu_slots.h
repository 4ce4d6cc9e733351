// GPU slots: which GPUs each rank sees, as CUDA_VISIBLE_DEVICES, under etrun's --gpus-per-rank N
// (local rank i gets GPUs [i*N, (i+1)*N)) or --ranks-per-gpu K (K ranks share one GPU: local
// rank i gets GPU i/K, as IBM WMLA's GPU sharing). Without either flag nothing is set: Horovod
// scripts pin a GPU by local rank themselves. The assignment is by Horovod's local rank, which
// names a slot for the life of a process (also in elastic mode), so a process keeps its GPUs.
// Pure, except DetectLocalGpus, which may run nvidia-smi. Thread-compatible.
#ifndef ETRUN_LAUNCHER_GPU_SLOTS_H_
#define ETRUN_LAUNCHER_GPU_SLOTS_H_

#include <string>
#include <vector>

#include "launcher/job_config.h"

namespace etrun::launcher {

struct GpuSlots {
  int gpus_per_rank = 0;  // --gpus-per-rank; 0: not given
  int ranks_per_gpu = 0;  // --ranks-per-gpu; 0: not given
  // The host's GPUs in the order they are handed out: "0".."n-1" from nvidia-smi, or the entries
  // of the host's own CUDA_VISIBLE_DEVICES (indices or UUIDs). Empty: not counted (no
  // nvidia-smi), so ranks get plain indices and nothing is checked. Remote hosts' agents count
  // theirs on the host (launcher/agent/agent.h).
  std::vector<std::string> pool;
  bool counted = false;  // pool holds the host's GPUs
  std::string source;    // where the count came from, for messages: "nvidia-smi -L"

  bool enabled() const { return gpus_per_rank > 0 || ranks_per_gpu > 0; }
};

// How many GPUs `local_size` ranks on one host use: N * local_size, or ceil(local_size / K).
int GpusNeeded(const GpuSlots& gpus, int local_size);

// CUDA_VISIBLE_DEVICES for `local_rank` ("4,5"). REQUIRES: gpus.enabled(). Returns false and
// sets *err when the host's counted GPUs are too few for that rank (*devices is then unchanged).
bool GpuDevices(const GpuSlots& gpus, int local_rank, std::string* devices, std::string* err);

// Checks up front that `local_size` ranks fit on this host's counted GPUs; true when not counted.
// *err names the flag, the need, the count and its source, and the fix.
bool CheckGpusFit(const GpuSlots& gpus, int local_size, std::string* err);

// The GPUs `nvidia-smi -L` lists ("GPU 0: NVIDIA H100 (UUID: ...)" lines; MIG lines are not
// counted separately).
int CountNvidiaSmiGpus(const std::string& output);

// Fills gpus->pool and gpus->counted for this machine. The launcher's CUDA_VISIBLE_DEVICES in
// `environment` wins when set (an allocation made by a scheduler); otherwise `nvidia-smi -L` on
// the PATH of `environment` counts the GPUs. Without nvidia-smi, returns true with the pool
// uncounted and a *warning. Returns false and sets *err when nvidia-smi fails or finds no GPU,
// or CUDA_VISIBLE_DEVICES is set but empty. REQUIRES: gpus->enabled().
bool DetectLocalGpus(const std::vector<std::string>& environment, GpuSlots* gpus,
                     std::string* warning, std::string* err);

// The GPU slots `config` asks for (--gpus-per-rank / --ranks-per-gpu), with this machine's GPUs
// counted by DetectLocalGpus; logs its warning. Without the flags: disabled, true.
bool LocalGpuSlots(const JobConfig& config, const std::vector<std::string>& environment,
                   GpuSlots* gpus, std::string* err);

// CUDA_VISIBLE_DEVICES for a process started in slot `local_rank` of a host when Horovod will
// report it as `horovod_local_rank` (Horovod numbers a host's processes by global rank, and etrun
// may permute global ranks so that rank 0 holds the training state). Scripts pin the GPU at
// index hvd.local_rank(); the slot's own GPU is the one at `local_rank` of `devices` (the host's
// GPUs: the launcher's CUDA_VISIBLE_DEVICES entries, or empty for indices). Returns the list with
// those two positions swapped, or "" when they are equal (nothing to set). `local_size`: slots
// of the host. Pure.
std::string PermutedDevices(const std::vector<std::string>& devices, int local_rank,
                            int horovod_local_rank, int local_size);

// The entries of a CUDA_VISIBLE_DEVICES value ("0,GPU-ab,2"), empty ones dropped. Pure.
std::vector<std::string> SplitDevices(const std::string& list);

// CUDA_VISIBLE_DEVICES for one rank of an elastic world ("": leave the inherited one). The rank
// runs in slot `local_rank` of its host and Horovod numbers it `horovod_local_rank` there.
// With `lent` (per local rank of the host, the devices its host source gave the job: a pool's
// GPUs): the job's devices on the host, the rank's own at index horovod_local_rank (first when
// that is beyond the list), so other jobs' GPUs are never visible; "" when its slot has none.
// Otherwise `inherited` (this machine's CUDA_VISIBLE_DEVICES entries; empty elsewhere) permuted
// as PermutedDevices does. Pure.
std::string RankVisibleDevices(const std::vector<std::string>* lent, const std::vector<std::string>& inherited,
                               int local_rank, int horovod_local_rank, int local_size);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_GPU_SLOTS_H_
