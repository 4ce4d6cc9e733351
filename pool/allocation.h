// Allocate: how a pool of slots (GPUs) is divided among elastic jobs (issue 12's policy, the
// scheduler of IBM WMLA's Elastic Distributed Training). Pure: the pool runtime calls it whenever
// a job arrives, ends, or changes priority, and moves slots (shrink first, then grow) to match.
//
// The rule:
//  1. Admission (gang): a job runs only with at least its min-np slots. Running jobs keep theirs;
//     queued jobs are admitted in priority order, then arrival order, while their minimums fit;
//     the first that does not fit waits, and so do all after it (no overtaking: a big job is
//     never starved by a stream of small ones).
//  2. Shares: the slots are divided among admitted jobs in proportion to their priorities
//     (weighted fair share), each share clamped to [min-np, max-np]; slots a capped job cannot
//     use are divided again among the others (water-filling) until every share is settled.
//  3. Rounding: each job gets the whole part of its share; the slots left over go one each to
//     the largest fractional parts, ties to the job that already holds more (so allocations do
//     not flip between equal jobs), then higher priority, then earlier arrival.
// With 8 slots, equal priorities give 4/4; priorities 10000 and 5000 give 5.33/2.67 -> 5/3.
// Thread-compatible.
#ifndef ETRUN_POOL_ALLOCATION_H_
#define ETRUN_POOL_ALLOCATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace etrun::pool {

inline constexpr int kDefaultPriority = 5000;

struct PoolJob {
  std::string id;
  int priority = kDefaultPriority;  // > 0
  int min_np = 1;                   // >= 1
  int max_np = 1;                   // >= min_np
  int64_t arrival = 0;              // order of arrival; smaller came first
  int current = 0;                  // slots it holds now; > 0 means it runs (admitted)
};

struct Allocation {
  std::map<std::string, int> slots;  // every job: its slots (0 while queued)
  std::vector<std::string> queued;   // jobs waiting for their minimum, in admission order
  int free = 0;                      // slots no job can use (every admitted job at its max)
};

// Divides `total` slots among `jobs`. REQUIRES: ids unique, priorities > 0,
// 1 <= min_np <= max_np. The sum of `slots` never exceeds `total`; every admitted job gets at
// least its min_np and at most its max_np.
Allocation Allocate(int total, const std::vector<PoolJob>& jobs);

}  // namespace etrun::pool

#endif  // ETRUN_POOL_ALLOCATION_H_
