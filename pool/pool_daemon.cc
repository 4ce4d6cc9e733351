#include "pool/pool_daemon.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "discovery/network.h"
#include "events/event_log.h"
#include "events/schema.h"
#include "control/control.h"
#include "pool/pool_client.h"
#include "pool/pool_state.h"
#include "pool/pool_wire.h"

namespace etrun::pool {

namespace asio = boost::asio;
namespace field = events::field;
using nlohmann::json;

namespace {

constexpr std::chrono::milliseconds kTick(100);


// The devices of each host, by DaemonOptions::gpus.
class Devices {
 public:
  bool Init(const DaemonOptions& options, std::string* err) {
    ranks_per_gpu_ = options.ranks_per_gpu;
    interfaces_ = discovery::LocalInterfaces();
    if (options.gpus == "none") return true;
    if (options.gpus != "auto") {
      int count = 0;
      auto [end, ec] = std::from_chars(options.gpus.data(), options.gpus.data() + options.gpus.size(), count);
      if (ec != std::errc() || end != options.gpus.data() + options.gpus.size() || count < 1) {
        *err = "--gpus " + options.gpus + ": give auto, none or a count of GPUs per host";
        return false;
      }
      for (int i = 0; i < count; ++i) every_.push_back(std::to_string(i));
      return true;
    }
    if (options.local_gpus.empty()) return true;  // a CPU machine as far as the pool can tell
    local_ = options.local_gpus;
    auto_remote_ = true;
    spdlog::info("this machine's GPUs ({}): {}", options.local_gpus_source, fmt::join(local_, ","));
    return true;
  }

  PoolHost Make(const discovery::HostSlots& h) const {
    PoolHost host{h.name, h.slots, every_};
    if (auto_remote_) {
      if (discovery::IsLocalHost(h.name, interfaces_)) {
        host.devices = local_;
      } else {
        for (int i = 0; i * ranks_per_gpu_ < h.slots; ++i) host.devices.push_back(std::to_string(i));
      }
    }
    // With GPUs, a host has no more slots than its GPUs can carry.
    int most = static_cast<int>(host.devices.size()) * ranks_per_gpu_;
    if (!host.devices.empty() && host.slots > most) {
      spdlog::warn("{} lists {} slots but has {} GPU{} x --ranks-per-gpu {}: using {}", h.name,
                   h.slots, host.devices.size(), host.devices.size() == 1 ? "" : "s", ranks_per_gpu_, most);
      host.slots = most;
    }
    return host;
  }

 private:
  int ranks_per_gpu_ = 1;
  std::vector<discovery::Interface> interfaces_;
  std::vector<std::string> every_;  // --gpus N
  std::vector<std::string> local_;  // auto: this machine's
  bool auto_remote_ = false;
};

class Daemon {
 public:
  Daemon(const DaemonOptions& options, discovery::HostSource* discovery)
      : options_(options),
        state_(options.name, options.ranks_per_gpu, options.min_hold,
               [this](const char* event, json fields) { OnEvent(event, std::move(fields)); }),
        signals_(io_, SIGINT, SIGTERM, SIGHUP),
        tick_(io_),
        poll_(io_),
        discovery_(options.discovery_script.empty() ? nullptr : discovery),
        machine_(control::MachineName()) {}

