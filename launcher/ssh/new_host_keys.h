// new_host_keys: the one warning line for the host keys this process met for the first time and
// took on trust (known_hosts.h records them), however many hosts it connects to:
//   etrun: warning: recorded the SSH host keys of 3 new hosts in /root/.ssh/known_hosts: h1,
//   h2, h3 (--ssh-strict-host-keys refuses unknown hosts)
// NewHostKeyBatch says what the line is and when it is due (pure); ReportNewHostKey feeds the
// process's one batch, which a thread of its own prints. Internal to launcher/ssh/.
#ifndef ETRUN_LAUNCHER_SSH_NEW_HOST_KEYS_H_
#define ETRUN_LAUNCHER_SSH_NEW_HOST_KEYS_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace etrun::launcher {

// The warning for the hosts `names` (known_hosts names, listed in natural order: h2 before h10,
// the first ten and how many more), whose keys were recorded in `path` or, when `error` is not
// empty, accepted without being recorded there, for that reason. Without etrun's "warning:".
std::string NewHostKeysLine(const std::string& path, std::vector<std::string> names,
                            const std::string& error);

// New host keys reported since the last Take, and when to say so. Connections to many hosts
// meet their keys within moments of each other, and one line for all of them is the point: the
// batch is due once no key has come for kQuiet, or kAtMost after its first one, whichever is
// sooner -- nothing waits for it, and a host that comes later (an elastic job growing) starts
// another batch. Not thread-safe.
class NewHostKeyBatch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  static constexpr std::chrono::milliseconds kQuiet{1000};
  static constexpr std::chrono::milliseconds kAtMost{10000};

  // A host `name` met at `now`, recorded in `path` (error empty) or not (error: why).
  void Add(const std::string& path, const std::string& name, const std::string& error,
           TimePoint now);
  // When the batch is due; nullopt while it is empty.
  std::optional<TimePoint> Due() const;
  // The batch's lines (one per file and outcome, in the order first met), emptying it.
  std::vector<std::string> Take();

 private:
  struct Group {
    std::string path;
    std::string error;
    std::vector<std::string> names;
  };
  std::vector<Group> groups_;
  TimePoint first_{};
  TimePoint last_{};
};

// Adds a host to this process's batch, which a thread of its own prints as one spdlog warning
// when due, and at exit what is left. Returns at once. Thread-safe.
void ReportNewHostKey(const std::string& path, const std::string& name, const std::string& error);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_NEW_HOST_KEYS_H_
