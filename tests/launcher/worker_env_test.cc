#include "launcher/worker_env.h"

#include <algorithm>
#include <map>

#include <doctest/doctest.h>

using etrun::Tunables;
using etrun::launcher::BuildWorkerEnv;
using etrun::launcher::EnvList;
using etrun::launcher::IsExportable;
using etrun::launcher::PythonFloat;
using etrun::launcher::RunVars;
using etrun::launcher::TunableEnv;
using etrun::rendezvous::SlotInfo;

namespace {

std::map<std::string, std::string> AsMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

RunVars LocalRun() {
  RunVars run;
  run.nics = {"lo"};
  run.master_addr = "127.0.0.1";
  run.master_port = 29500;
  return run;
}

}  // namespace

TEST_CASE("every rank gets Horovod's slot variables and torch.distributed's env:// variables") {
  SlotInfo slot{"127.0.0.1", 2, 3, 0, 1, 1, 2};
  auto env = AsMap(BuildWorkerEnv({"PATH=/usr/bin", "HOME=/root"}, Tunables{}, slot, 1, LocalRun()));
  std::map<std::string, std::string> want = {
      {"HOROVOD_HOSTNAME", "127.0.0.1"}, {"HOROVOD_RANK", "2"},      {"HOROVOD_SIZE", "3"},
      {"HOROVOD_LOCAL_RANK", "0"},       {"HOROVOD_LOCAL_SIZE", "1"}, {"HOROVOD_CROSS_RANK", "1"},
      {"HOROVOD_CROSS_SIZE", "2"},       {"HOROVOD_CONTROLLER", "gloo"},
      {"HOROVOD_CPU_OPERATIONS", "gloo"}, {"HOROVOD_GLOO_IFACE", "lo"}, {"NCCL_SOCKET_IFNAME", "lo"},
      {"PYTHONUNBUFFERED", "1"},         {"RANK", "2"},               {"WORLD_SIZE", "3"},
      {"LOCAL_RANK", "0"},               {"LOCAL_WORLD_SIZE", "1"},   {"GROUP_RANK", "1"},
      {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", "29500"},    {"PATH", "/usr/bin"},
      {"HOME", "/root"},                 {"GLOO_SOCKET_IFNAME", "lo"}};
  CHECK(env == want);  // and nothing else: no HOROVOD_ELASTIC, no rendezvous address yet
}

TEST_CASE("per-slot values win over inherited ones (spec 9.16)") {
  SlotInfo slot{"localhost", 1, 2, 1, 2, 0, 1};
  auto env = AsMap(BuildWorkerEnv({"HOROVOD_RANK=99", "RANK=7", "PYTHONUNBUFFERED=0",
                                   "CUDA_VISIBLE_DEVICES=3"},
                                  Tunables{}, slot, 0, LocalRun()));
  CHECK(env["HOROVOD_RANK"] == "1");
  CHECK(env["RANK"] == "1");
  CHECK(env["PYTHONUNBUFFERED"] == "1");
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "3");  // local ranks inherit everything
}

TEST_CASE("a user's own GLOO_SOCKET_IFNAME is kept") {
  SlotInfo slot{"localhost", 0, 1, 0, 1, 0, 1};
  auto env = AsMap(BuildWorkerEnv({"GLOO_SOCKET_IFNAME=eth9"}, Tunables{}, slot, 0, LocalRun()));
  CHECK(env["GLOO_SOCKET_IFNAME"] == "eth9");
}

TEST_CASE("inherited variables keep their order and appear once") {
  SlotInfo slot{"localhost", 0, 1, 0, 1, 0, 1};
  auto env = BuildWorkerEnv({"A=1", "HOROVOD_RANK=5", "B=2"}, Tunables{}, slot, 0, LocalRun());
  CHECK(env[0] == "A=1");
  CHECK(env[1] == "HOROVOD_RANK=0");
  CHECK(env[2] == "B=2");
  CHECK(std::count_if(env.begin(), env.end(), [](const std::string& kv) { return kv.starts_with("HOROVOD_RANK="); }) == 1);
}

