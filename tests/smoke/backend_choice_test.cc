// etrun-smoke's backend when local ranks may share a GPU: NCCL refuses two ranks on one GPU, so
// the default falls back to tcp and --backend nccl is refused with one line naming
// --ranks-per-gpu (smoke/backend_choice.h).
#include "smoke/backend_choice.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

using etrun::smoke::BackendChoice;
using etrun::smoke::ChooseBackend;
using etrun::smoke::GpuKey;

TEST_CASE("smoke backend: a rank's GPU is local_rank % device count, named by CUDA_VISIBLE_DEVICES") {
  CHECK(GpuKey("h", "", 4, 1) == "h/1");
  CHECK(GpuKey("h", "", 2, 3) == "h/1");
  CHECK(GpuKey("h", "4,5", 2, 1) == "h/5");
  CHECK(GpuKey("h", "GPU-ab", 1, 0) == "h/GPU-ab");
  CHECK(GpuKey("h", "", 0, 0).empty());  // no device seen
  // etrun --ranks-per-gpu 2 on one GPU: both local ranks see CUDA_VISIBLE_DEVICES=0, one device.
  CHECK(GpuKey("h", "0", 1, 0) == GpuKey("h", "0", 1, 1));
  // --gpus-per-rank 1: each sees its own single GPU: different keys.
  CHECK(GpuKey("h", "0", 1, 0) != GpuKey("h", "1", 1, 1));
}

TEST_CASE("smoke backend: two local ranks on one GPU use tcp by default, and nccl is refused in one line") {
  std::vector<std::string> shared = {GpuKey("h", "0", 1, 0), GpuKey("h", "0", 1, 1)};
  std::string err;
  BackendChoice by_default = ChooseBackend("", shared, &err);
  CHECK(by_default.backend == "tcp");
  CHECK(by_default.note == "ranks 0 and 1 share GPU 0 on h (etrun --ranks-per-gpu), and NCCL "
                           "allows one rank per GPU: backend tcp");
  BackendChoice named = ChooseBackend("nccl", shared, &err);
  CHECK(named.backend.empty());
  CHECK(err == "--backend nccl: ranks 0 and 1 share GPU 0 on h (etrun --ranks-per-gpu), and NCCL "
               "allows one rank per GPU: use --backend tcp, or run without --ranks-per-gpu");
  CHECK(ChooseBackend("tcp", shared, &err).backend == "tcp");
}

TEST_CASE("smoke backend: one rank per GPU keeps nccl; no GPU on rank 0 means tcp") {
  std::string err;
  std::vector<std::string> own = {"h/0", "h/1", "g/0", "g/1"};  // same index on two hosts is fine
  CHECK(ChooseBackend("", own, &err).backend == "nccl");
  CHECK(ChooseBackend("", own, &err).note.empty());
  CHECK(ChooseBackend("nccl", own, &err).backend == "nccl");
  CHECK(ChooseBackend("", {"", "h/0"}, &err).backend == "tcp");
  CHECK(ChooseBackend("", {}, &err).backend == "tcp");
  // The third rank shares with the first: named by the first pair found.
  ChooseBackend("nccl", {"h/0", "h/1", "h/0"}, &err);
  CHECK(err.find("ranks 0 and 2 share GPU 0 on h") != std::string::npos);
}
