// RankHost: a rank that runs on another host, as RankSet holds it. Each remote host runs one agent
// (launcher/agent/agent.h) that starts, signals and reaps the host's ranks and sends back their
// output and exit status; RankSet sees that agent's link as a RankHost and the rank as an id,
// never as a local process, and hears back through RankHostEvents. Which host runs what and how
// its agent is reached is the RemoteStarter's (launcher/remote_starter.h). Loop thread only.
#ifndef ETRUN_LAUNCHER_PROCESS_RANK_HOST_H_
#define ETRUN_LAUNCHER_PROCESS_RANK_HOST_H_

#include <chrono>
#include <string>
#include <string_view>

#include "events/exit_status.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {

class RankHost;

// What a host's agent reports of its ranks (RankSet implements it). Which ranks a host runs is
// RankSet's to know (its rank table): reports of a rank that `from` does not run, or that ended,
// are dropped. Loop thread only.
class RankHostEvents {
 public:
  virtual ~RankHostEvents() = default;
  // Output of the rank with RankSet id `id`, as read there. Returns false when the caller should
  // stop reading until RankHost::Resume (the console is congested).
  virtual bool OnRemoteOutput(RankHost* from, int id, bool is_stderr, std::string_view data) = 0;
  // The rank ended (its output is complete): its status there, and when its process ended, on
  // this machine's steady clock (the agent's time of it, translated).
  virtual void OnRemoteExit(RankHost* from, int id, const ExitStatus& status,
                            std::chrono::steady_clock::time_point exited_at) = 0;
  // `from` is gone (lost, or its stream closed): every rank it still runs ends with `status`,
  // the first of them (the oldest) saying `line` on its stderr, so a host's loss is one line.
  virtual void OnHostLost(RankHost* from, std::string_view line, const ExitStatus& status) = 0;
  // The process facts of rank `id` there (launcher/hang/proc_facts.h's text), as RankHost::
  // ProbeRank asked.
  virtual void OnRemoteFacts(RankHost* from, int id, std::string_view facts) = 0;
  // The agent's answer to a pre-flight request (RankHost::CheckHost, CheckPeers): "self\n" and
  // its own checks, or "peers\n" and its probes (launcher/preflight/'s texts); "lost\n" and the
  // line that says why, when the host is gone (then, or later, before it answered).
  virtual void OnRemoteCheck(RankHost* from, std::string_view text) = 0;
};

// A remote host's agent, as RankSet sees it. Loop thread only.
class RankHost {
 public:
  virtual ~RankHost() = default;
  // Asks the agent to run `command` (POSIX sh) as rank `id`: in its own process group, with
  // CUDA_VISIBLE_DEVICES set to its share of the host's GPUs when `gpus` is enabled, output and
  // exit reported through RankHostEvents. A host that is gone reports it exited 255.
  virtual void StartRank(int id, const std::string& command, const GpuShare& gpus) = 0;
  // Sends `sig` to the process group of rank `id` there.
  virtual void SignalRank(int id, int sig) = 0;
  // Asks the agent for rank `id`'s process facts (state, wait channel, command), which come
  // back through RankHostEvents::OnRemoteFacts; nothing comes for a rank that ended.
  virtual void ProbeRank(int id) = 0;
  // A pre-flight of the host (launcher/preflight/): `rank_start` is what its first rank would be
  // (the agent checks with that rank's environment, counts the GPUs its `slots` need, and opens a
  // listener for its peers' probes, which prove they know `key`, the run's NewProbeKey);
  // `peers` the probes it is to make (PeerTargetsText, with the same key), "" when the pre-flight
  // is over. Answers come through RankHostEvents::OnRemoteCheck.
  virtual void CheckHost(const std::string& key, const std::string& rank_start, int slots) = 0;
  virtual void CheckPeers(const std::string& peers) = 0;
  // Reading resumes after OnRemoteOutput returned false.
  virtual void Resume() = 0;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_RANK_HOST_H_
