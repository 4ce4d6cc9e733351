// The table rank 0 prints, in nccl-tests' layout: one row per size with time, algorithm
// bandwidth (bytes / time), bus bandwidth (algbw × 2(n-1)/n: what each link of a ring carries,
// comparable across rank counts) and the number of wrong elements. Pure; thread-compatible.
#ifndef ETRUN_SMOKE_REPORT_H_
#define ETRUN_SMOKE_REPORT_H_

#include <string>
#include <vector>

#include "smoke/sweep.h"

namespace etrun::smoke {

// GB/s (10^9 bytes per second); 0 for a zero time.
double AlgorithmBandwidth(size_t bytes, double time_us);
// algbw × 2(n-1)/n: 0 for a single rank, which moves nothing.
double BusBandwidth(double algbw, int size);

// The two "#" lines naming the columns.
std::string TableHeader();
// One row: "        1024           256     float     sum      12.34      0.08      0.11       0".
std::string FormatRow(const SizeResult& result, int size);
// "# Avg bus bandwidth    : 1.234 GB/s" and "# Wrong elements       : 0 (OK)", over every size.
std::string Summary(const std::vector<SizeResult>& results, int size);

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_REPORT_H_
