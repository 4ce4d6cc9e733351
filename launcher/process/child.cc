#include "launcher/process/child.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

// Boost.Process 1.74 defines its vfork executor only where this says vfork exists, and glibc's
// feature macros (_GNU_SOURCE: POSIX 2008, where vfork is no longer POSIX) make its own test say
// no; Linux has vfork. Boost.Process's documented switch (klemens-morgenstern/boost-process#118).
#define BOOST_POSIX_HAS_VFORK 1
#include <boost/process/child.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/posix.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace etrun::launcher {
namespace {

namespace bp = boost::process;

// In the forked child, before exec or the body: only async-signal-safe calls, nothing that
// allocates (a vforked child shares etrun's memory). Returns 0, or the errno of the step that
// failed.
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
  if (in < 0) {
    // No /dev/null (a bare container root): stdin is a pipe whose writer is gone, read as EOF.
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) return errno;
    close(ends[1]);
    in = ends[0];
  }
  if (dup2(in, STDIN_FILENO) < 0) return errno;
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
  if (o.cwd != nullptr && chdir(o.cwd) != 0) {
    // Where it is: the rank runs in the directory it started in, as before a failed `cd`.
  }
  // No descriptor of etrun's reaches the program: its own are close-on-exec, but the sockets
  // Asio opens are not (a rank inherited two), nor what etrun's parent left open. Marked, not
  // closed: the guardian's body (ForkChild) still reads its pipe.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  return 0;
}

// etrun's set-up of a child, as a Boost.Process extension handler (boost/process/extend.hpp).
// Boost.Process runs the fork and the exec, calls these hooks around them and brings the errno
// of a failure in the child back to the parent. What it has no property for is here: the
// process group or session, the parent-death signal, signals reset, the open-file limit, the
// descriptors closed, argv[0] kept as given (its exe/args put the path there), the /bin/sh
// fallback and the exit code 127 of a child that could not exec.
// Hand-written still, and why:
// - The redirections: Boost.Process's pipes are made by pipe(2) without O_CLOEXEC, and etrun
//   starts children from two threads (discovery runs on its own), so a write end could leak
//   into another child and hold a rank's output open. Callers make pipe2(O_CLOEXEC) pipes and
//   the set-up dup2s them, as `std_out > pipe` would.
// - Closing descriptors: bp::limit_handles lists /dev/fd with opendir in the child, which
//   allocates (not allowed under vfork) and costs a readdir per open descriptor per child; one
//   close_range does it.
// - Exits: Boost.Process's on_exit hands over WEXITSTATUS or WTERMSIG folded into one int (a
//   kill by signal 9 reads as exit code 9), and its SIGCHLD service keeps waiting for a pid it
//   was given until it sees that pid exit: a pid reaped elsewhere (RankSet's destructor reaps
//   synchronously) and then reused would be reaped by it. Two reapers of one pid cannot be
//   sound, so the caller stays the only one (RankSet for ranks, on SIGCHLD).
class ChildSetup : public bp::extend::handler {
 public:
  ChildSetup(const ChildOptions& options, const char* path, char* const* argv, char** envp,
             char* const* sh_argv)
      : options_(options), parent_(getpid()), path_(path), argv_(argv), envp_(envp),
        sh_argv_(sh_argv) {}

  pid_t forked() const { return forked_; }

  // Parent, before the fork. Every signal is blocked until the child has exec'd, so no handler
  // of etrun's runs in a child that shares its memory (posix_spawn does the same).
  template <class Executor>
  void on_setup(Executor& exec) {
    exec.exe = path_;
    exec.cmd_line = argv_;
    exec.env = envp_;
    sigset_t all;
    sigfillset(&all);
    blocked_ = pthread_sigmask(SIG_SETMASK, &all, &saved_mask_) == 0;
  }

  // Child, before the exec.
  template <class Executor>
  void on_exec_setup(Executor& exec) {
    if (int e = SetUpChild(parent_, options_); e != 0) Fail(exec, e);
  }

