// RunElastic: binds the ElasticDriver state machine to the real world: discovery script runs,
// rank processes (RankSet), the rendezvous HTTP server and the notifier, timers and signals,
// all on one io_context.
#include <signal.h>
#include <unistd.h>

#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "discovery/host_slots.h"
#include "discovery/network.h"
#include "discovery/script_runner.h"
#include "launcher/control.h"
#include "launcher/driver.h"
#include "launcher/elastic_driver.h"
#include "launcher/gpu_slots.h"
#include "launcher/guardian.h"
#include "launcher/output_sink.h"
#include "launcher/rank_set.h"
#include "launcher/ssh_host.h"
#include "rendezvous/elastic_handler.h"
#include "rendezvous/http_server.h"
#include "rendezvous/notifier.h"

namespace etrun::launcher {

namespace asio = boost::asio;

namespace {

TimePoint Now() { return std::chrono::steady_clock::now(); }

// WorkerControl over a RankSet: each slot's process gets its round's environment; Stop sends
// SIGTERM to its process group and SIGKILL after the grace period.
class RankSetWorkers : public WorkerControl {
 public:
  RankSetWorkers(asio::io_context* io, RankSet* ranks, SshHosts* ssh, OutputSink* sink,
                 const JobConfig& config, const std::vector<std::string>& environment,
                 const RunVars* run, const RankOutput& output, const ElasticDriver* const* driver,
                 rendezvous::AccessList* access, EventLog* events)
      : io_(io), ranks_(ranks), ssh_(ssh), sink_(sink), config_(config), environment_(environment),
        run_(run), output_(output), driver_(driver), access_(access), events_(events),
        interfaces_(discovery::LocalInterfaces()) {}

  // Called when a slot's process cannot even start: reported like an exit with code 127.
  std::function<void(const SlotKey&, ExitStatus)> on_start_failure;

  void Start(const rendezvous::SlotInfo& slot) override {
    SlotKey key{slot.hostname, slot.local_rank};
    std::string err;
    access_->AddHost(slot.hostname);  // its workers may use the rendezvous server from now on
    bool remote = !discovery::IsLocalHost(slot.hostname, interfaces_);
    int group_rank = 0;
    std::vector<std::string> seen;
    for (const rendezvous::SlotInfo& s : (*driver_)->assignment()) {
      if (std::find(seen.begin(), seen.end(), s.hostname) == seen.end()) seen.push_back(s.hostname);
      if (s.hostname == slot.hostname) break;
    }
    group_rank = static_cast<int>(seen.size()) - 1;
    LaunchSpec spec;
    spec.argv = config_.command;
    RunVars run = *run_;
    if (config_.restart_mode) {
      // Every restart is a new torch.distributed world: a fresh store port for rank 0.
      if ((*driver_)->round() != port_round_) {
        std::string port_err;
        int port = discovery::FindFreePort(run.master_addr, &port_err);
        if (port != 0) master_port_ = port;
        port_round_ = (*driver_)->round();
      }
      if (master_port_ != 0) run.master_port = master_port_;
    }
    std::vector<std::string> restart_env;
    if (config_.restart_mode) {
      restart_env = {"TORCHELASTIC_RESTART_COUNT=" + std::to_string((*driver_)->resets()),
                     "TORCHELASTIC_MAX_RESTARTS=" + std::to_string(config_.reset_limit.value_or(-1))};
    }
    if (remote) {
      // Over SSH; a host that cannot be reached fails like a crashed rank (blacklisted).
      try {
        spec = RemoteLaunchSpec(config_, environment_, slot, group_rank, run, ssh_, restart_env);
      } catch (const std::runtime_error& e) {
        return Fail(key, e.what());
      }
    } else {
      std::string devices;
      if (run.gpus.enabled() && !GpuDevices(run.gpus, slot.local_rank, &devices, &err)) {
        return Fail(key, err + ": lower --max-np or the host's slots");
      }
      spec.env = BuildWorkerEnv(environment_, config_.tunables, slot, group_rank, run);
      // Ours win over inherited ones: drop those first (getenv finds the first of duplicates).
      if (config_.restart_mode) {
        std::erase_if(spec.env, [](const std::string& kv) {
          return kv.starts_with("TORCHELASTIC_RESTART_COUNT=") || kv.starts_with("TORCHELASTIC_MAX_RESTARTS=");
        });
      }
      spec.env.insert(spec.env.end(), restart_env.begin(), restart_env.end());
    }
    spdlog::debug("starting {}[{}] as rank {} of {}: {}", slot.hostname, slot.local_rank, slot.rank,
                  slot.size, JoinCommand(spec.argv));
    RankOutput output = output_;
    if (!config_.output_filename.empty()) {
      int out_fd = -1, err_fd = -1;
      int np = config_.num_proc.value_or(1);
      if (!OpenRankFiles(config_.output_filename, slot.rank, np, &out_fd, &err_fd, &err)) {
        if (out_fd >= 0) close(out_fd);
        return Fail(key, err);
      }
      std::string label = config_.output_filename + "/" + RankDirName(slot.rank, np);
      output.file_out = sink_->AddDestination(out_fd, true, label + "/stdout");
      output.file_err = sink_->AddDestination(err_fd, true, label + "/stderr");
    }
    int id = -1;
    if (!ranks_->Start(slot.rank, slot.hostname, spec, output, &err, &id)) return Fail(key, err);
    ids_[key] = id;
    slots_[id] = key;
    ++starts_[key];
    events_->Emit("rank_started", {{"rank", slot.rank}, {"host", slot.hostname},
                                   {"local_rank", slot.local_rank}, {"pid", ranks_->pid(id)},
                                   {"round", (*driver_)->round()}});
    if (!ranks_->AwaitExecs(&err)) spdlog::error("{}", err);  // it exits 127 and is reaped
  }

