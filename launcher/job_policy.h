// JobPolicy: what differs between a static, an elastic and an --mpi job, driven by the one
// Runtime loop (launcher/runtime.h). The runtime owns the event loop, signals, guardian, output,
// rank set, rendezvous and control servers and the events file; a policy decides which ranks
// run, when the job is over and with what result, and acts only through its JobContext
// (launcher/job_context.h), so tests drive it with a fake one:
//   StaticPolicy  (static_policy.h): -np ranks on hosts that never change; the first failure
//                 stops the others;
//   ElasticPolicy (elastic_policy.h): the ElasticDriver state machine fed by discovery;
//   MpiPolicy     (mpi/mpi_policy.h): Open MPI's mpirun as the job's one supervised child.
// Every call comes from the runtime's thread.
#ifndef ETRUN_LAUNCHER_JOB_POLICY_H_
#define ETRUN_LAUNCHER_JOB_POLICY_H_

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "control/control_wire.h"
#include "events/exit_status.h"
#include "launcher/job_context.h"
#include "launcher/process/rank_set.h"
#include "rendezvous/http_request.h"
#include "rendezvous/http_server.h"

namespace etrun::launcher {

// How a job ended: etrun's exit code and why (empty on success). Written once, as job_end.
struct JobResult {
  int code = kExitOk;
  std::string cause;
};

using ControlRespond = std::function<void(int status, nlohmann::json body)>;

class JobPolicy {
 public:
  virtual ~JobPolicy() = default;

  // Plans the job before anything runs or any thread exists: hosts, ranks, addresses, GPUs, the
  // command. Returns false and sets *result (code and a one-line cause) when the job cannot run.
  virtual bool Prepare(JobResult* result) = 0;

  // The rendezvous server's handler and listen address ("0.0.0.0": every address); null: the
  // job needs no server.
  virtual rendezvous::HttpHandler* rendezvous_handler() { return nullptr; }
  virtual std::string listen_address() const { return ""; }

  // Starts the job once the servers listen (`rendezvous_port` 0 without a server).
  virtual void Begin(int rendezvous_port) = 0;

  // A rank (process) finished: exited and its output drained. Called from the loop after the
  // reap or read that found it has returned.
  virtual void OnRankFinished(const RankSet::Finished& finished) = 0;

  // The first SIGINT, SIGTERM or SIGHUP.
  virtual void OnStopSignal(int sig) = 0;
  // A later one. Default: a second SIGINT (Ctrl-C) kills every rank now; SIGTERM and SIGHUP
  // leave the stop as it was (SIGKILL after the grace period).
  virtual void OnRepeatedStopSignal(int sig);
  // SIGUSR1 or SIGUSR2. Default: forwarded to every rank.
  virtual void OnUserSignal(int sig);
  // The hang watchdog found the job hung and --hang-action is restart: the ranks on `odd_hosts`
  // are elsewhere than the others (empty: no rank stands out). Default: nothing (only elastic
  // jobs take restart; the CLI refuses it for others).
  virtual void OnHang(const std::vector<std::string>& odd_hosts) {}

  // The policy's part of GET /status: all but job, pid and duration_s, which the runtime adds.
  virtual control::JobStatus Status() const = 0;
  // Any other control request. Default: 404.
  virtual void OnControl(const rendezvous::HttpRequest& request, ControlRespond respond);

  // Whether the job is over; the runtime also waits for every rank to finish.
  virtual bool Finished() const = 0;
  // The outcome, once Finished() and every rank finished.
  virtual JobResult Result() const = 0;

  // Set before Prepare; must outlive the policy's calls.
  void set_context(JobContext* context) { context_ = context; }

 protected:
  JobContext* context_ = nullptr;
};

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_JOB_POLICY_H_
