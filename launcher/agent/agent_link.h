// AgentLink: the launcher's end of one remote host's agent (agent.h), over whatever carries the
// agent's stdin, stdout and stderr (an SSH channel, a --remote-shell command, a Slurm step:
// AgentTransport). It is that host's RankHost: ranks to start and signals become frames to the
// agent; the agent's frames become each rank's output and exit (RankHostEvents). Before the
// agent runs, the stream is the login's text: the link skips it to the agent's marker line, and
// when the bootstrap says the host has no usable agent it sends the launcher's own binary
// (agent_bootstrap.h) over the same stream.
// Liveness: once the agent is up (the clock starts then, not while a login runs the user's rc
// files), a host whose agent says nothing is judged by a SilenceJudge (silence.h): lost after
// --lost-host-timeout when its link is dead (the transport's kernel stopped acknowledging, or,
// on a pipe, the heartbeats' rhythm says so), given up to --unresponsive-host-timeout when it is
// only busy (one line and an event say it is late). The link pings the agent every second, so an
// agent that loses its launcher stops its ranks, and a TCP transport always has data in flight
// for its kernel to acknowledge. Silence while the launcher is not reading (its console is
// congested) or its own loop came late is not the host's. A lost link, or one whose stream closes, ends every rank it still runs with exit code
// 255 (kHostLost), and its first rank's stderr says why, in one line for the host. Loop thread
// only.
#ifndef ETRUN_LAUNCHER_AGENT_AGENT_LINK_H_
#define ETRUN_LAUNCHER_AGENT_AGENT_LINK_H_

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/agent/silence.h"
#include "launcher/agent/wire.h"
#include "launcher/remote_starter.h"

namespace etrun::launcher::agent {

// The exit code of a rank whose host was lost or could not be reached (ssh's convention).
inline constexpr int kHostLost = 255;

// The byte streams to one agent. The link owns the descriptors from Begin on.
struct AgentTransport {
  int to_agent = -1;      // its stdin (write end)
  int from_agent = -1;    // its stdout (read end)
  int agent_stderr = -1;  // its stderr and the login's (read end); -1: none
  pid_t pid = -1;         // a local process that carries them (a remote shell), reaped by the link
  // The kernel's word on a TCP transport's far end (SshHost::PeerAcking): whether it acknowledged
  // what was sent within the window; null for a pipe, where there is no kernel to ask.
  std::function<std::optional<bool>(std::chrono::milliseconds window)> peer_acking{};
};

// The agent the launcher brings to hosts that have none usable (etrun-agent): its bytes as the
// running etrun holds them (embedded in it when it was built: an etrun upgraded on disk during a
// job still brings the build it runs), their SHA-256, by which hosts verify every copy before they
// run it, and the path of the same agent beside this etrun, where a host that shares the
// launcher's files has it too. Loop thread only.
class AgentImage {
 public:
  // `bytes` must outlive the image (static storage: cli/agent_image.h).
  AgentImage(std::string_view bytes, std::string beside) : bytes_(bytes), beside_(std::move(beside)) {}
  std::string_view bytes() const { return bytes_; }
  const std::string& beside() const { return beside_; }
  // Hex; computed on first need (only a job with remote hosts pays for it).
  const std::string& sha256();

 private:
  std::string_view bytes_;
  std::string beside_;
  std::string sha256_;
};

class AgentLink : public RankHost {
 public:
  enum class Via { kSsh, kRemoteShell, kClusterStep };  // for messages
  struct Options {
    std::string host;
    Via via = Via::kSsh;
    std::string step;            // kClusterStep: the step's program ("srun"), for messages
    std::string label;           // how the host is reached, for messages: "ssh h1:22"
    double lost_after_s = 3;     // --lost-host-timeout, from the agent's start
    double unresponsive_after_s = 20;  // --unresponsive-host-timeout: a busy host's bound
    // Called once per silence when the host is late but not lost (the launcher says so).
    std::function<void(const std::string& host, double silent_s, double bound_s)> on_late;
    double start_timeout_s = 60; // until the agent is up
    // A SIGTERM the agent got (Slurm signalled the job's steps): stops the job as one to etrun
    // does, before anything the agent sent after it (its ranks' exits) is taken in. Null: ignored.
    std::function<void()> on_term;
    AgentImage* image = nullptr; // sent when the host has none; null: never
    // Written to the stream before anything else: the bootstrap, for a remote shell whose
    // command is `sh -s` (one line, which every sh reads whole before running any of it, so
    // nothing of it is left for the agent to read). "": none (over SSH the command carries it).
    std::string script;
  };

