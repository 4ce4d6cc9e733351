// HangWatch: the hang watchdog (--hang-timeout) and `etrun dump`. When no rank has printed, started
// or ended for the timeout, it sends every unfinished rank's process group the stack signal
// (python_hook.h: a Python rank writes every thread's stack to its stderr, which reaches the
// console under the rank's prefix as any output does), asks each remote rank's agent for its
// process facts (proc_facts.h; local ones it reads itself), gives them `collect` to arrive, and
// hands the verdict (stack_dump.h) to its owner, which prints it and acts on it. The dump's own
// output counts as life: the next dump comes after another timeout of silence. Loop thread only.
#ifndef ETRUN_LAUNCHER_HANG_HANG_WATCH_H_
#define ETRUN_LAUNCHER_HANG_HANG_WATCH_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/hang/proc_facts.h"
#include "launcher/hang/stack_dump.h"
#include "launcher/process/rank_set.h"

namespace etrun::launcher::hang {

class HangWatch {
 public:
  struct Options {
    std::chrono::milliseconds timeout{0};      // silence that counts as a hang; 0: on request only
    std::chrono::milliseconds collect{2000};   // how long dumps and facts are awaited
    std::chrono::milliseconds check{1000};     // how often silence is checked
  };
  // `on_hang`: each verdict of a timeout (the owner prints it and acts).
  HangWatch(boost::asio::io_context* io, RankSet* ranks, Options options,
            std::function<void(const Verdict&)> on_hang);
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  // Starts watching (with a timeout); Stop ends it, and any dump under way reports nothing.
  void Start();
  void Stop();
  // A dump now, whatever the silence (`etrun dump`): `done` gets its verdict. Joins a dump under
  // way rather than starting a second.
  void DumpNow(std::function<void(const Verdict&)> done);

 private:
  void Check();
  void Begin(std::string why);
  void Finish();

  boost::asio::io_context* io_;
  RankSet* ranks_;
  Options options_;
  std::function<void(const Verdict&)> on_hang_;
  boost::asio::steady_timer check_timer_;
  boost::asio::steady_timer collect_timer_;
  bool watching_ = false;
  bool dumping_ = false;
  bool timed_out_ = false;  // the dump under way is a timeout's (its verdict goes to on_hang_)
  std::string why_;
  std::chrono::steady_clock::time_point quiet_since_;  // silence counts from here at the latest
  std::map<int, std::string> stderr_;                  // id -> stderr during the dump
  std::map<int, ProcFacts> facts_;                     // id -> its process facts
  std::vector<RankSet::Running> ranks_dumped_;         // the ranks asked, as they were
  std::vector<std::function<void(const Verdict&)>> waiting_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace etrun::launcher::hang

#endif  // ETRUN_LAUNCHER_HANG_HANG_WATCH_H_
