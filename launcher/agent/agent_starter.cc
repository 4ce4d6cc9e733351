#include "launcher/agent/agent_starter.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "discovery/cluster_kind.h"
#include "events/schema.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_bootstrap.h"
#include "launcher/agent/wire.h"
#include "launcher/process/child.h"
#include "launcher/worker_env.h"
#include "launcher/ssh/remote_shell.h"

namespace etrun::launcher::agent {

namespace {

// Starts `command_line` under /bin/sh with pipes as its stdin, stdout and stderr, in its own
// process group, killed if etrun dies. Returns false and sets *err when it cannot be forked.
bool StartRemoteShell(const std::string& command_line, const std::vector<std::string>& environment,
                      AgentTransport* transport, std::string* err) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, errs[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1], errs[0], errs[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(errs, O_CLOEXEC) != 0) {
    *err = std::string("cannot create pipes: ") + strerror(errno);
    close_all();
    return false;
  }
  ChildOptions options;
  options.death_signal = SIGKILL;
  options.stdin_fd = in[0];
  options.stdout_fd = out[1];
  options.stderr_fd = errs[1];
  Child child;
  if (!StartChild("/bin/sh", {"sh", "-c", command_line}, environment, options, &child, err)) {
    close_all();
    return false;
  }
  std::string exec_err;
  AwaitExec(&child, &exec_err);  // /bin/sh itself; a failure shows as the stream's end
  for (int* fd : {&in[0], &out[1], &errs[1]}) {
    close(*fd);
    *fd = -1;
  }
  transport->to_agent = in[1];
  transport->from_agent = out[0];
  transport->agent_stderr = errs[0];
  transport->pid = child.pid;
  return true;
}

}  // namespace

AgentStarter::AgentStarter(const JobConfig& config, std::vector<std::string> environment,
                           AgentImage* image)
    : config_(config), environment_(std::move(environment)), image_(image) {
  // This machine's CUDA_VISIBLE_DEVICES names its GPUs, never another host's: a remote shell that
  // passes its environment on (srun does) must not make a host's agent take it for its own.
  // etrun's own secrets stay here too: srun passes its environment on to the agent, and so to
  // the ranks.
  std::erase_if(environment_, [](const std::string& kv) {
    return kv.starts_with("CUDA_VISIBLE_DEVICES=") || IsEtrunSecret(std::string_view(kv).substr(0, kv.find('=')));
  });
}

AgentStarter::~AgentStarter() { Detach(); }

void AgentStarter::Attach(boost::asio::io_context* io, RankHostEvents* events, events::EventLog* log,
                          std::function<void(int sig)> stop) {
  io_ = io;
  events_ = events;
  log_ = log;
  stop_ = std::move(stop);
}

void AgentStarter::Detach() {
  // Every agent hears EOF at once, then each remote shell gets the rest of a common 2 s.
  for (auto& [name, host] : hosts_) host.link->Close();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& [name, host] : hosts_) host.link->Reap(until);
  hosts_.clear();  // the SSH connections close (their threads end)
  replaced_.clear();
  io_ = nullptr;
  events_ = nullptr;
  stop_ = nullptr;
}

