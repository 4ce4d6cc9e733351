// MPI mode (--mpi): a static job run by Open MPI's mpirun, with the command line horovodrun
// builds (launcher/mpi/mpi_command.h). horovodrun replaces itself with `/bin/sh -c "<mpirun ...>"`;
// etrun instead runs mpirun as its child, straight from an argv (no shell re-parses the command),
// forwards SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 to it, and returns its exit code. mpirun
// gets SIGTERM if etrun dies (parent-death signal) and then stops its ranks itself. Ranks get
// their ranks from MPI: no rendezvous server and no HOROVOD_RANK-style variables. Driver thread.
#ifndef ETRUN_LAUNCHER_MPI_MPI_POLICY_H_
#define ETRUN_LAUNCHER_MPI_MPI_POLICY_H_

#include <string>
#include <vector>

#include "control/control_wire.h"
#include "launcher/job_config.h"
#include "launcher/job_policy.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/mpi/mpirun_report.h"

namespace etrun::launcher {

// The MPI implementation named by `mpirun --version` output, tested in horovodrun's order
// (spec §8.2): "Open MPI" (also for OpenRTE), "IBM Spectrum MPI", "MPICH", "Intel(R) MPI", or ""
// when unknown.
std::string MpiFlavor(const std::string& version_output);

// Turns off the single-copy (process_vm_readv) path of Open MPI's shared-memory transport. etrun
// sets it when that call is blocked here (as in many containers), so large messages between
// ranks on one host work without extra flags.
inline constexpr char kNoSingleCopy[] = "OMPI_MCA_btl_vader_single_copy_mechanism=none";

// Appends `kv` ("K=V") to *env unless the user set K already. Returns whether it was added.
bool AddOpenMpiEnv(const std::string& kv, std::vector<std::string>* env);

struct MpiInstall {
  std::string path;     // mpirun's path on PATH; empty: none
  std::string flavor;   // MpiFlavor of its --version; empty: unknown or not run
  std::string version;  // first line of its --version output
};

// Finds mpirun on the PATH of `environment` and runs `mpirun --version` once. Returns false and
// sets *err when there is no mpirun or it cannot be run; *install is filled as far as known.
bool FindMpirun(const std::vector<std::string>& environment, MpiInstall* install,
                std::string* err);

// Exit codes: mpirun's own, 128+N when signal N stopped etrun (after forwarding it) or killed
// mpirun, 2 for bad hosts or flags, 127 when there is no mpirun, 1 when mpirun is not Open MPI
// or cannot be started. A launch failure mpirun explains in a box etrun knows (a command not
// found on a host, a host it cannot reach: MpirunReport) ends the job with etrun's one line and
// the code the other modes give that cause (127, 255, 2) instead. mpirun's environment is
// etrun's plus the tunables' variables, and `-x` forwards their names.
class MpiPolicy : public JobPolicy {
 public:
  bool Prepare(JobResult* result) override;
  void Begin(int rendezvous_port) override;
  void OnRankFinished(const RankSet::Finished& finished) override;
  void OnStopSignal(int sig) override;
  void OnRepeatedStopSignal(int sig) override;
  control::JobStatus Status() const override;
  bool Finished() const override { return begun_; }
  JobResult Result() const override;

 private:
  // Prepare's steps; each returns false with *result set.
  bool ChooseNetwork(const std::vector<discovery::HostSlots>& hosts, MpiJob* job, JobResult* result);
  bool CheckHere(JobResult* result);
  bool FindOpenMpi(MpiJob* job, JobResult* result);
  // Opens DIR/1/rank.<r>/{stdout,stderr} for every rank. Returns false and sets *err.
  bool OpenRankFiles(const std::string& dir, std::string* err);
  void OnLine(const std::string& tag, std::string_view line);

  MpiInstall mpi_;
  std::vector<std::string> argv_;
  std::vector<std::string> env_;
  int np_ = 1;
  bool begun_ = false;
  int stop_signal_ = 0;
  ExitStatus status_;
  JobResult start_error_;  // code 0: none
  MpirunReport report_;    // what mpirun said of its launch, from both of its streams
  std::string output_dir_;               // --output-filename, written by etrun
  std::vector<std::pair<int, int>> rank_files_;  // by rank: sink destinations (stdout, stderr)
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_MPI_MPI_POLICY_H_
