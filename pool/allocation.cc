#include "pool/allocation.h"

#include <algorithm>
#include <cmath>

namespace etrun::pool {
namespace {

// Admission order: priority first, then arrival (then id, for a total order).
bool Before(const PoolJob* a, const PoolJob* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->arrival != b->arrival) return a->arrival < b->arrival;
  return a->id < b->id;
}

// Step 1: running jobs first (they keep their minimum while it fits), then queued ones in order
// while their minimums fit; the first queued job that does not fit stops admission.
std::vector<const PoolJob*> Admit(int total, const std::vector<PoolJob>& jobs,
                                  std::vector<std::string>* queued) {
  std::vector<const PoolJob*> running, waiting, admitted;
  for (const PoolJob& j : jobs) (j.current > 0 ? running : waiting).push_back(&j);
  std::sort(running.begin(), running.end(), Before);
  std::sort(waiting.begin(), waiting.end(), Before);
  int64_t used = 0;
  bool blocked = false;
  for (const std::vector<const PoolJob*>* group : {&running, &waiting}) {
    for (const PoolJob* j : *group) {
      if (!blocked && used + j->min_np <= total) {
        used += j->min_np;
        admitted.push_back(j);
      } else {
        blocked = blocked || group == &waiting;
        queued->push_back(j->id);
      }
    }
  }
  return admitted;
}

// Step 2: real-valued shares, weighted by priority and clamped to [min, max] by water-filling.
// Returns the slots no admitted job can use.
double Shares(int total, const std::vector<const PoolJob*>& admitted, std::vector<double>* share) {
  share->assign(admitted.size(), 0.0);
  std::vector<bool> fixed(admitted.size(), false);
  double remaining = total;
  for (;;) {
    double weight = 0;
    for (size_t i = 0; i < admitted.size(); ++i) {
      if (!fixed[i]) weight += admitted[i]->priority;
    }
    if (weight == 0) return remaining;  // every job fixed: what is left is free
    bool low = false, high = false;
    for (size_t i = 0; i < admitted.size(); ++i) {
      if (fixed[i]) continue;
      (*share)[i] = remaining * admitted[i]->priority / weight;
      low = low || (*share)[i] < admitted[i]->min_np;
      high = high || (*share)[i] > admitted[i]->max_np;
    }
    if (!low && !high) return 0;
    // Minimums first: giving them their floor takes slots from the rest, which may fall under
    // theirs; only when none is under, the capped ones give slots back.
    for (size_t i = 0; i < admitted.size(); ++i) {
      if (fixed[i]) continue;
      int bound = low ? admitted[i]->min_np : admitted[i]->max_np;
      if (low ? (*share)[i] < bound : (*share)[i] > bound) {
        (*share)[i] = bound;
        fixed[i] = true;
        remaining -= bound;
      }
    }
  }
}

}  // namespace

Allocation Allocate(int total, const std::vector<PoolJob>& jobs) {
  Allocation out;
  for (const PoolJob& j : jobs) out.slots[j.id] = 0;
  std::vector<const PoolJob*> admitted = Admit(total, jobs, &out.queued);
  std::vector<double> share;
  double free = Shares(total, admitted, &share);
  out.free = static_cast<int>(std::lround(free));
  // Step 3: whole parts, then the leftover slots by largest fractional part.
  std::vector<int> slots(admitted.size());
  int given = 0;
  for (size_t i = 0; i < admitted.size(); ++i) {
    slots[i] = static_cast<int>(std::floor(share[i] + 1e-9));
    given += slots[i];
  }
  int leftover = total - out.free - given;
  // Floating-point rounding may round a whole part up: give back from the most rounded up.
  while (leftover < 0) {
    size_t worst = 0;
    for (size_t i = 1; i < admitted.size(); ++i) {
      if (slots[i] - share[i] > slots[worst] - share[worst]) worst = i;
    }
    --slots[worst];
    ++leftover;
  }
  std::vector<size_t> order(admitted.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double fa = share[a] - slots[a], fb = share[b] - slots[b];
    if (std::abs(fa - fb) > 1e-9) return fa > fb;
    bool holds_a = admitted[a]->current > slots[a], holds_b = admitted[b]->current > slots[b];
    if (holds_a != holds_b) return holds_a;
    return Before(admitted[a], admitted[b]);
  });
  for (size_t k = 0; leftover > 0 && k < order.size(); ++k) {
    size_t i = order[k];
    if (slots[i] >= admitted[i]->max_np) continue;
    ++slots[i];
    --leftover;
  }
  out.free += leftover;  // every job that could take one is at its max
  for (size_t i = 0; i < admitted.size(); ++i) out.slots[admitted[i]->id] = slots[i];
  return out;
}

}  // namespace etrun::pool
