// OutputSink: the one writer of etrun's stdout, stderr and per-rank log files. The event loop
// appends whole formatted pieces and never blocks; a writer thread drains them with large
// write(2)s, so a slow console (a paused pager, a slow pipe) stalls nobody but the ranks it must
// (through backpressure), and lines from different ranks are never interleaved within a line.
// Thread-safe: AddDestination, Append, Release, ShouldPause and Flush from one producer thread
// (the event loop's); the writer is internal.
#ifndef ETRUN_LAUNCHER_OUTPUT_OUTPUT_SINK_H_
#define ETRUN_LAUNCHER_OUTPUT_OUTPUT_SINK_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace etrun::launcher {

class OutputSink {
 public:
  // Above `high_water` pending bytes the sink reports congestion; once the writer has drained to
  // `low_water`, `on_drained` runs (on the writer thread; post to your loop from there).
  explicit OutputSink(size_t high_water = 4 << 20, size_t low_water = 1 << 20);
  ~OutputSink();  // Flushes everything and joins the writer.
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // Registers a destination; the sink closes `fd` at destruction when `owned`. Returns its id.
  // `label` names it in error messages. Call before appending to it.
  int AddDestination(int fd, bool owned, std::string label);

  // Queues bytes for a destination and wakes the writer. Never blocks on I/O.
  void Append(int dest, std::string_view data);

  // No more bytes come for `dest`: once what was appended is written, its fd is closed (when
  // owned) and its buffers are freed. A rank's log files are released when it finishes.
  void Release(int dest);

  // True when the producer should stop producing until `on_drained` runs. Exactly one
  // on_drained call follows each true answer.
  bool ShouldPause();
  void set_on_drained(std::function<void()> callback);

  // Blocks until everything appended so far is written (or its destination failed).
  void Flush();

 private:
  struct Destination {
    int fd = -1;
    bool owned = false;
    bool failed = false;
    bool released = false;  // guarded by mutex_
    bool closed = false;    // guarded by mutex_
    std::string label;
    std::string buffer;  // guarded by mutex_
  };

  void WriterLoop();
  // Writes all of data to d's fd; returns false on a permanent error.
  static bool WriteAll(Destination* d, std::string_view data);

  const size_t high_water_;
  const size_t low_water_;
  std::mutex mutex_;
  std::condition_variable wake_;     // writer waits for data or stop
  std::condition_variable drained_;  // Flush waits for writes to finish
  std::vector<std::unique_ptr<Destination>> dests_;  // guarded by mutex_ (list), buffers too
  std::function<void()> on_drained_;  // guarded by mutex_
  bool stopping_ = false;             // guarded by mutex_
  bool writing_ = false;              // guarded by mutex_
  std::atomic<size_t> pending_{0};
  std::atomic<bool> producer_paused_{false};
  std::thread writer_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_OUTPUT_OUTPUT_SINK_H_
