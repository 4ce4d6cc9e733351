// The environment each rank starts with (spec §3.1–3.3, §1.3): the launcher's own environment,
// then the tunable variables, PYTHONUNBUFFERED=1, then the per-slot and per-run variables, which
// always win over inherited ones (horovodrun lets an inherited HOROVOD_RANK override them, §9.16).
// torch.distributed's env:// variables are added so `init_process_group` works unchanged. Pure.
#ifndef ETRUN_LAUNCHER_WORKER_ENV_H_
#define ETRUN_LAUNCHER_WORKER_ENV_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/gpu_slots.h"
#include "launcher/job_config.h"
#include "rendezvous/assign.h"

namespace etrun::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Values shared by every slot of one run.
struct RunVars {
  std::vector<std::string> nics;      // HOROVOD_GLOO_IFACE = nics[0]; NCCL_SOCKET_IFNAME = all
  std::string master_addr;            // torch.distributed rendezvous (rank 0's host)
  bool master_is_launcher = false;    // master_addr is this machine's (rank 0 runs here)
  int master_port = 0;
  std::string rendezvous_addr;        // HOROVOD_GLOO_RENDEZVOUS_ADDR; empty: no server yet
  int rendezvous_port = 0;
  bool elastic = false;               // HOROVOD_ELASTIC=1
  // Ranks on other hosts find their own interface and launcher address where they start
  // (discovery::ListenChoice::per_host); nics and the addresses above are this machine's.
  bool per_host = false;
  GpuSlots gpus;                      // --gpus-per-rank / --ranks-per-gpu: CUDA_VISIBLE_DEVICES
};

// The §1.3 variables for the tunables that were set, in the spec's order.
EnvList TunableEnv(const Tunables& tunables);

// The variables that describe one slot and run, in the order horovodrun writes them.
// `group_rank` is the index of the slot's host among the job's hosts (torchrun's GROUP_RANK).
// With GPU slots, also CUDA_VISIBLE_DEVICES for the slot's local rank. REQUIRES: with GPU slots
// on counted GPUs, the caller checked that the slot fits (GpuDevices succeeds).
EnvList SlotEnv(const rendezvous::SlotInfo& slot, int group_rank, const RunVars& run);

// Merges `base` ("K=V" strings, e.g. environ) with GLOO_SOCKET_IFNAME=nics[0] (torch's Gloo;
// only when `base` has none), the tunables, PYTHONUNBUFFERED=1 and SlotEnv:
// later values replace earlier ones in place; new names are appended. Returns "K=V" strings.
std::vector<std::string> BuildWorkerEnv(const std::vector<std::string>& base,
                                        const Tunables& tunables,
                                        const rendezvous::SlotInfo& slot, int group_rank,
                                        const RunVars& run);

// etrun's own secrets, never given to a rank (ETRUN_POOL_TOKEN: a pool's token lets its holder
// join and steer the pool). BuildWorkerEnv leaves them out.
bool IsEtrunSecret(std::string_view name);

// Whether a variable's name looks like it holds a secret (*TOKEN*, *SECRET*, *KEY*, *PASSWORD*,
// *PASSWD*, *CREDENTIAL*, in any case): its value is never written to a log.
bool IsSecretLooking(std::string_view name);

// "K=V" variables as a log line shows them: space-separated, secret-looking values redacted
// ("K=<redacted>").
std::string ShownEnv(const std::vector<std::string>& env);

// Whether a launcher variable is forwarded to remote workers (spec §3.3): not BASH_FUNC_*,
// OLDPWD*, *CUDA_VISIBLE_DEVICES*, _HOROVOD_SECRET_KEY*. Local workers inherit everything.
bool IsExportable(std::string_view name);

// Python's repr() of a float ("7.0", "0.5", "1e-05"), as horovodrun writes float tunables.
std::string PythonFloat(double value);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_WORKER_ENV_H_
