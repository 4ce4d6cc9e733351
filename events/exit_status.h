// How a rank ended, and the exit codes etrun itself returns. One place maps wait statuses to
// codes (as ninja's exit_status.h does). Pure; thread-compatible.
#ifndef ETRUN_EVENTS_EXIT_STATUS_H_
#define ETRUN_EVENTS_EXIT_STATUS_H_

#include <string>

namespace etrun {

// etrun's own exit codes. A failing rank's own code (0..255, or 128+N for signal N) is returned
// as is; these cover failures of etrun itself.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // runtime failure of etrun (cannot spawn, I/O...)
inline constexpr int kExitUsage = 2;         // bad flags, hosts or hostfile: nothing started
inline constexpr int kExitPreflight = 3;     // --preflight found sick hosts: nothing started
inline constexpr int kExitHang = 124;          // --hang-action abort stopped a hung job (as timeout(1))
inline constexpr int kExitCommandNotFound = 127;  // the worker command could not be executed

struct ExitStatus {
  enum class Kind { kExited, kSignaled };
  Kind kind = Kind::kExited;
  int code = 0;     // exit code when kExited
  int signal = 0;   // signal number when kSignaled

  // Decodes a waitpid() status.
  static ExitStatus FromWaitStatus(int wait_status);
  static ExitStatus Exited(int code) { return {Kind::kExited, code, 0}; }
  static ExitStatus Signaled(int sig) { return {Kind::kSignaled, 0, sig}; }

  bool success() const { return kind == Kind::kExited && code == 0; }
  // The shell convention: the exit code, or 128 + signal number.
  int ShellCode() const { return kind == Kind::kExited ? code : 128 + signal; }
  // "exited with code 3" / "was killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

// "SIGTERM" for 15; "signal 99" for unknown numbers.
std::string SignalName(int sig);

}  // namespace etrun

#endif  // ETRUN_EVENTS_EXIT_STATUS_H_
