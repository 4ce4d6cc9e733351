// etrun-smoke: proves that a job's network (and GPUs) work before a long run, like nccl-tests.
// Every rank runs it under etrun; ranks meet through etrun's rendezvous store, run an allreduce
// over a sweep of sizes, check every element, and rank 0 prints a table. main() wires the
// pieces: options -> world (environment) -> store client -> backend -> sweep -> report.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "smoke/backend.h"
#include "smoke/backend_choice.h"
#include "smoke/kv_client.h"
#include "smoke/options.h"
#include "smoke/report.h"
#include "smoke/sweep.h"
#include "smoke/world.h"

namespace etrun::smoke {
namespace {

#if defined(ETRUN_SMOKE_HAVE_NCCL) && ETRUN_SMOKE_HAVE_NCCL
constexpr bool kNcclBuilt = true;
#else
constexpr bool kNcclBuilt = false;
#endif

int Fail(int code, const std::string& what) {
  std::fprintf(stderr, "etrun-smoke: error: %s\n", what.c_str());
  return code;
}

// The GPU this rank's NCCL backend would use (backend_choice.h); "" in a build without NCCL or
// when it sees no device.
std::string OwnGpu(const World& world) {
#if defined(ETRUN_SMOKE_HAVE_NCCL) && ETRUN_SMOKE_HAVE_NCCL
  int devices = 0;
  std::string ignored;
  if (!CudaDeviceCount(&devices, &ignored)) return "";
  std::string host = world.hostname;
  if (host.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return GpuKey(host, visible == nullptr ? "" : visible, devices, world.local_rank);
#else
  (void)world;
  return "";
#endif
}

// Where ranks agree on the backend: every rank names its GPU ("gpu_<rank>"), rank 0 decides for
// all (ChooseBackend: nccl if built, it sees a GPU and no two ranks share one, else tcp; a named
// nccl that ranks would share a GPU with is refused) and publishes its choice, so that a mixed
// cluster cannot split into two backends. A refusal is "none": rank 0 says why, the others
// leave without a word. Without NCCL in the build there is nothing to agree on.
bool AgreeOnBackend(const World& world, KvClient* kv, std::chrono::milliseconds timeout,
                    std::string* backend, std::string* err) {
  if (!kNcclBuilt || *backend == "tcp") return true;
  if (!kv->Put("gpu_" + std::to_string(world.rank), OwnGpu(world), err)) return false;
  if (world.rank != 0) return kv->WaitFor("backend", timeout, backend, err);
  std::vector<std::string> gpus(world.size);
  std::string ignored;
  for (int r = 0; r < world.size; ++r) {
    if (!kv->WaitFor("gpu_" + std::to_string(r), timeout, &gpus[r], err)) return false;
    kv->Delete("gpu_" + std::to_string(r), &ignored);  // read by rank 0 only
  }
  BackendChoice choice = ChooseBackend(*backend, gpus, err);  // *err: why it is refused
  if (!choice.note.empty()) std::fprintf(stderr, "etrun-smoke: %s\n", choice.note.c_str());
  *backend = choice.backend.empty() ? "none" : choice.backend;
  std::string put_err;
  if (!kv->Put("backend", *backend, &put_err) && !choice.backend.empty()) {
    *err = put_err;
    return false;
  }
  return true;
}

std::unique_ptr<Backend> ConnectBackend(const std::string& name, const World& world, KvClient* kv,
                                        std::chrono::milliseconds timeout, std::string* err) {
#if defined(ETRUN_SMOKE_HAVE_NCCL) && ETRUN_SMOKE_HAVE_NCCL
  if (name == "nccl") return ConnectNcclBackend(world, kv, timeout, err);
#endif
  // Test hook: ETRUN_SMOKE_TEST_CORRUPT_RANK=<r> makes rank r corrupt what it sends.
  const char* corrupt = std::getenv("ETRUN_SMOKE_TEST_CORRUPT_RANK");
  const bool corrupt_for_test = corrupt != nullptr && std::to_string(world.rank) == corrupt;
  return ConnectTcpBackend(world, kv, timeout, corrupt_for_test, err);
}

// Every rank publishes one line about itself; rank 0 collects and prints them in rank order,
// then drops the keys (every rank has read "backend" and, for NCCL, "nccl_id" by now).
bool PrintRankLines(const World& world, const Backend& backend, KvClient* kv,
                    std::chrono::milliseconds timeout, std::string* err) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const std::string line = "#  rank " + std::to_string(world.rank) + " pid " +
                           std::to_string(getpid()) + " on " +
                           (world.hostname.empty() ? host : world.hostname) + ": " +
                           backend.description() + "\n";
  const std::string key = "rank_" + std::to_string(world.rank);
  if (!kv->Put(key, line, err)) return false;
  if (world.rank != 0) return true;
  for (int r = 0; r < world.size; ++r) {
    std::string text;
    if (!kv->WaitFor("rank_" + std::to_string(r), timeout, &text, err) ||
        !kv->Delete("rank_" + std::to_string(r), err)) {
      return false;
    }
    std::fputs(text.c_str(), stdout);
  }
  std::string ignored;
  kv->Delete("backend", &ignored);
  kv->Delete("nccl_id", &ignored);
  return true;
}

std::string SizeText(size_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// Rank 0's first lines: what runs, over how many ranks, on which sizes.
void PrintBanner(const World& world, const Backend& backend, const std::vector<size_t>& sizes,
                 const SmokeOptions& options) {
  std::printf("# etrun-smoke v%s: allreduce (sum, float32) over %d rank%s, backend %s\n",
              ETRUN_VERSION, world.size, world.size == 1 ? "" : "s", backend.name().c_str());
  const std::string range = sizes.size() == 1
                                ? SizeText(sizes.front())
                                : SizeText(sizes.front()) + " to " + SizeText(sizes.back()) +
                                      " (x" + std::to_string(options.step_factor) + ")";
  std::printf("# %s, %d timed and %d warm-up allreduces per size, every element checked\n",
              range.c_str(), options.iters, options.warmup);
}

// Rank 0 prints the sweep's summary and, when any element came back wrong, the error line.
// Returns how many elements came back wrong (on every rank).
int64_t ReportResults(const std::vector<SizeResult>& results, const World& world) {
  int64_t wrong = 0;
  size_t bad_sizes = 0;
  size_t first_bad = 0;
  for (const SizeResult& r : results) {
    if (r.wrong > 0 && bad_sizes++ == 0) first_bad = r.bytes;
    wrong += r.wrong;
  }
  if (world.rank == 0) {
    std::fputs(Summary(results, world.size).c_str(), stdout);
    std::fflush(stdout);
    if (wrong > 0) {
      Fail(kExitFailure, std::to_string(wrong) + " wrong elements in " +
                             std::to_string(bad_sizes) + " of " + std::to_string(results.size()) +
                             " sizes (first at " + std::to_string(first_bad) +
                             " B): the network or a device corrupts data");
    }
  }
  return wrong;
}

int Run(const std::vector<std::string>& args) {
  SmokeOptions options;
  std::string err;
  switch (ParseOptions(args, &options, &err)) {
    case ParseResult::kHelp:
      std::fputs(Usage(kNcclBuilt).c_str(), stdout);
      return kExitOk;
    case ParseResult::kError:
      return Fail(kExitUsage, err);
    case ParseResult::kRun:
      break;
  }
  if (options.backend == "nccl" && !kNcclBuilt) {
    return Fail(kExitUsage,
                "--backend nccl: this etrun-smoke was built without CUDA/NCCL (CMake looks "
                "under /usr/local/cuda); use --backend tcp");
  }
  World world;
  if (!ReadWorld([](const char* name) { return std::getenv(name); }, &world, &err)) {
    return Fail(kExitUsage, err);
  }
  const std::string who = "rank " + std::to_string(world.rank) + ": ";
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  // etrun's store holds a GET of a key not there yet for up to a second (until it is written):
  // one request may take that long on top of the wait, and must not time out before it answers.
  KvClient kv(world.store_address, world.store_port, timeout + std::chrono::seconds(2));

  std::string backend_name = options.backend.empty() && !kNcclBuilt ? "tcp" : options.backend;
  if (!AgreeOnBackend(world, &kv, timeout, &backend_name, &err)) {
    return Fail(kExitFailure, who + err);
  }
  if (backend_name == "none") return world.rank == 0 ? Fail(kExitUsage, err) : kExitUsage;
  std::unique_ptr<Backend> backend = ConnectBackend(backend_name, world, &kv, timeout, &err);
  if (backend == nullptr) return Fail(kExitFailure, who + err);

  const std::vector<size_t> sizes = SweepSizes(options);
  if (world.rank == 0) PrintBanner(world, *backend, sizes, options);
  if (!PrintRankLines(world, *backend, &kv, timeout, &err)) return Fail(kExitFailure, who + err);
  if (!backend->Allocate(sizes.back() / sizeof(float), &err)) {
    return Fail(kExitFailure, who + err);
  }
  if (world.rank == 0) std::printf("#\n%s", TableHeader().c_str());
  std::fflush(stdout);

  std::vector<SizeResult> results;
  const auto print_row = [&world](const SizeResult& result) {
    if (world.rank != 0) return;
    std::fputs(FormatRow(result, world.size).c_str(), stdout);
    std::fflush(stdout);
  };
  if (!RunSweep(backend.get(), world.rank, world.size, options, print_row, &results, &err)) {
    return Fail(kExitFailure, who + err);
  }
  const int64_t wrong = ReportResults(results, world);
  // A last barrier: no rank exits (which may make etrun stop the others) before rank 0 has
  // written its report.
  std::vector<double> barrier = {0};
  if (!backend->SumHost(&barrier, &err)) return Fail(kExitFailure, who + err);
  return wrong == 0 ? kExitOk : kExitFailure;
}

}  // namespace
}  // namespace etrun::smoke

int main(int argc, char** argv) {
  try {
    return etrun::smoke::Run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "etrun-smoke: error: %s\n", e.what());
    return etrun::smoke::kExitFailure;
  }
}
