// MpirunReport: mpirun's own words about a launch that failed, said in etrun's. mpirun explains
// a failed launch in a box of dashes on its stderr (Open MPI's show_help), before or after the
// lines of the tools it ran (ssh's "Could not resolve hostname ..."), and exits with a code of
// its own (134 for a command it cannot find, 255 for a host it cannot reach):
//   --------------------------------------------------------------------------
//   mpirun was unable to find the specified executable file, and therefore
//   did not launch the job.  ...
//   Node:       vm
//   Executable: nosuchcmd
//   --------------------------------------------------------------------------
// The report reads mpirun's untagged lines (MpiLineAssembler's own text, per stream), holds each
// box until it closes, and recognizes the launch failures etrun can put in one line with the exit
// code the other modes give the same cause (LaunchFailure). A recognized box is not shown (it is
// logged at debug level: --verbose); every other line and box passes through unchanged, so
// nothing etrun cannot say itself is lost. Pure; one per job, fed by both of mpirun's streams;
// thread-compatible.
#ifndef ETRUN_LAUNCHER_MPI_MPIRUN_REPORT_H_
#define ETRUN_LAUNCHER_MPI_MPIRUN_REPORT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace etrun::launcher {

// A launch failure of mpirun's, as etrun says it.
struct LaunchFailure {
  int code = 0;       // etrun's exit code for the cause: 127, 255 or 2 (docs/exit-codes.md)
  std::string cause;  // one line, e.g. "cannot run 'nosuchcmd' on vm: command not found in PATH
                      // (mpirun): check the command and PATH there"
};

class MpirunReport {
 public:
  // Takes one untagged line of mpirun's stdout or stderr (`is_stderr`), with its terminator if
  // it had one, and appends to *out what is to be shown now: the line, nothing while a box is
  // open, or the box once it closes unless it was recognized.
  void Line(bool is_stderr, std::string_view line, std::string* out);
  // End of a stream: appends a box that never closed, as it came.
  void Finish(bool is_stderr, std::string* out);

  // The first launch failure recognized; none when mpirun said nothing etrun can restate.
  const std::optional<LaunchFailure>& failure() const { return failure_; }
  // mpirun's summary of a failed launch ("2 total processes failed to start"), which may come
  // on stdout before or after the box on stderr: held back until both streams ended, then shown
  // by the caller unless a failure was recognized.
  const std::string& held() const { return held_; }

 private:
  struct Stream {
    std::vector<std::string> box;  // lines of the open box, rules included; empty: none open
    std::string last_line;         // the latest line outside a box (e.g. ssh's error), trimmed
  };
  // The failure a closed box reports, if it is one etrun knows.
  std::optional<LaunchFailure> Recognize(const Stream& stream) const;

  Stream streams_[2];  // stdout, stderr
  std::optional<LaunchFailure> failure_;
  std::string held_;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_MPI_MPIRUN_REPORT_H_
