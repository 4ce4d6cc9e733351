#include "launcher/policy/elastic_policy.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "events/schema.h"
#include "launcher/gpu_slots.h"
#include "launcher/fence.h"
#include "launcher/process/child.h"
#include "launcher/process/environment.h"
#include "launcher/process/program_path.h"

namespace etrun::launcher {

namespace asio = boost::asio;
namespace field = events::field;

namespace {

constexpr std::chrono::milliseconds kTick(100);
// Discovered hosts looked up ahead of use when there is no --max-np.
constexpr size_t kResolveAhead = 1024;

// The first `most` host names of a grant, so they can be looked up before the grant reaches
// the loop. Hosts further down the list rarely get ranks; one that does is looked up when it
// starts.
std::vector<std::string> HostNames(const discovery::HostGrant& grant, size_t most) {
  std::vector<std::string> names;
  for (size_t i = 0; i < grant.hosts.size() && i < most; ++i) names.push_back(grant.hosts[i].name);
  return names;
}

}  // namespace

std::chrono::milliseconds ElasticTimeout(const JobConfig& config,
                                         const std::vector<std::string>& environment) {
  int seconds = kDefaultElasticTimeoutS;
  if (std::string value = EnvValue(environment, "HOROVOD_ELASTIC_TIMEOUT"); !value.empty()) {
    char* end = nullptr;
    long parsed = strtol(value.c_str(), &end, 10);
    if (*end == '\0' && parsed > 0 && parsed <= INT32_MAX) {
      seconds = static_cast<int>(parsed);
    } else {
      spdlog::warn("ignoring HOROVOD_ELASTIC_TIMEOUT={}: not a whole number", value);
    }
  }
  if (config.elastic_timeout_s) seconds = *config.elastic_timeout_s;
  return std::chrono::seconds(seconds);
}

int FilesPerRank(const JobConfig& config) { return config.output_filename.empty() ? 3 : 5; }

std::optional<int> SupervisableRanks(const JobConfig& config, const FileLimit* limit) {
  if (limit == nullptr) return std::nullopt;
  rlim_t have = limit->current();
  if (have == RLIM_INFINITY) return std::nullopt;
  return have > 64 ? static_cast<int>(std::min<rlim_t>((have - 64) / FilesPerRank(config), INT32_MAX)) : 0;
}

// The cooldown jitter's seed, from the kernel. Not std::random_device: its libstdc++ object calls
// glibc 2.36's arc4random, and linked statically (CMakeLists.txt) it alone would raise the glibc
// that etrun needs from 2.35 (Ubuntu 22.04) to 2.36. A jitter seed need not be secret: should
// getrandom fail, the pid and the clock are enough to keep two launchers apart.
namespace {

unsigned JitterSeed() {
  unsigned seed = 0;
  if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == static_cast<ssize_t>(sizeof(seed))) return seed;
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return static_cast<unsigned>(now) ^ (static_cast<unsigned>(getpid()) << 16);
}

}  // namespace

ElasticPolicy::ElasticPolicy() : random_(JitterSeed()) {}

ElasticPolicy::~ElasticPolicy() {
  if (source_ != nullptr) source_->Stop();  // its thread may still post to the loop
}

bool ElasticPolicy::Prepare(JobResult* result) {
  if (!UseSource(result) || !ChooseNetwork(result) || !FitFileLimit(result) ||
      !SetOptions(result)) {
    return false;
  }
  BuildDriver();
  WatchStore();
  return true;
}

// The runtime's host source, or the fixed hosts of the flags (-H, --hostfile, or
// localhost:<np>), looked up now, before the loop runs. main() joins a --pool before the runtime
// exists, so a pool job always has its source here.
bool ElasticPolicy::UseSource(JobResult* result) {
  source_ = context_->host_source();
  if (source_ == nullptr) {
    std::vector<discovery::HostSlots> hosts;
    std::string err;
    if (!JobHosts(context_->config(), &hosts, &err)) {
      *result = {kExitUsage, err};
      return false;
    }
    std::vector<std::string> names;
    for (const discovery::HostSlots& h : hosts) names.push_back(h.name);
    context_->host_directory().Resolve(names);
    fixed_hosts_ = std::make_unique<discovery::FixedHostSource>(hosts);
    source_ = fixed_hosts_.get();
  }
  traits_ = source_->traits();
  return true;
}

