// Guardian: a small process forked when etrun starts that outlives etrun only to clean up. etrun
// tells it each rank's process group; if etrun dies without saying goodbye (kill -9, a crash),
// the guardian's pipe reaches EOF and it SIGKILLs every group it knows, so no rank and no child
// of a rank survives etrun. Ranks also carry PR_SET_PDEATHSIG; the guardian catches what a
// parent-death signal cannot: the ranks' own children. Driver thread only.
#ifndef ETRUN_LAUNCHER_PROCESS_GUARDIAN_H_
#define ETRUN_LAUNCHER_PROCESS_GUARDIAN_H_

#include <sys/types.h>

#include <string>

namespace etrun::launcher {

class Guardian {
 public:
  Guardian() = default;
  ~Guardian();  // Dismisses the guardian (see Dismiss).
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  // Forks the guardian. Call early, while etrun has no other threads. Returns false and sets
  // *err on failure (etrun still works; only the kill -9 cleanup is lost).
  bool Start(std::string* err);

  // Adds or forgets a process group to kill should etrun die.
  void Watch(pid_t pgid);
  void Forget(pid_t pgid);

  // Tells the guardian etrun has cleaned up itself; it exits without killing anything.
  void Dismiss();

 private:
  void Send(int message);

  pid_t pid_ = -1;
  int fd_ = -1;  // write end of the command pipe
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_GUARDIAN_H_
