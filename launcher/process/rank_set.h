// RankSet: owns every rank process of a job and is the only place that reads their output,
// signals their process groups and reaps them (after ninja's SubprocessSet). Output is split into
// pieces, prefixed and queued on the OutputSink; reading pauses while the sink is congested, so
// nothing is dropped and memory stays bounded. A rank is *finished* once its process has exited
// and both pipes reached EOF (or were given up after a grace period); its process group is then
// SIGKILLed so no child of it outlives it, and it is queued for NextFinished (after ninja's
// SubprocessSet::NextFinished): its owner hears of it only after the reap or read that found it
// has returned, never from inside it. A finished rank is forgotten at once (its buffers freed;
// callers keep what they need from the Finished record), so a long elastic job that restarts
// ranks many times holds memory for its live ranks only.
// A supervisor process (LaunchSpec::supervisor, e.g. mpirun) is signalled alone, not as a group,
// and is not given to the guardian.
// A rank on another host (LaunchSpec::remote_host) is a process of that host's agent: RankSet asks
// the agent to start and signal it, and the agent reports its output and exit (RankHostEvents),
// which go the same way as a local rank's. Driver thread only (the io_context's thread).
#ifndef ETRUN_LAUNCHER_PROCESS_RANK_SET_H_
#define ETRUN_LAUNCHER_PROCESS_RANK_SET_H_

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "events/exit_status.h"
#include "launcher/output/line_splitter.h"
#include "launcher/process/rank_host.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {

class Guardian;
class OutputSink;

// Turns one output stream's bytes into the text to write, instead of RankSet's `[rank]<stdout>:`
// prefixing: e.g. mpirun's tagged fragments into whole tagged lines (launcher/mpi/mpi_output.h).
// One per stream.
class LineFramer {
 public:
  using Emit = std::function<void(std::string_view text)>;
  virtual ~LineFramer() = default;
  // Feeds bytes as read; calls `emit` with ready text.
  virtual void Feed(std::string_view data, const Emit& emit) = 0;
  // End of stream: emits what is pending.
  virtual void Finish(const Emit& emit) = 0;
};

struct RankOutput {
  int console_out = -1;   // OutputSink destinations for prefixed lines
  int console_err = -1;
  int file_out = -1;      // raw copies (--output-filename); -1 for none
  int file_err = -1;
  bool timestamps = false;
  TimestampFormat timestamp_format = TimestampFormat::kAsctime;
  // When set, makes each stream's framer (its argument: whether the stream is stderr), which
  // replaces the `[rank]` prefixing (--mpi: the streams of mpirun, whose ranks' output is
  // already tagged).
  std::function<std::unique_ptr<LineFramer>(bool is_stderr)> framer;
};

class RankSet : public RankHostEvents {
 public:
  struct Finished {
    int id;        // as returned by Start
    int rank;      // the label its output carries
    std::string host;
    pid_t pid;
    ExitStatus status;
    int local_rank = -1;  // its slot on `host`, as started; -1: none
    // Its process ended after etrun sent it a stop signal (SIGTERM, SIGKILL, SIGINT, SIGHUP), by
    // exited_at (a remote rank's as its agent saw it): an exit 0 then may be its answer to the
    // stop rather than the end of its work.
    bool stopped = false;
    // When its process ended (not when its output closed): what orders a cascade's failures.
    std::chrono::steady_clock::time_point exited_at;
    std::string last_stderr;  // its last whole line on stderr ("" when none), at most 300 bytes
  };
  // A slot of the job: (host, local rank).
  using Slot = std::pair<std::string, int>;

  // `guardian` may be null. `drain_grace` bounds how long output pipes may stay open after a
  // rank's process exited (held by its children) before its group is killed.
  RankSet(boost::asio::io_context* io, Spawner* spawner, OutputSink* sink, Guardian* guardian,
          std::chrono::milliseconds drain_grace);
  ~RankSet() override;  // SIGKILLs and reaps whatever local rank is still alive.
  RankSet(const RankSet&) = delete;
  RankSet& operator=(const RankSet&) = delete;

  // Starts one rank on `host` in its slot `local_rank` (-1: a process of no slot, as mpirun);
  // `rank` labels its output. Returns false and sets *err if it could not be started (nothing of
  // it is left running). *id (if given) identifies this process from now on; ids are never
  // reused.
  bool Start(int rank, const std::string& host, int local_rank, const LaunchSpec& spec,
             const RankOutput& output, std::string* err, int* id = nullptr);

  // Waits for every rank started since the last call to have exec'd (Spawner::AwaitStart).
  // Returns false and sets *err (naming the rank) for the first that could not; that rank exits
  // 127 and is reaped as usual.
  bool AwaitExecs(std::string* err);

  // The errno behind the latest Start or AwaitExecs that returned false (the spawner's: a pipe,
  // the fork, the exec), 0 when no system call failed there; ClearStartErrno resets it, so a
  // caller can tell whether a failure of its own came from here.
  int start_errno() const { return start_errno_; }
  void ClearStartErrno() { start_errno_ = 0; }

  // Reaps exited ranks; call on SIGCHLD (spurious calls are harmless).
  void Reap();

