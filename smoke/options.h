// etrun-smoke's command line: nccl-tests' sweep flags (-b, -e, -f, -n, -w) plus the backend and
// a timeout, parsed by hand so that only cli/ links CLI11. Also the size sweep the flags describe.
// Pure; thread-compatible.
#ifndef ETRUN_SMOKE_OPTIONS_H_
#define ETRUN_SMOKE_OPTIONS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::smoke {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // wrong results, network or device failure
inline constexpr int kExitUsage = 2;    // bad flags, not started by etrun, backend not built

struct SmokeOptions {
  size_t min_bytes = 8;           // -b
  size_t max_bytes = 64 << 20;    // -e
  size_t step_factor = 2;         // -f
  int iters = 20;                 // -n: timed allreduces per size
  int warmup = 5;                 // -w: untimed allreduces per size, before the timed ones
  std::string backend;            // "tcp", "nccl", or empty: nccl when built and a GPU is present
  double timeout_s = 30;          // waiting for a peer (rendezvous, connect, data) gives up after
};

enum class ParseResult { kRun, kHelp, kError };

// Parses argv[1..] into *options (defaults as declared). kError sets *err to one line without
// the "etrun-smoke: error: " prefix; kHelp means print Usage() and exit 0.
ParseResult ParseOptions(const std::vector<std::string>& args, SmokeOptions* options,
                         std::string* err);

// "8", "512K", "64M", "1G" (binary multiples, case-insensitive, optional trailing "B").
// False for anything else, zero included, or a value beyond 2^40 bytes.
bool ParseSize(std::string_view text, size_t* bytes);

// The byte sizes of the sweep: min_bytes, ×step_factor, ... up to max_bytes, each rounded down
// to a whole number of floats (so -b 10 measures 8 bytes). REQUIRES: options from ParseOptions.
std::vector<size_t> SweepSizes(const SmokeOptions& options);

// The --help text; `nccl_built` says whether --backend nccl is available in this build.
std::string Usage(bool nccl_built);

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_OPTIONS_H_
