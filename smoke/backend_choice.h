// Which backend etrun-smoke runs, when ranks may share a GPU. NCCL refuses two ranks of one
// communicator on one GPU ("Duplicate GPU detected"), and etrun --ranks-per-gpu K gives K local
// ranks the same CUDA_VISIBLE_DEVICES. So, in a build with NCCL, every rank names the GPU it
// would use (GpuKey: its host and the device at local_rank % device count, by the id
// CUDA_VISIBLE_DEVICES gives it) and rank 0 decides for all (ChooseBackend): the default is tcp
// when two ranks name the same GPU, and --backend nccl then fails with one line naming
// --ranks-per-gpu instead of NCCL's own error on every rank. Pure; thread-compatible.
#ifndef ETRUN_SMOKE_BACKEND_CHOICE_H_
#define ETRUN_SMOKE_BACKEND_CHOICE_H_

#include <string>
#include <vector>

namespace etrun::smoke {

// The GPU a rank's NCCL backend would pick, as "<host>/<id>": device local_rank % `devices` of
// those it sees, named by its entry of `visible` (CUDA_VISIBLE_DEVICES, "" when unset: the index
// itself). "" when it sees no device (`devices` < 1).
std::string GpuKey(const std::string& host, const std::string& visible, int devices,
                   int local_rank);

struct BackendChoice {
  std::string backend;  // "tcp" or "nccl"; "" when refused (*err says why)
  std::string note;     // for rank 0 to print when the default fell back to tcp; "" otherwise
};

// Rank 0's decision. `requested`: --backend ("" for the default); `gpus`: each rank's GpuKey, by
// rank. The default is nccl when rank 0 sees a GPU and no two ranks name the same one, else tcp;
// tcp is always tcp; nccl with a GPU named twice is refused.
BackendChoice ChooseBackend(const std::string& requested, const std::vector<std::string>& gpus,
                            std::string* err);

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_BACKEND_CHOICE_H_
