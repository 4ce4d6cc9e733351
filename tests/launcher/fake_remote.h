// FakeRemote: a RemoteStarter that starts nothing and records what it is asked. Built over a
// JobConfig it plans as AgentStarter does: it is itself the host of every remote rank (a RankHost
// that records the ranks it starts) and the rank's command is the agent's, SSH_CONNECTION read
// over SSH only (no --remote-shell for the job or the rank's host); built without one, Plan
// refuses. Every host it is asked about was unreachable unless the test sets `unreachable` to
// false; every RunDetached succeeds.
#ifndef ETRUN_TESTS_LAUNCHER_FAKE_REMOTE_H_
#define ETRUN_TESTS_LAUNCHER_FAKE_REMOTE_H_

#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "events/exit_status.h"
#include "launcher/agent/wire.h"
#include "launcher/job_config.h"
#include "launcher/process/rank_host.h"
#include "launcher/process/spawner.h"
#include "launcher/remote_starter.h"

namespace etrun::launcher {

class FakeRemote : public RemoteStarter, public RankHost {
 public:
  FakeRemote() = default;
  // `config` is read when a rank is planned, so a test may change it after construction; it must
  // outlive the fake.
  explicit FakeRemote(const JobConfig& config) : config_(&config) {}

  // RemoteStarter
  void Attach(boost::asio::io_context*, RankHostEvents*, events::EventLog*,
              std::function<void(int)>) override {}
  void Detach() override {}
  bool Plan(const RemoteRank& rank, LaunchSpec* spec, std::string* err) override {
    planned.push_back(rank);
    if (config_ == nullptr) {
      *err = "not used";
      return false;
    }
    spec->remote_host = this;
    spec->remote_command =
        agent::RankStartText({rank.cwd, rank.env, rank.argv, rank.network, rank.start.command.empty()});
    return true;
  }
  bool Unreachable(const std::string& host, const ExitStatus&) const override {
    asked.push_back(host);
    return unreachable;
  }
  bool RunDetached(const std::string& host, const std::string& command) override {
    detached.push_back(host + ": " + command);
    return true;
  }

  // RankHost
  void StartRank(int id, const std::string&, const GpuShare&) override { started.push_back(id); }
  void SignalRank(int, int) override {}
  void ProbeRank(int) override {}
  void CheckHost(const std::string& key, const std::string& rank_start, int slots) override {
    checked.push_back(std::to_string(slots) + ": " + rank_start);
    keys.push_back(key);
  }
  void CheckPeers(const std::string& peers) override { peer_checks.push_back(peers); }
  void Resume() override {}

  // --- what the test sets
  bool unreachable = true;  // Unreachable's answer

  // --- what the fake recorded
  std::vector<RemoteRank> planned;
  mutable std::vector<std::string> asked;  // hosts Unreachable was asked about
  std::vector<std::string> detached;       // "host: command"
  std::vector<int> started;                // ids StartRank was given
  std::vector<std::string> checked;        // CheckHost's "slots: rank_start"
  std::vector<std::string> keys;           // and its keys
  std::vector<std::string> peer_checks;    // CheckPeers's texts

 private:
  const JobConfig* config_ = nullptr;
};

}  // namespace etrun::launcher

#endif  // ETRUN_TESTS_LAUNCHER_FAKE_REMOTE_H_
