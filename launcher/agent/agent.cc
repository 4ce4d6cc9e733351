#include "launcher/agent/agent.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <algorithm>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "launcher/agent/host_network.h"
#include "launcher/hang/proc_facts.h"
#include "launcher/hang/python_hook.h"
#include "launcher/agent/wire.h"
#include "launcher/gpu_slots.h"
#include "launcher/output/output_sink.h"
#include "launcher/preflight/probe.h"
#include "launcher/preflight/self_check.h"
#include "launcher/process/environment.h"
#include "launcher/process/guardian.h"
#include "launcher/process/rank_set.h"
#include "launcher/process/shell_words.h"

namespace etrun::launcher::agent {

namespace asio = boost::asio;

namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

// The executable's NT_GNU_BUILD_ID note, in hex; "" when it has none.
std::string BuildId() {
  std::string id;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        auto* out = static_cast<std::string*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                desc + note->n_descsz <= end) {
              *out = Hex(reinterpret_cast<const unsigned char*>(desc), note->n_descsz);
              return 1;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // the first object is the executable: stop either way
      },
      &id);
  return id;
}

// Wraps each piece of a rank's output into a frame for the launcher (RankOutput::framer).
class FrameFramer : public LineFramer {
 public:
  FrameFramer(char op, uint32_t id) : op_(op), id_(id) {}
  void Feed(std::string_view data, const Emit& emit) override {
    frame_.clear();
    AppendFlushedFrame(&frame_, op_, id_, data);
    emit(frame_);
  }
  void Finish(const Emit&) override {}

 private:
  char op_;
  uint32_t id_;
  std::string frame_;
};

class Agent {
 public:
  explicit Agent(const AgentOptions& options) : options_(options) {}

