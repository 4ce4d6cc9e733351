#include "launcher/child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace etrun::launcher {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

void CloseIf(int fd) {
  if (fd >= 0) close(fd);
}

// In the forked child, before exec or the body: only async-signal-safe calls. Returns 0, or the
// errno of the step that failed.
int SetUpChild(pid_t parent, const ChildOptions& o) {
  if (o.own_session) {
    setsid();
  } else {
    setpgid(0, 0);
  }
  if (o.death_signal != 0) {
    prctl(PR_SET_PDEATHSIG, o.death_signal);
    if (getppid() != parent) _exit(127);  // etrun died before prctl took effect
  }
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int in = o.stdin_fd >= 0 ? o.stdin_fd : devnull;
  if (devnull < 0 || dup2(in, STDIN_FILENO) < 0) return errno;
  int out = o.stdout_fd >= 0 ? o.stdout_fd : (o.devnull_output ? devnull : -1);
  int err = o.stderr_fd >= 0 ? o.stderr_fd : (o.devnull_output ? devnull : -1);
  if ((out >= 0 && dup2(out, STDOUT_FILENO) < 0) || (err >= 0 && dup2(err, STDERR_FILENO) < 0)) {
    return errno;
  }
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (o.nofile != nullptr) setrlimit(RLIMIT_NOFILE, o.nofile);
  return 0;
}

[[noreturn]] void Report(int status_w, int e) {
  (void)!write(status_w, &e, sizeof(e));
  _exit(127);
}

pid_t Fork(std::string* err, int* err_no = nullptr) {
  pid_t pid = fork();
  if (pid < 0) {
    if (err_no != nullptr) *err_no = errno;
    *err = std::string("cannot fork: ") + strerror(errno);
  }
  return pid;
}

}  // namespace

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::string EnvValue(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' && kv.starts_with(name)) {
      return kv.substr(name.size() + 1);
    }
  }
  return "";
}

std::string CommandCannotRun(const std::vector<std::string>& command,
                             const std::vector<std::string>& environment) {
  std::string err;
  if (!FindProgram(command.at(0), EnvValue(environment, "PATH"), &err).empty()) return "";
  return "cannot run '" + command[0] + "': " + err + ": check the command and PATH";
}

std::string FindProgram(const std::string& name, const std::string& path_env, std::string* err) {
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

FileLimit::FileLimit() { getrlimit(RLIMIT_NOFILE, &original_); }

void FileLimit::Raise() {
  struct rlimit limit = original_;
  if (limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? (1 << 20) : std::min<rlim_t>(limit.rlim_max, 1 << 20);
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) raised_ = true;
}

rlim_t FileLimit::current() const {
  struct rlimit limit;
  return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : original_.rlim_cur;
}

bool FileLimit::Ensure(rlim_t needed, const std::string& what, std::string* err) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    *err = fmt::format("{} need about {} open files but the hard limit is {} (ulimit -Hn): "
                       "raise it, or start fewer ranks per etrun", what, needed, limit.rlim_max);
    return false;
  }
  limit.rlim_cur = needed;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    *err = fmt::format("{} need about {} open files and the limit cannot be raised: {}", what,
                       needed, strerror(errno));
    return false;
  }
  raised_ = true;
  spdlog::debug("raised the open-file limit to {} for {}", needed, what);
  return true;
}

bool StartChild(const std::string& path, const std::vector<std::string>& argv,
                const std::vector<std::string>& env, const ChildOptions& options, Child* child,
                std::string* err, int* err_no) {
  // Everything the child needs is built before fork: it must not allocate.
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> sh_args = {const_cast<char*>("/bin/sh"), const_cast<char*>(path.c_str())};
  sh_args.insert(sh_args.end(), args.begin() + 1, args.end());
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) {
    if (err_no != nullptr) *err_no = errno;
    *err = std::string("cannot create a pipe: ") + strerror(errno);
    return false;
  }
  pid_t parent = getpid();
  pid_t pid = Fork(err, err_no);
  if (pid == 0) {
    if (int e = SetUpChild(parent, options); e != 0) Report(status[1], e);
    execve(path.c_str(), args.data(), envp.data());
    if (errno == ENOEXEC && options.shell_fallback) execve("/bin/sh", sh_args.data(), envp.data());
    Report(status[1], errno);
  }
  close(status[1]);
  if (pid < 0) {
    close(status[0]);
    return false;
  }
  // The group is made on both sides, so it exists before anyone signals it.
  if (!options.own_session) setpgid(pid, pid);
  child->pid = pid;
  child->exec_status_fd = status[0];
  return true;
}

pid_t ForkChild(const ChildOptions& options, void (*body)(void* arg), void* arg, std::string* err) {
  pid_t parent = getpid();
  pid_t pid = Fork(err);
  if (pid == 0) {
    if (SetUpChild(parent, options) != 0) _exit(127);
    body(arg);
    _exit(0);
  }
  if (pid > 0 && !options.own_session) setpgid(pid, pid);
  return pid;
}

bool AwaitExec(Child* child, std::string* err, int* err_no) {
  if (child->exec_status_fd < 0) return true;
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(child->exec_status_fd, &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  CloseIf(child->exec_status_fd);
  child->exec_status_fd = -1;
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    if (err_no != nullptr) *err_no = child_errno;
    *err = strerror(child_errno);
    return false;
  }
  return true;  // EOF: close-on-exec fired, the exec succeeded
}

bool IsShortage(int err_no) {
  return err_no == EMFILE || err_no == ENFILE || err_no == EAGAIN || err_no == ENOMEM;
}

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  static constexpr std::string_view kPlain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of(kPlain) == std::string::npos;
    out += plain ? a : ShellQuote(a);
  }
  return out;
}

}  // namespace etrun::launcher
