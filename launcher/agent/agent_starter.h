// AgentStarter: the RemoteStarter of etrun's remote ranks. Each remote host gets one agent
// (agent.h) on its first rank, reached over one connection: SSH (libssh2, launcher/ssh/ssh_host.h)
// or, with a route (RemoteRank::start: --remote-shell, the allocation's step, or a host's own: a
// node of another cluster allocation, a pool's host), one run of that command
// (launcher/ssh/remote_shell.h). The
// connection runs the bootstrap (agent_bootstrap.h), which brings this etrun along when the host
// has none. Every later rank on the host, signal and fence is a frame to that agent
// (agent_link.h). Loop thread only; must outlive the job's ranks.
#ifndef ETRUN_LAUNCHER_AGENT_AGENT_STARTER_H_
#define ETRUN_LAUNCHER_AGENT_AGENT_STARTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/agent/agent_link.h"
#include "launcher/job_config.h"
#include "launcher/remote_starter.h"
#include "launcher/ssh/ssh_host.h"

namespace etrun::launcher::agent {

class AgentStarter : public RemoteStarter {
 public:
  // Reads the SSH flags, --lost-host-timeout and --grace-period of `config`, which must outlive
  // the starter. `environment` is what remote shells run with, less CUDA_VISIBLE_DEVICES (this
  // machine's GPUs). A rank's route (RemoteRank::start) says how its host's agent starts: a route
  // of a cluster kind's is that cluster's step (its messages say so), and the job's own
  // allocation's agents pass the cluster's SIGTERM on.
  // `image` (may be null: hosts must have the agent) is what hosts without one get; it must
  // outlive the starter.
  AgentStarter(const JobConfig& config, std::vector<std::string> environment, AgentImage* image);
  ~AgentStarter() override;

  void Attach(boost::asio::io_context* io, RankHostEvents* events, events::EventLog* log,
              std::function<void(int sig)> stop) override;
  void Detach() override;
  bool Plan(const RemoteRank& rank, LaunchSpec* spec, std::string* err) override;
  bool Unreachable(const std::string& host, const ExitStatus& status) const override;
  bool RunDetached(const std::string& host, const std::string& command) override;

  // The hosts with an agent link so far.
  int hosts() const { return static_cast<int>(hosts_.size()); }

 private:
  struct Host {
    std::unique_ptr<SshHost> ssh;  // over SSH; null through a remote shell
    std::unique_ptr<AgentLink> link;
    bool ssh_connection = false;   // ranks can read the launcher address from SSH_CONNECTION
  };
  Host* Open(const RemoteRank& rank);

  const JobConfig& config_;
  std::vector<std::string> environment_;
  boost::asio::io_context* io_ = nullptr;
  RankHostEvents* events_ = nullptr;
  events::EventLog* log_ = nullptr;
  std::function<void(int sig)> stop_;
  AgentImage* image_;
  std::map<std::string, Host> hosts_;
  // Links that were lost and replaced by a new connection to the same host: kept until Detach
  // (the rank set may still name them) and asked by Unreachable for a short while.
  std::vector<Host> replaced_;
};

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_AGENT_STARTER_H_