  // Microseconds of this agent's clock: since it started.
  int64_t ClockUs(std::chrono::steady_clock::time_point t) const {
    return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(t - epoch_).count());
  }

  int Run() {
    std::string err;
    // The guardian forks while the agent has no other thread.
    if (!guardian_.Start(&err)) Say(err);
    signal(SIGPIPE, SIG_IGN);
    sink_ = std::make_unique<OutputSink>();
    out_ = sink_->AddDestination(STDOUT_FILENO, false, "the launcher");
    ranks_ = std::make_unique<RankSet>(&io_, &spawner_, sink_.get(), &guardian_,
                                       std::chrono::milliseconds(static_cast<int>(options_.grace_s * 1000)));
    ranks_->set_on_finished([this] { OnFinished(); });
    environment_ = CurrentEnvironment();
    network_.emplace(options_.host, EnvValue(environment_, "SSH_CONNECTION"));
    CountGpus();
    int in = dup(STDIN_FILENO);
    fcntl(in, F_SETFL, O_NONBLOCK);
    input_.emplace(io_, in);
    std::string hello = std::string(kHelloLine) + AgentId() + "\n";
    AppendFlushedFrame(&hello, kFacts, 0, Facts());
    sink_->Append(out_, hello);
    last_heard_ = std::chrono::steady_clock::now();
    // The heartbeat comes from a thread of its own, straight to the sink's writer: nothing the
    // loop does (rank starts, a fork and an exec each under load; output; the host's facts) can
    // hold it up, so a busy agent is never taken for a gone one (agent_link.h).
    heartbeat_ = std::thread([this] { Heartbeat(); });
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) { OnSignal(ec, sig); });
    Read();
    Tick();
    io_.run();
    {
      std::lock_guard<std::mutex> lock(heartbeat_mutex_);
      heartbeat_stop_ = true;
    }
    heartbeat_wake_.notify_one();
    heartbeat_.join();
    if (check_thread_.joinable()) check_thread_.join();  // its deadlines bound it
    probes_.reset();
    ranks_.reset();
    sink_.reset();
    guardian_.Dismiss();
    return 0;
  }

 private:
  std::string Facts() const {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    // clock_us: this agent's clock now, which its ranks' exit times are in (ExitText).
    std::string facts = "hostname=" + std::string(name) + "\npid=" + std::to_string(getpid()) +
                        "\nclock_us=" + std::to_string(ClockUs(std::chrono::steady_clock::now())) + "\n";
    if (gpus_.enabled()) {
      std::string list;
      for (const std::string& d : gpus_.pool) list += (list.empty() ? "" : ",") + d;
      facts += gpus_.counted ? "gpus=" + list + "\ngpus_from=" + gpus_.source + "\n" : "gpus=uncounted\n";
    }
    return facts;
  }

  // The host's GPUs, counted here as the launcher counts its own (gpu_slots.h), once.
  void CountGpus() {
    gpus_.gpus_per_rank = options_.gpus_per_rank;
    gpus_.ranks_per_gpu = options_.ranks_per_gpu;
    if (!gpus_.enabled()) return;
    std::string warning;
    DetectLocalGpus(environment_, &gpus_, &warning, &gpus_error_);  // an error: each GPU rank says it
    if (!warning.empty()) Say(warning);
  }

  // CUDA_VISIBLE_DEVICES for the rank `share` describes, from the host's GPUs. Returns false and
  // sets *err when the host cannot give it its share.
  bool ShareGpus(const GpuShare& share, std::string* devices, std::string* err) const {
    if (!gpus_error_.empty()) {
      *err = gpus_error_;
      return false;
    }
    GpuSlots slots = gpus_;
    slots.gpus_per_rank = share.gpus_per_rank;
    slots.ranks_per_gpu = share.ranks_per_gpu;
    if (GpuDevices(slots, share.local_rank, devices, err)) return true;
    *err += share.gpus_per_rank > 0 ? ": lower --gpus-per-rank or " + options_.host + "'s slots"
                                    : ": raise --ranks-per-gpu or lower " + options_.host + "'s slots";
    return false;
  }

  void Read() {
    input_->async_read_some(asio::buffer(buffer_, sizeof(buffer_)),
                            [this](const boost::system::error_code& ec, size_t n) {
                              if (n > 0) {
                                last_heard_ = std::chrono::steady_clock::now();
                                bool ok = reader_.Feed({buffer_, n}, [this](Frame& f) {
                                  backlog_.push_back(std::move(f));
                                });
                                Drain();
                                if (!ok) return Stop("the launcher's stream is not etrun's");
                              }
                              if (ec) return Stop("");
                              Read();
                            });
  }

  // Works through the launcher's frames in order, at most kStartsPerTurn rank starts (each a
  // fork, then a wait for its exec) per turn of the loop: a job's 64 ranks on a loaded host must
  // not hold the heartbeat up for seconds, or the launcher takes the host for lost.
  void Drain() {
    int started = 0;
    while (!backlog_.empty() && started < kStartsPerTurn) {
      Frame f = std::move(backlog_.front());
      backlog_.pop_front();
      if (f.op == kStart) ++started;
      OnFrame(f);
    }
    std::string err;
    if (!ranks_->AwaitExecs(&err)) Say(err);
    if (backlog_.empty() || drain_posted_) return;
    drain_posted_ = true;
    asio::post(io_, [this] {
      drain_posted_ = false;
      Drain();
    });
  }

  void OnFrame(Frame& f) {
    if (stopping_) return;
    switch (f.op) {
      case kStart: return StartRank(f.id, f.data);
      case kSignal: {
        auto it = ids_.find(f.id);
        int sig = atoi(f.data.c_str());
        if (it != ids_.end() && sig > 0) ranks_->Signal(it->second, sig);
        return;
      }
      case kRun: return RunDetached(f.data);
      case kGpus: {
        GpuShare share;
        if (!ParseGpuShare(f.data, &share)) return Stop("a bad GPU share from the launcher");
        shares_[f.id] = share;
        return;
      }
      case kPing: return;
      case kCheck: return CheckHost(f.data, static_cast<int>(f.id));
      case kPeers: return CheckPeers(f.data);
      case kProbe: {
        auto it = ids_.find(f.id);
        hang::ProcFacts facts;
        pid_t pid = it == ids_.end() ? -1 : ranks_->pid(it->second);
        if (pid <= 0 || !hang::ReadProcFacts(pid, &facts)) return;
        std::string frame;
        AppendFlushedFrame(&frame, kRankFacts, f.id, hang::ProcFactsText(facts));
        sink_->Append(out_, frame);
        return;
      }
      default: return Stop("unknown request from the launcher");
    }
  }

  // A pre-flight (launcher/preflight/): the host's own part, with the environment the rank kCheck
  // describes would get, and a listener for its peers' probes, kept until kPeers says it is over.
  // The checks block (connects with deadlines): they run on a thread, their answer comes back
  // through the loop.
  void CheckHost(const std::string& data, int slots) {
    RankStart start;
    std::string err;
    size_t end = data.find('\n');
    probe_key_ = data.substr(0, end);
    if (end == std::string::npos || !preflight::IsProbeKey(probe_key_)) {
      return Stop("a bad pre-flight from the launcher: no key");
    }
    if (!ParseRankStart(data.substr(end + 1), &start, &err)) return Stop("a bad pre-flight from the launcher: " + err);
    std::vector<std::string> env = OverlayEnvironment(environment_, start.env);
    std::vector<std::string> facts;
    std::vector<std::string> problems;
    if (network_->Vars(start.network, start.ssh_connection, &facts, &err)) {
      env = OverlayEnvironment(std::move(env), facts);
    } else {
      problems.push_back(err);
    }
    if (gpus_.enabled()) {  // what a rank's start would say, once for the host
      GpuSlots need = gpus_;
      if (!gpus_error_.empty()) {
        problems.push_back(gpus_error_);
      } else if (!CheckGpusFit(need, slots, &err)) {
        problems.push_back(err);
      }
    }
    probes_ = std::make_unique<preflight::ProbeServer>();
    if (!probes_->Start(probe_key_, &err)) {
      problems.push_back(err);
      probes_.reset();
    }
    int port = probes_ ? probes_->port() : 0;
    OffLoop([this, argv = std::move(start.argv), env = std::move(env), cwd = std::move(start.cwd),
             problems = std::move(problems), port] {
      preflight::SelfCheck check = preflight::CheckSelf(argv, env, cwd, std::chrono::seconds(2));
      check.problems.insert(check.problems.begin(), problems.begin(), problems.end());
      check.probe_port = port;
      return "self\n" + preflight::SelfCheckText(check);
    });
  }

  void CheckPeers(const std::string& data) {
    if (data.empty()) {
      probes_.reset();
      return;
    }
    std::vector<preflight::PeerTarget> targets;
    if (probe_key_.empty() || !preflight::ParsePeerTargets(data, &targets)) {
      return Stop("bad pre-flight peers from the launcher");
    }
    OffLoop([targets = std::move(targets), key = probe_key_] {
      std::string text = "peers\n";
      for (const preflight::PeerResult& r : preflight::ProbePeers(targets, key, preflight::ProbeLimits{})) {
        text += preflight::PeerResultLine(r);
      }
      return text;
    });
  }

  // Runs `work` on the check thread (after the one before it) and sends what it returns as a
  // kChecked frame, from the loop.
  void OffLoop(std::function<std::string()> work) {
    if (check_thread_.joinable()) check_thread_.join();
    check_thread_ = std::thread([this, work = std::move(work)] {
      std::string text = work();
      asio::post(io_, [this, text = std::move(text)] {
        std::string frame;
        AppendFlushedFrame(&frame, kChecked, 0, text);
        sink_->Append(out_, frame);
      });
    });
  }

  // The rank kStart describes, exec'd here with no shell: in its directory, with its
  // variables over the login's this agent inherited, its share of the host's GPUs and the host's
  // network facts, argv[0] found on its PATH.
  void StartRank(uint32_t id, const std::string& data) {
    RankStart start;
    std::string err;
    if (!ParseRankStart(data, &start, &err)) return Stop("a bad rank from the launcher: " + err);
    LaunchSpec spec;
    spec.argv = std::move(start.argv);
    spec.cwd = std::move(start.cwd);
    spec.env = environment_;
    if (auto share = shares_.find(id); share != shares_.end()) {
      std::string devices;
      bool ok = ShareGpus(share->second, &devices, &err);
      shares_.erase(share);
      if (!ok) return Refuse(id, "etrun: error: agent on " + options_.host + ": " + err, kExitUsage);
      spec.env = OverlayEnvironment(std::move(spec.env), {"CUDA_VISIBLE_DEVICES=" + devices});
    }
    spec.env = OverlayEnvironment(std::move(spec.env), start.env);
    std::vector<std::string> facts;
    if (!network_->Vars(start.network, start.ssh_connection, &facts, &err)) {
      return Refuse(id, err, kHostNetworkFailure);
    }
    spec.env = OverlayEnvironment(std::move(spec.env), facts);
    if (!hang::ApplyPythonHook(&spec.env, &err) && !hook_warned_) {
      hook_warned_ = true;  // once per host: the reason is the same for all its ranks
      Say("ranks start without the stack-dump hook (--hang-timeout shows no Python stack of "
          "theirs): " + err);
    }
    RankOutput output;
    output.console_out = out_;
    output.console_err = out_;
    output.framer = [id](bool is_stderr) -> std::unique_ptr<LineFramer> {
      return std::make_unique<FrameFramer>(is_stderr ? kStderr : kStdout, id);
    };
    int set_id = -1;
    if (!ranks_->Start(static_cast<int>(id), options_.host, -1, spec, output, &err, &set_id)) {
      return Refuse(id, "etrun: error: agent on " + options_.host + ": " + err, kExitCommandNotFound);
    }
    ids_[id] = set_id;
    launcher_ids_[set_id] = id;
  }

  // Rank `id` does not start: its stderr says `line`, and it exits with `code`.
  void Refuse(uint32_t id, const std::string& line, int code) {
    std::string frames;
    AppendFlushedFrame(&frames, kStderr, id, line + "\n");
    // With its time, in this agent's clock as every exit of the host: a refusal and the ranks the
    // launcher then stops here compare on one clock (the launcher's arrival time, against a
    // translated one, could put a stopped rank first).
    AppendFlushedFrame(&frames, kExit, id, ExitText(ExitStatus::Exited(code), ClockUs(std::chrono::steady_clock::now())));
    sink_->Append(out_, frames);
  }

  static void RunDetached(const std::string& command) {
    pid_t child = fork();
    if (child < 0) return;
    if (child == 0) {
      if (fork() == 0) {
        setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
          dup2(null, 0);
          dup2(null, 1);
          dup2(null, 2);
        }
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }

  void OnFinished() {
    RankSet::Finished f;
    std::string frames;
    while (ranks_->NextFinished(&f)) {
      auto it = launcher_ids_.find(f.id);
      if (it == launcher_ids_.end()) continue;
      AppendFlushedFrame(&frames, kExit, it->second, ExitText(f.status, ClockUs(f.exited_at)));
      ids_.erase(it->second);
      launcher_ids_.erase(it);
    }
    if (!frames.empty()) sink_->Append(out_, frames);
    MaybeDone();
  }

  void OnSignal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGCHLD) {
      ranks_->Reap();
    } else if (sig == SIGTERM) {
      std::string frame;
      AppendFlushedFrame(&frame, kTerm, 0, "");
      sink_->Append(out_, frame);
    } else {
      Stop("");
    }
    if (!done_) signals_.async_wait([this](const boost::system::error_code& e, int s) { OnSignal(e, s); });
  }

  void Heartbeat() {
    std::string frame;
    AppendFlushedFrame(&frame, kAlive, 0, "");
    std::unique_lock<std::mutex> lock(heartbeat_mutex_);
    while (!heartbeat_wake_.wait_for(lock, std::chrono::seconds(1), [this] { return heartbeat_stop_; })) {
      sink_->Append(out_, frame);
    }
  }

  void Tick() {
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || done_) return;
      // Unread pings are the launcher's word too: this agent, not the launcher, was late (it
      // was stopped, or starved, and its loop came back to this timer first).
      int unread = 0;
      if (input_ && ioctl(input_->native_handle(), FIONREAD, &unread) == 0 && unread > 0) {
        last_heard_ = std::chrono::steady_clock::now();
      }
      auto silent = std::chrono::steady_clock::now() - last_heard_;
      if (!stopping_ && silent > std::chrono::duration<double>(options_.launcher_timeout_s)) {
        Stop("nothing from the launcher for " + std::to_string(options_.launcher_timeout_s) + " s");
      }
      Tick();
    });
  }

  // The launcher is gone (or asked nothing of sense): stop the ranks and exit.
  void Stop(const std::string& why) {
    if (!why.empty()) Say(why + "; stopping its ranks");
    if (stopping_) return MaybeDone();
    stopping_ = true;
    input_->close();
    ranks_->SignalAll(SIGTERM);
    kill_timer_.expires_after(std::chrono::milliseconds(static_cast<int>(options_.grace_s * 1000)));
    kill_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) ranks_->SignalAll(SIGKILL);
    });
    MaybeDone();
  }

  void MaybeDone() {
    if (!stopping_ || done_ || ranks_->active() > 0) return;
    done_ = true;
    io_.stop();
  }

  void Say(const std::string& what) { spdlog::warn("{}", what); }

  AgentOptions options_;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  bool hook_warned_ = false;
  asio::io_context io_;
  asio::signal_set signals_{io_, SIGCHLD, SIGTERM, SIGINT};
  asio::steady_timer timer_{io_};
  asio::steady_timer kill_timer_{io_};
  Guardian guardian_;
  LocalSpawner spawner_;
  std::unique_ptr<OutputSink> sink_;
  int out_ = -1;
  std::unique_ptr<RankSet> ranks_;
  std::vector<std::string> environment_;
  std::optional<HostNetworkFinder> network_;  // the host's network facts, found once each
  std::optional<asio::posix::stream_descriptor> input_;
  char buffer_[1 << 16];
  FrameReader reader_;
  static constexpr int kStartsPerTurn = 8;
  std::deque<Frame> backlog_;             // frames from the launcher not yet acted on (Drain)
  bool drain_posted_ = false;
  GpuSlots gpus_;                         // the host's GPUs, with the job's flags
  std::string gpus_error_;                // they could not be counted: why
  std::map<uint32_t, GpuShare> shares_;   // launcher id -> the GPUs its start gets
  std::map<uint32_t, int> ids_;           // launcher id -> RankSet id
  std::map<int, uint32_t> launcher_ids_;  // and back
  std::chrono::steady_clock::time_point last_heard_;
  std::unique_ptr<preflight::ProbeServer> probes_;  // a pre-flight's listener, while it lasts
  std::string probe_key_;                            // and its key, from kCheck
  std::thread check_thread_;                         // a pre-flight's checks
  std::thread heartbeat_;
  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_wake_;
  bool heartbeat_stop_ = false;  // guarded by heartbeat_mutex_
  bool stopping_ = false;
  bool done_ = false;
};

