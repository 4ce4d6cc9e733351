#include "launcher/rank_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "events/schema.h"
#include "launcher/gpu_slots.h"
#include "launcher/hang/python_hook.h"
#include "launcher/output/output_sink.h"
#include "launcher/process/environment.h"
#include "launcher/process/shell_words.h"

namespace etrun::launcher {

namespace field = events::field;

std::string RankDirName(int rank, int np) {
  int width = 1;
  for (int n = np - 1; n >= 10; n /= 10) ++width;
  std::string digits = std::to_string(rank);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
  return "rank." + digits;
}

bool OpenLogFiles(const std::string& rank_dir, int* out_fd, int* err_fd, std::string* err) {
  std::error_code ec;
  std::filesystem::create_directories(rank_dir, ec);
  if (ec) {
    *err = "cannot create " + rank_dir + ": " + ec.message() +
           ": choose a writable --output-filename directory";
    return false;
  }
  *out_fd = *err_fd = -1;
  for (auto [name, fd] : {std::pair{"/stdout", out_fd}, std::pair{"/stderr", err_fd}}) {
    std::string path = rank_dir + name;
    // Never through a symbolic link someone put at the name: it would truncate what it points to.
    *fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (*fd < 0) {
      *err = errno == ELOOP ? path + " is a symbolic link, which etrun does not write through: "
                                     "remove it, or choose another --output-filename directory"
                            : "cannot open " + path + ": " + strerror(errno) +
                                  ": choose a writable --output-filename directory";
      if (*out_fd >= 0) close(*out_fd);
      *out_fd = -1;
      return false;
    }
  }
  return true;
}

bool OpenRankFiles(const std::string& dir, int rank, int np, int* out_fd, int* err_fd,
                   std::string* err) {
  return OpenLogFiles((std::filesystem::path(dir) / RankDirName(rank, np)).string(), out_fd,
                      err_fd, err);
}

// ETRUN_STACK_SIGNAL=<n>: the rank's Python gets the stack-dump hook.
static std::string StackSignalVar() {
  return std::string(hang::kStackSignalVar) + "=" + std::to_string(hang::kStackSignal);
}

RankOutput ConsoleOutput(const JobConfig& config, OutputSink* sink) {
  RankOutput output;
  output.console_out = sink->AddDestination(STDOUT_FILENO, false, "stdout");
  output.console_err = sink->AddDestination(STDERR_FILENO, false, "stderr");
  output.timestamps = config.prefix_timestamp;
  output.timestamp_format = config.timestamp_format;
  return output;
}

RankLauncher::RankLauncher(const JobConfig& config, const std::vector<std::string>& environment,
                           RankSet* ranks, OutputSink* sink, RankOutput console, RemoteStarter* remote,
                           discovery::HostDirectory* hosts, rendezvous::AccessList* access,
                           events::EventLog* events)
    : config_(config), environment_(environment), ranks_(ranks), sink_(sink),
      console_(console), remote_(remote), hosts_(hosts), access_(access), events_(events) {}

HostNetwork RankLauncher::RemoteNetwork(const RunVars& run, const std::string& host,
                                        const std::vector<std::string>& exported) {
  HostNetwork net;
  if (!run.per_host) {
    // --network-interface: horovodrun's meaning (the same names everywhere), checked there.
    if (!run.nics.empty() && !config_.network_interfaces.empty()) net.require_interface = run.nics.front();
    return net;
  }
  net.resolve = true;
  net.launcher_address = discovery::LauncherAddressToward(hosts_->Lookup(host).ipv4, hosts_->interfaces());
  if (!run.rendezvous_addr.empty()) net.address_vars.push_back("HOROVOD_GLOO_RENDEZVOUS_ADDR");
  if (run.master_is_launcher) net.address_vars.push_back("MASTER_ADDR");
  net.interface_vars = {"HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME"};
  bool own_gloo_ifname = std::any_of(exported.begin(), exported.end(), [](const std::string& kv) {
    return kv.starts_with("GLOO_SOCKET_IFNAME=");
  });
  if (!own_gloo_ifname) net.interface_vars.push_back("GLOO_SOCKET_IFNAME");  // the user's is kept
  return net;
}

bool RankLauncher::Plan(const RankRequest& request, LaunchSpec* spec, std::string* err) {
  const rendezvous::SlotInfo& slot = request.slot;
  if (!hosts_->Lookup(slot.hostname).local) {
    // The remote login environment is the base; the launcher's exportable variables and the
    // slot's are passed on the command line (spec §3.3-3.4).
    std::vector<std::string> exported;
    for (const std::string& kv : environment_) {
      if (IsExportable(kv.substr(0, kv.find('=')))) exported.push_back(kv);
    }
    RunVars remote_run = request.run;
    remote_run.gpus = GpuSlots{};  // the host's agent counts its GPUs and sets CUDA_VISIBLE_DEVICES
    std::vector<std::string> remote_env =
        BuildWorkerEnv(exported, config_.tunables, slot, request.group_rank, remote_run);
    // `env` keeps the last of duplicates: the extra variables win.
    remote_env.insert(remote_env.end(), request.extra_env.begin(), request.extra_env.end());
    // The host's agent puts the stack-dump hook there (launcher/hang/python_hook.h).
    if (config_.hang_timeout_s) remote_env.push_back(StackSignalVar());
    char cwd[4096];
    RemoteRank remote{slot.hostname, getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".",
                      std::move(remote_env), config_.command, config_.grace_period_s,
                      RemoteNetwork(request.run, slot.hostname, exported),
                      {request.run.gpus.gpus_per_rank, request.run.gpus.ranks_per_gpu, slot.local_rank},
                      // The one place a rank's route is chosen: its host's own, else the job's.
                      request.start.command.empty() ? config_.start : request.start};
    if (remote_ == nullptr) {
      *err = "cannot start a rank on " + slot.hostname + ": this job starts ranks on this machine only";
      return false;
    }
    return remote_->Plan(remote, spec, err);
  }
  std::string devices;
  if (request.run.gpus.enabled() && !GpuDevices(request.run.gpus, slot.local_rank, &devices, err)) {
    *err += ": lower --max-np or the host's slots";
    return false;
  }
  spec->argv = config_.command;
  spec->env = BuildWorkerEnv(environment_, config_.tunables, slot, request.group_rank, request.run);
  // The extra variables win over inherited ones: drop those first (getenv finds the first).
  for (const std::string& kv : request.extra_env) {
    std::string name = kv.substr(0, kv.find('=') + 1);
    std::erase_if(spec->env, [&name](const std::string& e) { return e.starts_with(name); });
  }
  spec->env.insert(spec->env.end(), request.extra_env.begin(), request.extra_env.end());
  if (config_.hang_timeout_s) {
    spec->env = OverlayEnvironment(std::move(spec->env), {StackSignalVar()});
    std::string why;
    if (!hang::ApplyPythonHook(&spec->env, &why) && !hook_warned_) {
      hook_warned_ = true;  // once: the reason is the same for every rank here
      spdlog::warn("ranks start without the stack-dump hook (--hang-timeout shows no Python "
                   "stack of theirs): {}", why);
    }
  }
  return true;
}

bool RankLauncher::Start(const RankRequest& request, int* id, std::string* err) {
  const rendezvous::SlotInfo& slot = request.slot;
  LaunchSpec spec;
  if (!Plan(request, &spec, err)) return false;
  if (spdlog::should_log(spdlog::level::debug)) {
    // The slot's variables and the command; never the whole environment, and no secret's value.
    std::vector<std::string> vars;
    for (const auto& [k, v] : SlotEnv(slot, request.group_rank, request.run)) vars.push_back(k + "=" + v);
    spdlog::debug("rank {} on {}: {} {}{}", slot.rank, slot.hostname, ShownEnv(vars),
                  JoinCommand(config_.command), spec.remote_host != nullptr ? " (by its host's agent)" : "");
  }
  RankOutput output = console_;
  if (!config_.output_filename.empty()) {
    int np = config_.num_proc.value_or(1);
    int out_fd = -1, err_fd = -1;
    if (!OpenRankFiles(config_.output_filename, slot.rank, np, &out_fd, &err_fd, err)) return false;
    std::string label = config_.output_filename + "/" + RankDirName(slot.rank, np);
    output.file_out = sink_->AddDestination(out_fd, true, label + "/stdout");
    output.file_err = sink_->AddDestination(err_fd, true, label + "/stderr");
  }
  access_->Admit(hosts_->Lookup(slot.hostname).ipv4);  // its workers may use the server now
  if (!ranks_->Start(slot.rank, slot.hostname, slot.local_rank, spec, output, err, id)) {
    *err = "rank " + std::to_string(slot.rank) + " on " + slot.hostname + ": " + *err;
    return false;
  }
  events_->Emit(events::kRankStarted,
                {{field::kRank, slot.rank}, {field::kHost, slot.hostname},
                 {field::kLocalRank, slot.local_rank}, {field::kPid, events::PidField(ranks_->pid(*id))},
                 {field::kRound, request.round}});
  return true;
}

}  // namespace etrun::launcher
