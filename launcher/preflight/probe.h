// Pre-flight probes between a job's hosts (--preflight): each host listens on a port of its own
// (ProbeServer) and measures its way to the others (ProbePeers): the connect, round trips and,
// toward some of them, how fast a short stream goes. Real sockets with deadlines, etrun-smoke's
// (smoke/socket.h): a peer that does not answer is an error within the timeout, never a hang.
// A host's agent runs both there; the launcher runs them for its own machine.
#ifndef ETRUN_LAUNCHER_PREFLIGHT_PROBE_H_
#define ETRUN_LAUNCHER_PREFLIGHT_PROBE_H_

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "smoke/socket.h"

namespace etrun::launcher::preflight {

// A pre-flight's key: 32 lowercase hex digits from the kernel's random source, new for each run.
// The launcher gives it to every host of the run over the connection it holds to that host's
// agent; a probe proves it knows the key before its listener answers anything.
constexpr size_t kProbeKeyLength = 32;
std::string NewProbeKey();
bool IsProbeKey(std::string_view key);

// A host's listener for its peers' probes, answered on a thread of its own until destroyed. On
// each connection the peer first sends the run's key (kProbeKeyLength bytes); a connection that
// sends anything else, or not all of it within kKeyWithin, is closed unanswered. Then it sends
// 'r' and gets 'r' back (a round trip), as often as it likes; or 'b', a stream of bytes ended by
// its shutdown(SHUT_WR), and gets the stream's length back as 8 bytes, little-endian; then the
// connection ends.
class ProbeServer {
 public:
  static constexpr std::chrono::milliseconds kKeyWithin{2000};

  ProbeServer() = default;
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;

  // Listens on every address, on a free port, for probes that know `key` (IsProbeKey). False
  // with *err when it cannot.
  bool Start(const std::string& key, std::string* err);
  int port() const { return port_; }

 private:
  void Serve();

  std::string key_;
  smoke::Fd listener_;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

struct PeerTarget {
  std::string host;     // the peer's name in the job
  std::string ip;       // where its ProbeServer listens: a dotted quad
  int port = 0;
  bool stream = false;  // measure the bandwidth toward it too
};

struct PeerResult {
  std::string host;
  std::string where;        // "ip:port"
  std::string error;        // why it was not reached, or the stream failed; "" when all went well
  double connect_ms = -1;
  double rtt_ms = -1;       // the least of the round trips
  double mbit_s = -1;       // the stream's rate; -1 when none was made, 0 when it failed
  bool ok() const { return error.empty(); }
  // Connected and answered its round trips (a failed stream still reached it).
  bool reached() const { return connect_ms >= 0 && rtt_ms >= 0; }
};

struct ProbeLimits {
  std::chrono::milliseconds timeout{2000};    // each connect and each answer
  std::chrono::milliseconds stream_for{150};  // a stream sends this long at most...
  size_t stream_bytes = size_t{64} << 20;     // ...or this much, whichever comes first
  int round_trips = 3;
};

// Probes every target at once (a thread each, 64 at a time at most), the round trips first, then
// the streams, all at once too (a link's rate, not the host's share of a crowd), each connection
// opened with the run's `key`. One result per target, in order. `cancel`, when set, ends it
// between batches (the rest: "cancelled").
std::vector<PeerResult> ProbePeers(const std::vector<PeerTarget>& targets, const std::string& key,
                                   const ProbeLimits& limits, const std::atomic<bool>* cancel = nullptr);

// One "<host> <ip> <port> <0|1: stream>" line per target, and back; false for anything else.
std::string PeerTargetsText(const std::vector<PeerTarget>& targets);
bool ParsePeerTargets(std::string_view text, std::vector<PeerTarget>* targets);

// One line per result, and back: "peer <host> <where> <connect_ms> <rtt_ms> <mbit_s>", then
// " error <text>" when it failed. Parse is false for a line it cannot read.
std::string PeerResultLine(const PeerResult& result);
bool ParsePeerResultLine(std::string_view line, PeerResult* result);

}  // namespace etrun::launcher::preflight

#endif  // ETRUN_LAUNCHER_PREFLIGHT_PROBE_H_