  void Stop(const SlotKey& key) override {
    auto it = ids_.find(key);
    if (it == ids_.end()) return;
    int id = it->second;
    ranks_->Signal(id, SIGTERM);
    auto timer = std::make_shared<asio::steady_timer>(*io_, GracePeriod(config_));
    RankSet* ranks = ranks_;
    timer->async_wait([timer, ranks, id](const boost::system::error_code& ec) {
      if (!ec) ranks->Signal(id, SIGKILL);
    });
  }

  // The slot a finished process served; forgets the mapping.
  // The slot of a process still running, and how many times that slot was restarted.
  std::optional<SlotKey> SlotFor(int id) const {
    auto it = slots_.find(id);
    return it == slots_.end() ? std::nullopt : std::optional<SlotKey>(it->second);
  }
  int Restarts(const SlotKey& key) const {
    auto it = starts_.find(key);
    return it == starts_.end() ? 0 : it->second - 1;
  }

  std::optional<SlotKey> Finished(int id) {
    auto it = slots_.find(id);
    if (it == slots_.end()) return std::nullopt;
    SlotKey key = it->second;
    slots_.erase(it);
    auto current = ids_.find(key);
    if (current != ids_.end() && current->second == id) ids_.erase(current);
    return key;
  }

 private:
  void Fail(const SlotKey& key, const std::string& err) {
    spdlog::error("cannot start {}[{}]: {}", key.first, key.second, err);
    auto callback = on_start_failure;
    asio::post(*io_, [callback, key] { callback(key, ExitStatus::Exited(kExitCommandNotFound)); });
  }

