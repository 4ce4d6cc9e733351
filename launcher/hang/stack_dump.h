// Reading the stacks a hang dump brings, and the one-line verdict on them. A Python rank with
// etrun's hook (python_hook.h) writes faulthandler's dump to its stderr:
//   Thread 0x00007f2a... (most recent call first):
//     File "/usr/lib/python3/dist-packages/horovod/torch/mpi_ops.py", line 1030 in synchronize
//     ...
//   <blank line>
//   Current thread 0x00007f2b... (most recent call first):
//     File "train.py", line 41 in load_batch
// The main thread is the one whose outermost frame is not threading's _bootstrap; its innermost
// frame is where the rank is. The verdict compares those frames across ranks: the place more
// ranks wait in than in any other is where the job waits, ranks elsewhere are the odd ones;
// ranks without a stack are shown with their kernel state and are never odd. Pure.
#ifndef ETRUN_LAUNCHER_HANG_STACK_DUMP_H_
#define ETRUN_LAUNCHER_HANG_STACK_DUMP_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/hang/proc_facts.h"

namespace etrun::launcher::hang {

struct StackFrame {
  std::string file;
  int line = 0;
  std::string function;
  bool operator==(const StackFrame&) const = default;
};

struct ThreadStack {
  bool current = false;            // "Current thread": the one that took the signal
  std::vector<StackFrame> frames;  // innermost first, as faulthandler prints them
};

// The threads of the last dump in `text` (a rank's stderr as captured); empty when it has none.
std::vector<ThreadStack> ParseStackDump(std::string_view text);

// The innermost frame of the main thread among `threads`; none when there is no Python frame.
std::optional<StackFrame> MainThreadFrame(const std::vector<ThreadStack>& threads);

// "horovod/torch/mpi_ops.py:1030 (synchronize)": the path after site-packages/ or dist-packages/,
// else the file's name.
std::string FrameText(const StackFrame& frame);

// What was learned of one rank.
struct RankObservation {
  int rank = 0;
  std::string host;
  std::optional<StackFrame> where;  // its main thread's innermost frame, when it dumped one
  std::optional<ProcFacts> facts;   // its process's state, when known
  std::string dump;                 // its stderr while the dump was awaited (the stacks)
};

struct Verdict {
  std::string why;                // as given: "no output for 300 s", "on request"
  std::string summary;            // "ranks 0,1,3 wait in ...; rank 2 on b is elsewhere: ..."
  std::vector<RankObservation> ranks;  // in rank order
  std::string line;               // "etrun: hang: <why>: ranks 0,1,3 wait in ...; rank 2 on b is elsewhere: ..."
  std::string waiting_in;         // the most common place ("" when no rank gave a stack)
  std::vector<int> odd_ranks;     // ranks whose stack is elsewhere than the most common place
  std::vector<std::string> odd_hosts;  // their hosts, each once, in rank order
};

// `why`: "no output for 300 s", "on request". Ranks in rank order.
Verdict JudgeHang(std::string_view why, std::vector<RankObservation> ranks);

// "0-3,5,7": rank numbers, runs joined.
std::string RankList(const std::vector<int>& ranks);

}  // namespace etrun::launcher::hang

#endif  // ETRUN_LAUNCHER_HANG_STACK_DUMP_H_
