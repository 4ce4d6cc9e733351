#include "smoke/sweep.h"

#include <chrono>
#include <new>

namespace etrun::smoke {

// Values up to size + 250 per rank keep sums of up to ~16,000 ranks below 2^24, where every
// integer is exact in float32. The period of 251 (a prime) makes a segment that lands in the
// wrong place, or data from the wrong rank, show up as wrong elements.
float InputValue(int rank, size_t i) { return static_cast<float>(rank + 1 + i % 251); }

float ExpectedSum(int size, size_t i) {
  return static_cast<float>(static_cast<double>(size) * (size + 1) / 2 +
                            static_cast<double>(size) * static_cast<double>(i % 251));
}

bool RunSweep(Backend* backend, int rank, int size, const SmokeOptions& options,
              const std::function<void(const SizeResult&)>& on_result,
              std::vector<SizeResult>* results, std::string* err) {
  const std::vector<size_t> sizes = SweepSizes(options);
  const size_t max_count = sizes.back() / sizeof(float);
  std::vector<float> host;
  try {
    host.resize(max_count);
  } catch (const std::bad_alloc&) {
    *err = "cannot allocate " + std::to_string(sizes.back()) + " bytes of host memory: lower "
           "-e/--maxbytes";
    return false;
  }
  for (size_t i = 0; i < max_count; ++i) host[i] = InputValue(rank, i);
  if (!backend->SetInput(host.data(), max_count, err)) return false;

  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    for (int i = 0; i < options.warmup; ++i) {
      if (!backend->Allreduce(count, err)) return false;
    }
    if (!backend->Wait(err)) return false;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.iters; ++i) {
      if (!backend->Allreduce(count, err)) return false;
    }
    if (!backend->Wait(err)) return false;
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;

    // The check: a fresh result in a zeroed buffer, so a stale one cannot pass.
    if (!backend->ClearOutput(count, err) || !backend->Allreduce(count, err) ||
        !backend->GetOutput(host.data(), count, err)) {
      return false;
    }
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += host[i] != ExpectedSum(size, i);

    std::vector<double> totals = {elapsed.count() / options.iters, static_cast<double>(wrong)};
    if (!backend->SumHost(&totals, err)) return false;
    SizeResult result;
    result.bytes = bytes;
    result.count = count;
    result.time_us = totals[0] / size;
    result.wrong = static_cast<int64_t>(totals[1]);
    results->push_back(result);
    on_result(result);
  }
  return true;
}

}  // namespace etrun::smoke