// Where the rendezvous server listens and the ranks' network (discovery::ListenChoice).
bool ElasticPolicy::ChooseNetwork(JobResult* result) {
  const JobConfig& config = context_->config();
  discovery::ListenChoice listen;
  std::string err;
  if (!discovery::ChooseListenAddress(config.network_interfaces, /*hosts_known=*/false, {},
                                      !config.start.command.empty(),
                                      context_->host_directory().interfaces(), &listen, &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  listen_addr_ = listen.listen;
  run_.nics = listen.nics;
  run_.per_host = listen.per_host;
  run_.elastic = true;
  run_.rendezvous_addr = listen.address;
  run_.master_addr = listen.address;
  run_.master_is_launcher = true;
  run_.master_port = discovery::FindFreePort(listen.address, &err);
  return true;
}

// Per rank: two output pipes, one spare and two log files (FilesPerRank). With
// --max-np the limit is raised for them; without, at most the ranks it lets etrun supervise.
bool ElasticPolicy::FitFileLimit(JobResult* result) {
  const JobConfig& config = context_->config();
  int most_ranks = config.max_np.value_or(std::max(config.num_proc.value_or(1), 4096));
  FileLimit* limit = context_->file_limit();
  std::string err;
  if (config.max_np && limit != nullptr &&
      !limit->Ensure(static_cast<rlim_t>(most_ranks) * FilesPerRank(config) + 64,
                     fmt::format("{} ranks", most_ranks), &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  supervisable_ = config.max_np ? std::nullopt : SupervisableRanks(config, limit);
  int least = config.min_np.value_or(config.num_proc.value_or(1));
  if (supervisable_ && *supervisable_ < least) {
    *result = {kExitUsage, fmt::format("the open-file limit ({}, ulimit -Hn) lets etrun supervise at "
                                       "most {} ranks, fewer than the {} the job needs: raise "
                                       "it, or start fewer ranks per etrun", limit->current(),
                                       *supervisable_, least)};
    return false;
  }
  return true;
}

// The GPUs of this machine's ranks and the driver's options from the flags and the traits.
bool ElasticPolicy::SetOptions(JobResult* result) {
  const JobConfig& config = context_->config();
  std::string err;
  if (!LocalGpuSlots(config, context_->environment(), &run_.gpus, &err)) {
    *result = {kExitUsage, err};
    return false;
  }
  options_.np = config.num_proc.value_or(1);
  options_.min_np = config.min_np.value_or(options_.np);
  options_.max_np = config.max_np ? config.max_np : supervisable_;
  if (supervisable_) options_.np = std::min(options_.np, *supervisable_);
  options_.elastic_timeout = ElasticTimeout(config, context_->environment());
  options_.reset_limit = config.reset_limit;
  options_.restart_all = config.restart_mode;
  options_.recovery_grace = config.recovery_grace();
  if (config.start_timeout_s) options_.start_timeout = std::chrono::seconds(*config.start_timeout_s);
  if (traits_.lent) {
    // A lender starts a job with its minimum (gang admission) and queues it until then.
    options_.np = options_.min_np;
    options_.wait_without_deadline = true;
  }
  return true;
}

void ElasticPolicy::BuildDriver() {
  host_manager_ = std::make_unique<discovery::HostManager>(context_->config().cooldown_range, [this] {
    return std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  });
  host_manager_->set_forget_departed(traits_.forget_departed);
  notifier_ = context_->MakeNotifier();
  WorkerControl* workers = this;  // private bases: converted here, where they are accessible
  CoordinatorNotifier* notifier = this;
  driver_ = std::make_unique<ElasticDriver>(options_, host_manager_.get(), workers, notifier,
                                            &store_, context_->Now());
  driver_->set_events(&context_->events());
  // The handler and the store's callbacks run on the store's threads: what the driver owns is
  // reached on the driver's loop only (launcher/rendezvous_service.h), while the policy lives.
  std::weak_ptr<bool> alive = alive_;
  JobContext* context = context_;
  on_loop_ = [alive, context](std::function<void()> fn) {
    context->Post([alive, fn = std::move(fn)] {
      if (alive.lock()) fn();
    });
  };
  posted_hooks_ = std::make_unique<rendezvous::PostedHooks>(driver_.get(), on_loop_);
  handler_ = std::make_unique<rendezvous::RendezvousHandler>(
      &store_, posted_hooks_.get(), context_->rendezvous_deadlines(), rendezvous::kGetHoldBound);
}

// What the driver hears from the store: the world ready, workers arriving, the Gloo mesh. The
// store calls these on its threads with its lock held: they only post to the driver's loop.
void ElasticPolicy::WatchStore() {
  store_.set_on_scope_done([this](std::string_view scope) {
    if (scope != "global") return;
    // Its generation is the round this scope belonged to. A new round's Init since then makes
    // it stale.
    uint64_t generation = store_.generation();
    on_loop_([this, generation] {
      if (store_.generation() == generation) driver_->OnWorldReady(context_->Now());
    });
  });
  store_.set_on_put([this](std::string_view scope, std::string_view key) {
    // A Gloo pair address list (PUT /<scope>/<rank>): the mesh a fence cuts (rendezvous/gloo_mesh.h),
    // read back on the loop, which owns mesh_.
    if (!key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      on_loop_([this, scope = std::string(scope), key = std::string(key)] {
        if (std::optional<std::string> value = store_.Get(scope, key)) mesh_.Record(scope, key, *value);
      });
      return;
    }
    // A worker's first rendezvous request: PUT /global/rank_<r> (spec §4.6).
    int rank = -1;
    if (scope != "global" || !key.starts_with("rank_")) return;
    auto [end, ec] = std::from_chars(key.data() + 5, key.data() + key.size(), rank);
    if (ec != std::errc() || end != key.data() + key.size()) return;
    on_loop_([this, rank] { driver_->OnWorkerArrived(rank, context_->Now()); });
  });
}

void ElasticPolicy::Begin(int rendezvous_port) {
  run_.rendezvous_port = rendezvous_port;  // before the first worker starts
  Poll();
  Tick();
}

// Discovery: one run at a time, the interval counted from the end of the last.
void ElasticPolicy::Poll() {
  if (preflight_pending_) return;  // its verdict polls again (ApplyGrant)
  std::weak_ptr<bool> alive = alive_;
  JobContext* context = context_;
  size_t most = ResolvedAhead();
  std::map<std::string, std::vector<int>> live;  // every process not yet reaped holds its slot
  for (const auto& [slot, ids] : context_->RankSlots()) live[slot.first].push_back(slot.second);
  source_->ReportLive(std::move(live));
  polling_ = true;
  // Posted from the source's thread (Post is thread-safe).
  source_->Poll([this, alive, context, most](discovery::HostGrant grant) {
    // On the source's thread (or at once for fixed hosts): look the names up here, not on the
    // loop, so a slow resolver delays only this grant.
    context->host_directory().Resolve(HostNames(grant, most));
    context->Post([this, alive, grant = std::move(grant)] {
      if (alive.lock()) AfterPoll(grant);
    });
  });
}

void ElasticPolicy::AfterPoll(const discovery::HostGrant& grant) {
  polling_ = false;
  // The script's stderr reaches the user as horovodrun passes it through.
  if (!grant.errors.empty()) context_->Write(context_->console().console_err, grant.errors);
  // Before any rank starts on this machine: a command that cannot run here ends the job with one
  // line, as in the other modes, instead of failing every local rank (and blaming the host).
  if (grant.ok && !command_checked_ && OffersThisMachine(grant)) {
    command_checked_ = true;
    if (std::string cause = CommandCannotRun(context_->config().command, context_->environment());
        !cause.empty()) {
      driver_->Abort(kExitCommandNotFound, cause);
      context_->CheckDone();
      return;
    }
  }
  if (grant.ok && supervisable_ && !warned_supervisable_) {
    int64_t offered = 0;
    for (const discovery::HostSlots& h : grant.hosts) offered += h.slots;
    if (offered > *supervisable_) {
      warned_supervisable_ = true;
      spdlog::warn("the open-file limit ({}, ulimit -n) lets etrun supervise at most {} ranks: the "
                   "other {} slots are not used; say so with --max-np {} or raise the limit "
                   "(ulimit -Hn)", context_->file_limit()->current(), *supervisable_,
                   offered - *supervisable_, *supervisable_);
    }
  }
  if (grant.ok && context_->config().preflight != PreflightMode::kOff) {
    std::vector<std::string> fresh = Unchecked(grant);
    if (!fresh.empty()) return Preflight(grant, std::move(fresh));
  }
  if (pending_overrides_) {  // their hosts passed meanwhile, or left the job
    driver_->SetOverrides(*pending_overrides_, context_->Now());
    pending_overrides_.reset();
  }
  ApplyGrant(grant);
}

bool ElasticPolicy::OutForNow(const std::string& host) const {
  if (!host_manager_->IsBlacklisted(host)) return false;
  std::optional<TimePoint> end = host_manager_->CooldownEnd(host);
  return !end || context_->Now() < *end;  // a cooldown that has ended lets it back at this grant
}

std::vector<std::string> ElasticPolicy::Unchecked(const discovery::HostGrant& grant) {
  // A host that left the job (blacklisted) is checked again when it comes back.
  std::erase_if(preflight_passed_, [this](const std::string& h) { return host_manager_->IsBlacklisted(h); });
  std::vector<std::string> names = HostNames(grant, ResolvedAhead());
  std::vector<std::string> fresh;
  auto consider = [&](const std::string& name, int slots) {
    if (slots > 0 && !OutForNow(name) && !preflight_passed_.count(name) &&
        std::find(fresh.begin(), fresh.end(), name) == fresh.end()) {
      fresh.push_back(name);
    }
  };
  for (size_t i = 0; i < names.size(); ++i) consider(names[i], grant.hosts[i].slots);
  // Hosts `etrun scale` adds, waiting for their check.
  if (pending_overrides_) {
    for (const auto& [name, slots] : pending_overrides_->add) consider(name, slots);
  }
  return fresh;
}

int ElasticPolicy::SlotsOffered(const discovery::HostGrant& grant, const std::string& host) const {
  if (pending_overrides_) {
    if (auto it = pending_overrides_->add.find(host); it != pending_overrides_->add.end()) return it->second;
  }
  if (auto it = driver_->overrides().add.find(host); it != driver_->overrides().add.end()) return it->second;
  for (const discovery::HostSlots& h : grant.hosts) {
    if (h.name == host) return h.slots;
  }
  return 0;
}

void ElasticPolicy::Preflight(const discovery::HostGrant& grant, std::vector<std::string> fresh) {
  // The new hosts, and (as peers to probe, at most 8) hosts of the job that passed before.
  std::vector<std::string> hosts = fresh;
  for (const std::string& h : HostNames(grant, ResolvedAhead())) {
    if (hosts.size() >= fresh.size() + 8) break;
    if (preflight_passed_.count(h) && !OutForNow(h) && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) {
      hosts.push_back(h);
    }
  }
  std::vector<PreflightRequest> requests;
  for (const std::string& h : hosts) {
    int slots = SlotsOffered(grant, h);
    rendezvous::SlotInfo slot;
    slot.hostname = h;
    slot.local_size = slots;
    RankRequest request{slot, 0, run_, 0, ExtraEnv(false), {}};
    if (run_.per_host) PlaceOnNetwork(slot, {slot}, &request.run);
    if (auto through = grant.start_through.find(h); through != grant.start_through.end()) {
      request.start = through->second;
    }
    requests.push_back({request, slots});
  }
  preflight_pending_ = true;
  std::optional<HostOverrides> overrides = std::move(pending_overrides_);
  pending_overrides_.reset();
  context_->Preflight(requests, [this, grant, fresh, overrides](const PreflightResult& result) {
    OnPreflight(grant, fresh, overrides, result);
  });
}

void ElasticPolicy::OnPreflight(const discovery::HostGrant& grant, const std::vector<std::string>& fresh,
                                const std::optional<HostOverrides>& overrides,
                                const PreflightResult& result) {
  preflight_pending_ = false;
  if (driver_->finished()) return;
  // Only the new hosts are judged: those of the job already run its ranks, and their failures
  // take the usual way.
  PreflightResult judged = result;
  std::erase_if(judged.sick, [&fresh](const preflight::SickHost& s) {
    return std::find(fresh.begin(), fresh.end(), s.host) == fresh.end();
  });
  bool warn = context_->config().preflight == PreflightMode::kWarn;
  ReportPreflight(judged, judged.sick.empty() ? "start" : warn ? "warn" : "leave_out", &context_->events());
  for (const std::string& h : fresh) {
    auto sick = std::find_if(judged.sick.begin(), judged.sick.end(),
                             [&h](const preflight::SickHost& s) { return s.host == h; });
    if (sick == judged.sick.end() || warn) {
      preflight_passed_.insert(h);
    } else {
      driver_->OnHostSick(h, "pre-flight: " + sick->why, context_->Now());
    }
  }
  // `etrun scale`'s hosts come in now that they are checked; newer overrides that came meanwhile
  // wait for the next poll's check.
  if (overrides && !pending_overrides_) driver_->SetOverrides(*overrides, context_->Now());
  ApplyGrant(grant);
}

void ElasticPolicy::ApplyGrant(const discovery::HostGrant& grant) {
  driver_->OnDiscovery(grant, context_->Now());
  context_->CheckDone();
  if (driver_->finished()) return;
  // Only the latest wait polls, so there is one chain of runs (an early poll drops the wait).
  uint64_t wait = ++poll_wait_;
  poll_timer_ = context_->After(context_->config().discovery_interval(), [this, wait] {
    if (wait == poll_wait_) Poll();
  });
}

// Only hosts the grant lists first are looked at (those Poll had resolved): the job's ranks start
// there, and a lookup of any other would block the loop.
bool ElasticPolicy::OffersThisMachine(const discovery::HostGrant& grant) const {
  std::vector<std::string> names = HostNames(grant, ResolvedAhead());
  for (size_t i = 0; i < names.size(); ++i) {
    if (grant.hosts[i].slots > 0 && context_->host_directory().Lookup(names[i]).local) return true;
  }
  return false;
}

size_t ElasticPolicy::ResolvedAhead() const {
  // A job uses at most max-np hosts (one slot each at least), beyond the blacklisted ones.
  return options_.max_np ? static_cast<size_t>(*options_.max_np) + 16 : kResolveAhead;
}

void ElasticPolicy::Tick() {
  tick_timer_ = context_->After(kTick, [this] {
    driver_->OnTick(context_->Now());
    context_->CheckDone();
    if (!driver_->finished()) Tick();
  });
}

void ElasticPolicy::OnRankFinished(const RankSet::Finished& f) {
  if (f.local_rank < 0) return;  // every process of an elastic job is a slot's
  SlotKey key{f.host, f.local_rank};
  kill_timers_.erase(f.id);
  if (unstarted_.erase(f.id) != 0) {  // never a worker: the driver heard of it as a shortage
    nlohmann::json fields = events::ExitFields(f.status);
    fields.update({{field::kRank, f.rank}, {field::kHost, f.host}, {field::kLocalRank, key.second},
                   {field::kPid, events::PidField(f.pid)},
                   {field::kReason, events::ExitReason(f.status, false, false)}});
    context_->events().Emit(events::kRankExited, std::move(fields));
    return;
  }
  // A host whose SSH connection failed, or whose remote shell died, is unreachable.
  RemoteStarter* remote = context_->remote();
  if (!f.status.success() && remote != nullptr && !context_->host_directory().Lookup(key.first).local &&
      remote->Unreachable(key.first, f.status)) {
    driver_->OnHostUnreachable(key.first, context_->Now());
    Fence(key.first, true);
  } else if (!f.status.success() && InFormedWorld(key) &&
             driver_->ExitReasonFor(key, f.status) == "failed") {
    Fence(key.first, false);  // its survivors' collectives fail now, not one by one
  }
  nlohmann::json fields = events::ExitFields(f.status);
  fields.update({{field::kRank, f.rank}, {field::kHost, f.host}, {field::kLocalRank, key.second},
                 {field::kPid, events::PidField(f.pid)},
                 {field::kReason, driver_->ExitReasonFor(key, f.status)}});
  context_->events().Emit(events::kRankExited, std::move(fields));
  driver_->OnWorkerExit(key, f.status, context_->Now(), f.stopped);
  // Its slot may be one the lender waits for: say so now rather than at the next poll.
  if (traits_.lent && !polling_ && !driver_->finished()) {
    ++poll_wait_;
    poll_timer_.reset();
    Poll();
  }
}

bool ElasticPolicy::InFormedWorld(const SlotKey& key) const {
  if (!driver_->world_ready()) return false;
  for (const rendezvous::SlotInfo& slot : driver_->assignment()) {
    if (slot.hostname == key.first && slot.local_rank == key.second) return true;
  }
  return false;
}

// A host's addresses: those discovery resolved, and those its ranks' Gloo pairs listen on.
std::vector<std::string> ElasticPolicy::FenceIps(const std::string& host) const {
  std::vector<std::string> ips;
  for (uint32_t a : context_->host_directory().Lookup(host).ipv4) ips.push_back(discovery::Ipv4Text(a));
  for (const rendezvous::SlotInfo& slot : driver_->assignment()) {
    std::string ip = slot.hostname == host ? mesh_.RankIp("global", slot.rank) : "";
    if (!ip.empty()) ips.push_back(std::move(ip));
  }
  return ips;
}

void ElasticPolicy::Fence(const std::string& host, bool lost) {
  std::vector<std::string> addresses;  // the lost host's: every survivor's sockets to it go
  if (lost) {
    if (!fenced_.insert(host).second) return;  // once per loss
    for (uint32_t a : context_->host_directory().Lookup(host).ipv4) addresses.push_back(discovery::Ipv4Text(a));
  }
  std::set<std::string> survivors;
  for (const auto& [slot, ids] : context_->RankSlots()) {
    if (!lost || slot.first != host) survivors.insert(slot.first);
  }
  std::vector<std::string> fenced;
  std::vector<std::string> here_ips;
  bool here = false;
  for (const std::string& survivor : survivors) {
    if (context_->host_directory().Lookup(survivor).local) {
      here = true;
      for (std::string& ip : FenceIps(survivor)) here_ips.push_back(std::move(ip));
      continue;
    }
    std::string command = FenceCommand(addresses, mesh_.FilterTerms(FenceIps(survivor)));
    if (!command.empty() && context_->remote() != nullptr &&
        context_->remote()->RunDetached(survivor, command)) {
      fenced.push_back(survivor);
    }
  }
  std::string here_command = here ? FenceCommand(addresses, mesh_.FilterTerms(here_ips)) : "";
  if (!here_command.empty()) {
    context_->FenceHere(here_command);
    fenced.push_back("this machine");
  }
  mesh_.Clear();  // that world's mesh is gone; the next rendezvous records the new one
  if (!lost) {
    if (!fenced.empty()) {
      spdlog::info("a worker on {} failed: its world's Gloo connections are cut on {}, so every "
                   "survivor's collective fails now", host, fmt::join(fenced, ", "));
    }
    return;
  }
  if (survivors.empty() || (addresses.empty() && fenced.empty())) return;
  if (fenced.empty()) {
    spdlog::info("host {} is lost; its peers' connections to it cannot be cut (no way to run "
                 "ss -K where they are): their collectives wait for Gloo's timeout", host);
    return;
  }
  spdlog::info("host {} is lost: its peers' connections to it are cut on {}, so their "
               "collectives fail now", host, fmt::join(fenced, ", "));
}

void ElasticPolicy::OnStopSignal(int sig) {
  driver_->Abort(128 + sig, "received " + SignalName(sig));
}

void ElasticPolicy::OnHang(const std::vector<std::string>& odd_hosts) {
  const auto& slots = context_->RankSlots();
  if (context_->config().restart_mode) {
    spdlog::warn("hang: restarting every rank (--hang-action restart)");
    for (const auto& [slot, ids] : slots) {
      for (int id : ids) context_->Signal(id, SIGKILL);
    }
    return;
  }
  if (odd_hosts.empty()) {
    spdlog::warn("hang: no rank stands out from the others, so no host is restarted "
                 "(--hang-action restart); the next dump follows another --hang-timeout");
    return;
  }
  for (const std::string& host : odd_hosts) {
    spdlog::warn("hang: host {} counts as failed (--hang-action restart)", host);
    driver_->OnHostHung(host, context_->Now());
  }
  std::vector<int> kill;
  for (const auto& [slot, ids] : slots) {
    if (std::find(odd_hosts.begin(), odd_hosts.end(), slot.first) == odd_hosts.end()) continue;
    kill.insert(kill.end(), ids.begin(), ids.end());
  }
  for (int id : kill) context_->Signal(id, SIGKILL);
}

// The index of `host` among the hosts of `world`, in order of first appearance.
static int GroupRank(const std::string& host, const std::vector<rendezvous::SlotInfo>& world) {
  std::vector<std::string> seen;
  for (const rendezvous::SlotInfo& s : world) {
    if (std::find(seen.begin(), seen.end(), s.hostname) == seen.end()) seen.push_back(s.hostname);
    if (s.hostname == host) break;
  }
  return static_cast<int>(seen.size()) - 1;
}

void ElasticPolicy::PlaceOnNetwork(const rendezvous::SlotInfo& slot,
                                   const std::vector<rendezvous::SlotInfo>& world, RunVars* run) {
  discovery::HostDirectory& hosts = context_->host_directory();  // cached: no lookup on the loop
  auto remote = std::find_if(world.begin(), world.end(), [&hosts](const rendezvous::SlotInfo& s) {
    return !hosts.Lookup(s.hostname).local;
  });
  // torch.distributed's store is served by rank 0: MASTER_ADDR names its host when that is
  // another machine (remote ranks are told this machine's address as they reach it otherwise).
  for (const rendezvous::SlotInfo& s : world) {
    if (s.rank == 0 && !hosts.Lookup(s.hostname).local) {
      run->master_addr = s.hostname;
      run->master_is_launcher = false;
    }
  }
  // This machine's ranks meet remote ones where the route toward them leaves (the loopback
  // while the world is this machine only).
  if (remote == world.end() || !hosts.Lookup(slot.hostname).local) return;
  std::vector<uint32_t> ipv4 = hosts.Lookup(remote->hostname).ipv4;
  std::string nic, address;
  if (!ipv4.empty() && discovery::RouteTowardAddress(ipv4.front(), hosts.interfaces(), &nic, &address)) {
    run->nics = {nic};
  }
}

bool ElasticPolicy::Start(const rendezvous::SlotInfo& slot, int round,
                          const std::vector<rendezvous::SlotInfo>& world, Shortage* shortage) {
  SlotKey key{slot.hostname, slot.local_rank};
  fenced_.erase(slot.hostname);  // back in the job: fenced again if lost again
  RankRequest request{slot, GroupRank(slot.hostname, world), run_, round,
                      ExtraEnv(round > driver_->round()), {}};
  if (run_.per_host) PlaceOnNetwork(slot, world, &request.run);
  // The facts of the hosts the driver plans with are its grant's own (HostGrant: one value).
  const discovery::HostGrant& grant = driver_->grant();
  if (auto through = grant.start_through.find(slot.hostname); through != grant.start_through.end()) {
    request.start = through->second;
  }
  // The slot's facts from its source (a pool's slot name and GPU) and the GPUs the rank sees:
  // with --gpus-per-rank the RankLauncher sets them; else ranks permuted on this host (rank 0
  // kept with the state) must find their slot's own GPU at hvd.local_rank().
  auto facts = grant.slots.find(slot.hostname);
  const discovery::SlotFacts* own = nullptr;
  std::vector<std::string> lent;
  if (facts != grant.slots.end() && slot.local_rank >= 0 && static_cast<size_t>(slot.local_rank) < facts->second.size()) {
    own = &facts->second[slot.local_rank];
    request.extra_env.insert(request.extra_env.end(), own->env.begin(), own->env.end());
    for (const discovery::SlotFacts& f : facts->second) lent.push_back(f.device);
  }
  if (own != nullptr || !run_.gpus.enabled()) {
    int horovod_local = 0;
    for (const rendezvous::SlotInfo& s : world) {
      if (s.hostname == slot.hostname && s.rank < slot.rank) ++horovod_local;
    }
    std::vector<std::string> inherited;  // this machine's, as its ranks see them
    if (own == nullptr && context_->host_directory().Lookup(slot.hostname).local) {
      inherited = SplitDevices(EnvValue(context_->environment(), "CUDA_VISIBLE_DEVICES"));
    }
    std::string devices = RankVisibleDevices(own != nullptr ? &lent : nullptr, inherited,
                                             slot.local_rank, horovod_local, slot.local_size);
    if (!devices.empty()) request.extra_env.push_back("CUDA_VISIBLE_DEVICES=" + devices);
  }
  if (options_.restart_all) {
    // Every restart is a new torch.distributed world: a fresh store port for rank 0.
    if (driver_->round() != port_round_) {
      std::string port_err;
      if (int port = discovery::FindFreePort(run_.master_addr, &port_err); port != 0) {
        master_port_ = port;
      }
      port_round_ = driver_->round();
    }
    if (master_port_ != 0) request.run.master_port = master_port_;
  }
  int id = -1;
  std::string err;
  if (!context_->StartRank(request, &id, &err)) {
    if (!IsShortage(context_->start_errno())) {
      FailStart(key, err);
      return true;
    }
    *shortage = ShortageOf(context_->start_errno());
    return false;
  }
  if (!context_->AwaitExecs(&err)) {  // it exits 127 and is reaped
    if (IsShortage(context_->start_errno())) {
      unstarted_.insert(id);
      *shortage = ShortageOf(context_->start_errno());
      return false;
    }
    spdlog::error("{}", err);
  }
  return true;
}

// The rank table is the runtime's (JobContext::RankSlots): a slot runs a worker when it holds a
// process that could start (not one of `unstarted_`), or while the exit of a start that failed is
// on its way (`failing_`).
int ElasticPolicy::WorkerIn(const SlotKey& key) const {
  const auto& slots = context_->RankSlots();
  auto it = slots.find(key);
  if (it == slots.end()) return -1;
  for (auto id = it->second.rbegin(); id != it->second.rend(); ++id) {
    if (!unstarted_.count(*id)) return *id;
  }
  return -1;
}

bool ElasticPolicy::Running(const SlotKey& key) const {
  return failing_.count(key) != 0 || WorkerIn(key) >= 0;
}

std::vector<SlotKey> ElasticPolicy::RunningSlots() const {
  std::set<SlotKey> running(failing_.begin(), failing_.end());
  for (const auto& [slot, ids] : context_->RankSlots()) {
    if (unstarted_.empty() || WorkerIn(slot) >= 0) running.insert(slot);
  }
  return {running.begin(), running.end()};
}

bool ElasticPolicy::AnyRunning() const {
  if (!failing_.empty()) return true;
  if (unstarted_.empty()) return !context_->RankSlots().empty();
  for (const auto& [slot, ids] : context_->RankSlots()) {
    if (WorkerIn(slot) >= 0) return true;
  }
  return false;
}

// What etrun can afford is estimated from the processes it runs now (`running`): with files, each
// holds its pipes (and log files), and etrun keeps kOwnFiles descriptors of those for itself and
// one per rank for its rendezvous connection at a reset (FilesPerRank counts it); with processes,
// room for a discovery run (its shell and script); with memory, one rank's worth.
Shortage ElasticPolicy::ShortageOf(int err_no) const {
  constexpr int kOwnFiles = 16;
  int processes = 0;
  for (const auto& [slot, ids] : context_->RankSlots()) processes += static_cast<int>(ids.size());
  int running = processes - static_cast<int>(unstarted_.size());
  int per_rank = FilesPerRank(context_->config());
  int files = (running * (per_rank - 1) - kOwnFiles) / per_rank;
  struct rlimit limit;
  switch (err_no) {
    case EMFILE:
      if (context_->file_limit() == nullptr) return {"too many open files (ulimit -Hn)", files};
      return {fmt::format("too many open files: etrun's open-file limit is {} (ulimit -Hn)",
                          context_->file_limit()->current()), files};
    case ENFILE:
      return {"the system's open-file table is full (sysctl fs.file-max)", files};
    case EAGAIN:
      if (getrlimit(RLIMIT_NPROC, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        return {fmt::format("no more processes: the limit is {} per user (ulimit -u), or the "
                            "cgroup's pids.max", limit.rlim_cur), running - 2};
      }
      return {"no more processes: the cgroup's pids.max or the system's limit is reached",
              running - 2};
    default:
      return {std::string("out of memory: ") + strerror(err_no), running - 1};
  }
}

// A slot's process cannot even start: reported like an exit with code 127, from the loop.
void ElasticPolicy::FailStart(const SlotKey& key, const std::string& err) {
  spdlog::error("cannot start {}[{}]: {}", key.first, key.second, err);
  failing_.insert(key);
  std::weak_ptr<bool> alive = alive_;
  context_->Post([this, alive, key] {
    if (!alive.lock()) return;
    failing_.erase(key);
    driver_->OnWorkerExit(key, ExitStatus::Exited(kExitCommandNotFound), context_->Now());
    context_->CheckDone();
  });
}

// Restart mode: torchrun's restart count. A worker started ahead of its round waits in its
// first rendezvous until the training world's next commit: its Gloo deadline
// (HOROVOD_GLOO_TIMEOUT_SECONDS, default 30 s) is raised to --elastic-timeout for it.
std::vector<std::string> ElasticPolicy::ExtraEnv(bool ahead) const {
  std::vector<std::string> env;
  if (options_.restart_all) {
    env = {"TORCHELASTIC_RESTART_COUNT=" + std::to_string(driver_->resets()),
           "TORCHELASTIC_MAX_RESTARTS=" + std::to_string(context_->config().reset_limit.value_or(-1))};
  }
  if (ahead) {
    long gloo = 30;
    if (std::string v = EnvValue(context_->environment(), "HOROVOD_GLOO_TIMEOUT_SECONDS"); !v.empty()) {
      gloo = strtol(v.c_str(), nullptr, 10);
    }
    if (context_->config().tunables.gloo_timeout_seconds) gloo = *context_->config().tunables.gloo_timeout_seconds;
    long wait = std::chrono::duration_cast<std::chrono::seconds>(options_.elastic_timeout).count();
    if (wait > gloo) env.push_back("HOROVOD_GLOO_TIMEOUT_SECONDS=" + std::to_string(wait));
  }
  return env;
}

void ElasticPolicy::Stop(const SlotKey& key) {
  int id = WorkerIn(key);
  if (id < 0) return;
  context_->Signal(id, SIGTERM);
  JobContext* context = context_;
  kill_timers_[id] = context_->After(context_->config().grace_period(),
                                     [context, id] { context->Signal(id, SIGKILL); });
}

void ElasticPolicy::Register(const rendezvous::WorkerRegistration& registration,
                             std::function<void(bool, std::string)> done) {
  notifier_->Register(registration, std::move(done));
}

bool ElasticPolicy::IsRegistered(const SlotKey& slot) const {
  return notifier_->IsRegistered(slot.first, slot.second);
}

void ElasticPolicy::Notify(const SlotKey& slot, rendezvous::HostUpdateResult res,
                           std::function<void(bool, std::string)> done) {
  notifier_->Notify(slot.first, slot.second, notifier_->NextTimestamp(), res, std::move(done));
}

control::JobStatus ElasticPolicy::Status() const {
  auto now = context_->Now();
  control::JobStatus status;
  for (const RankSet::Running& r : context_->Unfinished()) {
    if (r.local_rank < 0) continue;
    SlotKey key{r.host, r.local_rank};
    int current = -1;
    for (const rendezvous::SlotInfo& s : driver_->assignment()) {
      if (s.hostname == key.first && s.local_rank == key.second) current = s.rank;
    }
    status.ranks.push_back({.rank = current, .label = r.rank, .host = r.host,
                            .local_rank = key.second, .pid = r.pid,
                            .state = driver_->WorkerState(key),
                            .restarts = r.starts - 1,
                            .uptime_s = std::chrono::duration<double>(now - r.started).count()});
  }
  const HostOverrides& overrides = driver_->overrides();
  status.state = driver_->state();
  status.elastic = true;
  status.world_ready = driver_->world_ready();
  if (traits_.lent) status.pool = traits_.lender;
  status.world_size = static_cast<int>(driver_->assignment().size());
  status.np = options_.np;
  status.min_np = options_.min_np;
  status.max_np = context_->config().max_np;
  status.resets = driver_->resets();
  status.round = driver_->round();
  status.overrides = overrides;
  return status;
}

void ElasticPolicy::OnControl(const rendezvous::HttpRequest& request, ControlRespond respond) {
  if (request.method == "POST" && request.target == "/overrides") {
    return ApplyOverrides(request.body, std::move(respond));
  }
  JobPolicy::OnControl(request, std::move(respond));
}

// `etrun scale`: the whole new set of overrides, {"add": {host: slots}, "remove": [host],
// "to": N or null}. Added hosts are looked up off the loop before they apply.
bool ElasticPolicy::NeedsPreflight(const HostOverrides& overrides) const {
  if (context_->config().preflight == PreflightMode::kOff) return false;
  return std::any_of(overrides.add.begin(), overrides.add.end(), [this](const auto& added) {
    return added.second > 0 && !preflight_passed_.count(added.first) && !OutForNow(added.first);
  });
}

void ElasticPolicy::ApplyOverrides(const std::string& body, ControlRespond respond) {
  control::Overrides wanted;
  std::string err;
  if (!control::OverridesFromJson(nlohmann::json::parse(body, nullptr, false),
                                  discovery::IsValidHostName, &wanted, &err)) {
    return respond(400, control::ErrorToJson(err));
  }
  HostOverrides next = std::move(wanted);
  if (traits_.lent && (!next.add.empty() || !next.remove.empty())) {
    // The lender decides the job's hosts; slots past its grant are other jobs'.
    return respond(400, control::ErrorToJson("the job's hosts are lent by pool '" + traits_.lender +
                                             "': change its share with `etrun pool priority`, or "
                                             "cap it with --to N"));
  }
  if (next.to && *next.to < options_.min_np) {
    return respond(400, control::ErrorToJson("--to " + std::to_string(*next.to) +
                                             " is below --min-np " + std::to_string(options_.min_np)));
  }
  std::vector<std::string> names;
  for (const auto& [host, slots] : next.add) names.push_back(host);
  std::weak_ptr<bool> alive = alive_;
  JobContext* context = context_;
  context_->RunBlocking([context, names] { context->host_directory().Resolve(names); },
                        [this, alive, next, respond] {
                          if (!alive.lock()) return;
                          if (NeedsPreflight(next)) {
                            // Its new hosts are checked first, at a poll made now (or once the
                            // check under way is over), then the overrides apply.
                            pending_overrides_ = next;
                            respond(200, control::OkToJson());
                            if (!polling_ && !preflight_pending_) {
                              ++poll_wait_;
                              poll_timer_.reset();
                              Poll();
                            }
                            return;
                          }
                          driver_->SetOverrides(next, context_->Now());
                          respond(200, control::OkToJson());
                          context_->CheckDone();
                        });
}

}  // namespace etrun::launcher
