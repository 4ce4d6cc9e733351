#include "launcher/output/output_sink.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace etrun::launcher {

OutputSink::OutputSink(size_t high_water, size_t low_water)
    : high_water_(high_water), low_water_(low_water), writer_([this] { WriterLoop(); }) {}

OutputSink::~OutputSink() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  writer_.join();
  for (auto& d : dests_) {
    if (d->owned && !d->closed) close(d->fd);
  }
}

void OutputSink::Release(int dest) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dests_[dest]->released = true;
  }
  wake_.notify_one();
}

int OutputSink::AddDestination(int fd, bool owned, std::string label) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto d = std::make_unique<Destination>();
  d->fd = fd;
  d->owned = owned;
  d->label = std::move(label);
  dests_.push_back(std::move(d));
  return static_cast<int>(dests_.size()) - 1;
}

void OutputSink::set_on_drained(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_drained_ = std::move(callback);
}

void OutputSink::Append(int dest, std::string_view data) {
  if (data.empty()) return;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Destination* d = dests_[dest].get();
    if (d->failed) return;
    wake = d->buffer.empty();
    d->buffer.append(data);
  }
  pending_.fetch_add(data.size(), std::memory_order_relaxed);
  if (wake) wake_.notify_one();
}

bool OutputSink::ShouldPause() {
  if (pending_.load() <= high_water_) return false;
  producer_paused_.store(true);
  // The writer may have drained everything between the two loads: whoever clears the flag first
  // owns the wake-up.
  if (pending_.load() <= low_water_ && producer_paused_.exchange(false)) return false;
  return true;
}

void OutputSink::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [this] {
    if (writing_) return false;
    for (auto& d : dests_) {
      if (!d->buffer.empty()) return false;
    }
    return true;
  });
}

bool OutputSink::WriteAll(Destination* d, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(d->fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Someone made the descriptor non-blocking (a shared tty or pipe): wait until writable.
      struct pollfd p = {d->fd, POLLOUT, 0};
      poll(&p, 1, -1);
      continue;
    }
    return false;
  }
  return true;
}

void OutputSink::WriterLoop() {
  std::vector<std::string> batch;  // one per destination, swapped with the shared buffers
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Released destinations whose last bytes are written are closed and their buffers freed.
    for (size_t i = 0; i < dests_.size(); ++i) {
      Destination* d = dests_[i].get();
      if (!d->released || d->closed || !d->buffer.empty()) continue;
      if (d->owned) close(d->fd);
      d->closed = true;
      std::string().swap(d->buffer);
      if (i < batch.size()) std::string().swap(batch[i]);
    }
    bool any = false;
    for (auto& d : dests_) any = any || !d->buffer.empty();
    if (!any) {
      writing_ = false;
      drained_.notify_all();
      if (stopping_) return;
      wake_.wait(lock);
      continue;
    }
    writing_ = true;
    batch.resize(dests_.size());
    std::vector<Destination*> targets(dests_.size());
    for (size_t i = 0; i < dests_.size(); ++i) {
      targets[i] = dests_[i].get();
      batch[i].clear();
      batch[i].swap(dests_[i]->buffer);  // the shared buffer keeps the old batch's capacity
    }
    lock.unlock();
    size_t written = 0;
    std::vector<size_t> failed;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].empty()) continue;
      if (!targets[i]->failed && !WriteAll(targets[i], batch[i])) {
        int saved = errno;
        failed.push_back(i);
        // stderr itself may be the broken destination; this is best effort.
        if (targets[i]->fd != STDERR_FILENO) {
          spdlog::error("cannot write to {}: {}; its further output is dropped", targets[i]->label,
                        strerror(saved));
        }
      }
      written += batch[i].size();
    }
    size_t left = pending_.fetch_sub(written) - written;
    if (left <= low_water_ && producer_paused_.exchange(false)) {
      std::function<void()> callback;
      {
        std::lock_guard<std::mutex> guard(mutex_);
        callback = on_drained_;
      }
      if (callback) callback();
    }
    lock.lock();
    for (size_t i : failed) targets[i]->failed = true;
  }
}

}  // namespace etrun::launcher
