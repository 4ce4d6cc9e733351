// GPU slots (--gpus-per-rank, --ranks-per-gpu): which GPUs each local rank gets, the up-front
// check against the host's GPUs, and how they are counted (nvidia-smi -L, CUDA_VISIBLE_DEVICES).
#include "launcher/gpu_slots.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "launcher/worker_env.h"

using etrun::launcher::CheckGpusFit;
using etrun::launcher::CountNvidiaSmiGpus;
using etrun::launcher::DetectLocalGpus;
using etrun::launcher::GpuDevices;
using etrun::launcher::GpusNeeded;
using etrun::launcher::GpuSlots;

namespace {

GpuSlots PerRank(int n, int gpus) {
  GpuSlots g;
  g.gpus_per_rank = n;
  for (int i = 0; i < gpus; ++i) g.pool.push_back(std::to_string(i));
  g.counted = gpus > 0;
  g.source = "nvidia-smi -L";
  return g;
}

GpuSlots Shared(int k, int gpus) {
  GpuSlots g = PerRank(0, gpus);
  g.gpus_per_rank = 0;
  g.ranks_per_gpu = k;
  return g;
}

std::string Devices(const GpuSlots& g, int local_rank) {
  std::string devices, err;
  REQUIRE(GpuDevices(g, local_rank, &devices, &err));
  return devices;
}

// A temporary directory with an executable `nvidia-smi` shell script in it.
class FakeNvidiaSmi {
 public:
  explicit FakeNvidiaSmi(const std::string& script) {
    char dir_template[] = "/tmp/etrun_gpu_test_XXXXXX";
    dir_ = mkdtemp(dir_template);
    std::ofstream(dir_ + "/nvidia-smi") << "#!/bin/sh\n" << script;
    chmod((dir_ + "/nvidia-smi").c_str(), 0755);
  }
  ~FakeNvidiaSmi() {
    std::remove((dir_ + "/nvidia-smi").c_str());
    rmdir(dir_.c_str());
  }
  std::string path() const { return "PATH=" + dir_ + ":/usr/bin:/bin"; }

 private:
  std::string dir_;
};

}  // namespace

TEST_CASE("--gpus-per-rank N gives local rank i the GPUs i*N .. i*N+N-1") {
  const std::vector<std::tuple<int, int, std::string>> cases = {
      {1, 0, "0"}, {1, 3, "3"}, {2, 0, "0,1"}, {2, 1, "2,3"}, {3, 1, "3,4,5"}, {4, 1, "4,5,6,7"},
  };
  for (const auto& [n, local_rank, want] : cases) {
    CAPTURE(n);
    CAPTURE(local_rank);
    CHECK(Devices(PerRank(n, 8), local_rank) == want);
  }
}

TEST_CASE("--ranks-per-gpu K lets K neighbouring local ranks share GPU i/K") {
  const std::vector<std::tuple<int, int, std::string>> cases = {
      {1, 0, "0"}, {1, 2, "2"}, {2, 0, "0"}, {2, 1, "0"}, {2, 2, "1"}, {2, 3, "1"},
      {3, 5, "1"}, {3, 6, "2"}, {4, 7, "1"},
  };
  for (const auto& [k, local_rank, want] : cases) {
    CAPTURE(k);
    CAPTURE(local_rank);
    CHECK(Devices(Shared(k, 4), local_rank) == want);
  }
}

TEST_CASE("GPUs come from the counted pool, so an inherited CUDA_VISIBLE_DEVICES is subdivided") {
  // Given the launcher was handed GPUs 4,6 and two UUIDs, ranks get those, not 0..3.
  GpuSlots g = PerRank(2, 0);
  g.pool = {"4", "6", "GPU-aa", "GPU-bb"};
  g.counted = true;
  CHECK(Devices(g, 0) == "4,6");
  CHECK(Devices(g, 1) == "GPU-aa,GPU-bb");
}

