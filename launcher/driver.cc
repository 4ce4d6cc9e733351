#include "launcher/driver.h"

#include "launcher/control.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "launcher/exit_status.h"
#include "launcher/gpu_slots.h"
#include "launcher/guardian.h"
#include "launcher/mpi_run.h"
#include "launcher/output_sink.h"
#include "launcher/rank_set.h"
#include "launcher/ssh_host.h"
#include "launcher/ssh_rank.h"
#include "rendezvous/http_server.h"
#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"

namespace etrun::launcher {

namespace asio = boost::asio;

namespace {

// Fills plan->run.gpus from --gpus-per-rank/--ranks-per-gpu and checks that this machine's ranks
// fit on its GPUs (per host name). Returns false and sets *err; nothing has started yet.
bool PlanGpuSlots(const JobConfig& config, const std::vector<std::string>& environment,
                  bool any_local, StaticPlan* plan, std::string* err) {
  if (!config.gpus_per_rank && !config.ranks_per_gpu) return true;
  if (!any_local) {  // nothing to count here: every host gets GPUs by index
    plan->run.gpus.gpus_per_rank = config.gpus_per_rank.value_or(0);
    plan->run.gpus.ranks_per_gpu = config.ranks_per_gpu.value_or(0);
    return true;
  }
  if (!LocalGpuSlots(config, environment, &plan->run.gpus, err)) return false;
  std::map<std::string, int> local_sizes;  // per host name of this machine
  for (const rendezvous::SlotInfo& s : plan->slots) {
    if (std::find(plan->remote_hosts.begin(), plan->remote_hosts.end(), s.hostname) ==
        plan->remote_hosts.end()) {
      ++local_sizes[s.hostname];
    }
  }
  for (const auto& [host, size] : local_sizes) {
    if (!CheckGpusFit(plan->run.gpus, size, err)) return false;
  }
  return true;
}

}  // namespace

bool ResolveHosts(const JobConfig& config, std::vector<discovery::HostSlots>* hosts,
                  std::string* err) {
  if (!config.hosts.empty()) return discovery::ParseHostsFlag(config.hosts, hosts, err);
  if (!config.hostfile.empty()) {
    std::ifstream in(config.hostfile, std::ios::binary);
    if (!in) {
      *err = "cannot read hostfile " + config.hostfile + ": " + strerror(errno);
      return false;
    }
    std::stringstream contents;
    contents << in.rdbuf();
    return discovery::ParseHostfile(config.hostfile, contents.str(), hosts, err);
  }
  *hosts = {{"localhost", config.num_proc.value_or(1)}};
  return true;
}

bool PlanStaticJob(const JobConfig& config, const std::vector<discovery::Interface>& interfaces,
                   StaticPlan* plan, std::string* err) {
  StaticPlan p;
  if (!ResolveHosts(config, &p.hosts, err)) return false;
  for (const discovery::HostSlots& h : p.hosts) {
    if (h.slots > 0 && !discovery::IsLocalHost(h.name, interfaces)) p.remote_hosts.push_back(h.name);
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
  std::string driver_ip;
  if (!p.remote_hosts.empty() && config.network_interfaces.empty()) {
    // Workers must reach the rendezvous server: listen where the route toward them leaves.
    std::string nic;
    if (!discovery::RouteToward(p.remote_hosts.front(), interfaces, &nic, &driver_ip, err)) return false;
    p.run.nics = {nic};
  } else if (!discovery::ChooseLocalNics(config.network_interfaces, interfaces, &p.run.nics,
                                         &driver_ip, err)) {
    return false;
  }
  // torch.distributed's TCPStore is served by rank 0, so MASTER_ADDR names rank 0's host.
  bool rank0_remote = std::find(p.remote_hosts.begin(), p.remote_hosts.end(),
                                p.slots.front().hostname) != p.remote_hosts.end();
  p.run.master_addr = rank0_remote ? p.slots.front().hostname : driver_ip;
  p.run.rendezvous_addr = driver_ip;  // the port is the HTTP server's, known once it listens
  p.run.master_port = discovery::FindFreePort(driver_ip, err);
  if (p.run.master_port == 0) return false;
  *plan = std::move(p);
  return true;
}

std::string RankDirName(int rank, int np) {
  int width = 1;
  for (int n = np - 1; n >= 10; n /= 10) ++width;
  std::string digits = std::to_string(rank);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
  return "rank." + digits;
}

void ConfigureLogging(const JobConfig& config) {
  auto logger = std::make_shared<spdlog::logger>(
      "etrun", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("etrun: %l: %v");
  spdlog::level::level_enum level = spdlog::level::warn;
  if (config.verbose) level = spdlog::level::debug;
  if (config.tunables.log_level) {
    static const std::map<std::string, spdlog::level::level_enum> kLevels = {
        {"TRACE", spdlog::level::trace}, {"DEBUG", spdlog::level::debug},
        {"INFO", spdlog::level::info},   {"WARNING", spdlog::level::warn},
        {"ERROR", spdlog::level::err},   {"FATAL", spdlog::level::critical}};
    auto it = kLevels.find(*config.tunables.log_level);
    if (it != kLevels.end()) level = std::min(level, it->second);
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

bool OpenRankFiles(const std::string& dir, int rank, int np, int* out_fd, int* err_fd,
                   std::string* err) {
  std::filesystem::path rank_dir = std::filesystem::path(dir) / RankDirName(rank, np);
  std::error_code ec;
  std::filesystem::create_directories(rank_dir, ec);
  if (ec) {
    *err = "cannot create " + rank_dir.string() + ": " + ec.message() +
           ": choose a writable --output-filename directory";
    return false;
  }
  for (auto [name, fd] : {std::pair{"stdout", out_fd}, std::pair{"stderr", err_fd}}) {
    std::string path = (rank_dir / name).string();
    *fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*fd < 0) {
      *err = "cannot open " + path + ": " + strerror(errno) +
             ": choose a writable --output-filename directory";
      return false;
    }
  }
  return true;
}

LaunchSpec RemoteLaunchSpec(const JobConfig& config, const std::vector<std::string>& environment,
                            const rendezvous::SlotInfo& slot, int group_rank, const RunVars& run,
                            SshHosts* ssh, const std::vector<std::string>& extra_env) {
  // The remote login environment is the base; the launcher's exportable variables and the
  // slot's are passed on the command line (spec §3.3-3.4).
  std::vector<std::string> exported;
  for (const std::string& kv : environment) {
    if (IsExportable(kv.substr(0, kv.find('=')))) exported.push_back(kv);
  }
  RunVars remote_run = run;
  remote_run.gpus = RemoteGpuSlots(run.gpus);  // another machine's GPUs: by index, uncounted
  std::vector<std::string> remote_env =
      BuildWorkerEnv(exported, config.tunables, slot, group_rank, remote_run);
  remote_env.insert(remote_env.end(), extra_env.begin(), extra_env.end());  // `env` keeps the last
  char cwd[4096];
  std::string dir = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  SshTarget target;
  target.host = slot.hostname;
  target.port = config.ssh_port.value_or(22);
  target.identity_file = config.ssh_identity_file;
  target.strict_host_keys = config.ssh_strict_host_keys;
  target.connect_timeout_s = config.ssh_connect_timeout_s;
  LaunchSpec spec;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  spec.argv = {n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("etrun")};
  std::string label = target.host + ":" + std::to_string(target.port);
  std::string command = RemoteCommand(dir, remote_env, config.command, config.grace_period_s);
  for (std::string& a : SshRankArgs(ssh->SocketFor(target), label, command)) {
    spec.argv.push_back(std::move(a));
  }
  spec.env = environment;  // the local helper's own
  return spec;
}

bool EnsureFileLimit(int ranks, bool rank_files, std::string* err) {
  // Per rank: two output pipes and a short-lived exec-status pipe (plus two log files).
  rlim_t want = static_cast<rlim_t>(ranks) * (rank_files ? 5 : 3) + 64;
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= want) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < want) {
    *err = fmt::format("{} ranks need about {} open files but the hard limit is {} (ulimit -Hn): "
                       "raise it, or start fewer ranks per etrun", ranks, want, limit.rlim_max);
    return false;
  }
  limit.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    *err = fmt::format("{} ranks need about {} open files and the limit cannot be raised: {}", ranks,
                       want, strerror(errno));
    return false;
  }
  spdlog::debug("raised the open-file limit to {} for {} ranks", want, ranks);
  return true;
}

std::string JobName(const JobConfig& config) {
  if (!config.job_name.empty()) return config.job_name;
  auto base = [](const std::string& path) {
    std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    size_t dot = name.rfind('.');
    return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  };
  // Skip interpreters, their options and VAR=value words: the script is the interesting name.
  static const std::vector<std::string> kInterpreters = {"python", "sh", "bash", "env", "torchrun"};
  for (const std::string& arg : config.command) {
    if (arg.starts_with("-") || arg.find('=') != std::string::npos) continue;
    std::string name = base(arg);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
        std::string::npos) {
      continue;  // a `sh -c` script text, not a name
    }
    bool interpreter = std::any_of(kInterpreters.begin(), kInterpreters.end(),
                                   [&](const std::string& i) { return name.starts_with(i); });
    if (!interpreter && !name.empty()) return name;
  }
  return config.command.empty() ? "etrun" : base(config.command[0]);
}