bool ParseSeconds(const char* text, double* out) {
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0) || v > 86400) return false;
  *out = v;
  return true;
}

}  // namespace

const std::string& AgentId() {
  static const std::string id = [] {
    std::string build = BuildId();
    return build.empty() ? std::string("unknown") : build;
  }();
  return id;
}

bool ParseAgentArgs(int argc, char** argv, AgentOptions* options, std::string* err) {
  for (int i = 0; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      *err = "missing value of " + flag;
      return false;
    }
    const char* value = argv[++i];
    if (flag == "--host") {
      options->host = value;
    } else if (flag == "--launcher-timeout") {
      if (!ParseSeconds(value, &options->launcher_timeout_s)) {
        *err = "bad --launcher-timeout";
        return false;
      }
    } else if (flag == "--grace") {
      if (!ParseSeconds(value, &options->grace_s)) {
        *err = "bad --grace";
        return false;
      }
    } else if (flag == "--gpus-per-rank" || flag == "--ranks-per-gpu") {
      char* end = nullptr;
      long n = strtol(value, &end, 10);
      if (end == value || *end != '\0' || n < 1 || n > 1 << 20) {
        *err = "bad " + flag;
        return false;
      }
      (flag == "--gpus-per-rank" ? options->gpus_per_rank : options->ranks_per_gpu) = static_cast<int>(n);
    } else {
      *err = "unknown argument " + flag;
      return false;
    }
  }
  return true;
}

std::string AgentArgs(const AgentOptions& options) {
  char timeout[32], grace[32];
  snprintf(timeout, sizeof(timeout), "%g", options.launcher_timeout_s);
  snprintf(grace, sizeof(grace), "%g", options.grace_s);
  std::string args =
      "--host " + ShellQuote(options.host) + " --launcher-timeout " + timeout + " --grace " + grace;
  if (options.gpus_per_rank > 0) args += " --gpus-per-rank " + std::to_string(options.gpus_per_rank);
  if (options.ranks_per_gpu > 0) args += " --ranks-per-gpu " + std::to_string(options.ranks_per_gpu);
  return args;
}

int RunAgent(const AgentOptions& options) {
  // stdout is the launcher's stream: what the agent's parts log goes to stderr, which the
  // launcher passes on (agent_link.h).
  auto logger = spdlog::stderr_logger_mt("agent");
  logger->set_pattern("etrun agent on " + options.host + ": %v");
  spdlog::set_default_logger(logger);
  return Agent(options).Run();
}

}  // namespace etrun::launcher::agent
