// Remote ranks through a command instead of SSH (--remote-shell), as Open MPI's plm_rsh_agent:
// `--remote-shell 'kubectl exec -i {host} -n ns --'` starts each remote rank by running that
// command, {host} replaced by the host's name, followed by `sh -c '<the rank's remote command>'`
// (the same wrapper, environment and working directory as over SSH: ssh_rank.h).
//
// Each such rank is a local stub process (etrun re-executed as `etrun __remote_shell_rank ...`)
// that runs the command with a pipe as its stdin and holds the pipe's other end: RankSet treats
// it like any rank (pipes, process group, signals, guardian). SIGTERM/SIGINT/SIGHUP to the stub
// close that pipe: the remote wrapper sees EOF and stops the command (SIGTERM, SIGKILL after the
// grace period); if the stub, the command or etrun dies, the channel closes with the same effect.
// The stub exits with the command's exit code; 255 (ssh's convention) when the remote shell
// itself was killed or failed with 255, which etrun reads as the host being unreachable.
// Slurm's srun exits 0 when the node under its step fails ("srun: error: Node failure on h3"),
// so through srun the exit status travels in band: the remote wrapper's last line on stderr is an
// exit record, which the stub takes out of the stream; a step that ends without one lost its
// host (255).
#ifndef ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
#define ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_

#include <string>
#include <string_view>
#include <vector>

namespace etrun::launcher {

// argv[1] that selects the stub mode.
inline constexpr char kRemoteShellRankMode[] = "__remote_shell_rank";

// The exit code that means "the remote shell failed, not the rank" (as ssh's).
inline constexpr int kRemoteShellFailure = 255;

// Records start with kRecordLead and end with a newline. The exit record: kExitRecord, the exit
// code in decimal (kExitRecordShell: the same prefix as printf's format writes it). The alive
// record, kRecordLead + kAliveWord, comes every second while the remote wrapper runs: a stub that
// hears nothing for --lost-host-timeout after the first takes the host for lost.
inline constexpr char kRecordLead[] = "\036etrun-";
inline constexpr char kExitRecord[] = "\036etrun-exit ";
inline constexpr char kExitRecordShell[] = "\\036etrun-exit ";
inline constexpr char kAliveWord[] = "alive";
// The term record, kRecordLead + kTermWord: the remote wrapper got SIGTERM from outside (Slurm
// signalling the job's steps). The stub passes it on to etrun (its parent) as a SIGTERM: the whole
// job drains, as when Slurm signals the batch shell.
inline constexpr char kTermWord[] = "term";

// Whether ranks through `remote_shell` report their exit status with a record: its program is
// srun (etrun's own template inside an allocation, or the user's).
bool UsesExitRecord(const std::string& remote_shell);

// Takes records out of a stream fed in pieces: Feed returns what to pass on (everything else, in
// order, with at most a record's lead held back until the next piece).
class ExitRecordFilter {
 public:
  std::string Feed(std::string_view piece);
  std::string Finish();  // at the end of the stream: what was held back
  bool seen() const { return code_ >= 0; }
  int code() const { return code_; }  // the last exit record's; -1: none
  int alive() const { return alive_; }  // alive records so far
  int term() const { return term_; }    // term records so far

 private:
  std::string held_;
  int code_ = -1;
  int alive_ = 0;
  int term_ = 0;
};

// Whether `remote_shell` names the host with {host}. Returns false and sets *err otherwise.
bool CheckRemoteShell(const std::string& remote_shell, std::string* err);

// The shell command line that runs `remote_command` on `host` through `remote_shell`.
std::string RemoteShellCommand(const std::string& remote_shell, const std::string& host,
                               const std::string& remote_command);

// How a stub learns its rank's status.
struct RecordMode {
  bool exit_record = false;  // from records (else the remote shell's exit status)
  double lost_after_s = 0;   // > 0: lost when no record comes for this long after the first alive
  bool pass_term = false;    // a term record is passed on to etrun as SIGTERM (the job's own
                             // allocation; not one it grew onto, which ending is no stop)
};

// The stub's argv after the program path: the mode, the host (for messages), the command line and
// how its exit status comes: "status" (the remote shell's), or "record:<lost_after_s>[:term]".
std::vector<std::string> RemoteShellRankArgs(const std::string& host, const std::string& command_line,
                                             bool exit_record, double lost_after_s = 0,
                                             bool pass_term = false);

// Reads RemoteShellRankArgs' last word. Returns false for anything else.
bool ParseStatusMode(const std::string& text, RecordMode* mode);

// The stub (RemoteShellRankArgs, parsed by cli/stub_main.h): runs `command_line` (which reaches
// `host`) with a pipe as its stdin; returns the exit code to exit with. With `exit_record`, the
// command's stderr passes through the stub, which takes the records out and exits with the exit
// record's code, or with kRemoteShellFailure (one line) when the command ended without one or,
// once alive records came, nothing came for `lost_after_s` seconds (> 0): then the command is
// killed.
int RunRemoteShellRank(const std::string& host, const std::string& command_line,
                       const RecordMode& mode);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