  AgentLink(boost::asio::io_context* io, RankHostEvents* events, Options options);
  ~AgentLink() override;
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Starts talking over `transport`.
  void Begin(AgentTransport transport);
  // The transport could not be started: the link is lost with `why` from the start.
  void Fail(const std::string& why);

  // RankHost.
  void StartRank(int id, const std::string& command, const GpuShare& gpus) override;
  void SignalRank(int id, int sig) override;
  void ProbeRank(int id) override;
  void CheckHost(const std::string& key, const std::string& rank_start, int slots) override;
  void CheckPeers(const std::string& peers) override;
  void Resume() override;

  // Runs `command` detached there (fencing). False when the agent is not up.
  bool RunDetached(const std::string& command);

  // Closes the stream: the agent stops what still runs and exits. Then Reap.
  void Close();
  // Reaps the transport's process (a remote shell), waiting for it until `until`, then killing it.
  void Reap(std::chrono::steady_clock::time_point until);

  bool up() const { return state_ == State::kUp; }
  // Failed or lost: its ranks' 255s mean the host could not be reached.
  bool lost() const { return state_ == State::kLost; }
  std::chrono::steady_clock::time_point lost_at() const { return lost_at_; }
  const std::string& host() const { return options_.host; }
  // The agent's facts ("key=value" lines), once up.
  const std::string& facts() const { return facts_; }

 private:
  enum class State { kIdle, kStarting, kUp, kLost, kClosed };

  void Read();
  void OnData(const char* data, size_t n);
  void OnPreamble(const char* data, size_t n);
  void OnFrame(Frame& frame);
  void ReadStderr();
  void Send(std::string bytes);
  void SendImage();
  void Flush();
  void Tick();
  // Judges the agent's silence at `now` (SilenceJudge); true when the host was declared lost.
  bool Judge(std::chrono::steady_clock::time_point now);
  // Ends the link and every rank it runs, the first with a line on its stderr: "etrun: error:
  // <label>: <why>", or `why` itself when it is a `whole_line`.
  void Lose(const std::string& why, bool whole_line = false);
  void OnStreamEnd(int waited);
  void CloseStreams();
  void ReapLater(int attempts);

  boost::asio::io_context* io_;
  RankHostEvents* events_;
  Options options_;
  State state_ = State::kIdle;
  std::optional<boost::asio::posix::stream_descriptor> to_;
  std::optional<boost::asio::posix::stream_descriptor> from_;
  std::optional<boost::asio::posix::stream_descriptor> err_;
  pid_t pid_ = -1;
  std::function<std::optional<bool>(std::chrono::milliseconds)> transport_peer_;
  std::optional<int> shell_status_;  // the remote shell's wait status, once reaped
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer reap_timer_;
  std::chrono::steady_clock::time_point began_;
  std::chrono::steady_clock::time_point last_heard_;
  std::chrono::steady_clock::time_point last_tick_;
  bool passed_ = false;       // the last tick came late and judged nothing
  SilenceJudge judge_;
  bool said_late_ = false;    // this silence was said late
  char buffer_[64 << 10];
  char err_buffer_[4096];
  std::string preamble_;      // the login's text before the marker
  std::string err_line_;      // a stderr line being read
  bool err_ended_ = false;    // stderr reached its end
  std::deque<std::string> last_errors_;  // the last stderr lines, for messages
  FrameReader reader_;
  bool paused_ = false;       // RankHostEvents asked to stop reading
  bool reading_ = false;
  // Writes: what waits, and the image being sent (written from its bytes in place).
  std::string script_;        // Options::script, until written
  std::string outgoing_;
  std::string in_flight_;
  bool image_queued_ = false;
  bool writing_ = false;
  std::string why_;           // why it was lost
  std::string lost_line_;     // and the line each of its ranks says it with
  std::chrono::steady_clock::time_point lost_at_;
  std::string facts_;
  // Where the agent's clock (its exit times) started, on ours; none before its facts came.
  std::optional<std::chrono::steady_clock::time_point> agent_epoch_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_AGENT_LINK_H_
