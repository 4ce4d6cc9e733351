#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/spawner.h"

namespace etrun::launcher {
namespace {

void CloseIf(int fd) {
  if (fd >= 0) close(fd);
}

// The open-file limit ranks get: etrun's own before RaiseOpenFileLimit raised it.
struct rlimit g_child_nofile;
bool g_restore_nofile = false;

// Runs in the forked child: only async-signal-safe calls until execve.
[[noreturn]] void ExecChild(pid_t parent, const char* path, char* const* argv, char* const* sh_argv,
                            char* const* envp, int out_w, int err_w, int status_w) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // etrun died before prctl took effect
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0 || dup2(out_w, STDOUT_FILENO) < 0 ||
      dup2(err_w, STDERR_FILENO) < 0) {
    int e = errno;
    (void)!write(status_w, &e, sizeof(e));
    _exit(127);
  }
  ResetProcessForExec();
  execve(path, argv, envp);
  int e = errno;
  // A script without "#!": run it with /bin/sh, as execvp does.
  if (e == ENOEXEC) execve("/bin/sh", sh_argv, envp);
  (void)!write(status_w, &e, sizeof(e));
  _exit(127);
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

void ResetProcessForExec() {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (g_restore_nofile) setrlimit(RLIMIT_NOFILE, &g_child_nofile);
}

void LocalSpawner::RaiseOpenFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  g_child_nofile = limit;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? (1 << 20) : std::min<rlim_t>(limit.rlim_max, 1 << 20);
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) g_restore_nofile = true;
}

std::string LocalSpawner::ResolveProgram(const std::string& name, const std::string& path_env,
                                         std::string* err) {
  if (name.empty()) {
    *err = "the command is empty";
    return "";
  }
  if (name.find('/') != std::string::npos) {
    if (IsExecutableFile(name)) return name;
    struct stat st;
    *err = stat(name.c_str(), &st) != 0 ? "no such file" : "not an executable file";
    return "";
  }
  std::string path = path_env.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_env;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    std::string dir = path.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    // Built by appends: GCC 12 misreports `dir = "."` and `dir + "/" + name` under -Wrestrict.
    if (dir.empty()) dir.push_back('.');
    std::string candidate = dir;
    candidate += '/';
    candidate += name;
    if (IsExecutableFile(candidate)) return candidate;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  *err = "command not found in PATH";
  return "";
}

bool LocalSpawner::Start(const LaunchSpec& spec, SpawnedProcess* out, std::string* err) {
  std::string path_env;
  for (const std::string& kv : spec.env) {
    if (kv.starts_with("PATH=")) path_env = kv.substr(5);
  }
  std::string program = ResolveProgram(spec.argv.at(0), path_env, err);
  if (program.empty()) {
    *err = "cannot run '" + spec.argv[0] + "': " + *err;
    return false;
  }
  // Everything the child needs is built before fork: it must not allocate.
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> sh_argv = {const_cast<char*>("/bin/sh"), program.data()};
  sh_argv.insert(sh_argv.end(), argv.begin() + 1, argv.end());
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, status_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    *err = std::string("cannot create pipes: ") + strerror(errno);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], status_pipe[0], status_pipe[1]}) CloseIf(fd);
    return false;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    ExecChild(parent, program.c_str(), argv.data(), sh_argv.data(), envp.data(), out_pipe[1], err_pipe[1],
              status_pipe[1]);
  }
  int fork_errno = errno;
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(status_pipe[1]);
  if (pid < 0) {
    *err = std::string("cannot fork: ") + strerror(fork_errno);
    for (int fd : {out_pipe[0], err_pipe[0], status_pipe[0]}) close(fd);
    return false;
  }
  setpgid(pid, pid);  // also here, so the group exists before we ever signal it
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  out->pid = pid;
  out->stdout_fd = out_pipe[0];
  out->stderr_fd = err_pipe[0];
  out->exec_status_fd = status_pipe[0];
  return true;
}

bool LocalSpawner::AwaitExec(SpawnedProcess* process, std::string* err) {
  if (process->exec_status_fd < 0) return true;
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(process->exec_status_fd, &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(process->exec_status_fd);
  process->exec_status_fd = -1;
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    *err = strerror(child_errno);
    return false;
  }
  return true;  // EOF: close-on-exec fired, the exec succeeded
}

}  // namespace etrun::launcher