  // Sends `sig` to the process group of every unfinished rank.
  void SignalAll(int sig);

  // Sends `sig` to the process group of one rank, if it is unfinished.
  void Signal(int id, int sig);

  // Ranks started and not yet handed out by NextFinished.
  int active() const { return active_; }

  // The process id of an unfinished rank (its group id too); -1 once it finished.
  pid_t pid(int id) const;

  // Ranks not yet finished, for `etrun status`.
  struct Running {
    int id;
    int rank;
    std::string host;
    pid_t pid;
    std::chrono::steady_clock::time_point started;
    int local_rank = -1;
    int starts = 1;  // processes started in its slot so far, this one included
  };
  std::vector<Running> Unfinished() const;

  // The job's rank table by slot: every slot with ranks its owner has not yet been handed by
  // NextFinished, and their ids, oldest first (a slot's rank still exiting beside its next is
  // rare: a policy starts a slot again once it heard of the end). Policies ask this; they keep
  // no table of their own.
  const std::map<Slot, std::vector<int>>& slots() const { return slots_; }
  // Processes ever started in a slot (0: none).
  int starts(const std::string& host, int local_rank) const;

  // RankHostEvents: a remote rank's output, end and process facts, from its host's agent.
  bool OnRemoteOutput(RankHost* from, int id, bool is_stderr, std::string_view data) override;
  void OnRemoteExit(RankHost* from, int id, const ExitStatus& status,
                    std::chrono::steady_clock::time_point exited_at) override;
  void OnHostLost(RankHost* from, std::string_view line, const ExitStatus& status) override;
  void OnRemoteFacts(RankHost* from, int id, std::string_view facts) override;
  void OnRemoteCheck(RankHost* from, std::string_view text) override;

  // For the hang watchdog (launcher/hang/hang_watch.h). When the job last showed life: a rank
  // printed (any bytes), started or finished.
  std::chrono::steady_clock::time_point last_activity() const { return last_activity_; }
  // Whether reading the ranks' output is paused because the console is congested: their
  // silence then says nothing about them.
  bool reading_paused() const { return !paused_.empty() || !paused_hosts_.empty(); }
  // While set, every piece of any rank's output (as read, before prefixing) is also given to
  // `tap`; unset (null) it costs nothing.
  using OutputTap = std::function<void(int id, bool is_stderr, std::string_view data)>;
  void set_output_tap(OutputTap tap) { output_tap_ = std::move(tap); }
  // Asks the agent of unfinished remote rank `id` for its process facts, which come back through
  // the facts tap (text, launcher/hang/proc_facts.h); false for a local or finished rank.
  bool ProbeRemote(int id);
  using FactsTap = std::function<void(int id, std::string_view facts)>;
  void set_facts_tap(FactsTap tap) { facts_tap_ = std::move(tap); }

  // Takes the next finished rank, in finishing order. Returns false when none is queued.
  bool NextFinished(Finished* finished);

  // Called (posted to the loop) when a finished rank is queued and the queue was empty: drain it
  // with NextFinished then.
  void set_on_finished(std::function<void()> callback) { on_finished_ = std::move(callback); }
  // Where hosts' pre-flight answers go (RankHostEvents::OnRemoteCheck), a lost host's too.
  void set_on_check(std::function<void(RankHost*, std::string_view)> callback) { on_check_ = std::move(callback); }

 private:
  struct Stream;
  struct Rank;

  void Arm(Stream* stream);
  void OnRead(Stream* stream, const boost::system::error_code& ec, size_t n);
  void Emit(Stream* stream, std::string_view data);
  void CloseStream(Stream* stream);
  void Resume();
  void OnDrainTimer(Rank* rank, int stage);
  void MaybeFinish(Rank* rank);
  void Forget(int id);
  // Takes a started rank into the table: its id (also *id, if given), its slot.
  int Adopt(std::unique_ptr<Rank> r, int* id);
  void Kill(const Rank& rank, int sig) const;
  void NoteStop(Rank* rank, int sig);
  static bool IsStop(int sig);

  boost::asio::io_context* io_;
  Spawner* spawner_;
  OutputSink* sink_;
  Guardian* guardian_;
  std::chrono::milliseconds drain_grace_;
  std::map<int, std::unique_ptr<Rank>> ranks_;  // unfinished ranks (and just-finished ones)
  std::map<Slot, std::vector<int>> slots_;        // by slot: ranks not yet handed out
  std::map<Slot, int> starts_;                    // by slot: processes ever started
  int next_id_ = 0;
  std::vector<int> unawaited_;  // ids whose exec has not been awaited
  int start_errno_ = 0;
  std::vector<Stream*> paused_;
  std::vector<RankHost*> paused_hosts_;  // agents that stopped reading for the sink
  std::string scratch_;  // formatted output of one read, reused
  int active_ = 0;
  std::deque<Finished> finished_;  // not yet handed out
  std::function<void()> on_finished_;
  std::function<void(RankHost*, std::string_view)> on_check_;
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  OutputTap output_tap_;
  FactsTap facts_tap_;
  std::shared_ptr<bool> alive_;  // lets callbacks posted from the writer thread see we are gone
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_RANK_SET_H_