rendezvous::AccessList BaseAccessList(const JobConfig& config,
                                      const std::vector<discovery::Interface>& interfaces) {
  std::vector<std::string> local;
  for (const discovery::Interface& nic : interfaces) local.insert(local.end(), nic.ipv4.begin(), nic.ipv4.end());
  std::vector<rendezvous::Cidr> allowed;
  for (const std::string& text : config.rendezvous_allow) {
    rendezvous::Cidr cidr;
    std::string ignored;
    if (rendezvous::ParseCidr(text, &cidr, &ignored)) allowed.push_back(cidr);
  }
  return rendezvous::AccessList(local, std::move(allowed));
}

RankOutput ConsoleOutput(const JobConfig& config, OutputSink* sink) {
  RankOutput output;
  output.console_out = sink->AddDestination(STDOUT_FILENO, false, "stdout");
  output.console_err = sink->AddDestination(STDERR_FILENO, false, "stderr");
  output.timestamps = config.prefix_timestamp;
  output.timestamp_format = config.timestamp_format;
  return output;
}

std::chrono::milliseconds GracePeriod(const JobConfig& config) {
  return std::chrono::milliseconds(static_cast<long long>(config.grace_period_s * 1000));
}

Driver::Driver(const JobConfig& config, Spawner* spawner, std::vector<std::string> environment)
    : config_(config), spawner_(spawner), environ_(std::move(environment)) {}