  int Run() {
    std::string err;
    if (!devices_.Init(options_, &err)) return Fail(err, 2);
    if (!options_.events_file.empty() && !events_.Open(options_.events_file, &err)) {
      return Fail("--events-file " + options_.events_file + ": " + err, 2);
    }
    std::string address = "127.0.0.1";
    int port = 0;
    if (!options_.listen.empty() && !SplitListen(options_.listen, &address, &port, &err)) return Fail(err, 2);
    for (const control::JobEntry& p : control::ListJobs(&err, control::kPoolRegistry)) {
      if (p.job == options_.name) {
        return Fail(fmt::format("pool '{}' is already running (pid {}): stop it with `etrun pool "
                                "stop {}` or pick another name", p.job, p.pid, p.job), 1);
      }
    }
    if (!err.empty()) return Fail(err, 1);
    book_path_ = control::RegistryDir(&err, control::kPoolRegistry) + "/" + options_.name + ".book.json";
    LoadBook();
    // A new token at every start (jobs on this machine find it in the registry; others are
    // given it again: `etrun pool token`).
    server_ = std::make_unique<control::ControlServer>(
        &io_,
        [this](const rendezvous::HttpRequest& r, std::function<void(int, json)> respond) {
          Handle(r, std::move(respond));
        },
        kMaxBodyBytes);
    if (!server_->Start(options_.name, &err, control::kPoolRegistry, address, port)) {
      return Fail("cannot open pool '" + options_.name + "': " + err, 1);
    }
    json hosts = json::array();
    std::vector<PoolHost> fixed;
    int total = 0;
    for (const discovery::HostSlots& h : options_.hosts) {
      fixed.push_back(Host(h));
      hosts.push_back({{field::kHost, fixed.back().name}, {field::kSlots, fixed.back().slots},
                       {field::kDevices, fixed.back().devices}});
      total += fixed.back().slots;
    }
    events_.Emit(events::kPoolStart, {{field::kPool, options_.name}, {field::kHosts, hosts},
                                      {field::kTotal, total}});
    if (options_.discovery_script.empty()) {
      state_.SetHosts(std::move(fixed), Now());
      Restore();
    }
    spdlog::info("pool '{}' is up: {} slots on {} host{}{}; jobs join with `etrun --pool {} "
                 "[--priority N] --min-np N --max-np N COMMAND`",
                 options_.name, state_.total(), state_.hosts().size(),
                 state_.hosts().size() == 1 ? "" : "s",
                 options_.discovery_script.empty() ? "" : " (hosts from the discovery script)",
                 options_.name);
    if (!options_.start_through.command.empty()) {
      spdlog::info("jobs start their ranks on the pool's hosts through `{}` (a job on one of "
                   "them runs that host's ranks itself)", options_.start_through.command);
    }
    if (address != "127.0.0.1") {
      spdlog::warn("pool '{}' listens on {}:{}: anyone with its token (`etrun pool token {}`, new "
                   "at every start) can join or steer it", options_.name, address,
                   server_->entry().port, options_.name);
    }
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (!ec) Shutdown(fmt::format("signal {}", sig));
    });
    Tick();
    if (discovery_) Poll();
    io_.run();
    if (discovery_) discovery_->Stop();
    return 0;
  }

 private:
  int Fail(const std::string& err, int code) {
    spdlog::error("{}", err);
    return code;
  }

  static bool SplitListen(const std::string& text, std::string* address, int* port, std::string* err) {
    if (!SplitHostPort(text, address, port, /*allow_any_port=*/true) ||
        discovery::ResolveIPv4(*address).empty()) {
      *err = "--listen " + text + ": give ADDRESS:PORT, e.g. 0.0.0.0:7070";
      return false;
    }
    return true;
  }

