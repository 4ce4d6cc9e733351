// Child processes: the one place etrun forks. Every process etrun starts (ranks, mpirun, the
// discovery script, `nvidia-smi`/`mpirun --version` probes, the guardian) goes through
// StartChild, which gives it its own process group or session, an optional parent-death signal
// (with the fork race closed), stdin from /dev/null, chosen stdout/stderr, default signal
// dispositions, an empty signal mask, the open-file limit etrun started with and no descriptor
// of etrun's but those three; then it execs (or, for the guardian, runs a function).
// Boost.Process starts the programs (vfork and exec, with etrun's set-up as its extension
// handler, launcher/process/child.cc); it returns once the child has exec'd or failed to, and AwaitExec
// reports which.
// The environment (environment.h), the PATH lookup (program_path.h) and shell quoting
// (shell_words.h) that callers share live beside it.
// Thread-compatible: StartChild may be called from any thread (discovery runs on its own).
#ifndef ETRUN_LAUNCHER_PROCESS_CHILD_H_
#define ETRUN_LAUNCHER_PROCESS_CHILD_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace etrun::launcher {

// The open-file limit: etrun raises its own soft limit (the rendezvous server may hold thousands
// of connections) and hands every child the limit it started with. main() owns the one object.
class FileLimit {
 public:
  FileLimit();  // records the current limit
  // Raises the soft limit to the hard limit (at most 2^20). Children keep the original.
  void Raise();
  // Makes sure the soft limit allows `needed` descriptors. Returns false and sets *err when even
  // the hard limit is too low ("raise it with ulimit -Hn, or start fewer ranks per etrun").
  bool Ensure(rlim_t needed, const std::string& what, std::string* err);
  // etrun's own soft limit now (RLIM_INFINITY when unlimited).
  rlim_t current() const;
  // What a child gets; null when etrun never changed its limit.
  const struct rlimit* for_children() const { return raised_ ? &original_ : nullptr; }

 private:
  struct rlimit original_ = {};
  bool raised_ = false;
};

struct ChildOptions {
  bool own_session = false;  // setsid() instead of a process group of its own
  int death_signal = 0;      // sent to the child when etrun dies; 0: none
  int stdin_fd = -1;         // dup'ed to stdin; -1: /dev/null
  int stdout_fd = -1;        // dup'ed to stdout; -1: /dev/null with devnull_output, else inherited
  int stderr_fd = -1;
  bool devnull_output = false;
  bool shell_fallback = false;  // a file without "#!" runs with /bin/sh, as execvp does
  const struct rlimit* nofile = nullptr;  // restored in the child (FileLimit::for_children)
  const char* cwd = nullptr;  // changed to before the exec; a failure is ignored (as `cd` before
                              // a command a shell runs anyway). null: etrun's own
};

struct Child {
  pid_t pid = -1;     // also its process group (or session) id
  int exec_errno = 0;  // why it did not exec (see AwaitExec); 0 when it did
};

// Starts `path` with `argv` (argv[0] as given) and `env` ("K=V"), and returns once it has exec'd
// or failed to. Returns false and sets *err when the fork fails (nothing is left running), and
// *err_no (if given) to its errno; an exec failure is reported by AwaitExec and the child exits
// 127. The caller reaps the child.
bool StartChild(const std::string& path, const std::vector<std::string>& argv,
                const std::vector<std::string>& env, const ChildOptions& options, Child* child,
                std::string* err, int* err_no = nullptr);

// Forks a child that sets itself up as StartChild's do and then runs `body(arg)`, which must not
// return. For the guardian. Returns the pid, or -1 and sets *err.
pid_t ForkChild(const ChildOptions& options, void (*body)(void* arg), void* arg, std::string* err);

// Whether `child` exec'd (true) or failed to (false, *err = strerror of the failure, *err_no (if
// given) = its errno: the exec's, or that of the child's set-up before it). Clears the failure.
bool AwaitExec(Child* child, std::string* err, int* err_no = nullptr);

// Whether a failure to start a process with `err_no` means etrun ran out of something it holds
// (open files: EMFILE, ENFILE; processes: EAGAIN; memory: ENOMEM) rather than that the command
// cannot run.
bool IsShortage(int err_no);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_CHILD_H_
