#include "rendezvous/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <system_error>

namespace etrun::rendezvous {

namespace {

// Events taken per epoll_wait: enough that a busy loop amortizes the call.
constexpr int kBatch = 256;

// epoll's data for a descriptor: the registration's number above, the descriptor below. The
// eventfd's is all ones (no registration has that number).
constexpr uint64_t kWakeUp = ~uint64_t{0};
uint64_t Tag(int fd, uint32_t registration) { return uint64_t{registration} << 32 | static_cast<uint32_t>(fd); }

}  // namespace

EventLoop::EventLoop() {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0) {
    int err = errno;
    close(epoll_);
    throw std::system_error(err, std::generic_category(), "eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeUp;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) != 0) {
    int err = errno;
    close(wake_);
    close(epoll_);
    throw std::system_error(err, std::generic_category(), "epoll_ctl");
  }
}

EventLoop::~EventLoop() {
  stopped_ = true;
  // Work dropped unrun may post more as it is destroyed (an unanswered request's 500 goes to its
  // connection's loop): drop that too, while the descriptors are still ours to wake.
  for (;;) {
    std::vector<std::function<void()>> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      work.swap(posted_);
    }
    auto timers = std::move(timers_);
    timers_.clear();
    if (work.empty() && timers.empty()) break;
  }
  retired_.clear();
  close(wake_);
  close(epoll_);
}

bool EventLoop::Add(int fd, uint32_t events, Watcher* watcher) {
  if (fd < 0) {
    errno = EBADF;
    return false;
  }
  if (static_cast<size_t>(fd) >= slots_.size()) slots_.resize(static_cast<size_t>(fd) + 64);
  if (++registrations_ == 0 || registrations_ == ~uint32_t{0}) registrations_ = 1;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = Tag(fd, registrations_);
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  slots_[static_cast<size_t>(fd)] = {watcher, registrations_};
  return true;
}

bool EventLoop::Modify(int fd, uint32_t events, Watcher* watcher) {
  if (fd < 0 || static_cast<size_t>(fd) >= slots_.size() || slots_[static_cast<size_t>(fd)].watcher != watcher) {
    errno = ENOENT;
    return false;
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = Tag(fd, slots_[static_cast<size_t>(fd)].registration);
  return epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev) == 0;
}

void EventLoop::Forget(int fd) {
  if (fd >= 0 && static_cast<size_t>(fd) < slots_.size()) slots_[static_cast<size_t>(fd)] = {};
}

void EventLoop::Remove(int fd) {
  epoll_event ignored{};
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, &ignored);  // fails only for one never added: nothing to do
  Forget(fd);
}

void EventLoop::Wake() {
  uint64_t one = 1;
  while (write(wake_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void EventLoop::Stop() {
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  Wake();
}

void EventLoop::Post(std::function<void()> fn) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
    has_posted_.store(true, std::memory_order_release);
    // One write per wake-up: the loop reads the eventfd before it runs what was posted.
    wake = !woken_ && !InLoopThread();
    if (wake) woken_ = true;
  }
  if (wake) Wake();
}

void EventLoop::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  timers_.emplace(Clock::now() + delay, std::move(fn));
}

void EventLoop::RunPosted() {
  if (!has_posted_.load(std::memory_order_acquire)) return;
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(posted_);
    has_posted_.store(false, std::memory_order_relaxed);
  }
  for (auto& fn : work) {
    if (stopped_) return;
    fn();
  }
}

int EventLoop::TimeoutMs() {
  // Posted from this thread (no wake-up was written), or from another since RunPosted.
  if (has_posted_.load(std::memory_order_acquire)) return 0;
  if (timers_.empty()) return -1;
  auto left = timers_.begin()->first - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Rounded up: waking early would only find the timer not due. Past epoll's int, wait that long.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<decltype(ms)>(ms, std::numeric_limits<int>::max()));
}

void EventLoop::Run() {
  running_ = std::this_thread::get_id();
  epoll_event events[kBatch];
  while (!stopped_) {
    int n = epoll_wait(epoll_, events, kBatch, TimeoutMs());
    if (n < 0 && errno != EINTR) break;  // only a bad epoll descriptor: not ours to fix
    now_ = Clock::now();
    for (int i = 0; i < n && !stopped_; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag != kWakeUp) {
        const auto fd = static_cast<size_t>(tag & 0xffffffffu);
        // A registration since forgotten (its descriptor closed, or closed and used again) is
        // not its watcher's any more.
        if (fd < slots_.size() && slots_[fd].registration == static_cast<uint32_t>(tag >> 32)) {
          slots_[fd].watcher->OnEvents(events[i].events);
        }
        continue;
      }
      uint64_t count;
      while (read(wake_, &count, sizeof count) < 0 && errno == EINTR) {
      }
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = false;
    }
    retired_.clear();
    if (stopped_) break;
    while (!timers_.empty() && timers_.begin()->first <= now_ && !stopped_) {
      auto fn = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
      fn();
    }
    RunPosted();
    retired_.clear();
  }
  running_ = std::thread::id();
}

}  // namespace etrun::rendezvous