  // The book of a pool of this name that ran before (stopped, or killed): its jobs may still
  // train on the slots they held, so those stay theirs until they join again or are gone.
  // Read before anything is written over it; applied once the pool knows its hosts.
  void LoadBook() {
    std::ifstream in(book_path_);
    if (!in) return;
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) {
      spdlog::warn("ignoring {}: not JSON", book_path_);
      return;
    }
    Book book;
    if (BookFromJson(j, &book)) previous_book_ = std::move(book);
  }

  void Restore() {
    if (restored_) return;
    restored_ = true;
    if (!previous_book_) return SaveBook();
    state_.Restore(*previous_book_, Now());
    previous_book_.reset();
    size_t jobs = state_.Holdings().jobs.size();
    if (jobs > 0) {
      spdlog::info("{} job{} of the previous pool '{}' keep{} their slots until they join again",
                   jobs, jobs == 1 ? "" : "s", options_.name, jobs == 1 ? "s" : "");
    }
    SaveBook();
  }

  // Keeps the book on disk (0600 in the private registry directory), replaced atomically.
  void SaveBook() {
    if (!restored_ || book_path_.empty() || book_path_[0] != '/') return;
    std::string tmp = book_path_ + ".tmp" + std::to_string(getpid());
    Book book = state_.Holdings();
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << BookToJson(book).dump() << "\n";
      if (!out) return;
    }
    chmod(tmp.c_str(), 0600);
    rename(tmp.c_str(), book_path_.c_str());
  }

  // A host of the pool: its slots, devices and how jobs elsewhere start ranks there.
  PoolHost Host(const discovery::HostSlots& h) const {
    PoolHost host = devices_.Make(h);
    host.start_through = options_.start_through;
    return host;
  }

  void SetHosts(const std::vector<discovery::HostSlots>& hosts) {
    std::vector<PoolHost> made;
    for (const discovery::HostSlots& h : hosts) made.push_back(Host(h));
    state_.SetHosts(std::move(made), Now());
  }

  void Poll() {
    discovery_->Poll([this](discovery::HostGrant grant) {
      asio::post(io_, [this, grant = std::move(grant)] {
        if (!grant.ok) {
          spdlog::warn("pool '{}': {}: keeping the hosts", options_.name, grant.failure);
        } else {
          for (const std::string& w : grant.warnings) spdlog::warn("pool '{}': {}", options_.name, w);
          SetHosts(grant.hosts);
          Restore();
        }
        if (stopping_) return;
        poll_.expires_after(options_.discovery_interval);
        poll_.async_wait([this](const boost::system::error_code& ec) {
          if (!ec) Poll();
        });
      });
    });
  }

  void Tick() {
    tick_.expires_after(kTick);
    tick_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      auto now = Now();
      for (const PoolState::LocalJob& job : state_.LocalJobs()) {
        if (!control::ProcessAlive(job.pid, job.pid_start)) state_.Leave(job.id, events::kCrashed, now);
      }
      for (const auto& [id, heard] : state_.RemoteJobs()) {
        if (now - heard > options_.lease) state_.Leave(id, events::kLost, now);
      }
      state_.Tick(now);
      std::string why;
      if (!state_.Consistent(&why)) spdlog::error("pool book inconsistent: {}", why);
      Tick();
    });
  }

  void Shutdown(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    spdlog::info("pool '{}' stops ({}); its jobs train on with the slots they hold", options_.name, why);
    events_.Emit(events::kPoolStop);
    // Jobs that train on need the book at the next start; with none, nothing is left behind.
    if (restored_ && state_.Holdings().jobs.empty()) unlink(book_path_.c_str());
    server_.reset();  // unpublished: jobs find no pool and train on
    io_.stop();
  }

  void OnEvent(const char* event, json fields) {
    std::string name = event;
    if (name == events::kPoolAllocation) {
      std::string text;
      for (const auto& [job, held] : fields[field::kHeld].items()) {
        text += fmt::format("{}{} {}/{}", text.empty() ? "" : ", ", job, held.get<int>(),
                            fields[field::kTarget].value(job, 0));
      }
      spdlog::info("allocation (held/target of {}): {}{}", fields[field::kTotal].get<int>(),
                   text.empty() ? "no jobs" : text,
                   fields[field::kQueued].empty() ? "" : "; queued: " + fields[field::kQueued].dump());
    } else if (name == events::kPoolJobJoined) {
      spdlog::info("job '{}' joined (priority {}, {}..{} slots)", fields[field::kJob].get<std::string>(),
                   fields[field::kPriority].get<int>(), fields[field::kMinNp].get<int>(),
                   fields[field::kMaxNp].get<int>());
    } else if (name == events::kPoolJobLeft) {
      spdlog::info("job '{}' left ({})", fields[field::kJob].get<std::string>(),
                   fields[field::kReason].get<std::string>());
    } else if (name == events::kPoolPriority) {
      spdlog::info("job '{}' priority {}", fields[field::kJob].get<std::string>(),
                   fields[field::kPriority].get<int>());
    }
    events_.Emit(event, std::move(fields));
    SaveBook();
  }

  void Handle(const rendezvous::HttpRequest& r, std::function<void(int, json)> respond) {
    auto now = Now();
    std::string path = r.target.substr(0, r.target.find('?'));
    if (r.method == "GET" && path == "/status") return respond(200, state_.Status(now));
    if (r.method == "POST" && path == "/stop") {
      respond(200, OkToJson());
      asio::post(io_, [this] { Shutdown("asked to stop"); });
      return;
    }
    json body = json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
    if (!body.is_object()) return respond(400, ErrorToJson("the body is not a JSON object"));
    // Until the first discovery run and the last pool's book are in, holdings are not known:
    // jobs wait (and train on) rather than be cut to nothing.
    if (!restored_ && r.method == "POST" && path.starts_with("/jobs")) {
      return respond(503, ErrorToJson("pool '" + options_.name + "' is starting: its hosts are not known yet"));
    }
    if (r.method == "POST" && path == "/jobs") return Join(body, now, respond);
    if (r.method == "POST" && path == "/priority") return Priority(body, now, respond);
    static constexpr std::string_view kJobs = "/jobs/";
    if (path.starts_with(kJobs)) {
      std::string rest = path.substr(kJobs.size());
      size_t slash = rest.find('/');
      std::string id = rest.substr(0, slash);
      std::string verb = slash == std::string::npos ? "" : rest.substr(slash + 1);
      if (r.method == "DELETE" && verb.empty()) {
        if (!state_.Leave(id, events::kEnded, now)) return respond(404, ErrorToJson("no job '" + id + "'"));
        return respond(200, OkToJson());
      }
      if (r.method == "POST" && verb == "sync") return Sync(id, body, now, respond);
    }
    respond(404, ErrorToJson("no such endpoint: " + r.method + " " + path));
  }

  void Join(const json& body, PoolTime now, const std::function<void(int, json)>& respond) {
    static const char kShape[] =
        "expected {\"name\", \"priority\", \"min_np\", \"max_np\", \"pid\", \"machine\", \"held\"}";
    JoinRequest request;
    std::string machine;
    if (!JoinRequestFromJson(body, &request, &machine)) return respond(400, ErrorToJson(kShape));
    // On this machine and visible here, the very process that sent it: a job in another pid
    // namespace, or of an etrun that sends no start time, is watched by lease.
    request.local = machine == machine_ && control::ProcessAlive(request.pid, request.pid_start);
    std::string err;
    std::string id = state_.Join(request, now, &err);
    if (id.empty()) return respond(400, ErrorToJson(err));
    respond(200, JoinReplyToJson({id, state_.Version(id)}));
  }

  void Sync(const std::string& id, const json& body, PoolTime now,
            const std::function<void(int, json)>& respond) {
    SyncRequest request;
    if (!SyncRequestFromJson(body, &request)) {
      return respond(400, ErrorToJson("expected {\"live\": {host: [local ranks]}, \"seen\": N}"));
    }
    Grant grant;
    std::string err;
    // 410: this pool does not know the job (restarted without a book, or counted it gone).
    if (!state_.Sync(id, request.live, request.seen, now, &grant, &err)) {
      return respond(410, ErrorToJson(err));
    }
    respond(200, GrantToJson(grant));
  }

  void Priority(const json& body, PoolTime now, const std::function<void(int, json)>& respond) {
    PriorityRequest request;
    if (!PriorityRequestFromJson(body, &request)) {
      return respond(400, ErrorToJson("expected {\"job\": NAME, \"priority\": N}"));
    }
    // Out of int range: refused by SetPriority's range check like any other bad number.
    int value = request.priority < 1 || request.priority > INT32_MAX ? 0 : static_cast<int>(request.priority);
    std::string err;
    if (!state_.SetPriority(request.job, value, now, &err)) {
      return respond(state_.HasJob(request.job) ? 400 : 404, ErrorToJson(err));
    }
    respond(200, OkToJson());
  }

  static PoolTime Now() { return std::chrono::steady_clock::now(); }

  DaemonOptions options_;
  asio::io_context io_;
  events::EventLog events_;
  PoolState state_;
  Devices devices_;
  asio::signal_set signals_;
  asio::steady_timer tick_;
  asio::steady_timer poll_;
  discovery::HostSource* discovery_;  // the discovery script's hosts; null without one
  std::unique_ptr<control::ControlServer> server_;
  std::string machine_;
  std::string book_path_;  // the pool's book, kept for its next start
  std::optional<Book> previous_book_;  // the last pool's, until restored
  bool restored_ = false;  // the last pool's book applied: this one's may be written
  bool stopping_ = false;
};

}  // namespace

int RunPoolDaemon(const DaemonOptions& options, discovery::HostSource* discovery) {
  Daemon daemon(options, discovery);
  return daemon.Run();
}

}  // namespace etrun::pool