  // Child, the exec failed: a file without "#!" runs under /bin/sh (as execvp does), else the
  // child reports why and exits 127.
  template <class Executor>
  void on_exec_error(Executor& exec, const std::error_code& ec) {
    if (ec.value() == ENOEXEC && sh_argv_ != nullptr) {
      // Boost.Process has already noted ENOEXEC in the memory a vforked child shares with us.
      exec.set_error(std::error_code(), "");
      execve("/bin/sh", sh_argv_, envp_);
      Fail(exec, errno);
    }
    Fail(exec, ec.value());
  }

  // Parent: the child exec'd. Its group is made here too, so it exists before anyone signals it
  // even where vfork is a fork (ThreadSanitizer). Not a session: only the child can make its own
  // (RankSet::Kill signals the process itself until it has).
  template <class Executor>
  void on_success(Executor& exec) {
    if (!options_.own_session) setpgid(exec.pid, exec.pid);
    Unblock();
  }

  // Parent: the fork failed (exec.pid -1), or the child did not exec and exited 127. The
  // vfork executor of Boost.Process 1.74 has made its child object before it checks for an error
  // and drops it after this: its destructor would reap the pid (waitpid), which is the caller's
  // to reap. A stored exit status tells that object the child is gone.
  template <class Executor>
  void on_error(Executor& exec, const std::error_code&) {
    forked_ = exec.pid;
    if (forked_ > 0) exec.exit_status->store(127 << 8);
    Unblock();
  }

 private:
  // Child only. Messages stay short: under vfork set_error copies them into the parent's string.
  template <class Executor>
  [[noreturn]] static void Fail(Executor& exec, int e) {
    exec.set_error(std::error_code(e, std::system_category()), "set-up");
    _exit(127);
  }

  void Unblock() {
    if (blocked_) pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
    blocked_ = false;
  }

  const ChildOptions& options_;
  const pid_t parent_;
  const char* path_;
  char* const* argv_;
  char** envp_;
  char* const* sh_argv_;  // null: no /bin/sh fallback
  sigset_t saved_mask_;
  bool blocked_ = false;
  pid_t forked_ = -1;
};

pid_t Fork(std::string* err, int* err_no = nullptr) {
  pid_t pid = fork();
  if (pid < 0) {
    if (err_no != nullptr) *err_no = errno;
    *err = std::string("cannot fork: ") + strerror(errno);
  }
  return pid;
}

}  // namespace

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
  // Everything the child needs is built before the fork: it must not allocate.
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> sh_args = {const_cast<char*>("/bin/sh"), const_cast<char*>(path.c_str())};
  sh_args.insert(sh_args.end(), args.begin() + 1, args.end());
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ChildSetup setup(options, path.c_str(), args.data(), envp.data(),
                   options.shell_fallback ? sh_args.data() : nullptr);
  // vfork, as posix_spawn does: fork's copy of the page tables grows with etrun's memory, and
  // the parent resumes as soon as the child has exec'd or exited. ThreadSanitizer turns vfork
  // into fork: there the child's report of a failed exec stays in its own memory, and such a
  // child is seen only as exiting 127. (Boost.Process's fork executor is no way out: its child
  // writes the error record in three pieces that the parent reads with one read.)
  std::error_code ec;
  bp::child process(setup, bp::posix::use_vfork, ec);
  // The caller reaps it: an attached bp::child would waitpid it (and kill it) when destroyed.
  process.detach();
  if (!ec) {
    child->pid = process.id();
    child->exec_errno = 0;
    return true;
  }
  if (setup.forked() > 0) {  // it exits 127; AwaitExec says why
    child->pid = setup.forked();
    child->exec_errno = ec.value();
    return true;
  }
  if (err_no != nullptr) *err_no = ec.value();
  *err = "cannot fork: " + ec.message();
  return false;
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
  int e = child->exec_errno;
  child->exec_errno = 0;
  if (e == 0) return true;
  if (err_no != nullptr) *err_no = e;
  *err = strerror(e);
  return false;
}

bool IsShortage(int err_no) {
  return err_no == EMFILE || err_no == ENFILE || err_no == EAGAIN || err_no == ENOMEM;
}

}  // namespace etrun::launcher
