#include "rendezvous/deadlines.h"

namespace etrun::rendezvous {

void LoopDeadlines::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  if (loop_->InLoopThread()) return loop_->After(delay, std::move(fn));
  // The timer is set on the loop's thread: a hop of microseconds, against a bound of a second.
  loop_->Post([loop = loop_, delay, fn = std::move(fn)]() mutable { loop->After(delay, std::move(fn)); });
}

}  // namespace etrun::rendezvous
