// The pool's allocation policy (pool/allocation.h): WMLA's scenario as a table, then properties
// over random pools.
#include "pool/allocation.h"

#include <algorithm>
#include <random>

#include <doctest/doctest.h>

using etrun::pool::Allocate;
using etrun::pool::Allocation;
using etrun::pool::PoolJob;

namespace {

PoolJob Job(const std::string& id, int priority, int min_np, int max_np, int64_t arrival, int current) {
  return PoolJob{id, priority, min_np, max_np, arrival, current};
}

TEST_CASE("WMLA's scenario on 8 GPUs: 8; 4/4; 5/3 after the priority change; 8 after job 1 ends") {
  struct Step {
    const char* what;
    std::vector<PoolJob> jobs;
    std::map<std::string, int> want;
  } steps[] = {
      {"training 1 alone takes every GPU", {Job("t1", 5000, 1, 8, 1, 0)}, {{"t1", 8}}},
      {"training 2 arrives: fair share, equal priorities",
       {Job("t1", 5000, 1, 8, 1, 8), Job("t2", 5000, 1, 8, 2, 0)}, {{"t1", 4}, {"t2", 4}}},
      {"training 2's priority 10000: 10000/15000 of 8 -> 5, 3 for training 1",
       {Job("t1", 5000, 1, 8, 1, 4), Job("t2", 10000, 1, 8, 2, 4)}, {{"t1", 3}, {"t2", 5}}},
      {"training 1 ends: training 2 grows to all 8", {Job("t2", 10000, 1, 8, 2, 5)}, {{"t2", 8}}},
  };
  for (const Step& s : steps) {
    CAPTURE(s.what);
    Allocation a = Allocate(8, s.jobs);
    CHECK(a.slots == s.want);
    CHECK(a.queued.empty());
    CHECK(a.free == 0);
  }
}

TEST_CASE("a job that cannot get its minimum waits, and later ones do not overtake it") {
  // 8 GPUs: a runs with min 6; b (min 4) cannot start short; c (min 1) arrived after b and waits.
  Allocation a = Allocate(8, {Job("a", 5000, 6, 8, 1, 8), Job("b", 5000, 4, 8, 2, 0),
                              Job("c", 5000, 1, 8, 3, 0)});
  CHECK(a.slots == std::map<std::string, int>{{"a", 8}, {"b", 0}, {"c", 0}});
  CHECK(a.queued == std::vector<std::string>{"b", "c"});
  // A higher priority is admitted first, whatever the arrival.
  Allocation p = Allocate(8, {Job("a", 5000, 4, 8, 1, 0), Job("b", 9000, 6, 8, 2, 0)});
  CHECK(p.slots == std::map<std::string, int>{{"a", 0}, {"b", 8}});
  CHECK(p.queued == std::vector<std::string>{"a"});
}

TEST_CASE("shares respect min and max, and what capped jobs cannot use goes to the others") {
  Allocation a = Allocate(10, {Job("small", 5000, 1, 2, 1, 0), Job("big", 5000, 1, 10, 2, 0)});
  CHECK(a.slots == std::map<std::string, int>{{"small", 2}, {"big", 8}});
  Allocation low = Allocate(10, {Job("hi", 90000, 1, 10, 1, 0), Job("floor", 1000, 3, 10, 2, 0)});
  CHECK(low.slots == std::map<std::string, int>{{"hi", 7}, {"floor", 3}});
  Allocation capped = Allocate(10, {Job("a", 5000, 1, 2, 1, 0), Job("b", 5000, 1, 3, 2, 0)});
  CHECK(capped.slots == std::map<std::string, int>{{"a", 2}, {"b", 3}});
  CHECK(capped.free == 5);
}

TEST_CASE("equal remainders keep the job that already holds the slot") {
  // 3 slots, three equal jobs of max 3 would be 1/1/1; with 2 slots one gets 1 and the other 1,
  // with 5 slots two get 2: the ones that hold 2 now keep them.
  Allocation a = Allocate(5, {Job("a", 5000, 1, 3, 1, 1), Job("b", 5000, 1, 3, 2, 2),
                              Job("c", 5000, 1, 3, 3, 2)});
  CHECK(a.slots == std::map<std::string, int>{{"a", 1}, {"b", 2}, {"c", 2}});
}

TEST_CASE("properties over random pools: no slot twice, bounds, gang, monotone in priority") {
  std::mt19937 rng(20261123);
  for (int trial = 0; trial < 3000; ++trial) {
    CAPTURE(trial);
    int total = std::uniform_int_distribution<int>(0, 64)(rng);
    int n = std::uniform_int_distribution<int>(1, 8)(rng);
    std::vector<PoolJob> jobs;
    int used = 0;
    for (int i = 0; i < n; ++i) {
      PoolJob j;
      j.id = "j" + std::to_string(i);
      j.priority = std::uniform_int_distribution<int>(1, 20000)(rng);
      j.min_np = std::uniform_int_distribution<int>(1, 8)(rng);
      j.max_np = j.min_np + std::uniform_int_distribution<int>(0, 24)(rng);
      j.arrival = std::uniform_int_distribution<int>(0, 5)(rng);
      if (used + j.min_np <= total && rng() % 2 == 0) {
        j.current = j.min_np;
        used += j.min_np;
      }
      jobs.push_back(j);
    }
    Allocation a = Allocate(total, jobs);
    int sum = 0;
    for (const PoolJob& j : jobs) {
      int got = a.slots.at(j.id);
      bool queued = std::find(a.queued.begin(), a.queued.end(), j.id) != a.queued.end();
      CHECK(got >= 0);
      if (queued) {
        CHECK(got == 0);
      } else {
        CHECK(got >= j.min_np);  // the gang guarantee
        CHECK(got <= j.max_np);
      }
      if (j.current > 0) CHECK_FALSE(queued);  // running minimums fit by construction
      sum += got;
    }
    CHECK(sum + a.free == total);  // every slot once: held by one job, or free
    CHECK(sum <= total);
    // Raising one job's priority never lowers its allocation.
    size_t k = std::uniform_int_distribution<size_t>(0, jobs.size() - 1)(rng);
    std::vector<PoolJob> raised = jobs;
    raised[k].priority += std::uniform_int_distribution<int>(1, 20000)(rng);
    CHECK(Allocate(total, raised).slots.at(jobs[k].id) >= a.slots.at(jobs[k].id));
  }
}

}  // namespace
