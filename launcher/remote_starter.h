// RemoteStarter: how a rank starts on a host that is not this machine. A remote rank is a local
// stub process that runs the rank's command there and exits with its status, so RankSet treats
// it like any rank (pipes, process group, signals, guardian). The real starters live below the
// launcher (launcher/ssh/ssh_starter.h: libssh2, or a --remote-shell command such as kubectl
// exec); main() builds the one the flags ask for. A Slurm `srun` starter is another of these.
// Loop thread only.
#ifndef ETRUN_LAUNCHER_REMOTE_STARTER_H_
#define ETRUN_LAUNCHER_REMOTE_STARTER_H_

#include <string>
#include <vector>

#include "events/exit_status.h"

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
  // The wrapper's last line on stderr is the rank's exit status (remote_shell.h's ExitRecord), for
  // remote shells that do not pass it on faithfully (srun exits 0 when its node fails).
  bool exit_record = false;
  // Its host's own remote-shell template ({host}), instead of the job's (--remote-shell, SSH):
  // a node of another Slurm allocation. "": the job's.
  std::string remote_shell;
};

class RemoteStarter {
 public:
  virtual ~RemoteStarter() = default;
  // Sets *argv (program first) to the local stub process that runs `rank`. Returns false and sets
  // *err when it cannot (e.g. the host's connection cannot be set up); nothing is left started.
  virtual bool StubArgv(const RemoteRank& rank, std::vector<std::string>* argv, std::string* err) = 0;
  // Whether a rank on `host` that ended with `status` (not success) ended because the host could
  // not be reached (its connection failed or was lost, the remote shell failed), not by itself.
  virtual bool Unreachable(const std::string& host, const ExitStatus& status) const = 0;
  // Runs `command` (POSIX sh) on `host` over the way its ranks start, output discarded, not
  // waited for; best effort (fencing a lost host: launcher/fence.h). Returns false when it
  // cannot be tried (no connection to the host; a starter that has no such way).
  virtual bool RunDetached(const std::string& host, const std::string& command) {
    (void)host, (void)command;
    return false;
  }
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_REMOTE_STARTER_H_