TEST_CASE("uncounted hosts get plain indices, whatever the local rank") {
  GpuSlots g = PerRank(2, 0);  // no nvidia-smi there
  CHECK_FALSE(g.counted);
  CHECK(g.pool.empty());
  CHECK(g.enabled());
  CHECK(Devices(g, 5) == "10,11");
  GpuSlots shared = Shared(2, 0);
  CHECK(Devices(shared, 9) == "4");
}

TEST_CASE("a rank beyond the host's GPUs is refused with the need and the count") {
  std::string devices = "unchanged", err;
  CHECK_FALSE(GpuDevices(PerRank(2, 4), 2, &devices, &err));
  CHECK(err == "--gpus-per-rank 2: local rank 2 needs GPUs 4-5 but this host has 4 (nvidia-smi -L)");
  CHECK(devices == "unchanged");
  CHECK_FALSE(GpuDevices(Shared(2, 2), 4, &devices, &err));
  CHECK(err == "--ranks-per-gpu 2: local rank 4 needs GPU 2 but this host has 2 (nvidia-smi -L)");
}

TEST_CASE("the up-front check counts what all of a host's ranks need") {
  CHECK(GpusNeeded(PerRank(2, 4), 3) == 6);
  CHECK(GpusNeeded(Shared(2, 4), 3) == 2);
  CHECK(GpusNeeded(Shared(3, 4), 9) == 3);
  CHECK(GpusNeeded(Shared(3, 4), 10) == 4);
  CHECK(GpusNeeded(GpuSlots{}, 4) == 0);
  std::string err;
  CHECK(CheckGpusFit(PerRank(1, 4), 4, &err));
  CHECK(CheckGpusFit(Shared(2, 4), 8, &err));
  CHECK(CheckGpusFit(PerRank(8, 0), 8, &err));  // not counted: not checked
  CHECK_FALSE(CheckGpusFit(PerRank(2, 4), 3, &err));
  CHECK(err == "--gpus-per-rank 2: 3 ranks on this host need 6 GPUs but it has 4 (nvidia-smi -L): "
               "lower -np, lower --gpus-per-rank or add hosts");
  CHECK_FALSE(CheckGpusFit(Shared(2, 1), 3, &err));
  CHECK(err == "--ranks-per-gpu 2: 3 ranks on this host need 2 GPUs but it has 1 (nvidia-smi -L): "
               "lower -np, raise --ranks-per-gpu or add hosts");
}

TEST_CASE("nvidia-smi -L lines are counted as GPUs, MIG devices are not") {
  CHECK(CountNvidiaSmiGpus("") == 0);
  CHECK(CountNvidiaSmiGpus("No devices found.\n") == 0);
  CHECK(CountNvidiaSmiGpus("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1d2e)\n"
                           "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-3f4a)\n") == 2);
  CHECK(CountNvidiaSmiGpus("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5b6c)\n"
                           "  MIG 1g.5gb      Device  0: (UUID: MIG-7d8e)\n"
                           "  MIG 1g.5gb      Device  1: (UUID: MIG-9f0a)\n"
                           "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-1b2c)") == 2);
}

TEST_CASE("the launcher's CUDA_VISIBLE_DEVICES is the pool when set") {
  GpuSlots g = PerRank(1, 0);
  std::string warning, err;
  REQUIRE(DetectLocalGpus({"PATH=/nonexistent", "CUDA_VISIBLE_DEVICES=2,3,,GPU-x"}, &g, &warning,
                          &err));
  CHECK(g.counted);
  CHECK(g.pool == std::vector<std::string>{"2", "3", "GPU-x"});
  CHECK(g.source == "CUDA_VISIBLE_DEVICES");
  CHECK(warning.empty());
  CHECK_FALSE(DetectLocalGpus({"CUDA_VISIBLE_DEVICES="}, &g, &warning, &err));
  CHECK(err == "--gpus-per-rank 1: CUDA_VISIBLE_DEVICES is set but empty, so etrun may use no GPU: "
               "unset it or list the GPUs ranks may use");
}

