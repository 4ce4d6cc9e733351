// SshStarter: the RemoteStarter of etrun's remote ranks: over SSH (libssh2, one connection per
// host shared by its ranks: ssh_host.h, ssh_rank.h), or, with --remote-shell, through that
// command (remote_shell.h). Either way the rank's command runs in the same wrapper (RemoteCommand),
// which stops it when its channel closes. A rank may name its host's own template
// (RemoteRank::remote_shell: a node of another Slurm allocation). Loop thread only; must outlive
// the job's ranks.
#ifndef ETRUN_LAUNCHER_SSH_SSH_STARTER_H_
#define ETRUN_LAUNCHER_SSH_SSH_STARTER_H_

#include <map>
#include <string>
#include <vector>

#include "launcher/job_config.h"
#include "launcher/remote_starter.h"
#include "launcher/ssh/ssh_host.h"

namespace etrun::launcher {

// How long a command run through srun by RunDetached may take before it is killed.
inline constexpr int kDetachedTimeoutS = 30;

class SshStarter : public RemoteStarter {
 public:
  // Reads the SSH flags and --remote-shell of `config`, which must outlive the starter.
  explicit SshStarter(const JobConfig& config) : config_(config) {}

  bool StubArgv(const RemoteRank& rank, std::vector<std::string>* argv, std::string* err) override;
  bool Unreachable(const std::string& host, const ExitStatus& status) const override;
  // Over the host's SSH connection; through srun (etrun's template inside Slurm, or the user's) as
  // a background step bounded by kDetachedTimeoutS; not through other remote shells (each would
  // be another process to supervise), where it returns false.
  bool RunDetached(const std::string& host, const std::string& command) override;

  // The SSH connections opened so far.
  const SshHosts& hosts() const { return hosts_; }

 private:
  const JobConfig& config_;
  SshHosts hosts_;
  // Hosts whose ranks started through a template of their own (RemoteRank::remote_shell), and it.
  std::map<std::string, std::string> own_templates_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_SSH_STARTER_H_