  asio::io_context* io_;
  RankSet* ranks_;
  SshHosts* ssh_;
  OutputSink* sink_;
  const JobConfig& config_;
  const std::vector<std::string>& environment_;
  const RunVars* run_;  // its rendezvous port is known only once the server listens
  RankOutput output_;
  const ElasticDriver* const* driver_;
  rendezvous::AccessList* access_;
  EventLog* events_;
  std::vector<discovery::Interface> interfaces_;
  std::map<SlotKey, int> ids_;
  std::map<int, SlotKey> slots_;
  std::map<SlotKey, int> starts_;
  int port_round_ = -1;
  int master_port_ = 0;
};

class NotifierAdapter : public CoordinatorNotifier {
 public:
  explicit NotifierAdapter(rendezvous::Notifier* notifier) : notifier_(notifier) {}
  void Register(const rendezvous::WorkerRegistration& registration,
                std::function<void(bool, std::string)> done) override {
    notifier_->Register(registration, std::move(done));
  }
  bool IsRegistered(const SlotKey& slot) const override {
    return notifier_->IsRegistered(slot.first, slot.second);
  }
  void Notify(const SlotKey& slot, rendezvous::HostUpdateResult res,
              std::function<void(bool, std::string)> done) override {
    notifier_->Notify(slot.first, slot.second, notifier_->NextTimestamp(), res, std::move(done));
  }

 private:
  rendezvous::Notifier* notifier_;
};

std::chrono::milliseconds ElasticTimeout(const JobConfig& config,
                                         const std::vector<std::string>& environment) {
  int seconds = 600;
  for (const std::string& kv : environment) {
    if (kv.starts_with("HOROVOD_ELASTIC_TIMEOUT=")) {
      try {
        seconds = std::stoi(kv.substr(24));
      } catch (const std::exception&) {
        spdlog::warn("ignoring HOROVOD_ELASTIC_TIMEOUT={}: not a whole number", kv.substr(24));
      }
    }
  }
  if (config.elastic_timeout_s) seconds = *config.elastic_timeout_s;
  return std::chrono::seconds(seconds);
}

}  // namespace

int RunElastic(const JobConfig& config, Spawner* spawner, const std::vector<std::string>& environment,
               EventLog* events) {
  std::string err;
  // Hosts come from the script, or are fixed (-H, --hostfile, or localhost:<np>).
  std::string fixed_hosts;
  if (config.host_discovery_script.empty()) {
    std::vector<discovery::HostSlots> hosts;
    if (!ResolveHosts(config, &hosts, &err)) {
      spdlog::error("{}", err);
      return kExitUsage;
    }
    for (const discovery::HostSlots& h : hosts) fixed_hosts += h.name + ":" + std::to_string(h.slots) + "\n";
  }
  RunVars run;
  std::string driver_ip;
  if (!discovery::ChooseLocalNics(config.network_interfaces, discovery::LocalInterfaces(), &run.nics,
                                  &driver_ip, &err)) {
    spdlog::error("{}", err);
    return kExitUsage;
  }
  int most_ranks = config.max_np.value_or(std::max(config.num_proc.value_or(1), 4096));
  if (!EnsureFileLimit(most_ranks, !config.output_filename.empty(), &err) && config.max_np) {
    spdlog::error("{}", err);
    return kExitUsage;
  }
  run.elastic = true;
  run.rendezvous_addr = driver_ip;
  run.master_addr = driver_ip;
  run.master_port = discovery::FindFreePort(driver_ip, &err);
  if (!LocalGpuSlots(config, environment, &run.gpus, &err)) {
    spdlog::error("{}", err);
    return kExitUsage;
  }

  Guardian guardian;
  if (!guardian.Start(&err)) spdlog::warn("{}; ranks may outlive etrun if it is killed", err);
  signal(SIGPIPE, SIG_IGN);

  asio::io_context io;
  asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGUSR1);
  signals.add(SIGUSR2);
  signals.add(SIGCHLD);

  OutputSink sink;
  RankOutput output = ConsoleOutput(config, &sink);
  SshHosts ssh;  // outlives the ranks: their stubs talk to it until they are reaped
  RankSet ranks(&io, spawner, &sink, &guardian, GracePeriod(config));

  ElasticOptions options;
  options.np = config.num_proc.value_or(1);
  options.min_np = config.min_np.value_or(options.np);
  options.max_np = config.max_np;
  options.default_slots = config.slots_per_host.value_or(1);
  options.elastic_timeout = ElasticTimeout(config, environment);
  options.reset_limit = config.reset_limit;
  options.restart_all = config.restart_mode;

