// The agent's stream: what etrun's launcher and a host's agent (`etrun __agent`, agent.h) say to
// each other over the one byte stream between them (an SSH channel, a --remote-shell command's
// stdin and stdout, a Slurm step's). Before the frames, the agent's side is text: whatever the
// login prints, then one marker line; after it, both directions are frames:
//   op (1 byte), id (uint32, little-endian), length (uint32, little-endian), `length` bytes.
// The id names a rank process (the launcher's RankSet id); 0 where an op has none.
// Pure; any thread.
#ifndef ETRUN_LAUNCHER_AGENT_WIRE_H_
#define ETRUN_LAUNCHER_AGENT_WIRE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "events/exit_status.h"
#include "launcher/process/spawner.h"
#include "launcher/remote_starter.h"

namespace etrun::launcher::agent {

// The agent's first line on its stdout once it runs (followed by its build id and a newline);
// frames follow it.
inline constexpr char kHelloLine[] = "\036etrun-agent ";
// The bootstrap's line when the host has no usable agent: the launcher then sends the binary's
// bytes, and the marker line comes once it runs.
inline constexpr char kNeedLine[] = "\036etrun-need";

enum Op : char {
  // launcher -> agent
  kStart = 'S',   // data: RankStartText, the rank the agent starts itself
  kSignal = 'K',  // data: the signal number, decimal; to the rank's process group
  kRun = 'R',     // data: a command run detached, output discarded (fencing)
  kPing = 'P',    // the launcher is alive
  kGpus = 'G',    // data: GpuShareText; the next kStart of this id gets that share of the host's GPUs
  kProbe = 'Q',   // the rank's process facts, please (answered with kRankFacts)
  kCheck = 'C',   // data: the pre-flight's key, '\n', RankStartText of the host's first rank; id: its slots (kChecked)
  kPeers = 'W',   // data: preflight::PeerTargetsText, the peers to probe (kChecked); "": the pre-flight is over
  // agent -> launcher
  kFacts = 'H',   // data: "key=value" lines (hostname=, pid=): follows the marker line
  kRankFacts = 'F',  // data: the rank's process facts (launcher/hang/proc_facts.h), as kProbe asked
  kStdout = 'O',  // data: bytes of the rank's stdout
  kStderr = 'E',  // data: bytes of its stderr
  kExit = 'X',    // data: ExitText; the rank's output is complete
  kAlive = 'A',   // the agent is alive
  kTerm = 'T',    // the agent got SIGTERM (Slurm signalling the step)
  kChecked = 'Y', // data: "self\n" and preflight::SelfCheckText, or "peers\n" and PeerResultLines
  kNewline = 'N', // data: "\n"; nothing to do (AppendFlushedFrame)
};

struct Frame {
  char op = 0;
  uint32_t id = 0;
  std::string data;
};

inline constexpr size_t kFrameHeader = 9;
// No frame is longer: rank output comes in reads of at most 64 KiB, commands are short.
inline constexpr uint32_t kMaxFrameData = 16 << 20;

// Appends one frame to *out.
void AppendFrame(std::string* out, char op, uint32_t id, std::string_view data);

// AppendFrame, then, unless the frame's last byte is a newline, a kNewline frame, whose is: a
// transport that forwards whole lines only (Slurm's slurmstepd line-buffers a step's stdout)
// passes the frame on at once instead of holding it until a newline comes. The agent writes
// every frame so.
void AppendFlushedFrame(std::string* out, char op, uint32_t id, std::string_view data);

// "c<code>" or "s<signal>", with "@<us>" when `at_us` >= 0: when the rank's process ended, in
// microseconds of the agent's clock (its facts' clock_us says where that clock stood as it said
// hello; microseconds, as a stop's way to a rank and its end take less than a millisecond), and
// back; false for anything else. *at_us is -1 when the text has no time.
std::string ExitText(const ExitStatus& status, int64_t at_us = -1);
bool ParseExitText(std::string_view text, ExitStatus* status, int64_t* at_us = nullptr);

// "<gpus_per_rank> <ranks_per_gpu> <local_rank>", and back; false for anything else.
std::string GpuShareText(const GpuShare& share);
bool ParseGpuShare(std::string_view text, GpuShare* share);

// A rank to start (kStart's data): all the agent needs to exec the rank itself, so no shell runs
// for it and no value of it stands on any command line there. RankStartText writes it as items,
// each a tag byte, its text and a NUL: 'C' the directory, 'E' one "K=V", 'A' one argv word, and
// its host's network facts: 'R' to resolve them, 'L' the launcher address, 'S' read
// SSH_CONNECTION, 'V' an address variable, 'I' an interface variable, 'N' the interface the host
// must have. Variables and argv words cannot hold a NUL (execve's cannot), so nothing is escaped.
struct RankStart {
  std::string cwd;                // changed to first; failure ignored
  std::vector<std::string> env;   // "K=V", over the agent's (its login's) environment
  std::vector<std::string> argv;  // argv[0] looked up on the rank's PATH
  HostNetwork network;
  bool ssh_connection = false;    // the agent runs under SSH: SSH_CONNECTION names the launcher
};
std::string RankStartText(const RankStart& start);
// Returns false and sets *err for text RankStartText did not write (an unknown or unterminated
// item, a variable without a name, no directory, no command).
bool ParseRankStart(std::string_view text, RankStart* start, std::string* err);

// Frames out of a byte stream fed in pieces.
class FrameReader {
 public:
  // Calls `on_frame` for every complete frame in order. Returns false (and stops) at a frame
  // longer than kMaxFrameData: the stream is not the agent's.
  bool Feed(std::string_view data, const std::function<void(Frame&)>& on_frame);
  size_t pending() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_WIRE_H_
