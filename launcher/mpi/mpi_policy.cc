#include "launcher/mpi/mpi_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "discovery/host_slots.h"
#include "discovery/network.h"
#include "events/exit_status.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/mpi/mpi_output.h"
#include "launcher/process/child.h"
#include "launcher/process/environment.h"
#include "launcher/process/program_output.h"
#include "launcher/process/program_path.h"
#include "launcher/process/shell_words.h"
#include "launcher/rank_launcher.h"
#include "launcher/worker_env.h"

namespace etrun::launcher {
namespace {

// `environment` with the tunables' variables set (replaced in place, or appended).
std::vector<std::string> MpirunEnv(const std::vector<std::string>& environment,
                                   const Tunables& tunables) {
  std::vector<std::string> env = environment;
  for (const auto& [name, value] : TunableEnv(tunables)) {
    std::string kv = name + "=" + value;
    auto it = std::find_if(env.begin(), env.end(), [&name](const std::string& e) {
      return e.size() > name.size() && e.starts_with(name) && e[name.size()] == '=';
    });
    if (it != env.end()) {
      *it = std::move(kv);
    } else {
      env.push_back(std::move(kv));
    }
  }
  return env;
}

// Whether process_vm_readv works here. Open MPI's shared-memory transport (vader) copies large
// messages with it; container seccomp profiles often forbid it, and then every large message
// fails ("Read -1, expected ..."). Reading our own memory needs no ptrace permission, so a
// failure means the call itself is blocked.
bool CrossMemoryAttachWorks() {
  char source = 'x', target = 0;
  iovec local{&target, 1}, remote{&source, 1};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1 && target == 'x';
}

}  // namespace

bool AddOpenMpiEnv(const std::string& kv, std::vector<std::string>* env) {
  std::string prefix = kv.substr(0, kv.find('=') + 1);
  for (const std::string& e : *env) {
    if (e.starts_with(prefix)) return false;
  }
  env->push_back(kv);
  return true;
}

std::string MpiFlavor(const std::string& output) {
  if (output.find("Open MPI") != std::string::npos || output.find("OpenRTE") != std::string::npos) {
    return "Open MPI";
  }
  for (const char* name : {"IBM Spectrum MPI", "MPICH", "Intel(R) MPI"}) {
    if (output.find(name) != std::string::npos) return name;
  }
  return "";
}

bool FindMpirun(const std::vector<std::string>& environment, MpiInstall* install,
                std::string* err) {
  *install = MpiInstall{};
  std::string unused;
  install->path = FindProgram("mpirun", EnvValue(environment, "PATH"), &unused);
  if (install->path.empty()) {
    *err = "no mpirun on PATH";
    return false;
  }
  ProgramOutput result;
  if (!RunForOutput({install->path, "--version"}, environment, std::chrono::seconds(30), &result,
                    err)) {
    return false;
  }
  std::string text = result.out + result.err;
  install->version = text.substr(0, text.find('\n'));
  if (result.exit_code != 0) {
    *err = "'" + install->path + " --version' exited with code " +
           std::to_string(result.exit_code) +
           (install->version.empty() ? "" : ": " + install->version);
    return false;
  }
  install->flavor = MpiFlavor(text);
  return true;
}

bool MpiPolicy::Prepare(JobResult* result) {
  const JobConfig& config = context_->config();
  std::string err;
  std::vector<discovery::HostSlots> hosts;
  if (!JobHosts(config, &hosts, &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  MpiJob job;
  job.hosts = config.hosts_flag.empty() ? discovery::FormatHosts(hosts) : config.hosts_flag;
  job.num_hosts = static_cast<int>(hosts.size());
  job.env = MpirunEnv(context_->environment(), config.tunables);
  if (!ChooseNetwork(hosts, &job, result) || !FindOpenMpi(&job, result)) return false;
  if (!BuildMpirunArgv(config, job, &argv_, &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  env_ = std::move(job.env);
  np_ = config.num_proc.value_or(1);
  // etrun writes --output-filename's files itself, whole lines (see mpi_policy.h).
  auto out = std::find(argv_.begin(), argv_.end(), "--output-filename");
  if (out != argv_.end() && out + 1 != argv_.end()) {
    output_dir_ = *(out + 1);
    argv_.erase(out, out + 2);
  }
  return true;
}

// As horovodrun: a job on this machine only uses the interfaces carrying 127.0.0.1 (or the ones
// named); with remote hosts, only named ones (horovodrun would probe every host with Horovod's
// task service; without names etrun lets Open MPI choose).
bool MpiPolicy::ChooseNetwork(const std::vector<discovery::HostSlots>& hosts, MpiJob* job,
                              JobResult* result) {
  const JobConfig& config = context_->config();
  std::vector<std::string> names;
  for (const discovery::HostSlots& h : hosts) names.push_back(h.name);
  discovery::HostDirectory& directory = context_->host_directory();
  directory.Resolve(names);
  bool all_local = std::all_of(names.begin(), names.end(), [&directory](const std::string& h) {
    return directory.Lookup(h).local;
  });
  if (!all_local) {
    job->nics = config.network_interfaces;
    return true;
  }
  discovery::ListenChoice listen;
  std::string err;
  if (!discovery::ChooseListenAddress(config.network_interfaces, /*hosts_known=*/true, {},
                                      !config.start.command.empty(), directory.interfaces(),
                                      &listen, &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  job->nics = listen.nics;
  return CheckHere(result);
}

// A job on this machine only: what mpirun would fail on later, said now as the other modes say it.
bool MpiPolicy::CheckHere(JobResult* result) {
  const JobConfig& config = context_->config();
  // mpirun would print a box and exit 134; say it as the other modes do, before it starts.
  // Not with --mpi-args, which may move the ranks (-wdir) or give them another PATH (-x).
  std::string cause = config.mpi_args.empty() ? CommandCannotRun(config.command, context_->environment()) : "";
  if (!cause.empty()) {
    *result = {kExitCommandNotFound, cause};
    return false;
  }
  // mpirun holds each rank's pipes here as etrun does in a static job: an -np that no open-file
  // limit allows is refused as there, before mpirun tries (it would spin, flooding its log,
  // until stopped).
  int np = config.num_proc.value_or(1);
  FileLimit* limit = context_->file_limit();
  std::string err;
  if (limit != nullptr &&
      !limit->Ensure(static_cast<rlim_t>(np) * 3 + 64, fmt::format("{} ranks", np), &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  return true;
}

// mpirun on job->env's PATH, Open MPI's; with the single-copy setting where the kernel blocks it.
bool MpiPolicy::FindOpenMpi(MpiJob* job, JobResult* result) {
  if (!CrossMemoryAttachWorks() && AddOpenMpiEnv(kNoSingleCopy, &job->env)) {
    spdlog::debug("process_vm_readv is blocked here: {}", kNoSingleCopy);
  }
  std::string err;
  if (!FindMpirun(job->env, &mpi_, &err)) {
    if (mpi_.path.empty()) {
      *result = {kExitCommandNotFound,
                 "--mpi: " + err + ": install Open MPI (Debian: apt-get install openmpi-bin) or "
                 "leave out --mpi to launch with Gloo"};
    } else {
      *result = {kExitFailure, "--mpi: " + err + ": check the MPI installation or leave out --mpi"};
    }
    return false;
  }
  if (mpi_.flavor != "Open MPI") {
    *result = {kExitFailure,
               fmt::format("--mpi: {} is {} ({}): etrun runs Open MPI's mpirun only; put Open MPI "
                           "first on PATH or leave out --mpi to launch with Gloo",
                           mpi_.path, mpi_.flavor.empty() ? "not Open MPI" : mpi_.flavor,
                           mpi_.version)};
    return false;
  }
  return true;
}

bool MpiPolicy::OpenRankFiles(const std::string& dir, std::string* err) {
  int width = static_cast<int>(std::to_string(np_).size());
  for (int r = 0; r < np_; ++r) {
    std::string rank = std::to_string(r);
    std::string rank_dir = dir + "/1/rank." + std::string(width - rank.size(), '0') + rank;
    int out_fd = -1, err_fd = -1;
    if (!OpenLogFiles(rank_dir, &out_fd, &err_fd, err)) return false;
    rank_files_.emplace_back(context_->AddOutput(out_fd, true, rank_dir + "/stdout"),
                             context_->AddOutput(err_fd, true, rank_dir + "/stderr"));
  }
  return true;
}

// A whole line of rank R: "[1,R]<stdout>:" or "<stderr>:" decides the file.
void MpiPolicy::OnLine(const std::string& tag, std::string_view line) {
  size_t comma = tag.find(',');
  size_t close = tag.find(']');
  if (comma == std::string::npos || close == std::string::npos || close < comma) return;
  int rank = -1;
  std::from_chars(tag.data() + comma + 1, tag.data() + close, rank);
  if (rank < 0 || rank >= static_cast<int>(rank_files_.size())) return;
  bool is_stderr = tag.compare(close + 1, 8, "<stderr>") == 0;
  context_->Write(is_stderr ? rank_files_[rank].second : rank_files_[rank].first, line);
}

void MpiPolicy::Begin(int rendezvous_port) {
  begun_ = true;
  spdlog::debug("{}", JoinCommand(argv_));
  LaunchSpec spec;
  spec.argv = argv_;
  spec.env = env_;
  spec.supervisor = true;
  RankOutput output = context_->console();
  bool timestamps = context_->config().prefix_timestamp;  // mpirun's --timestamp-output
  std::string err;
  if (!output_dir_.empty() && !OpenRankFiles(output_dir_, &err)) {
    start_error_ = {kExitFailure, err};
    return;
  }
  bool observe = !output_dir_.empty();
  output.framer = [this, timestamps, observe](bool is_stderr) -> std::unique_ptr<LineFramer> {
    auto assembler = std::make_unique<MpiLineAssembler>(timestamps);
    assembler->set_report(&report_, is_stderr);
    if (observe) {
      assembler->set_on_line([this](const std::string& tag, std::string_view line) { OnLine(tag, line); });
    }
    return assembler;
  };
  int id = -1;
  if (!context_->StartProcess(0, "localhost", spec, output, &id, &err)) {
    start_error_ = {kExitFailure, err};
  } else if (!context_->AwaitExecs(&err)) {
    start_error_ = {kExitFailure, "cannot run " + mpi_.path + ": " +
                                      err.substr(err.find("could not start: ") + 17)};
  }
}

// Both of mpirun's streams have ended: what its report held back is shown unless etrun says the
// failure in its own words.
void MpiPolicy::OnRankFinished(const RankSet::Finished& finished) {
  status_ = finished.status;
  if (!report_.failure() && !report_.held().empty()) {
    context_->Write(context_->console().console_out, report_.held());
  }
}

void MpiPolicy::OnStopSignal(int sig) {
  stop_signal_ = sig;
  OnRepeatedStopSignal(sig);
}

// Every stop signal is forwarded: mpirun stops its ranks itself (SIGKILL would orphan them).
void MpiPolicy::OnRepeatedStopSignal(int sig) {
  spdlog::debug("forwarding {} to mpirun", SignalName(sig));
  context_->SignalAll(sig);
}

control::JobStatus MpiPolicy::Status() const {
  control::JobStatus status;
  status.state = stop_signal_ != 0 ? "finishing" : "running";
  status.world_size = status.np = np_;
  auto now = std::chrono::steady_clock::now();
  for (const RankSet::Running& r : context_->Unfinished()) {
    // mpirun, the job's one process: no rank of its own.
    status.ranks.push_back({.rank = std::nullopt, .label = "mpirun", .host = r.host,
                            .local_rank = std::nullopt, .pid = r.pid,
                            .state = stop_signal_ != 0 ? "stopping" : "running",
                            .uptime_s = std::chrono::duration<double>(now - r.started).count()});
  }
  return status;
}

JobResult MpiPolicy::Result() const {
  if (start_error_.code != 0) return start_error_;
  if (stop_signal_ != 0) {
    return {128 + stop_signal_, fmt::format("received {}: stopped mpirun, which {}",
                                            SignalName(stop_signal_), status_.Describe())};
  }
  if (!status_.success()) spdlog::debug("mpirun {}", status_.Describe());
  if (!status_.success() && report_.failure()) return {report_.failure()->code, report_.failure()->cause};
  return {status_.ShellCode(), ""};
}

}  // namespace etrun::launcher