int Driver::Run() {
  if (!config_.events_file.empty() && !events_.Open(config_.events_file, &cause_)) {
    spdlog::error("{}", cause_);
    return kExitUsage;
  }
  nlohmann::json hosts = nlohmann::json::array();
  if (config_.host_discovery_script.empty()) {
    std::vector<discovery::HostSlots> listed;
    std::string ignored;
    if (ResolveHosts(config_, &listed, &ignored)) {
      for (const discovery::HostSlots& h : listed) hosts.push_back({{"host", h.name}, {"slots", h.slots}});
    }
  }
  auto optional_int = [](const std::optional<int>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  events_.Emit("job_start",
               {{"job", JobName(config_)}, {"command", config_.command},
                {"np", config_.num_proc.value_or(1)}, {"min_np", optional_int(config_.min_np)},
                {"max_np", optional_int(config_.max_np)}, {"elastic", config_.elastic()},
                {"hosts", hosts},
                {"discovery_script", config_.host_discovery_script.empty()
                                         ? nlohmann::json(nullptr)
                                         : nlohmann::json(config_.host_discovery_script)},
                {"pid", getpid()}});
  if (config_.controller == Controller::kMpi) {
    int code = RunMpi(config_, environ_);
    events_.Emit("job_end", {{"exit_code", code}, {"cause", code == 0 ? "" : "mpirun exited with code " + std::to_string(code)}});
    return code;
  }
  if (config_.elastic()) return RunElastic(config_, spawner_, environ_, &events_);
  int code = RunStatic();
  events_.Emit("job_end", {{"exit_code", code}, {"cause", cause_}});
  return code;
}

// Logs `cause` as etrun's error (when there is one) and returns `code`; Run reports both.
int Driver::End(int code, std::string cause) {
  if (!cause.empty()) spdlog::error("{}", cause);
  cause_ = std::move(cause);
  return code;
}

int Driver::RunStatic() {
  if (config_.max_np) spdlog::warn("--max-np has no effect in a static job (it caps elastic jobs)");
  StaticPlan plan;
  std::string err;
  if (!PlanStaticJob(config_, discovery::LocalInterfaces(), &plan, &err)) return End(kExitUsage, err);
  if (!EnsureFileLimit(static_cast<int>(plan.slots.size()), !config_.output_filename.empty(), &err)) {
    return End(kExitUsage, err);
  }
  // Fail before starting anything when the command cannot run at all.
  std::string path_env;
  for (const std::string& kv : environ_) {
    if (kv.starts_with("PATH=")) path_env = kv.substr(5);
  }
  bool any_local = std::any_of(plan.slots.begin(), plan.slots.end(), [&plan](const rendezvous::SlotInfo& s) {
    return std::find(plan.remote_hosts.begin(), plan.remote_hosts.end(), s.hostname) == plan.remote_hosts.end();
  });
  if (any_local && LocalSpawner::ResolveProgram(config_.command.at(0), path_env, &err).empty()) {
    return End(kExitCommandNotFound,
               "cannot run '" + config_.command[0] + "': " + err + ": check the command and PATH");
  }
  if (!PlanGpuSlots(config_, environ_, any_local, &plan, &err)) {
    spdlog::error("{}", err);
    return kExitUsage;
  }

  // The guardian forks first, while etrun has no other thread.
  Guardian guardian;
  if (!guardian.Start(&err)) spdlog::warn("{}; ranks may outlive etrun if it is killed", err);
  signal(SIGPIPE, SIG_IGN);  // a closed console must come back as EPIPE, not kill etrun

  asio::io_context io;
  asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGUSR1);
  signals.add(SIGUSR2);
  signals.add(SIGCHLD);  // before the first fork, so no exit goes unnoticed

  // Horovod's Gloo workers rendezvous through this store; bound to the address they are told.
  rendezvous::KvStore store;
  store.Init(plan.slots);
  rendezvous::KvHandler handler(&store);
  rendezvous::HttpServer server(&io, &handler);
  if (!server.Listen(plan.run.rendezvous_addr, 0, &err)) return End(kExitFailure, "rendezvous server: " + err);
  plan.run.rendezvous_port = server.port();
  spdlog::debug("rendezvous server listening on {}:{}", plan.run.rendezvous_addr, server.port());
  rendezvous::AccessList access = BaseAccessList(config_, discovery::LocalInterfaces());
  for (const discovery::HostSlots& host : plan.hosts) access.AddHost(host.name);
  server.set_access(&access);

  OutputSink sink;
  RankOutput output = ConsoleOutput(config_, &sink);
  auto grace = GracePeriod(config_);
  SshHosts ssh;  // outlives the ranks: their stubs talk to it until they are reaped
  RankSet ranks(&io, spawner_, &sink, &guardian, grace);
  bool stopping = false;
  auto started = std::chrono::steady_clock::now();
  std::string control_name = JobName(config_);
  ControlServer control(&io, [&](const rendezvous::HttpRequest& request,
                                 std::function<void(int, nlohmann::json)> respond) {
    if (request.method == "POST" && request.target == "/scale") {
      return respond(409, {{"error", "a static job cannot be scaled: start it with --min-np or "
                                     "--host-discovery-script to make it elastic"}});
    }
    if (request.method != "GET" || request.target != "/status") {
      return respond(404, {{"error", "unknown request " + request.method + " " + request.target}});
    }
    auto now = std::chrono::steady_clock::now();
    nlohmann::json ranks_json = nlohmann::json::array();
    for (const RankSet::Running& r : ranks.Unfinished()) {
      ranks_json.push_back({{"rank", r.rank}, {"label", r.rank}, {"host", r.host},
                            {"local_rank", plan.slots[r.id].local_rank}, {"pid", r.pid},
                            {"state", stopping ? "stopping" : "running"}, {"restarts", 0},
                            {"uptime_s", std::chrono::duration<double>(now - r.started).count()}});
    }
    respond(200, {{"job", control_name}, {"state", stopping ? "finishing" : "running"},
                  {"elastic", false}, {"pid", getpid()},
                  {"duration_s", std::chrono::duration<double>(now - started).count()},
                  {"world_size", plan.slots.size()}, {"np", plan.slots.size()}, {"min_np", nullptr},
                  {"max_np", nullptr}, {"resets", 0}, {"round", 0}, {"ranks", ranks_json}});
  });
  if (std::string why; !control.Start(control_name, &why)) {
    spdlog::warn("no control endpoint (etrun status will not see this job): {}", why);
  }
  control_name = control.name();
  asio::steady_timer kill_timer(io);
  std::optional<RankSet::Finished> first_failure;
  int stop_signal = 0;
  std::string start_error;
  int start_error_code = kExitFailure;

  auto stop = [&](const char* why) {
    if (stopping) return;
    stopping = true;
    spdlog::debug("stopping {} ranks: {}", ranks.active(), why);
    ranks.SignalAll(SIGTERM);
    kill_timer.expires_after(grace);
    kill_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      if (ranks.active() > 0) {
        spdlog::warn("{} ranks still running {:.1f} s after SIGTERM; sending SIGKILL", ranks.active(),
                     config_.grace_period_s);
      }
      ranks.SignalAll(SIGKILL);
    });
  };
  auto maybe_done = [&] {
    if (ranks.active() == 0) {
      signals.cancel();
      kill_timer.cancel();
      server.Stop();
      io.stop();
    }
  };
  ranks.set_on_finished([&](const RankSet::Finished& f) {
    bool stopped_by_us = stopping;  // before a first failure below starts the stop
    if (events_.enabled()) {
      nlohmann::json fields = ExitFields(f.status);
      fields.update({{"rank", f.rank}, {"host", f.host}, {"local_rank", plan.slots[f.id].local_rank},
                     {"pid", f.pid}, {"reason", ExitReason(f.status, stopped_by_us, false)}});
      events_.Emit("rank_exited", std::move(fields));
    }
    if (!f.status.success()) {
      if (!stopping && !first_failure) {
        first_failure = f;
        stop("a rank failed");
      } else {
        spdlog::debug("rank {} on {} {}", f.rank, f.host, f.status.Describe());
      }
    }
    maybe_done();
  });

  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGCHLD) {
          ranks.Reap();
        } else if (sig == SIGUSR1 || sig == SIGUSR2) {
          spdlog::debug("forwarding {} to every rank", SignalName(sig));
          ranks.SignalAll(sig);
        } else if (stopping && stop_signal != 0) {
          spdlog::warn("received {} again: killing every rank now", SignalName(sig));
          ranks.SignalAll(SIGKILL);
        } else {
          if (stop_signal == 0) stop_signal = sig;
          stop(strsignal(sig));
        }
        if (ranks.active() > 0) signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);

  // Start every rank, then wait for their execs together: forks proceed in parallel.
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const rendezvous::SlotInfo& slot = plan.slots[i];
    LaunchSpec spec;
    bool remote = std::find(plan.remote_hosts.begin(), plan.remote_hosts.end(), slot.hostname) !=
                  plan.remote_hosts.end();
    if (remote) {
      try {
        spec = RemoteLaunchSpec(config_, environ_, slot, plan.group_ranks[i], plan.run, &ssh);
      } catch (const std::runtime_error& e) {
        start_error = e.what();
        break;
      }
    } else {
      spec.argv = config_.command;
      spec.env = BuildWorkerEnv(environ_, config_.tunables, slot, plan.group_ranks[i], plan.run);
    }
    if (spdlog::should_log(spdlog::level::debug)) {
      std::string vars;
      for (const auto& [k, v] : SlotEnv(slot, plan.group_ranks[i], plan.run)) vars += k + "=" + v + " ";
      spdlog::debug("rank {} on {}: {}{}", slot.rank, slot.hostname, vars, JoinCommand(spec.argv));
    }
    RankOutput rank_output = output;
    if (!config_.output_filename.empty()) {
      int out_fd = -1, err_fd = -1;
      if (!OpenRankFiles(config_.output_filename, slot.rank, config_.num_proc.value_or(1), &out_fd,
                         &err_fd, &start_error)) {
        if (out_fd >= 0) close(out_fd);
        break;
      }
      std::string label = config_.output_filename + "/" + RankDirName(slot.rank, config_.num_proc.value_or(1));
      rank_output.file_out = sink.AddDestination(out_fd, true, label + "/stdout");
      rank_output.file_err = sink.AddDestination(err_fd, true, label + "/stderr");
    }
    int id = -1;
    if (!ranks.Start(slot.rank, slot.hostname, spec, rank_output, &start_error, &id)) {
      start_error = "rank " + std::to_string(slot.rank) + " on " + slot.hostname + ": " + start_error;
      break;
    }
    events_.Emit("rank_started", {{"rank", slot.rank}, {"host", slot.hostname},
                                  {"local_rank", slot.local_rank}, {"pid", ranks.pid(id)}, {"round", 0}});
  }
  std::string exec_error;
  if (!ranks.AwaitExecs(&exec_error) && start_error.empty()) {
    start_error = exec_error;
    start_error_code = kExitCommandNotFound;
  }
  if (!start_error.empty()) stop("a rank could not be started");
  ranks.Reap();  // exits that happened before the loop runs

  if (ranks.active() > 0) io.run();
  sink.Flush();

  int total = static_cast<int>(plan.slots.size());
  if (!start_error.empty()) return End(start_error_code, start_error);
  if (first_failure) {
    std::string what = fmt::format("rank {} on {} {}", first_failure->rank, first_failure->host,
                                   first_failure->status.Describe());
    if (total > 1) what += fmt::format("; stopped the other {} rank{}", total - 1, total - 1 == 1 ? "" : "s");
    return End(first_failure->status.ShellCode(), what);
  }
  if (stop_signal != 0) {
    return End(128 + stop_signal, fmt::format("received {}: stopped {} rank{}", SignalName(stop_signal),
                                              total, total == 1 ? "" : "s"));
  }
  spdlog::debug("all {} ranks exited with code 0", total);
  return End(kExitOk, "");
}

}  // namespace etrun::launcher
