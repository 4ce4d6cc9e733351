#include "launcher/mpi_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "discovery/host_slots.h"
#include "discovery/network.h"
#include "launcher/driver.h"
#include "launcher/exit_status.h"
#include "launcher/mpi_command.h"
#include "launcher/program_output.h"
#include "launcher/spawner.h"
#include "launcher/worker_env.h"

namespace etrun::launcher {
namespace {

std::string PathOf(const std::vector<std::string>& environment) {
  std::string path;
  for (const std::string& kv : environment) {
    if (kv.starts_with("PATH=")) path = kv.substr(5);
  }
  return path;
}

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

// Runs in the forked child: only async-signal-safe calls until execve.
[[noreturn]] void ExecMpirun(pid_t parent, const char* path, char* const* argv, char* const* envp,
                             int status_w) {
  setpgid(0, 0);  // signals reach mpirun only through etrun, once each
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // mpirun stops its ranks on SIGTERM
  if (getppid() != parent) _exit(127);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0) {
    int e = errno;
    (void)!write(status_w, &e, sizeof(e));
    _exit(127);
  }
  ResetProcessForExec();
  execve(path, argv, envp);
  int e = errno;
  (void)!write(status_w, &e, sizeof(e));
  _exit(127);
}

// Starts mpirun and waits for it, forwarding etrun's signals. *stop_signal: the first SIGINT,
// SIGTERM or SIGHUP etrun received (0 if none). Returns false and sets *err if it cannot start.
bool RunMpirun(const std::string& path, const std::vector<std::string>& argv,
               const std::vector<std::string>& env, ExitStatus* status, int* stop_signal,
               std::string* err) {
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  sigset_t handled, old_mask;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&handled, sig);
  // Blocked before the fork, so no signal is lost between fork and the wait loop.
  sigprocmask(SIG_BLOCK, &handled, &old_mask);
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    *err = std::string("cannot create a pipe: ") + strerror(errno);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return false;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecMpirun(parent, path.c_str(), args.data(), envp.data(), status_pipe[1]);
  int fork_errno = errno;
  close(status_pipe[1]);
  if (pid < 0) {
    close(status_pipe[0]);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    *err = std::string("cannot fork: ") + strerror(fork_errno);
    return false;
  }
  setpgid(pid, pid);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  bool exec_failed = n == static_cast<ssize_t>(sizeof(child_errno));

  int wait_status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      *err = std::string("cannot wait for mpirun: ") + strerror(errno);
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      return false;
    }
    siginfo_t info;
    int sig = sigwaitinfo(&handled, &info);
    if (sig < 0 || sig == SIGCHLD) continue;
    if (sig != SIGUSR1 && sig != SIGUSR2 && *stop_signal == 0) *stop_signal = sig;
    spdlog::debug("forwarding {} to mpirun", SignalName(sig));
    kill(pid, sig);
  }
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (exec_failed) {
    *err = "cannot run " + path + ": " + strerror(child_errno);
    return false;
  }
  *status = ExitStatus::FromWaitStatus(wait_status);
  return true;
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
  install->path = LocalSpawner::ResolveProgram("mpirun", PathOf(environment), &unused);
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

int RunMpi(const JobConfig& config, const std::vector<std::string>& environment) {
  std::string err;
  std::vector<discovery::HostSlots> hosts;
  if (!ResolveHosts(config, &hosts, &err)) {
    spdlog::error("{}", err);
    return kExitUsage;
  }
  MpiJob job;
  job.hosts = config.hosts.empty() ? discovery::FormatHosts(hosts) : config.hosts;
  job.num_hosts = static_cast<int>(hosts.size());
  // As horovodrun: a job on this machine only uses the interfaces carrying 127.0.0.1 (or the
  // ones named); with remote hosts, only named ones (horovodrun would probe every host with
  // Horovod's task service; without names etrun lets Open MPI choose).
  std::vector<discovery::Interface> interfaces = discovery::LocalInterfaces();
  bool all_local = std::all_of(hosts.begin(), hosts.end(),
                               [&interfaces](const discovery::HostSlots& h) {
                                 return discovery::IsLocalHost(h.name, interfaces);
                               });
  if (all_local) {
    std::string unused_ip;
    if (!discovery::ChooseLocalNics(config.network_interfaces, interfaces, &job.nics, &unused_ip,
                                    &err)) {
      spdlog::error("{}", err);
      return kExitUsage;
    }
  } else {
    job.nics = config.network_interfaces;
  }
  job.env = MpirunEnv(environment, config.tunables);
  if (!CrossMemoryAttachWorks() && AddOpenMpiEnv(kNoSingleCopy, &job.env)) {
    spdlog::debug("process_vm_readv is blocked here: {}", kNoSingleCopy);
  }

  MpiInstall mpi;
  if (!FindMpirun(job.env, &mpi, &err)) {
    if (mpi.path.empty()) {
      spdlog::error("--mpi: {}: install Open MPI (Debian: apt-get install openmpi-bin) or leave "
                    "out --mpi to launch with Gloo", err);
      return kExitCommandNotFound;
    }
    spdlog::error("--mpi: {}: check the MPI installation or leave out --mpi", err);
    return kExitFailure;
  }
  if (mpi.flavor != "Open MPI") {
    spdlog::error("--mpi: {} is {} ({}): etrun runs Open MPI's mpirun only; put Open MPI first on "
                  "PATH or leave out --mpi to launch with Gloo",
                  mpi.path, mpi.flavor.empty() ? "not Open MPI" : mpi.flavor, mpi.version);
    return kExitFailure;
  }
  std::vector<std::string> argv;
  if (!BuildMpirunArgv(config, job, &argv, &err)) {
    spdlog::error("{}", err);
    return kExitUsage;
  }
  spdlog::debug("{}", JoinCommand(argv));

  ExitStatus status;
  int stop_signal = 0;
  if (!RunMpirun(mpi.path, argv, job.env, &status, &stop_signal, &err)) {
    spdlog::error("{}", err);
    return kExitFailure;
  }
  if (stop_signal != 0) {
    spdlog::error("received {}: stopped mpirun, which {}", SignalName(stop_signal),
                  status.Describe());
    return 128 + stop_signal;
  }
  if (!status.success()) spdlog::debug("mpirun {}", status.Describe());
  return status.ShellCode();
}

}  // namespace etrun::launcher