  rendezvous::KvStore store;
  rendezvous::Notifier notifier(&io);
  NotifierAdapter notifier_adapter(&notifier);
  discovery::HostManager hosts(config.cooldown_range, [] { return static_cast<double>(random()) / (static_cast<double>(RAND_MAX) + 1.0); });
  const ElasticDriver* driver_view = nullptr;
  rendezvous::HttpServer* server_ptr = nullptr;
  rendezvous::AccessList access = BaseAccessList(config, discovery::LocalInterfaces());
  RankSetWorkers workers(&io, &ranks, &ssh, &sink, config, environment, &run, output, &driver_view,
                         &access, events);
  ElasticDriver driver(options, &hosts, &workers, &notifier_adapter, &store, Now());
  driver_view = &driver;
  driver.set_events(events);
  rendezvous::RendezvousHandler handler(&store, &driver);
  rendezvous::HttpServer server(&io, &handler);
  server_ptr = &server;
  server.set_access(&access);
  if (!server.Listen(driver_ip, 0, &err)) {
    spdlog::error("rendezvous server: {}", err);
    return kExitFailure;
  }
  run.rendezvous_port = server.port();  // before the first worker starts

  auto started = std::chrono::steady_clock::now();
  std::string control_name = JobName(config);
  ControlServer control(&io, [&](const rendezvous::HttpRequest& request,
                                 std::function<void(int, nlohmann::json)> respond) {
    if (request.method == "POST" && request.target == "/overrides") {
      // `etrun scale`: the whole new set of overrides, {"add": {host: slots}, "remove": [host],
      // "to": N or null}.
      nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
      HostOverrides next;
      try {
        for (const auto& [host, slots] : body.at("add").items()) {
          if (!discovery::IsValidHostName(host) || slots.get<int>() < 1) throw std::invalid_argument(host);
          next.add[host] = slots.get<int>();
        }
        for (const auto& host : body.at("remove")) next.remove.push_back(host.get<std::string>());
        if (!body.at("to").is_null()) next.to = body.at("to").get<int>();
      } catch (const std::exception&) {
        return respond(400, {{"error", "expected {\"add\": {host: slots}, \"remove\": [hosts], \"to\": N|null}"}});
      }
      if (next.to && *next.to < options.min_np) {
        return respond(400, {{"error", "--to " + std::to_string(*next.to) + " is below --min-np " +
                                           std::to_string(options.min_np)}});
      }
      driver.SetOverrides(next, Now());
      return respond(200, {{"ok", true}});
    }
    if (request.method != "GET" || request.target != "/status") {
      return respond(404, {{"error", "unknown request " + request.method + " " + request.target}});
    }
    auto now = std::chrono::steady_clock::now();
    nlohmann::json ranks_json = nlohmann::json::array();
    for (const RankSet::Running& r : ranks.Unfinished()) {
      std::optional<SlotKey> key = workers.SlotFor(r.id);
      if (!key) continue;
      int current = -1;
      for (const rendezvous::SlotInfo& s : driver.assignment()) {
        if (s.hostname == key->first && s.local_rank == key->second) current = s.rank;
      }
      ranks_json.push_back({{"rank", current}, {"label", r.rank}, {"host", r.host},
                            {"local_rank", key->second}, {"pid", r.pid},
                            {"state", driver.WorkerState(*key)}, {"restarts", workers.Restarts(*key)},
                            {"uptime_s", std::chrono::duration<double>(now - r.started).count()}});
    }
    auto optional_int = [](const std::optional<int>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    respond(200, {{"job", control_name}, {"state", driver.state()}, {"elastic", true},
                  {"pid", getpid()}, {"duration_s", std::chrono::duration<double>(now - started).count()},
                  {"world_size", driver.assignment().size()}, {"np", options.np},
                  {"min_np", options.min_np}, {"max_np", optional_int(options.max_np)},
                  {"resets", driver.resets()}, {"round", driver.round()}, {"ranks", ranks_json},
                  {"overrides", {{"add", driver.overrides().add}, {"remove", driver.overrides().remove},
                                 {"to", optional_int(driver.overrides().to)}}}});
  });
  if (std::string why; !control.Start(control_name, &why)) {
    spdlog::warn("no control endpoint (etrun status will not see this job): {}", why);
  }
  control_name = control.name();

  asio::steady_timer poll_timer(io), tick_timer(io);
  bool done = false;
  auto check_done = [&] {
    if (done || !driver.finished() || ranks.active() > 0) return;
    done = true;
    signals.cancel();
    poll_timer.cancel();
    tick_timer.cancel();
    server_ptr->Stop();
    io.stop();
  };
  workers.on_start_failure = [&](const SlotKey& key, ExitStatus status) {
    driver.OnWorkerExit(key, status, Now());
    check_done();
  };
  ranks.set_on_finished([&](const RankSet::Finished& f) {
    if (auto key = workers.Finished(f.id)) {
      if (!f.status.success() && ssh.Unreachable(key->first)) driver.OnHostUnreachable(key->first, Now());
      nlohmann::json fields = ExitFields(f.status);
      fields.update({{"rank", f.rank}, {"host", f.host}, {"local_rank", key->second}, {"pid", f.pid},
                     {"reason", driver.ExitReasonFor(*key, f.status)}});
      events->Emit("rank_exited", std::move(fields));
      driver.OnWorkerExit(*key, f.status, Now());
    }
    check_done();
  });

  // Discovery: one run at a time, the interval counted from the end of the last.
  auto interval = std::chrono::milliseconds(
      static_cast<long long>(config.discovery_interval_s.value_or(1.0) * 1000));
  auto timeout = std::chrono::milliseconds(
      static_cast<long long>(config.discovery_timeout_s.value_or(30.0) * 1000));
  discovery::ShellScriptRunner runner(config.host_discovery_script, timeout);
  std::function<void()> poll;
  auto after_poll = [&](discovery::ScriptResult result) {
    if (!result.ok || !result.errors.empty()) {
      // The script's stderr reaches the user as horovodrun passes it through.
      if (!result.errors.empty()) sink.Append(output.console_err, result.errors);
    }
    driver.OnDiscovery(result, Now());
    check_done();
    if (done) return;
    poll_timer.expires_after(interval);
    poll_timer.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) poll();
    });
  };
  poll = [&] {
    if (!fixed_hosts.empty()) return after_poll({true, fixed_hosts, "", ""});
    runner.Run([&io, after_poll](discovery::ScriptResult result) {
      asio::post(io, [after_poll, result] { after_poll(result); });
    });
  };

  std::function<void(const boost::system::error_code&)> tick = [&](const boost::system::error_code& ec) {
    if (ec) return;
    driver.OnTick(Now());
    check_done();
    if (done) return;
    tick_timer.expires_after(std::chrono::milliseconds(100));
    tick_timer.async_wait(tick);
  };

  int stop_signal = 0;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGCHLD) {
          ranks.Reap();
        } else if (sig == SIGUSR1 || sig == SIGUSR2) {
          ranks.SignalAll(sig);
        } else if (stop_signal != 0) {
          spdlog::warn("received {} again: killing every rank now", SignalName(sig));
          ranks.SignalAll(SIGKILL);
        } else {
          stop_signal = sig;
          driver.Abort(128 + sig, "received " + SignalName(sig));
        }
        check_done();
        if (!done) signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  spdlog::debug("rendezvous server listening on {}:{}", driver_ip, server.port());
  poll();
  tick_timer.expires_after(std::chrono::milliseconds(100));
  tick_timer.async_wait(tick);
  io.run();
  sink.Flush();
  if (!driver.summary().empty()) spdlog::error("{}", driver.summary());
  events->Emit("job_end", {{"exit_code", driver.exit_code()}, {"cause", driver.summary()}});
  return driver.exit_code();
}

}  // namespace etrun::launcher
