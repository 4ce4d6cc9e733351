// Clock: where the runtime and the elastic policy read the time, so tests can pass a fake one
// (the ElasticDriver itself takes the time as an argument). main() builds the real one.
// Thread-safe.
#ifndef ETRUN_LAUNCHER_CLOCK_H_
#define ETRUN_LAUNCHER_CLOCK_H_

#include <chrono>

namespace etrun::launcher {

using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SteadyClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_CLOCK_H_