AgentStarter::Host* AgentStarter::Open(const RemoteRank& rank) {
  auto found = hosts_.find(rank.host);
  if (found != hosts_.end() && !found->second.link->lost()) return &found->second;
  if (found != hosts_.end()) {  // lost, and back in the job: connect anew
    replaced_.push_back(std::move(found->second));
    hosts_.erase(found);
  }
  Host& host = hosts_[rank.host];
  const std::string& shell = rank.start.command;
  AgentOptions agent;
  agent.host = rank.host;
  agent.grace_s = config_.grace_period_s;
  // The agent gives up on a silent launcher later than the launcher on it.
  agent.launcher_timeout_s = std::max(10.0, 3 * config_.host_timeout_s);
  agent.gpus_per_rank = config_.gpus_per_rank.value_or(0);
  agent.ranks_per_gpu = config_.ranks_per_gpu.value_or(0);
  AgentRef ref;
  if (image_ != nullptr) ref = {image_->sha256(), image_->bytes().size(), image_->beside()};
  std::string bootstrap = BootstrapCommand(ref, agent, AgentEnvironment(environment_));
  AgentLink::Options options;
  options.host = rank.host;
  options.lost_after_s = config_.host_timeout_s;
  options.unresponsive_after_s = config_.unresponsive_host_timeout();
  events::EventLog* log = log_;
  options.on_late = [log](const std::string& name, double silent_s, double bound_s) {
    spdlog::warn("host {} is late: its agent has said nothing for {:.0f} s, but the host is still "
                 "reachable; waiting up to {:g} s (--unresponsive-host-timeout) before it is lost",
                 name, silent_s, bound_s);
    if (log != nullptr) {
      log->Emit(events::kHostLate, {{events::field::kHost, name},
                                    {events::field::kSilentS, std::round(silent_s * 10) / 10},
                                    {events::field::kBoundS, bound_s}});
    }
  };
  options.image = image_;
  // A cluster signalling the job's own steps (Slurm: scancel --signal=TERM, preemption) drains
  // the whole job, as when it signals the batch shell; a node of an allocation it grew onto
  // ending is no stop, and neither is one pod of a remote shell being terminated (its host is
  // lost instead).
  const discovery::ClusterKind* kind = rank.start.kind;
  if (kind != nullptr && kind->words().term_stops_job && rank.start.job_own && stop_) {
    options.on_term = [stop = stop_] { stop(SIGTERM); };
  }
  AgentTransport transport;
  std::string err;
  if (!shell.empty()) {
    options.label = "remote shell to " + rank.host;
    options.via = kind != nullptr ? AgentLink::Via::kClusterStep : AgentLink::Via::kRemoteShell;
    if (kind != nullptr) options.step = kind->words().step;
    options.script = bootstrap + "\n";  // `sh -s` there reads it first (remote_shell.h)
    host.link = std::make_unique<AgentLink>(io_, events_, options);
    if (!StartRemoteShell(RemoteShellCommand(shell, rank.host), environment_, &transport, &err)) {
      host.link->Fail(err);
    } else {
      host.link->Begin(transport);
    }
    return &host;
  }
  SshTarget target;
  target.host = rank.host;
  target.port = config_.ssh_port.value_or(22);
  target.identity_file = config_.ssh_identity_file;
  target.strict_host_keys = config_.ssh_strict_host_keys;
  target.connect_timeout_s = config_.ssh_connect_timeout_s;
  options.label = SshLabel(target);
  host.ssh_connection = true;
  host.link = std::make_unique<AgentLink>(io_, events_, options);
  SshStreams streams;
  host.ssh = SshHost::Start(target, bootstrap, &streams, &err);
  if (host.ssh == nullptr) {
    host.link->Fail(err);
    return &host;
  }
  transport.from_agent = streams.data;
  SshHost* ssh = host.ssh.get();
  transport.peer_acking = [ssh](std::chrono::milliseconds window) { return ssh->PeerAcking(window); };
  transport.to_agent = dup(streams.data);
  fcntl(transport.to_agent, F_SETFD, FD_CLOEXEC);
  transport.agent_stderr = streams.errors;
  host.link->Begin(transport);
  return &host;
}

bool AgentStarter::Plan(const RemoteRank& rank, LaunchSpec* spec, std::string* err) {
  if (io_ == nullptr) {
    *err = "cannot start a rank on " + rank.host + ": no event loop for its agent";
    return false;
  }
  Host* host = Open(rank);
  spec->remote_host = host->link.get();
  spec->remote_command = RankStartText({rank.cwd, rank.env, rank.argv, rank.network, host->ssh_connection});
  spec->remote_gpus = rank.gpus;
  return true;
}

bool AgentStarter::Unreachable(const std::string& host, const ExitStatus& status) const {
  if (status.kind != ExitStatus::Kind::kExited || status.code != kHostLost) return false;
  auto found = hosts_.find(host);
  if (found != hosts_.end() && found->second.link->lost()) return true;
  auto recent = std::chrono::steady_clock::now() - std::chrono::seconds(30);
  return std::any_of(replaced_.begin(), replaced_.end(), [&](const Host& h) {
    return h.link->host() == host && h.link->lost_at() > recent;
  });
}

bool AgentStarter::RunDetached(const std::string& host, const std::string& command) {
  auto found = hosts_.find(host);
  return found != hosts_.end() && found->second.link->RunDetached(command);
}

}  // namespace etrun::launcher::agent
