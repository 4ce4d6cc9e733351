// EventLoop: one thread's epoll loop, with nothing between the kernel and the rendezvous
// server's connections: a descriptor's readiness goes straight to its Watcher, timers are a sorted
// map read once per wake-up, and other threads reach the loop through a queue and an eventfd.
// The store's connections cost what the bare server's do plus an epoll_ctl: accept4, read,
// writev, close (docs/rendezvous.md, "Against the floor"; Asio's reactor added an ioctl, a second
// epoll_ctl, a read tried before the request came, a timer per operation).
//
// Thread-safety: Post and Stop from any thread; everything else from the loop's own thread (the
// one in Run), or before Run. Descriptors are the caller's: the loop never closes them, and the
// caller removes one (Remove) before closing it.
#ifndef ETRUN_RENDEZVOUS_EVENT_LOOP_H_
#define ETRUN_RENDEZVOUS_EVENT_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace etrun::rendezvous {

// Told when its descriptor is ready. `events` are epoll's (EPOLLIN, EPOLLOUT, EPOLLRDHUP,
// EPOLLHUP, EPOLLERR).
class Watcher {
 public:
  virtual void OnEvents(uint32_t events) = 0;

 protected:
  ~Watcher() = default;
};

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs until Stop: waits for descriptors, timers and posted work, and runs them. Returns at
  // once when stopped already.
  void Run();
  // Makes Run return after the wake-up in progress; posted work and timers not yet run are
  // dropped (destroyed by the loop's destructor). Any thread; idempotent.
  void Stop();

  // Runs `fn` on the loop's thread soon, after the current wake-up's events. Any thread.
  void Post(std::function<void()> fn);
  // Runs `fn` on the loop's thread `delay` from now. The loop's thread only.
  void After(std::chrono::milliseconds delay, std::function<void()> fn);
  // Keeps `object` alive until the current wake-up's work is done: a connection that closes
  // itself is still on its own call stack. The loop's thread only.
  void Retire(std::shared_ptr<void> object) { retired_.push_back(std::move(object)); }

  // epoll_ctl ADD/MOD for `fd` with `events`, telling `watcher`. False with errno on failure.
  // Events reach a watcher through the loop's table of descriptors, each with the number of its
  // registration, never through a pointer epoll keeps: see Forget.
  bool Add(int fd, uint32_t events, Watcher* watcher);
  bool Modify(int fd, uint32_t events, Watcher* watcher);
  // Before closing `fd`: its watcher hears nothing more. No system call: close() takes a
  // descriptor out of epoll, except while another process holds it too (a rank being started
  // holds every descriptor between its vfork and its exec); whatever epoll still reports for it
  // then carries the old registration's number and is dropped.
  void Forget(int fd);
  // epoll_ctl DEL, and Forget: for a descriptor that stays open, or whose loop stops.
  void Remove(int fd);

  // The time of the current wake-up (one clock reading for all its events): for deadlines of
  // seconds. The loop's thread only.
  Clock::time_point now() const { return now_; }

  // True on the thread in Run.
  bool InLoopThread() const { return running_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

 private:
  void Wake();
  void RunPosted();
  int TimeoutMs();

  int epoll_ = -1;
  int wake_ = -1;  // an eventfd: Post and Stop write it
  std::atomic<bool> stopped_{false};
  std::atomic<std::thread::id> running_{};
  std::mutex mu_;
  std::vector<std::function<void()>> posted_;  // under mu_
  bool woken_ = false;                         // under mu_: wake_ written, not yet read
  // Whether posted_ may hold work: set under mu_ by Post, cleared under it by RunPosted. Read
  // without the lock by the loop's thread, so that a wake-up with nothing posted (nearly every
  // one: a connection's events) takes no lock. A Post from another thread also writes wake_,
  // so work it posts after the loop saw false is run on the next wake-up.
  std::atomic<bool> has_posted_{false};
  std::multimap<Clock::time_point, std::function<void()>> timers_;
  std::vector<std::shared_ptr<void>> retired_;
  Clock::time_point now_ = Clock::now();
  // By descriptor: its watcher and the number of its registration (epoll's data for it holds
  // both the descriptor and that number; 0: none).
  struct Slot {
    Watcher* watcher = nullptr;
    uint32_t registration = 0;
  };
  std::vector<Slot> slots_;
  uint32_t registrations_ = 0;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_EVENT_LOOP_H_
