// Deadlines: "call this after that long", the one timer the rendezvous handlers need (a held GET's
// bound), as an interface so tests fire deadlines by hand instead of sleeping. AsioDeadlines runs
// them on an executor (the store's threads). Thread-safe: After may be called from any thread.
#ifndef ETRUN_RENDEZVOUS_DEADLINES_H_
#define ETRUN_RENDEZVOUS_DEADLINES_H_

#include <chrono>
#include <functional>

#include <boost/asio/any_io_executor.hpp>

namespace etrun::rendezvous {

class Deadlines {
 public:
  virtual ~Deadlines() = default;
  // Calls `fn` once, `delay` from now, on some thread of the implementation's.
  virtual void After(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
};

class AsioDeadlines : public Deadlines {
 public:
  explicit AsioDeadlines(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}
  void After(std::chrono::milliseconds delay, std::function<void()> fn) override;

 private:
  boost::asio::any_io_executor executor_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_DEADLINES_H_
