// The measurement: for each size of the sweep, warm-up allreduces, timed allreduces, then one
// more on a zeroed output whose every element is compared with the exact expected sum. Values
// are small integers, so float32 sums are exact in any order and any wrong element is a real
// error. Results are the same on every rank (times averaged over ranks, wrong elements summed).
#ifndef ETRUN_SMOKE_SWEEP_H_
#define ETRUN_SMOKE_SWEEP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "smoke/backend.h"
#include "smoke/options.h"

namespace etrun::smoke {

struct SizeResult {
  size_t bytes = 0;
  size_t count = 0;       // float32 elements
  double time_us = 0;     // one allreduce, mean over the timed iterations and over ranks
  int64_t wrong = 0;      // wrong elements, summed over ranks
};

// Rank `rank`'s input element i, and the sum of that element over `size` ranks.
float InputValue(int rank, size_t i);
float ExpectedSum(int size, size_t i);

// Runs every size of SweepSizes(options) on `backend` (after Allocate) and appends one result
// per size, calling `on_result` as each is known (rank 0 prints it then). False and *err on a
// backend failure; wrong results are not failures here, they are counted.
bool RunSweep(Backend* backend, int rank, int size, const SmokeOptions& options,
              const std::function<void(const SizeResult&)>& on_result,
              std::vector<SizeResult>* results, std::string* err);

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_SWEEP_H_
