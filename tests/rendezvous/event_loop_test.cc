// EventLoop (rendezvous/event_loop.h): the rendezvous store's epoll loop, with real descriptors
// and real threads.
#include "rendezvous/event_loop.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

using etrun::rendezvous::EventLoop;
using etrun::rendezvous::Watcher;

namespace {

using Clock = std::chrono::steady_clock;

// Counts what epoll reports for a pipe's read end, on the loop's thread, and drains it.
class PipeReader : public Watcher {
 public:
  PipeReader(EventLoop* loop, int fd) : loop_(loop), fd_(fd) {}
  void OnEvents(uint32_t events) override {
    ++calls;
    on_loop = loop_->InLoopThread();
    if (events & EPOLLIN) {
      char buf[64];
      while (read(fd_, buf, sizeof buf) > 0) ++reads;
    }
    if (events & EPOLLHUP) {
      hung_up = true;
      loop_->Stop();
    }
  }
  int calls = 0;
  int reads = 0;
  bool hung_up = false;
  bool on_loop = false;

 private:
  EventLoop* loop_;
  int fd_;
};

}  // namespace

TEST_CASE("work posted from other threads runs on the loop's thread, each thread's in its order") {
  // Given two threads posting 2,000 items each, every item runs once, on the loop's thread,
  // and each thread's items in the order it posted them.
  EventLoop loop;
  std::vector<int> seen[2];
  std::atomic<int> off_loop{0};
  std::atomic<int> done{0};
  std::thread runner([&] { loop.Run(); });
  auto post = [&](int who) {
    for (int i = 0; i < 2000; ++i) {
      loop.Post([&, who, i] {
        if (!loop.InLoopThread()) ++off_loop;
        seen[who].push_back(i);
        if (++done == 4000) loop.Stop();
      });
    }
  };
  std::thread a(post, 0), b(post, 1);
  a.join();
  b.join();
  // The last item stops the loop. Items that never run fail this test (after 10 s) instead of
  // leaving it waiting for ever.
  for (int i = 0; i < 10000 && done < 4000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  loop.Stop();
  runner.join();
  REQUIRE(done.load() == 4000);
  CHECK(off_loop == 0);
  for (auto& items : seen) {
    REQUIRE(items.size() == 2000);
    for (int i = 0; i < 2000; ++i) CHECK(items[static_cast<size_t>(i)] == i);
  }
  CHECK_FALSE(loop.InLoopThread());
}

TEST_CASE("timers run by their deadline, not the order they were set, and never early") {
  EventLoop loop;
  std::vector<int> order;
  Clock::time_point set = Clock::now(), first{}, second{};
  loop.After(std::chrono::milliseconds(60), [&] {
    order.push_back(60);
    second = Clock::now();
    loop.Stop();
  });
  loop.After(std::chrono::milliseconds(20), [&] {
    order.push_back(20);
    first = Clock::now();
  });
  loop.Run();
  CHECK(order == std::vector<int>{20, 60});
  CHECK(first - set >= std::chrono::milliseconds(20));
  CHECK(second - set >= std::chrono::milliseconds(60));
}

TEST_CASE("a descriptor's readiness reaches its watcher on the loop's thread, and a hang-up too") {
  int fds[2];
  REQUIRE(pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
  EventLoop loop;
  PipeReader reader(&loop, fds[0]);
  REQUIRE(loop.Add(fds[0], EPOLLIN, &reader));
  std::thread runner([&] { loop.Run(); });
  REQUIRE(write(fds[1], "x", 1) == 1);
  close(fds[1]);  // the reader sees the bytes, then the hang-up, and stops the loop
  runner.join();
  CHECK(reader.reads >= 1);
  CHECK(reader.hung_up);
  CHECK(reader.on_loop);
  close(fds[0]);
}

TEST_CASE("work and timers dropped unrun are destroyed with the loop, even what they post as they go") {
  // Given a loop that never runs, holding a posted item and a timer whose captures post more
  // work when destroyed (as an unanswered request's 500 does): destroying the loop destroys
  // every one of them and runs none.
  int destroyed = 0;
  bool ran = false;
  struct PostsWhenDestroyed {
    PostsWhenDestroyed(EventLoop* l, int* d, bool* r) : loop(l), destroyed(d), ran(r) {}
    EventLoop* loop;
    int* destroyed;
    bool* ran;
    ~PostsWhenDestroyed() {
      ++*destroyed;
      auto again = std::make_shared<int>(0);
      loop->Post([again, ran = ran] { *ran = true; });
    }
  };
  {
    EventLoop loop;
    auto a = std::make_shared<PostsWhenDestroyed>(&loop, &destroyed, &ran);
    auto b = std::make_shared<PostsWhenDestroyed>(&loop, &destroyed, &ran);
    loop.Post([a, &ran] { ran = true; });
    loop.After(std::chrono::hours(1), [b, &ran] { ran = true; });
    a.reset();
    b.reset();
  }
  CHECK(destroyed == 2);
  CHECK_FALSE(ran);
}

TEST_CASE("a forgotten descriptor's events are dropped, even while another holder keeps it in epoll") {
  // Given a pipe whose read end is watched by A, then forgotten and closed while a duplicate
  // keeps the pipe open (as a child between vfork and exec holds every descriptor), epoll still
  // reports it; A hears nothing. A new pipe on the same descriptor number, watched by B, reaches
  // B alone.
  EventLoop loop;
  int first[2];
  REQUIRE(pipe2(first, O_NONBLOCK | O_CLOEXEC) == 0);
  PipeReader a(&loop, first[0]);
  REQUIRE(loop.Add(first[0], EPOLLIN, &a));
  int holder = dup(first[0]);  // the other holder: epoll keeps the registration alive
  REQUIRE(holder >= 0);
  const int number = first[0];
  loop.Forget(first[0]);
  close(first[0]);
  REQUIRE(write(first[1], "x", 1) == 1);  // epoll reports the old registration
  int second[2];
  REQUIRE(pipe2(second, O_NONBLOCK | O_CLOEXEC) == 0);
  PipeReader b(&loop, second[0]);
  REQUIRE(loop.Add(second[0], EPOLLIN, &b));
  CAPTURE(number);
  CAPTURE(second[0]);  // usually the same number again
  REQUIRE(write(second[1], "y", 1) == 1);
  loop.After(std::chrono::milliseconds(50), [&] { loop.Stop(); });
  loop.Run();
  CHECK(a.calls == 0);
  CHECK(b.calls == 1);  // the old registration's event reaches nobody, B's own once
  CHECK(b.reads == 1);
  close(holder);
  close(first[1]);
  close(second[0]);
  close(second[1]);
}