TEST_CASE("several NICs: the first is Gloo's, all are NCCL's; elastic and rendezvous when set") {
  RunVars run = LocalRun();
  run.nics = {"eth0", "lo"};
  run.rendezvous_addr = "10.1.2.3";
  run.rendezvous_port = 4242;
  run.elastic = true;
  auto env = AsMap(BuildWorkerEnv({}, Tunables{}, SlotInfo{"a", 0, 1, 0, 1, 0, 1}, 0, run));
  CHECK(env["HOROVOD_GLOO_IFACE"] == "eth0");
  CHECK(env["NCCL_SOCKET_IFNAME"] == "eth0,lo");
  CHECK(env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "10.1.2.3");
  CHECK(env["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "4242");
  CHECK(env["HOROVOD_ELASTIC"] == "1");
}

TEST_CASE("tunables become the spec's variables with the spec's values (spec 1.3)") {
  Tunables t;
  t.fusion_threshold_mb = 32;
  t.cycle_time_ms = 7;
  t.cache_capacity = 2048;
  t.hierarchical_allreduce = true;
  t.hierarchical_allgather = false;
  t.torus_allreduce = true;
  t.autotune = true;
  t.autotune_log_file = "/tmp/at.csv";
  t.autotune_warmup_samples = 3;
  t.autotune_steps_per_sample = 10;
  t.autotune_bayes_opt_max_samples = 20;
  t.autotune_gaussian_process_noise = 0.8;
  t.timeline_filename = "/tmp/tl.json";
  t.timeline_mark_cycles = true;
  t.no_stall_check = true;
  t.stall_check_warning_time_seconds = 60;
  t.stall_check_shutdown_time_seconds = 120;
  t.mpi_threads_disable = false;
  t.num_nccl_streams = 2;
  t.thread_affinity = 4;
  t.gloo_timeout_seconds = 90;
  t.tcp = true;
  t.log_level = "DEBUG";
  t.log_hide_timestamp = true;
  EnvList want = {{"HOROVOD_FUSION_THRESHOLD", "33554432"},
                  {"HOROVOD_CYCLE_TIME", "7.0"},
                  {"HOROVOD_CACHE_CAPACITY", "2048"},
                  {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                  {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
                  {"HOROVOD_TORUS_ALLREDUCE", "1"},
                  {"HOROVOD_AUTOTUNE", "1"},
                  {"HOROVOD_AUTOTUNE_LOG", "/tmp/at.csv"},
                  {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "3"},
                  {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "10"},
                  {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "20"},
                  {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8"},
                  {"HOROVOD_TIMELINE", "/tmp/tl.json"},
                  {"HOROVOD_TIMELINE_MARK_CYCLES", "1"},
                  {"HOROVOD_STALL_CHECK_DISABLE", "1"},
                  {"HOROVOD_STALL_CHECK_TIME_SECONDS", "60"},
                  {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "120"},
                  {"HOROVOD_MPI_THREADS_DISABLE", "0"},
                  {"HOROVOD_NUM_NCCL_STREAMS", "2"},
                  {"HOROVOD_THREAD_AFFINITY", "4"},
                  {"HOROVOD_GLOO_TIMEOUT_SECONDS", "90"},
                  {"NCCL_IB_DISABLE", "1"},
                  {"HOROVOD_LOG_LEVEL", "DEBUG"},
                  {"HOROVOD_LOG_HIDE_TIME", "1"}};
  CHECK(TunableEnv(t) == want);
}

TEST_CASE("unset tunables export nothing; autotune and timeline details need their switch") {
  CHECK(TunableEnv(Tunables{}).empty());
  Tunables t;
  t.autotune = false;
  t.autotune_warmup_samples = 3;
  t.timeline_mark_cycles = true;
  CHECK(TunableEnv(t).empty());
}

TEST_CASE("floats are written as Python's repr writes them") {
  struct Case {
    double v;
    const char* want;
  } cases[] = {{7, "7.0"},           {0.5, "0.5"},        {2.25, "2.25"},     {0.1, "0.1"},
               {1e-05, "1e-05"},     {0.0001, "0.0001"},  {1e16, "1e+16"},    {1e15, "1000000000000000.0"},
               {123456.789, "123456.789"}, {0, "0.0"},     {1.5e-7, "1.5e-07"}, {-3.5, "-3.5"}};
  for (const Case& c : cases) {
    CAPTURE(c.v);
    CHECK(PythonFloat(c.v) == c.want);
  }
}

TEST_CASE("remote export filter follows horovod's anchored patterns (spec 3.3)") {
  CHECK(IsExportable("PATH"));
  CHECK(IsExportable("MY_OLDPWD"));
  CHECK_FALSE(IsExportable("OLDPWD"));
  CHECK_FALSE(IsExportable("BASH_FUNC_foo%%"));
  CHECK_FALSE(IsExportable("CUDA_VISIBLE_DEVICES"));
  CHECK_FALSE(IsExportable("NV_CUDA_VISIBLE_DEVICES_X"));
  CHECK_FALSE(IsExportable("_HOROVOD_SECRET_KEY"));
}

TEST_CASE("etrun's own secrets never reach a rank, and logs show no secret's value") {
  // ETRUN_POOL_TOKEN lets its holder steer a pool: no rank gets it, local or remote.
  etrun::rendezvous::SlotInfo slot;
  std::vector<std::string> env = BuildWorkerEnv({"ETRUN_POOL_TOKEN=t0k3n", "KEPT=1"}, Tunables{}, slot, 0, {});
  CHECK(std::find(env.begin(), env.end(), "KEPT=1") != env.end());
  CHECK(std::none_of(env.begin(), env.end(), [](const std::string& kv) { return kv.starts_with("ETRUN_POOL_TOKEN"); }));
  using etrun::launcher::IsSecretLooking;
  for (const char* name : {"ETRUN_POOL_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "db_password",
                           "HF_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS"}) {
    CAPTURE(name);
    CHECK(IsSecretLooking(name));
  }
  CHECK_FALSE(IsSecretLooking("HOROVOD_RANK"));
  CHECK(etrun::launcher::ShownEnv({"HOROVOD_RANK=0", "MY_API_KEY=s3cr3t", "NAME_ONLY"}) ==
        "HOROVOD_RANK=0 MY_API_KEY=<redacted> NAME_ONLY");
}
