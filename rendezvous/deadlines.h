// Deadlines: "call this after that long", the one timer the rendezvous handlers need (a held GET's
// bound), as an interface so tests fire deadlines by hand instead of sleeping. LoopDeadlines runs
// them on an EventLoop (the store's first thread). Thread-safe: After may be called from any
// thread.
#ifndef ETRUN_RENDEZVOUS_DEADLINES_H_
#define ETRUN_RENDEZVOUS_DEADLINES_H_

#include <chrono>
#include <functional>

#include "rendezvous/event_loop.h"

namespace etrun::rendezvous {

class Deadlines {
 public:
  virtual ~Deadlines() = default;
  // Calls `fn` once, `delay` from now, on some thread of the implementation's.
  virtual void After(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
};

class LoopDeadlines : public Deadlines {
 public:
  explicit LoopDeadlines(EventLoop* loop) : loop_(loop) {}
  void After(std::chrono::milliseconds delay, std::function<void()> fn) override;

 private:
  EventLoop* loop_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_DEADLINES_H_
