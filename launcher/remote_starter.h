// RemoteStarter: how a rank starts on a host that is not this machine. Each remote host runs one
// agent (`etrun __agent`, launcher/agent/agent.h), reached over one connection, that starts, signals
// and reaps the host's ranks and sends back their output and exit status; RankSet holds such a
// rank as a RankHost and an id, never as a local process. The real starter lives below the
// launcher (launcher/agent/agent_starter.h: over SSH with libssh2, or a --remote-shell command such
// as kubectl exec or srun); main() builds it. Loop thread only.
#ifndef ETRUN_LAUNCHER_REMOTE_STARTER_H_
#define ETRUN_LAUNCHER_REMOTE_STARTER_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "discovery/start_route.h"
#include "events/event_log.h"
#include "events/exit_status.h"
#include "launcher/process/rank_host.h"
#include "launcher/process/spawner.h"

namespace etrun::launcher {

// What a rank learns on its own host as it starts there (discovery::ListenChoice::per_host):
// hosts differ from the launcher and from each other in addresses and interface names.
struct HostNetwork {
  bool resolve = false;                      // off: the variables are set as they are
  std::string launcher_address;              // where the host cannot tell (no SSH connection)
  std::vector<std::string> address_vars;     // set to the launcher address the host reaches
  std::vector<std::string> interface_vars;   // set to the host's interface toward that address
  std::string require_interface;             // --network-interface: must exist on the host
};

// One rank to run on another host.
struct RemoteRank {
  std::string host;
  std::string cwd;                // changed to there first (failure ignored)
  std::vector<std::string> env;   // "K=V", set over the host's login environment
  std::vector<std::string> argv;  // the command
  double grace_s = 5;             // SIGTERM to SIGKILL when the rank is stopped
  HostNetwork network;
  GpuShare gpus;                  // counted and handed out on the host
  // How its host's agent starts (discovery/start_route.h): the host's own route (a node of
  // another Slurm allocation, a pool's host) or else the job's (--remote-shell, its allocation's
  // step); an empty command: SSH. RankLauncher chooses; the starter takes it as it is.
  discovery::StartRoute start;
};

class RemoteStarter {
 public:
  virtual ~RemoteStarter() = default;
  // The runtime's loop, rank set and events file, before the first remote rank starts, and what a
  // stop signal to etrun does (`stop`: called when a cluster signals the job's own steps, as
  // Slurm's preemption does); Detach() closes every host's connection (the agents stop what still
  // runs there and exit) and forgets them.
  virtual void Attach(boost::asio::io_context* io, RankHostEvents* events, events::EventLog* log,
                      std::function<void(int sig)> stop) = 0;
  virtual void Detach() = 0;
  // Sets spec->remote_host to `rank`'s host agent (its connection started on first use) and
  // spec->remote_command to what the agent runs. Returns false and sets *err when it cannot
  // (e.g. a remote shell that cannot be started); nothing is left started.
  virtual bool Plan(const RemoteRank& rank, LaunchSpec* spec, std::string* err) = 0;
  // Whether a rank on `host` that ended with `status` (not success) ended because the host could
  // not be reached (its connection failed or was lost, its agent went silent), not by itself.
  virtual bool Unreachable(const std::string& host, const ExitStatus& status) const = 0;
  // Runs `command` (POSIX sh) on `host` through its agent, output discarded, not waited for;
  // best effort (fencing a lost host's peers: launcher/fence.h). False when the host has no
  // agent up.
  virtual bool RunDetached(const std::string& host, const std::string& command) = 0;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_REMOTE_STARTER_H_