TEST_CASE("nvidia-smi -L counts this host's GPUs; without it they are not counted") {
  GpuSlots g = Shared(2, 0);
  std::string warning, err;
  SUBCASE("four GPUs") {
    FakeNvidiaSmi smi(
        "[ \"$1\" = -L ] || exit 9\n"
        "for i in 0 1 2 3; do echo \"GPU $i: Fake GPU (UUID: GPU-$i)\"; done\n");
    REQUIRE(DetectLocalGpus({smi.path()}, &g, &warning, &err));
    CHECK(g.counted);
    CHECK(g.pool == std::vector<std::string>{"0", "1", "2", "3"});
    CHECK(g.source == "nvidia-smi -L");
  }
  SUBCASE("a failing nvidia-smi is an error with its first line") {
    FakeNvidiaSmi smi(
        "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\n"
        "echo 'Make sure that the latest NVIDIA driver is installed and running.'\nexit 9\n");
    CHECK_FALSE(DetectLocalGpus({smi.path()}, &g, &warning, &err));
    CHECK(err == "--ranks-per-gpu 2: nvidia-smi -L failed (exit code 9): NVIDIA-SMI has failed "
                 "because it could not communicate with the NVIDIA driver.: check the NVIDIA "
                 "driver, or leave the flag out");
  }
  SUBCASE("no GPU listed is an error") {
    FakeNvidiaSmi smi("echo 'No devices found.'\n");
    CHECK_FALSE(DetectLocalGpus({smi.path()}, &g, &warning, &err));
    CHECK(err == "--ranks-per-gpu 2: nvidia-smi -L lists no GPU: No devices found.: check the "
                 "NVIDIA driver, or leave the flag out");
  }
  SUBCASE("no nvidia-smi: a warning, and ranks get indices unchecked") {
    REQUIRE(DetectLocalGpus({"PATH=/nonexistent"}, &g, &warning, &err));
    CHECK_FALSE(g.counted);
    CHECK(warning == "--ranks-per-gpu 2: no nvidia-smi on PATH, so this host's GPUs are not "
                     "counted; ranks get GPUs by local rank unchecked");
  }
}

TEST_CASE("a slot's environment carries its CUDA_VISIBLE_DEVICES only with GPU slots") {
  etrun::rendezvous::SlotInfo slot{"localhost", 3, 4, 1, 2, 0, 1};
  etrun::launcher::RunVars run;
  auto cuda = [&run, &slot]() -> std::string {
    std::string value = "(unset)";
    for (const std::string& kv : etrun::launcher::BuildWorkerEnv({"CUDA_VISIBLE_DEVICES=7"},
                                                                  etrun::Tunables{}, slot, 0, run)) {
      if (kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) value = kv.substr(21);
    }
    return value;
  };
  CHECK(cuda() == "7");  // inherited, untouched
  run.gpus = PerRank(2, 4);
  CHECK(cuda() == "2,3");
  run.gpus = Shared(2, 4);
  CHECK(cuda() == "0");
}

TEST_CASE("a process Horovod numbers differently from its slot gets its slot's GPU at that index") {
  using etrun::launcher::PermutedDevices;
  // Slot 0 of a 2-slot host, reported as local rank 1 (rank 0 went to the survivor in slot 1):
  // index 1 must be GPU 0, the slot's own, and index 0 the survivor's GPU 1.
  CHECK(PermutedDevices({}, 0, 1, 2) == "1,0");
  CHECK(PermutedDevices({"4", "5", "6"}, 0, 2, 3) == "6,5,4");  // the launcher's own list
  CHECK(PermutedDevices({"GPU-a", "GPU-b"}, 1, 0, 2) == "GPU-b,GPU-a");
  CHECK(PermutedDevices({}, 1, 1, 2).empty());  // numbered as its slot: nothing to set
}
