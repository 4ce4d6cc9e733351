#include "launcher/ssh/new_host_keys.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace etrun::launcher {

namespace {

constexpr size_t kMostNamed = 10;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "h2" < "h10": runs of digits compare as numbers.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t i_end = std::min(a.find_first_not_of("0123456789", i), a.size());
      size_t j_end = std::min(b.find_first_not_of("0123456789", j), b.size());
      std::string_view x(a.data() + i, i_end - i), y(b.data() + j, j_end - j);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end;
      j = j_end;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;  // equal but for leading zeros: any fixed order
}

// The process's one batch and the thread that prints it. A process-wide object, unlike the
// rest of etrun's state: the connections that feed it run on threads of their own
// (ssh_host.h) and know nothing of one another or of the job, and what it owns -- one line on
// stderr -- is the process's.
class Reporter {
 public:
  ~Reporter() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();  // it prints what is left first
  }

  void Add(const std::string& path, const std::string& name, const std::string& error) {
    std::lock_guard<std::mutex> lock(mutex_);
    batch_.Add(path, name, error, std::chrono::steady_clock::now());
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    wake_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      std::optional<NewHostKeyBatch::TimePoint> due = batch_.Due();
      if (stopping_ || (due && std::chrono::steady_clock::now() >= *due)) {
        std::vector<std::string> lines = batch_.Take();
        lock.unlock();
        for (const std::string& line : lines) spdlog::warn("{}", line);
        lock.lock();
        if (stopping_) return;
        continue;
      }
      if (due) {
        wake_.wait_until(lock, *due);
      } else {
        wake_.wait(lock);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  NewHostKeyBatch batch_;   // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  std::thread thread_;
};

}  // namespace

std::string NewHostKeysLine(const std::string& path, std::vector<std::string> names,
                            const std::string& error) {
  std::sort(names.begin(), names.end(), NaturalLess);
  names.erase(std::unique(names.begin(), names.end()), names.end());
  size_t n = names.size();
  std::string listed;
  for (size_t i = 0; i < n && i < kMostNamed; ++i) listed += (i == 0 ? "" : ", ") + names[i];
  if (n > kMostNamed) listed += fmt::format(" and {} more", n - kMostNamed);
  std::string what = n == 1 ? "the SSH host key of 1 new host"
                            : fmt::format("the SSH host keys of {} new hosts", n);
  std::string done = error.empty()
                         ? fmt::format("recorded {} in {}", what, path)
                         : fmt::format("accepted {} without recording {} in {} ({})", what,
                                       n == 1 ? "it" : "them", path, error);
  return fmt::format("{}: {} (--ssh-strict-host-keys refuses unknown hosts)", done, listed);
}

void NewHostKeyBatch::Add(const std::string& path, const std::string& name,
                          const std::string& error, TimePoint now) {
  if (groups_.empty()) first_ = now;
  last_ = now;
  for (Group& g : groups_) {
    if (g.path == path && g.error == error) {
      g.names.push_back(name);
      return;
    }
  }
  groups_.push_back({path, error, {name}});
}

std::optional<NewHostKeyBatch::TimePoint> NewHostKeyBatch::Due() const {
  if (groups_.empty()) return std::nullopt;
  return std::min(last_ + kQuiet, first_ + kAtMost);
}

std::vector<std::string> NewHostKeyBatch::Take() {
  std::vector<std::string> lines;
  for (Group& g : groups_) lines.push_back(NewHostKeysLine(g.path, std::move(g.names), g.error));
  groups_.clear();
  return lines;
}

void ReportNewHostKey(const std::string& path, const std::string& name, const std::string& error) {
  // Built by the first new key, after main set up logging, so it is destroyed -- and prints what
  // is left -- before spdlog's registry is; the connections are over by then (their owners are
  // main's).
  static Reporter reporter;
  reporter.Add(path, name, error);
}

}  // namespace etrun::launcher
