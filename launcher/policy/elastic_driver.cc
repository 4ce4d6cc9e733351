#include "launcher/policy/elastic_driver.h"

#include <spdlog/spdlog.h>

#include "events/schema.h"

namespace etrun::launcher {

namespace {

namespace field = events::field;

std::string Seconds(std::chrono::milliseconds d) {
  return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

ElasticDriver::ElasticDriver(ElasticOptions options, discovery::HostManager* hosts,
                             WorkerControl* workers, CoordinatorNotifier* notifier,
                             rendezvous::KvStore* store, TimePoint start)
    : options_(options),
      hosts_(hosts),
      workers_(workers),
      notifier_(notifier),
      store_(store),
      now_(start),
      wait_deadline_(start + options.elastic_timeout) {}

std::string ElasticDriver::Describe(const SlotKey& key) const {
  return key.first + "[" + std::to_string(key.second) + "]";
}

std::optional<rendezvous::SlotInfo> ElasticDriver::SlotOf(const SlotKey& key) const {
  for (const rendezvous::SlotInfo& s : assignment_) {
    if (s.hostname == key.first && s.local_rank == key.second) return s;
  }
  return std::nullopt;
}

bool ElasticDriver::ComputeAssignment(std::vector<rendezvous::SlotInfo>* plan, std::string* err) const {
  std::vector<rendezvous::HostSlotCount> counts;
  for (const discovery::HostSlots& h : hosts_->Available()) counts.push_back({h.name, h.slots});
  std::optional<int> max_np = options_.max_np;
  for (const std::optional<int>& cap : {overrides_.to, shortage_cap_}) {
    if (cap) max_np = max_np ? std::min(*max_np, *cap) : *cap;
  }
  return rendezvous::Assign(counts, options_.min_np, max_np, plan, err);
}

void ElasticDriver::OnDiscovery(const discovery::HostGrant& grant, TimePoint now) {
  now_ = now;
  if (phase_ == Phase::kStopping || phase_ == Phase::kDone) return;
  if (!grant.ok) {
    const std::string& err = grant.failure;
    Emit(events::kDiscoveryFailed, {{field::kReason, err}});
    if (!have_discovery_) return Stop(kExitFailure, grant.fix.empty() ? err : err + ": " + grant.fix);
    spdlog::warn("{}; keeping the last host list", err);
    return;
  }
  for (const std::string& w : grant.warnings) spdlog::warn("{}", w);
  have_discovery_ = true;
  grant_ = grant;
  grant_.warnings.clear();
  grant_.errors.clear();
  ApplyHosts(grant_.hosts, now);
}

void ElasticDriver::SetOverrides(HostOverrides overrides, TimePoint now) {
  now_ = now;
  overrides_ = std::move(overrides);
  spdlog::info("scale: hosts added {}, removed {}, size {}", overrides_.add.size(),
               overrides_.remove.size(), overrides_.to ? std::to_string(*overrides_.to) : "as discovered");
  if (have_discovery_ && phase_ != Phase::kStopping && phase_ != Phase::kDone) ApplyHosts(grant_.hosts, now);
}

void ElasticDriver::ApplyHosts(std::vector<discovery::HostSlots> parsed, TimePoint now) {
  std::string err;
  std::erase_if(parsed, [this](const discovery::HostSlots& h) {
    return std::find(overrides_.remove.begin(), overrides_.remove.end(), h.name) != overrides_.remove.end() ||
           overrides_.add.count(h.name) != 0;
  });
  for (const auto& [host, slots] : overrides_.add) parsed.push_back({host, slots});
  // The job's host list (the grant with the overrides) is the host manager's: an event says
  // each new one, the first included.
  if (!hosts_->updated() || parsed != hosts_->discovered()) {
    nlohmann::json list = nlohmann::json::array();
    for (const discovery::HostSlots& h : parsed) list.push_back({{field::kHost, h.name}, {field::kSlots, h.slots}});
    Emit(events::kDiscovery, {{field::kHosts, list}});
  }
  std::vector<std::string> was_blacklisted;
  for (const discovery::HostSlots& h : parsed) {
    if (hosts_->IsBlacklisted(h.name)) was_blacklisted.push_back(h.name);
  }
  int flags = hosts_->Update(parsed, now);
  for (const std::string& host : was_blacklisted) {
    if (!hosts_->IsBlacklisted(host)) Emit(events::kHostResurrected, {{field::kHost, host}});
  }
  int available = hosts_->AvailableSlots();
  if (phase_ == Phase::kWaitingToStart) {
    if (available >= options_.np) Activate();
    return;
  }
  if (phase_ == Phase::kResuming) {
    if (available >= options_.min_np) Activate();
    return;
  }
  // Tell rank 0 only when the change would alter the assignment (spec §6.4). With no host
  // change, a new `scale --to` size can still alter it.
  std::vector<rendezvous::SlotInfo> plan;
  if (available < options_.min_np || !ComputeAssignment(&plan, &err)) plan.clear();
  if (SameSlots(plan, assignment_)) return;
  if (flags == discovery::kNoUpdate) {
    flags = plan.size() > assignment_.size() ? discovery::kAdded : discovery::kRemoved;
  }
  // Workers already starting ahead for this plan: rank 0 is told once, when they are in (a
  // poll between that notification and the reset must not queue a second one).
  if (ahead_ && ahead_->plan == plan) return;
  spdlog::debug("host change seen (flags {}): {} slots available", flags, available);
  if (options_.restart_all) {
    // A world of which a rank finished training has finished it: its other ranks are finishing
    // too, and a change must not start it once more (seen with a pool grant that arrived as the
    // last ranks exited 0). The change counts for nothing now; the job ends with its ranks.
    if (WorldFinishing()) return spdlog::debug("host change ignored: training has finished");
    return BeginRestart("the hosts changed");
  }
  pending_flags_ |= flags;
  if (MaybeStartAhead(plan, now)) return;  // rank 0 is told once the new workers are in
  MaybeNotify();
}

bool ElasticDriver::SameSlots(const std::vector<rendezvous::SlotInfo>& a,
                              const std::vector<rendezvous::SlotInfo>& b) {
  // The round's ranks may be permuted (KeepStateOnRankZero): the slots used are what counts.
  auto slots = [](const std::vector<rendezvous::SlotInfo>& plan) {
    std::vector<std::pair<std::string, int>> keys;
    for (const rendezvous::SlotInfo& s : plan) keys.emplace_back(s.hostname, s.local_rank);
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  return a.size() == b.size() && slots(a) == slots(b);
}

void ElasticDriver::BeginRestart(const std::string& why) {
  if (phase_ != Phase::kRunning) return;
  if (options_.reset_limit && resets_ >= *options_.reset_limit) {
    return Stop(EndingCode(), why + ", and the number of restarts reached the limit: " +
                                  std::to_string(*options_.reset_limit) + " (--reset-limit)" +
                                  EarlierFailure("; first failure: "));
  }
  std::vector<SlotKey> running = workers_->RunningSlots();
  spdlog::info("restarting all {} workers: {}", running.size(), why);
  restart_reason_ = why;
  NoteResetBegin(why);
  phase_ = Phase::kRestarting;
  records_.clear();
  for (const SlotKey& key : running) Drain(key);
  MaybeRestart();
}

void ElasticDriver::FinishRestartWorld() {
  if (last_failure_in_world_) {
    return Stop(EndingCode(), last_failure_ + EarlierFailure("; first failure: "));
  }
  spdlog::debug("training finished in round {}: no restart", round_);
  Stop(kExitOk, "");
}

bool ElasticDriver::WorldFinishing() const {
  return std::any_of(records_.begin(), records_.end(),
                     [](const auto& r) { return r.second == Record::kSuccess; });
}

void ElasticDriver::MaybeRestart() {
  if (phase_ != Phase::kRestarting) return;
  // A worker of the stopped world that exited 0 had finished training before the stop reached
  // it (its exit and the change came in the same turn): the job is done, not restarted.
  if (finished_while_restarting_) return FinishRestartWorld();
  if (workers_->AnyRunning()) return;
  ++resets_;
  last_failure_in_world_ = false;
  Emit(events::kReset, {{field::kResets, resets_}, {field::kReason, restart_reason_}});
  if (hosts_->AvailableSlots() >= options_.min_np) return Activate();
  phase_ = Phase::kResuming;
  wait_deadline_ = now_ + options_.elastic_timeout;
}

void ElasticDriver::MaybeNotify() {
  if (pending_flags_ == 0 || notify_in_flight_ || phase_ != Phase::kRunning) return;
  if (ahead_ && !ahead_->waiting.empty()) return;  // told once the new workers are in
  // A reset already under way picks the latest hosts up when the round opens.
  if (!records_.empty() || assignment_.empty()) return;
  SlotKey coordinator{assignment_.front().hostname, assignment_.front().local_rank};
  if (!notifier_->IsRegistered(coordinator)) return;  // sent once it registers
  int flags = pending_flags_;
  pending_flags_ = 0;
  notify_in_flight_ = true;
  spdlog::debug("notifying rank 0 ({}) of host change {}", Describe(coordinator), flags);
  notifier_->Notify(coordinator, static_cast<rendezvous::HostUpdateResult>(flags),
                    [this, flags, coordinator](bool ok, std::string err) {
                      notify_in_flight_ = false;
                      if (ok) return spdlog::debug("rank 0 ({}) acknowledged the host change", Describe(coordinator));
                      spdlog::warn("could not notify rank 0 ({}) of a host change: {}; will retry",
                                   Describe(coordinator), err);
                      pending_flags_ |= flags;
                    });
}

void ElasticDriver::Activate() {
  std::vector<rendezvous::SlotInfo> plan;
  std::string err;
  if (!ComputeAssignment(&plan, &err)) {
    if (phase_ == Phase::kReplanning) wait_deadline_ = now_ + options_.elastic_timeout;
    phase_ = phase_ == Phase::kWaitingToStart ? phase_ : Phase::kResuming;
    return;
  }
  if (launched_ && !options_.restart_all) {
    bool survivor = false;
    for (const rendezvous::SlotInfo& s : plan) survivor = survivor || HoldsState({s.hostname, s.local_rank});
    if (!survivor) {
      return Stop(EndingCode(), "no worker of the previous round is left to carry the training state" +
                                    (last_failure_.empty() ? std::string() : " (" + last_failure_ + ")"));
    }
  }
  // The round prepared ahead opens as planned; any other plan replaces the workers started
  // ahead for it (they are drained, then started afresh with this round's environment).
  bool adopt = ahead_ && ahead_->plan == plan;
  if (ahead_ && !adopt) AbandonStartAhead("the next round differs from the one prepared");
  ahead_.reset();
  if (round_ > 0 && !options_.restart_all && !adopt) KeepStateOnRankZero(&plan);
  assignment_ = std::move(plan);
  ++round_;
  records_.clear();
  round_deadline_.reset();
  recovery_deadline_.reset();
  start_when_gone_.clear();
  pending_flags_ = 0;  // the new round reflects the hosts as they are now
  if (adopt) {
    store_->Resize(assignment_);  // keeps what the workers started ahead already put
  } else {
    store_->Init(assignment_);
  }
  phase_ = Phase::kRunning;
  spdlog::info("round {}: {} ranks", round_, assignment_.size());
  if (events_ != nullptr && events_->enabled()) {
    nlohmann::json slots = nlohmann::json::array();
    for (const rendezvous::SlotInfo& s : assignment_) {
      slots.push_back({{field::kRank, s.rank}, {field::kHost, s.hostname}, {field::kLocalRank, s.local_rank}});
    }
    Emit(events::kRound, {{field::kRound, round_}, {field::kWorldSize, assignment_.size()}, {field::kAssignment, slots}});
  }
  world_ready_ = false;
  reset_begun_ = false;
  // Workers start before the held rank_and_size requests are answered: after a shortage the
  // round opens again, smaller, and no survivor has been told the larger one.
  std::vector<SlotKey> fresh;
  for (size_t i = 0; i < assignment_.size(); ++i) {
    const rendezvous::SlotInfo& s = assignment_[i];
    SlotKey key{s.hostname, s.local_rank};
    if (workers_->Running(key)) {
      // A replaced (or drained) process still exiting: its slot starts afresh once it is gone.
      if (draining_.count(key)) start_when_gone_.insert(key);
      continue;
    }
    Shortage shortage;
    if (!workers_->Start(s, round_, assignment_, &shortage)) {
      return ShortageWhileOpening(key, static_cast<int>(i), shortage, fresh);
    }
    fresh.push_back(key);
  }
  launched_ = true;
  ReleaseWaiting();
  spdlog::debug("round {} started", round_);
  // A restarted world is ready once its ranks run: etrun cannot see torch's own rendezvous.
  if (options_.restart_all && phase_ == Phase::kRunning) MarkWorldReady();
}

void ElasticDriver::OnWorldReady(TimePoint now) {
  now_ = now;
  if (options_.restart_all || phase_ != Phase::kRunning || world_ready_) return;
  MarkWorldReady();
}

void ElasticDriver::MarkWorldReady() {
  world_ready_ = true;
  spdlog::debug("round {}: every worker is in the new world", round_);
  Emit(events::kWorldReady, {{field::kRound, round_}, {field::kWorldSize, assignment_.size()}});
}

void ElasticDriver::NoteResetBegin(const std::string& why) {
  if (reset_begun_ || round_ == 0) return;
  reset_begun_ = true;
  Emit(events::kResetBegin, {{field::kRound, round_}, {field::kReason, why}});
}

void ElasticDriver::ReleaseWaiting() {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [key, reply] : waiting) {
    std::optional<rendezvous::SlotInfo> slot = SlotOf(key);
    reply(slot);
    if (!slot) Drain(key, /*removed=*/true);
  }
}

void ElasticDriver::RecordReady(const std::string& host, int local_rank,
                                std::function<void(std::optional<rendezvous::SlotInfo>)> reply) {
  SlotKey key{host, local_rank};
  if (phase_ == Phase::kStopping || phase_ == Phase::kDone) return reply(std::nullopt);
  if (phase_ == Phase::kRunning && !SlotOf(key)) {  // its slot is gone: release and drain it
    reply(std::nullopt);
    return Drain(key, /*removed=*/true);
  }
  waiting_[key] = std::move(reply);
  if (phase_ != Phase::kRunning) return;  // answered when the next round opens
  Record(key, Record::kReady, now_);
}

void ElasticDriver::RegisterWorker(rendezvous::WorkerRegistration registration,
                                   std::function<void(bool)> done) {
  SlotKey key{registration.host, registration.local_rank};
  notifier_->Register(registration, [this, key, done](bool ok, std::string err) {
    if (!ok) spdlog::warn("worker {} registered an unreachable notification service: {}", Describe(key), err);
    done(ok);
    if (ok) MaybeNotify();
  });
}

void ElasticDriver::Record(const SlotKey& key, enum Record record, TimePoint now) {
  auto it = records_.find(key);
  if (it != records_.end() && it->second != Record::kReady) return;  // exits are final
  // The first worker to leave training (for a new rank, or by failing) begins the reset.
  if (record == Record::kReady) NoteResetBegin("worker " + Describe(key) + " left training for a reset");
  if (record == Record::kFailure) NoteResetBegin("worker " + Describe(key) + " failed");
  if (record == Record::kNotStarted) NoteResetBegin("worker " + Describe(key) + " could not start");
  bool lost = record == Record::kFailure || record == Record::kNotStarted;
  if (lost && options_.recovery_grace.count() > 0 && !options_.restart_all && !recovery_deadline_) {
    recovery_deadline_ = now + options_.recovery_grace;
  }
  records_[key] = record;
  if (!round_deadline_) round_deadline_ = now + options_.elastic_timeout;
  MaybeDecide(now);
}

void ElasticDriver::MaybeDecide(TimePoint now) {
  if (phase_ != Phase::kRunning || records_.size() < assignment_.size()) return;
  for (const rendezvous::SlotInfo& s : assignment_) {
    if (!records_.count({s.hostname, s.local_rank})) return;
  }
  Decide(now);
}

void ElasticDriver::Decide(TimePoint now) {
  spdlog::debug("all {} workers of round {} are in", records_.size(), round_);
  int successes = 0, failures = 0;
  std::vector<SlotKey> failed, unstarted;  // unstarted: no fault of theirs (see ShortageInRound)
  for (const auto& [key, record] : records_) {
    if (record == Record::kSuccess) ++successes;
    if (record == Record::kFailure) {
      ++failures;
      failed.push_back(key);
    }
    if (record == Record::kNotStarted) unstarted.push_back(key);
  }
  if (successes > 0) {  // training finished: release whoever waits, finish when all are gone
    if (failures > 0) return Stop(EndingCode(), last_failure_ + EarlierFailure("; first failure: "));
    return Stop(kExitOk, "");
  }
  if (failures > 0 && failures + unstarted.size() == records_.size()) {
    return Stop(EndingCode(), "every rank failed; last: " + last_failure_ + EarlierFailure("; first: "));
  }
  for (const SlotKey& key : failed) {
    if (hosts_->IsBlacklisted(key.first) || hosts_->Departed(key.first)) continue;
    spdlog::warn("blacklisting host {} after {} failed", key.first, Describe(key));
    BlacklistHost(key.first, "worker " + Describe(key) + " failed", now);
    for (const SlotKey& other : workers_->RunningSlots()) {
      if (other.first == key.first) Drain(other, /*removed=*/true);
    }
  }
  // Workers waiting on a blacklisted host are released now, not after a slot wait.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (hosts_->IsBlacklisted(it->first.first)) {
      it->second(std::nullopt);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  bool all_blacklisted = unstarted.size() < records_.size();
  for (const auto& [key, record] : records_) {
    if (record == Record::kNotStarted) continue;
    all_blacklisted = all_blacklisted && hosts_->IsBlacklisted(key.first);
  }
  if (all_blacklisted) {
    return Stop(EndingCode(),
                "every host of the job failed; last: " + last_failure_ + EarlierFailure("; first: "));
  }
  if (options_.reset_limit && resets_ >= *options_.reset_limit) {
    return Stop(EndingCode(), "stopped because the number of resets exceeded the limit: " +
                                  std::to_string(*options_.reset_limit) + " (--reset-limit)" +
                                  (last_failure_.empty() ? std::string() : "; last failure: " + last_failure_));
  }
  ++resets_;
  std::string reason;
  for (const SlotKey& key : failed) reason += (reason.empty() ? "" : ", ") + Describe(key);
  // Every worker came back ready: they were told the hosts changed (or lost a drained peer).
  if (failed.empty() && unstarted.empty()) reason = "the hosts changed";
  else if (failed.empty()) reason = "etrun could not start every worker";
  else reason = "worker" + std::string(failed.size() > 1 ? "s " : " ") + reason + " failed";
  Emit(events::kReset, {{field::kResets, resets_}, {field::kReason, reason}});
  if (hosts_->AvailableSlots() >= options_.min_np) return Activate();
  phase_ = Phase::kResuming;
  wait_deadline_ = now + options_.elastic_timeout;
  spdlog::info("waiting for {} slots (--min-np) to resume; {} available", options_.min_np,
               hosts_->AvailableSlots());
}

bool ElasticDriver::KeepTo(int runnable, const SlotKey& key, const Shortage& shortage) {
  int ranks = std::max(0, std::min(runnable, shortage.affordable));
  bool room = ranks < runnable;  // fewer than could start: etrun keeps room for its own work
  std::string what = "cannot start worker " + Describe(key) + ": " + shortage.what;
  std::string plural = ranks == 1 ? "" : "s";
  if (ranks < options_.min_np) {
    Stop(kExitFailure, fmt::format("{}; etrun can run only {} rank{}{}, fewer than --min-np {}: "
                                   "raise the limit, or lower --min-np", what, ranks, plural,
                                   room ? " and keep room for its own work" : "", options_.min_np));
    return false;
  }
  spdlog::warn("{}; going on with {} rank{} from now on{}: raise the limit, or cap the job with "
               "--max-np {}", what, ranks, plural,
               room ? " (keeping room for etrun's own work)" : "", ranks);
  shortage_cap_ = ranks;
  return true;
}

void ElasticDriver::ShortageWhileOpening(const SlotKey& key, int runnable,
                                         const Shortage& shortage,
                                         const std::vector<SlotKey>& fresh) {
  // Nobody has been told this round yet; the workers started for it were, in their env.
  for (const SlotKey& started : fresh) Drain(started);
  if (!KeepTo(runnable, key, shortage)) return;
  start_when_gone_.clear();
  phase_ = Phase::kReplanning;
  MaybeReopen();
}

void ElasticDriver::MaybeReopen() {
  if (phase_ != Phase::kReplanning || !draining_.empty()) return;
  Activate();
}

void ElasticDriver::ShortageAhead(const SlotKey& key, const Shortage& shortage) {
  AbandonStartAhead("etrun could not start them all");
  if (!KeepTo(static_cast<int>(assignment_.size()), key, shortage)) return;
  // The world that trains goes on as it is, or, when etrun cannot afford all of it, is told to
  // reset into a smaller one.
  pending_flags_ = shortage_cap_ < static_cast<int>(assignment_.size()) ? discovery::kRemoved : 0;
  MaybeNotify();
}

void ElasticDriver::ShortageInRound(const SlotKey& key, const Shortage& shortage, TimePoint now) {
  // The round's world was told already: the slots that cannot start now leave it at the next
  // reset, which the survivors reach as after a failure, but no host is to blame.
  // Slots still waiting for their old process to go are not started either.
  std::vector<SlotKey> unstarted{key};
  unstarted.insert(unstarted.end(), start_when_gone_.begin(), start_when_gone_.end());
  start_when_gone_.clear();
  if (!KeepTo(static_cast<int>(assignment_.size() - unstarted.size()), key, shortage)) return;
  for (const SlotKey& k : unstarted) Record(k, Record::kNotStarted, now);
}

void ElasticDriver::OnWorkerExit(const SlotKey& key, ExitStatus status, TimePoint now, bool stopped) {
  now_ = now;
  // Its process is gone from the rank table; what the driver decided about it goes too.
  bool draining = draining_.erase(key) != 0;
  removed_.erase(key);
  waiting_.erase(key);
  if (draining) {
    spdlog::debug("worker {} drained ({})", Describe(key), status.Describe());
    // Restart mode: one that exited 0 before any stop reached it had finished training.
    if (options_.restart_all && phase_ == Phase::kRestarting && status.success() && !stopped) {
      finished_while_restarting_ = true;
    }
    if (start_when_gone_.erase(key) && phase_ == Phase::kRunning) {
      if (std::optional<rendezvous::SlotInfo> slot = SlotOf(key)) {
        Shortage shortage;  // it joins the round its env names
        if (!workers_->Start(*slot, round_, assignment_, &shortage)) ShortageInRound(key, shortage, now);
      }
    }
    MaybeRestart();
    MaybeReopen();
    return MaybeFinish();
  }
  if (StartedAhead(key)) {  // never part of the training world: the world goes on undisturbed
    spdlog::warn("worker {}, started ahead of round {}, {}; dropping it", Describe(key),
                 round_ + 1, status.Describe());
    BlacklistHost(key.first, "worker " + Describe(key) + " " + status.Describe() +
                                 " before joining", now);
    AbandonStartAhead("a worker started ahead failed");
    Replan(now);
    return MaybeFinish();
  }
  if (!status.success()) NoteFailure(status, "worker " + Describe(key) + " " + status.Describe());
  // A host blacklisted as unreachable was named already: its workers' exits say nothing new.
  if (!status.success() && !hosts_->IsBlacklisted(key.first)) {
    spdlog::warn("worker {} {}", Describe(key), status.Describe());
  }
  if (options_.restart_all && phase_ == Phase::kRunning && SlotOf(key)) {
    if (!status.success()) last_failure_in_world_ = true;
    if (!status.success() && !WorldFinishing()) {
      BeginRestart("worker " + Describe(key) + " " + status.Describe());
    } else {
      // Every slot's end decides, as in Horovod mode: all 0, the job succeeds; a failure beside a
      // finished rank ends it with the failure's code.
      records_[key] = status.success() ? Record::kSuccess : Record::kFailure;
      if (records_.size() == assignment_.size()) FinishRestartWorld();
    }
  } else if (phase_ == Phase::kRunning && SlotOf(key)) {
    Record(key, status.success() ? Record::kSuccess : Record::kFailure, now);
  } else if (phase_ == Phase::kResuming && !status.success()) {
    BlacklistHost(key.first, "worker " + Describe(key) + " " + status.Describe(), now);
  }
  MaybeFinish();
}

void ElasticDriver::OnHostUnreachable(const std::string& host, TimePoint now) {
  now_ = now;
  if (hosts_->IsBlacklisted(host)) return;
  spdlog::warn("blacklisting host {}: it cannot be reached", host);
  BlacklistHost(host, "cannot be reached", now);
}

void ElasticDriver::OnHostHung(const std::string& host, TimePoint now) {
  now_ = now;
  if (hosts_->IsBlacklisted(host)) return;
  BlacklistHost(host, "its ranks hung elsewhere than the others (--hang-action restart)", now);
}

void ElasticDriver::OnHostSick(const std::string& host, const std::string& why, TimePoint now) {
  now_ = now;
  // Out already, unless its cooldown has just ended (it is checked as it comes back).
  std::optional<TimePoint> end = hosts_->CooldownEnd(host);
  if (hosts_->IsBlacklisted(host) && (!end || now < *end)) return;
  BlacklistHost(host, why, now);
}

void ElasticDriver::BlacklistHost(const std::string& host, const std::string& reason, TimePoint now) {
  hosts_->Blacklist(host, now);
  std::optional<TimePoint> end = hosts_->CooldownEnd(host);
  nlohmann::json cooldown = nullptr;
  if (end) cooldown = std::chrono::duration<double>(*end - now).count();
  Emit(events::kHostBlacklisted, {{field::kHost, host}, {field::kReason, reason}, {field::kCooldownS, cooldown}});
}

void ElasticDriver::Emit(std::string_view event, nlohmann::json fields) {
  if (events_ != nullptr) events_->Emit(event, std::move(fields));
}

std::string ElasticDriver::state() const {
  switch (phase_) {
    case Phase::kWaitingToStart: return "waiting";
    case Phase::kRunning: return "running";
    case Phase::kRestarting:
    case Phase::kResuming:
    case Phase::kReplanning: return "resetting";
    case Phase::kStopping:
    case Phase::kDone: return "finishing";
  }
  return "running";
}

std::string ElasticDriver::WorkerState(const SlotKey& slot) const {
  if (!draining_.count(slot)) return "running";
  return removed_.count(slot) ? "draining" : "stopping";
}

std::string ElasticDriver::ExitReasonFor(const SlotKey& slot, const ExitStatus& status) const {
  return events::ExitReason(status, draining_.count(slot) != 0, removed_.count(slot) != 0);
}

void ElasticDriver::OnTick(TimePoint now) {
  now_ = now;
  if (phase_ == Phase::kWaitingToStart || phase_ == Phase::kResuming) {
    if (now < wait_deadline_ || options_.wait_without_deadline) return;
    int want = phase_ == Phase::kWaitingToStart ? options_.np : options_.min_np;
    std::string found = have_discovery_ ? discovery::FormatHosts(hosts_->Available())
                                        : "the discovery script never answered";
    return Stop(kExitFailure, fmt::format(
        "timed out after {} waiting for {} slots ({}); available: {} ({}): add hosts, or lower "
        "{} or raise --elastic-timeout",
        Seconds(options_.elastic_timeout), want,
        phase_ == Phase::kWaitingToStart ? "-np" : "--min-np", hosts_->AvailableSlots(),
        found.empty() ? "none" : found, phase_ == Phase::kWaitingToStart ? "-np" : "--min-np"));
  }
  MaybeReplaceStuck(now);
  if (ahead_ && !ahead_->waiting.empty() && now >= ahead_->deadline) {
    for (const SlotKey& key : ahead_->waiting) {
      spdlog::warn("worker {}, started ahead, made no rendezvous request within {} "
                   "(--start-timeout); dropping it", Describe(key), Seconds(options_.start_timeout));
      if (!hosts_->IsBlacklisted(key.first)) {
        BlacklistHost(key.first, "worker " + Describe(key) + " did not start in time", now);
      }
    }
    AbandonStartAhead("workers started ahead did not come in time");
    Replan(now);
  }
  if (phase_ == Phase::kRunning && round_deadline_ && now >= *round_deadline_) {
    // Parties silent past the deadline are stuck: count them failed and stop them (spec §9.6).
    round_deadline_.reset();
    for (const rendezvous::SlotInfo& s : assignment_) {
      SlotKey key{s.hostname, s.local_rank};
      if (records_.count(key)) continue;
      spdlog::warn("worker {} did not reach the reset within {}; stopping it", Describe(key),
                   Seconds(options_.elastic_timeout));
      NoteFailure(ExitStatus::Exited(kExitFailure), "worker " + Describe(key) + " hung in a reset");
      records_[key] = Record::kFailure;
      Drain(key);
    }
    MaybeDecide(now);
    return;
  }
  MaybeNotify();
}

void ElasticDriver::Abort(int exit_code, const std::string& why) { Stop(exit_code, why); }

bool ElasticDriver::MaybeStartAhead(const std::vector<rendezvous::SlotInfo>& plan, TimePoint now) {
  if (ahead_ && ahead_->plan == plan) return true;  // already under way
  if (ahead_) AbandonStartAhead("the hosts changed again");
  // Only a formed world that trains and only added slots: every current slot is in the plan.
  if (options_.restart_all || phase_ != Phase::kRunning || !records_.empty() || !world_ready_ ||
      plan.size() <= assignment_.size()) {
    return false;
  }
  for (const rendezvous::SlotInfo& s : assignment_) {
    auto it = std::find_if(plan.begin(), plan.end(), [&s](const rendezvous::SlotInfo& p) {
      return p.hostname == s.hostname && p.local_rank == s.local_rank;
    });
    if (it == plan.end() || it->rank != s.rank) return false;
  }
  StartAhead ahead{plan, {}, now + options_.start_timeout};
  for (const rendezvous::SlotInfo& s : plan) {
    SlotKey key{s.hostname, s.local_rank};
    if (SlotOf(key) || workers_->Running(key)) continue;
    ahead.waiting.insert(key);
  }
  if (ahead.waiting.empty()) return false;
  spdlog::info("starting {} worker(s) ahead of round {} while the world of {} trains",
               ahead.waiting.size(), round_ + 1, assignment_.size());
  ahead_ = std::move(ahead);
  std::vector<rendezvous::SlotInfo> next = ahead_->plan;  // a shortage drops ahead_
  for (const rendezvous::SlotInfo& s : next) {
    SlotKey key{s.hostname, s.local_rank};
    if (!ahead_->waiting.count(key)) continue;
    Shortage shortage;
    if (!workers_->Start(s, round_ + 1, next, &shortage)) {
      ahead_->waiting.erase(key);
      ShortageAhead(key, shortage);
      break;
    }
  }
  return true;
}

void ElasticDriver::OnWorkerArrived(int rank, TimePoint now) {
  now_ = now;
  if (!ahead_ || rank < 0 || rank >= static_cast<int>(ahead_->plan.size())) return;
  const rendezvous::SlotInfo& s = ahead_->plan[rank];
  if (ahead_->waiting.erase({s.hostname, s.local_rank}) == 0) return;
  spdlog::debug("worker {}[{}] started ahead is in ({} to go)", s.hostname, s.local_rank,
                ahead_->waiting.size());
  if (ahead_->waiting.empty()) MaybeNotify();
}

bool ElasticDriver::StartedAhead(const SlotKey& key) const {
  if (!ahead_) return false;
  for (const rendezvous::SlotInfo& s : ahead_->plan) {
    if (s.hostname == key.first && s.local_rank == key.second) return !SlotOf(key);
  }
  return false;
}

void ElasticDriver::AbandonStartAhead(const std::string& why) {
  if (!ahead_) return;
  spdlog::info("dropping the workers started ahead of round {}: {}", round_ + 1, why);
  std::vector<rendezvous::SlotInfo> plan = std::move(ahead_->plan);
  ahead_.reset();
  for (const rendezvous::SlotInfo& s : plan) {
    SlotKey key{s.hostname, s.local_rank};
    if (SlotOf(key)) continue;
    Drain(key);
    // What it put in its first rendezvous names its own mesh sockets: a later round must not
    // read them (spec §4.6 steps 1 and 3; it blocks in step 4 until then).
    store_->Erase("global", "rank_" + std::to_string(s.rank));
    store_->Erase("global", std::to_string(s.rank));
  }
}

void ElasticDriver::Replan(TimePoint now) {
  if (phase_ != Phase::kRunning) return;
  std::vector<rendezvous::SlotInfo> plan;
  std::string err;
  if (hosts_->AvailableSlots() < options_.min_np || !ComputeAssignment(&plan, &err)) plan.clear();
  if (plan == assignment_) {
    pending_flags_ = 0;  // nothing of the change is left: the world was never told
    return;
  }
  if (!MaybeStartAhead(plan, now)) MaybeNotify();
}

void ElasticDriver::MaybeReplaceStuck(TimePoint now) {
  if (!recovery_deadline_ || now < *recovery_deadline_ || phase_ != Phase::kRunning) return;
  bool survivor_back = false;
  for (const auto& [key, record] : records_) survivor_back = survivor_back || record == Record::kReady;
  if (!survivor_back) return;  // nobody is back with the state yet: wait as without recovery
  std::vector<SlotKey> stuck;
  for (const rendezvous::SlotInfo& s : assignment_) {
    SlotKey key{s.hostname, s.local_rank};
    if (records_.count(key) || !workers_->Running(key) || draining_.count(key)) continue;
    stuck.push_back(key);
  }
  if (stuck.empty()) return;
  for (const SlotKey& key : stuck) {
    spdlog::warn("worker {} is still in a collective {} after {}: replacing it with a fresh "
                 "process (--recovery-grace)", Describe(key), Seconds(options_.recovery_grace),
                 last_failure_.empty() ? "a failure" : last_failure_);
    records_[key] = Record::kReplaced;
    Drain(key);
  }
  MaybeDecide(now);
}

void ElasticDriver::KeepStateOnRankZero(std::vector<rendezvous::SlotInfo>* plan) const {
  auto holds_state = [this](const rendezvous::SlotInfo& s) { return HoldsState({s.hostname, s.local_rank}); };
  if (plan->empty() || holds_state(plan->front())) return;
  for (size_t i = 1; i < plan->size(); ++i) {
    if (!holds_state((*plan)[i])) continue;
    spdlog::info("rank 0 goes to {}[{}], which holds the training state, instead of a new process",
                 (*plan)[i].hostname, (*plan)[i].local_rank);
    std::swap((*plan)[0].rank, (*plan)[i].rank);
    std::swap((*plan)[0], (*plan)[i]);
    return;
  }
}

void ElasticDriver::NoteFailure(const ExitStatus& status, const std::string& what) {
  if (first_failure_.empty()) first_failure_ = what;
  last_failure_status_ = status;
  last_failure_ = what;
}

int ElasticDriver::EndingCode() const {
  return last_failure_status_ ? last_failure_status_->ShellCode() : kExitFailure;
}

std::string ElasticDriver::EarlierFailure(const std::string& lead) const {
  return first_failure_.empty() || first_failure_ == last_failure_ ? "" : lead + first_failure_;
}

void ElasticDriver::Stop(int exit_code, std::string summary) {
  if (phase_ == Phase::kStopping || phase_ == Phase::kDone) return;
  phase_ = Phase::kStopping;
  exit_code_ = exit_code;
  summary_ = std::move(summary);
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [key, reply] : waiting) reply(std::nullopt);
  for (const SlotKey& key : workers_->RunningSlots()) Drain(key);
  MaybeFinish();
}

void ElasticDriver::Drain(const SlotKey& key, bool removed) {
  if (!workers_->Running(key) || !draining_.insert(key).second) return;
  if (removed) removed_.insert(key);
  workers_->Stop(key);
}

bool ElasticDriver::HoldsState(const SlotKey& key) const {
  return workers_->Running(key) && !draining_.count(key);
}

void ElasticDriver::MaybeFinish() {
  if (phase_ == Phase::kStopping && !workers_->AnyRunning()) phase_ = Phase::kDone;
}

}  // namespace etrun::launcher
