#include "launcher/policy/static_policy.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "events/schema.h"
#include "launcher/gpu_slots.h"
#include "launcher/process/child.h"
#include "launcher/process/program_path.h"

namespace etrun::launcher {

namespace field = events::field;

bool PlanStaticJob(const JobConfig& config, discovery::HostDirectory* hosts, StaticPlan* plan,
                   std::string* err) {
  StaticPlan p;
  if (!JobHosts(config, &p.hosts, err)) return false;
  std::vector<std::string> names;
  for (const discovery::HostSlots& h : p.hosts) names.push_back(h.name);
  hosts->Resolve(names);  // before the loop runs: it never looks a name up itself
  for (const discovery::HostSlots& h : p.hosts) {
    if (h.slots > 0 && !hosts->Lookup(h.name).local) p.remote_hosts.push_back(h.name);
  }
  int np = config.num_proc.value_or(1);
  std::vector<rendezvous::HostSlotCount> counts;
  for (const discovery::HostSlots& h : p.hosts) counts.push_back({h.name, h.slots});
  if (!rendezvous::Assign(counts, np, np, &p.slots, err)) {
    *err += " (" + discovery::FormatHosts(p.hosts) + "): add hosts or slots, or lower -np";
    return false;
  }
  std::map<std::string, int> host_index;
  for (const rendezvous::SlotInfo& s : p.slots) {
    host_index.try_emplace(s.hostname, static_cast<int>(host_index.size()));
    p.group_ranks.push_back(host_index[s.hostname]);
  }
  discovery::ListenChoice listen;
  if (!discovery::ChooseListenAddress(config.network_interfaces, /*hosts_known=*/true,
                                      p.remote_hosts, !config.start.command.empty(),
                                      hosts->interfaces(), &listen, err)) {
    return false;
  }
  const std::string& driver_ip = listen.address;
  p.listen_addr = listen.listen;
  p.run.nics = listen.nics;
  p.run.per_host = listen.per_host;
  // torch.distributed's TCPStore is served by rank 0, so MASTER_ADDR names rank 0's host.
  bool rank0_remote = std::find(p.remote_hosts.begin(), p.remote_hosts.end(),
                                p.slots.front().hostname) != p.remote_hosts.end();
  p.run.master_addr = rank0_remote ? p.slots.front().hostname : driver_ip;
  p.run.master_is_launcher = !rank0_remote;
  p.run.rendezvous_addr = driver_ip;  // the port is the HTTP server's, known once it listens
  p.run.master_port = discovery::FindFreePort(driver_ip, err);
  if (p.run.master_port == 0) return false;
  *plan = std::move(p);
  return true;
}

bool StaticPolicy::Prepare(JobResult* result) {
  const JobConfig& config = context_->config();
  if (config.max_np) spdlog::warn("--max-np has no effect in a static job (it caps elastic jobs)");
  std::string err;
  if (!PlanStaticJob(config, &context_->host_directory(), &plan_, &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  // Per rank: two output pipes, one spare (once an exec-status pipe; FilesPerRank), two log files.
  rlim_t files = plan_.slots.size() * (config.output_filename.empty() ? 3 : 5) + 64;
  FileLimit* limit = context_->file_limit();
  if (limit != nullptr &&
      !limit->Ensure(files, fmt::format("{} ranks", plan_.slots.size()), &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  bool any_local = std::any_of(plan_.slots.begin(), plan_.slots.end(), [this](const auto& s) {
    return std::find(plan_.remote_hosts.begin(), plan_.remote_hosts.end(), s.hostname) ==
           plan_.remote_hosts.end();
  });
  // Fail before starting anything when the command cannot run at all.
  if (std::string cause = any_local ? CommandCannotRun(config.command, context_->environment()) : "";
      !cause.empty()) {
    *result = {kExitCommandNotFound, cause};
    return false;
  }
  if (!PlanGpus(&err)) {
    *result = {kExitUsage, err};
    return false;
  }
  store_.Init(plan_.slots);
  handler_ = std::make_unique<rendezvous::KvHandler>(&store_, context_->rendezvous_deadlines(),
                                                     rendezvous::kGetHoldBound);
  return true;
}

// Fills plan_.run.gpus from --gpus-per-rank/--ranks-per-gpu and checks that this machine's ranks
// fit on its GPUs (per host name). Returns false and sets *err; nothing has started yet.
bool StaticPolicy::PlanGpus(std::string* err) {
  const JobConfig& config = context_->config();
  if (!config.gpus_per_rank && !config.ranks_per_gpu) return true;
  std::map<std::string, int> local_sizes;  // per host name of this machine
  for (const rendezvous::SlotInfo& s : plan_.slots) {
    if (std::find(plan_.remote_hosts.begin(), plan_.remote_hosts.end(), s.hostname) ==
        plan_.remote_hosts.end()) {
      ++local_sizes[s.hostname];
    }
  }
  if (local_sizes.empty()) {  // nothing to count here: every host gets GPUs by index
    plan_.run.gpus.gpus_per_rank = config.gpus_per_rank.value_or(0);
    plan_.run.gpus.ranks_per_gpu = config.ranks_per_gpu.value_or(0);
    return true;
  }
  if (!LocalGpuSlots(config, context_->environment(), &plan_.run.gpus, err)) return false;
  for (const auto& [host, size] : local_sizes) {
    if (!CheckGpusFit(plan_.run.gpus, size, err)) return false;
  }
  return true;
}

void StaticPolicy::Begin(int rendezvous_port) {
  plan_.run.rendezvous_port = rendezvous_port;
  begun_ = true;
  if (context_->config().preflight == PreflightMode::kOff) return StartAll();
  // Each host is checked with the environment its first rank would get, and its slots' GPUs.
  std::vector<PreflightRequest> hosts;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < plan_.slots.size(); ++i) {
    const rendezvous::SlotInfo& slot = plan_.slots[i];
    auto [it, added] = index.emplace(slot.hostname, hosts.size());
    if (added) hosts.push_back({{slot, plan_.group_ranks[i], plan_.run, 0, {}, {}}, 0});
    ++hosts[it->second].slots;
  }
  preflighting_ = true;
  context_->Preflight(hosts, [this](const PreflightResult& result) { OnPreflight(result); });
}

void StaticPolicy::OnPreflight(const PreflightResult& result) {
  if (!preflighting_) return;  // stopped meanwhile
  preflighting_ = false;
  bool refuse = !result.sick.empty() && context_->config().preflight == PreflightMode::kOn;
  ReportPreflight(result, result.sick.empty() ? "start" : refuse ? "refuse" : "warn", &context_->events());
  if (!refuse) return StartAll();
  size_t n = result.sick.size();
  start_error_ = {kExitPreflight,
                  fmt::format("pre-flight found {} of {} host{} sick ({}): nothing was started; "
                              "fix {} or leave {} out, or run anyway with --preflight=warn",
                              n, result.hosts.size(), result.hosts.size() == 1 ? "" : "s",
                              SickNames(result), n == 1 ? "it" : "them", n == 1 ? "it" : "them")};
  stopping_ = true;
}

void StaticPolicy::StartAll() {
  // Start every rank, then wait for their execs together: forks proceed in parallel.
  std::string err;
  for (size_t i = 0; i < plan_.slots.size(); ++i) {
    RankRequest request{plan_.slots[i], plan_.group_ranks[i], plan_.run, 0, {}, {}};
    int id = -1;
    if (!context_->StartRank(request, &id, &err)) {
      start_error_ = {kExitFailure, err};
      break;
    }
  }
  if (!context_->AwaitExecs(&err) && start_error_.code == 0) {
    start_error_ = {kExitCommandNotFound, err};
  }
  if (start_error_.code != 0) {
    stopping_ = true;
    context_->StopAll("a rank could not be started");
  }
}

void StaticPolicy::OnRankFinished(const RankSet::Finished& f) {
  bool stopped_by_us = stopping_;  // before a first failure below starts the stop
  if (context_->events().enabled()) {
    nlohmann::json fields = events::ExitFields(f.status);
    fields.update({{field::kRank, f.rank}, {field::kHost, f.host},
                   {field::kLocalRank, plan_.slots.at(f.id).local_rank},
                   {field::kPid, events::PidField(f.pid)},
                   {field::kReason, events::ExitReason(f.status, stopped_by_us, false)}});
    context_->events().Emit(events::kRankExited, std::move(fields));
  }
  if (f.status.success()) return;
  if (!stopping_ && !first_failure_) {
    first_failure_ = f;
    stopping_ = true;
    context_->StopAll("a rank failed");
  } else if (first_failure_ && f.exited_at < first_failure_->exited_at &&
             (!f.stopped || first_failure_->stopped)) {
    // A cascade: this one ended first, though its end reached etrun later (a slower host, output
    // still draining). Nothing etrun did can have ended it: the stop came after the other's end.
    // One that ended after etrun's stop reached it never goes before one that did not: times of
    // different clocks (the launcher's, each agent's translated) are apart by as much as the
    // agents' hellos took to arrive.
    spdlog::debug("rank {} on {} {}, before rank {} did", f.rank, f.host, f.status.Describe(),
                  first_failure_->rank);
    first_failure_ = f;
  } else {
    spdlog::debug("rank {} on {} {}", f.rank, f.host, f.status.Describe());
  }
}

void StaticPolicy::OnStopSignal(int sig) {
  stop_signal_ = sig;
  stopping_ = true;
  preflighting_ = false;  // its verdict, when it comes, starts nothing
  context_->StopAll(strsignal(sig));
}

control::JobStatus StaticPolicy::Status() const {
  control::JobStatus status;
  status.state = stopping_ ? "finishing" : "running";
  status.world_size = status.np = static_cast<int>(plan_.slots.size());
  auto now = std::chrono::steady_clock::now();
  for (const RankSet::Running& r : context_->Unfinished()) {
    status.ranks.push_back({.rank = r.rank, .label = r.rank, .host = r.host,
                            .local_rank = plan_.slots.at(r.id).local_rank, .pid = r.pid,
                            .state = stopping_ ? "stopping" : "running",
                            .uptime_s = std::chrono::duration<double>(now - r.started).count()});
  }
  return status;
}

void StaticPolicy::OnControl(const rendezvous::HttpRequest& request, ControlRespond respond) {
  if (request.method == "POST" && request.target == "/scale") {
    return respond(409, control::ErrorToJson("a static job cannot be scaled: start it with --min-np "
                                             "or --host-discovery-script to make it elastic"));
  }
  JobPolicy::OnControl(request, std::move(respond));
}

JobResult StaticPolicy::Result() const {
  int total = static_cast<int>(plan_.slots.size());
  if (start_error_.code != 0) return start_error_;
  if (first_failure_) {
    std::string what = fmt::format("rank {} on {} {}", first_failure_->rank, first_failure_->host,
                                   first_failure_->status.Describe());
    // Its last words, where it had any: the error behind a cascade is usually there.
    if (!first_failure_->last_stderr.empty()) what += ": \"" + first_failure_->last_stderr + "\"";
    if (total > 1) what += fmt::format("; stopped the other {} rank{}", total - 1, total - 1 == 1 ? "" : "s");
    return {first_failure_->status.ShellCode(), what};
  }
  if (stop_signal_ != 0) {
    return {128 + stop_signal_, fmt::format("received {}: stopped {} rank{}", SignalName(stop_signal_),
                                            total, total == 1 ? "" : "s")};
  }
  spdlog::debug("all {} ranks exited with code 0", total);
  return {};
}

}  // namespace etrun::launcher
