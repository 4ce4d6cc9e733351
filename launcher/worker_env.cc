#include "launcher/worker_env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <unordered_map>

namespace etrun::launcher {
namespace {

std::string Bool01(bool v) { return v ? "1" : "0"; }

// "K=V" list with in-place replacement, keeping first-appearance order.
class OrderedEnv {
 public:
  void Set(std::string_view name, std::string value) {
    auto [it, inserted] = index_.try_emplace(std::string(name), entries_.size());
    if (inserted) {
      entries_.emplace_back(std::string(name), std::move(value));
    } else {
      entries_[it->second].second = std::move(value);
    }
  }
  bool Has(std::string_view name) const { return index_.count(std::string(name)) > 0; }
  void SetAll(const EnvList& list) {
    for (const auto& [k, v] : list) Set(k, v);
  }
  std::vector<std::string> Strings() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& [k, v] : entries_) out.push_back(k + "=" + v);
    return out;
  }

 private:
  EnvList entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace

std::string PythonFloat(double value) {
  if (value != value) return "nan";
  if (value == 1.0 / 0.0) return "inf";
  if (value == -1.0 / 0.0) return "-inf";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, result.ptr);  // shortest round-trip, e.g. "-1.5e-05"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exponent = std::stoi(sci.substr(e + 1));
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int decpt = exponent + 1;  // position of the decimal point relative to the digits
  int n = static_cast<int>(digits.size());
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    std::string exp_digits = std::to_string(exponent < 0 ? -exponent : exponent);
    if (exp_digits.size() < 2) exp_digits = "0" + exp_digits;
    out += std::string("e") + (exponent < 0 ? "-" : "+") + exp_digits;
  } else if (decpt <= 0) {
    out = "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= n) {
    out = digits + std::string(decpt - n, '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return sign + out;
}

EnvList TunableEnv(const Tunables& t) {
  EnvList env;
  auto add_int = [&env](const char* name, const std::optional<int64_t>& v) {
    if (v) env.emplace_back(name, std::to_string(*v));
  };
  auto add_bool = [&env](const char* name, const std::optional<bool>& v) {
    if (v) env.emplace_back(name, Bool01(*v));
  };
  if (t.fusion_threshold_mb) {
    env.emplace_back("HOROVOD_FUSION_THRESHOLD", std::to_string(*t.fusion_threshold_mb * 1048576));
  }
  if (t.cycle_time_ms) env.emplace_back("HOROVOD_CYCLE_TIME", PythonFloat(*t.cycle_time_ms));
  add_int("HOROVOD_CACHE_CAPACITY", t.cache_capacity);
  add_bool("HOROVOD_HIERARCHICAL_ALLREDUCE", t.hierarchical_allreduce);
  add_bool("HOROVOD_HIERARCHICAL_ALLGATHER", t.hierarchical_allgather);
  add_bool("HOROVOD_TORUS_ALLREDUCE", t.torus_allreduce);
  if (t.autotune.value_or(false)) {
    env.emplace_back("HOROVOD_AUTOTUNE", "1");
    if (t.autotune_log_file) env.emplace_back("HOROVOD_AUTOTUNE_LOG", *t.autotune_log_file);
    add_int("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", t.autotune_warmup_samples);
    add_int("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", t.autotune_steps_per_sample);
    add_int("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", t.autotune_bayes_opt_max_samples);
    if (t.autotune_gaussian_process_noise) {
      env.emplace_back("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
                       PythonFloat(*t.autotune_gaussian_process_noise));
    }
  }
  if (t.timeline_filename && !t.timeline_filename->empty()) {
    env.emplace_back("HOROVOD_TIMELINE", *t.timeline_filename);
    add_bool("HOROVOD_TIMELINE_MARK_CYCLES", t.timeline_mark_cycles);
  }
  add_bool("HOROVOD_STALL_CHECK_DISABLE", t.no_stall_check);
  add_int("HOROVOD_STALL_CHECK_TIME_SECONDS", t.stall_check_warning_time_seconds);
  add_int("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", t.stall_check_shutdown_time_seconds);
  add_bool("HOROVOD_MPI_THREADS_DISABLE", t.mpi_threads_disable);
  add_int("HOROVOD_NUM_NCCL_STREAMS", t.num_nccl_streams);
  add_int("HOROVOD_THREAD_AFFINITY", t.thread_affinity);
  add_int("HOROVOD_GLOO_TIMEOUT_SECONDS", t.gloo_timeout_seconds);
  if (t.tcp) env.emplace_back("NCCL_IB_DISABLE", "1");
  if (t.log_level) env.emplace_back("HOROVOD_LOG_LEVEL", *t.log_level);
  add_bool("HOROVOD_LOG_HIDE_TIME", t.log_hide_timestamp);
  return env;
}

EnvList SlotEnv(const rendezvous::SlotInfo& slot, int group_rank, const RunVars& run) {
  EnvList env = {
      {"HOROVOD_HOSTNAME", slot.hostname},
      {"HOROVOD_RANK", std::to_string(slot.rank)},
      {"HOROVOD_SIZE", std::to_string(slot.size)},
      {"HOROVOD_LOCAL_RANK", std::to_string(slot.local_rank)},
      {"HOROVOD_LOCAL_SIZE", std::to_string(slot.local_size)},
      {"HOROVOD_CROSS_RANK", std::to_string(slot.cross_rank)},
      {"HOROVOD_CROSS_SIZE", std::to_string(slot.cross_size)},
  };
  if (!run.rendezvous_addr.empty()) {
    env.emplace_back("HOROVOD_GLOO_RENDEZVOUS_ADDR", run.rendezvous_addr);
    env.emplace_back("HOROVOD_GLOO_RENDEZVOUS_PORT", std::to_string(run.rendezvous_port));
  }
  env.emplace_back("HOROVOD_CONTROLLER", "gloo");
  env.emplace_back("HOROVOD_CPU_OPERATIONS", "gloo");
  if (!run.nics.empty()) {
    std::string all;
    for (const std::string& nic : run.nics) all += (all.empty() ? "" : ",") + nic;
    env.emplace_back("HOROVOD_GLOO_IFACE", run.nics.front());
    env.emplace_back("NCCL_SOCKET_IFNAME", all);
  }
  if (run.elastic) env.emplace_back("HOROVOD_ELASTIC", "1");
  // torch.distributed (env://) and torchrun's names.
  env.emplace_back("RANK", std::to_string(slot.rank));
  env.emplace_back("WORLD_SIZE", std::to_string(slot.size));
  env.emplace_back("LOCAL_RANK", std::to_string(slot.local_rank));
  env.emplace_back("LOCAL_WORLD_SIZE", std::to_string(slot.local_size));
  env.emplace_back("GROUP_RANK", std::to_string(group_rank));
  env.emplace_back("MASTER_ADDR", run.master_addr);
  env.emplace_back("MASTER_PORT", std::to_string(run.master_port));
  if (run.gpus.enabled()) {
    std::string devices, unused;
    if (GpuDevices(run.gpus, slot.local_rank, &devices, &unused)) {
      env.emplace_back("CUDA_VISIBLE_DEVICES", devices);
    }
  }
  return env;
}

std::vector<std::string> BuildWorkerEnv(const std::vector<std::string>& base,
                                        const Tunables& tunables,
                                        const rendezvous::SlotInfo& slot, int group_rank,
                                        const RunVars& run) {
  OrderedEnv env;
  for (const std::string& kv : base) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // not a variable; execve would keep junk
    if (IsEtrunSecret(std::string_view(kv).substr(0, eq))) continue;
    env.Set(std::string_view(kv).substr(0, eq), kv.substr(eq + 1));
  }
  // torch.distributed's Gloo picks its interface from this; a user's own choice is kept.
  if (!run.nics.empty() && !env.Has("GLOO_SOCKET_IFNAME")) env.Set("GLOO_SOCKET_IFNAME", run.nics.front());
  env.SetAll(TunableEnv(tunables));
  env.Set("PYTHONUNBUFFERED", "1");
  env.SetAll(SlotEnv(slot, group_rank, run));
  return env.Strings();
}

bool IsEtrunSecret(std::string_view name) { return name == "ETRUN_POOL_TOKEN"; }

bool IsSecretLooking(std::string_view name) {
  for (const char* word : {"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL"}) {
    std::string_view w(word);
    auto it = std::search(name.begin(), name.end(), w.begin(), w.end(),
                          [](char a, char b) { return std::toupper(static_cast<unsigned char>(a)) == b; });
    if (it != name.end()) return true;
  }
  return false;
}

std::string ShownEnv(const std::vector<std::string>& env) {
  std::string shown;
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    std::string_view name(kv.data(), eq == std::string::npos ? kv.size() : eq);
    if (!shown.empty()) shown += ' ';
    shown += IsSecretLooking(name) && eq != std::string::npos ? std::string(name) + "=<redacted>" : kv;
  }
  return shown;
}

bool IsExportable(std::string_view name) {
  return !(name.starts_with("BASH_FUNC_") || name.starts_with("OLDPWD") ||
           name.find("CUDA_VISIBLE_DEVICES") != std::string_view::npos ||
           name.starts_with("_HOROVOD_SECRET_KEY"));
}

}  // namespace etrun::launcher
