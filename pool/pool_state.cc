#include "pool/pool_state.h"

#include <algorithm>
#include <cctype>

#include "discovery/cluster_kind.h"
#include "events/schema.h"

namespace etrun::pool {

namespace field = events::field;

namespace {

constexpr int kMaxPriority = 1000000;

bool HigherFirst(int priority_a, int64_t arrival_a, int priority_b, int64_t arrival_b) {
  if (priority_a != priority_b) return priority_a > priority_b;
  return arrival_a < arrival_b;
}

}  // namespace

int PoolState::Job::count() const {
  int n = 0;
  for (const auto& [host, slots] : held) n += static_cast<int>(slots.size());
  return n;
}

PoolState::PoolState(std::string name, int ranks_per_gpu, std::chrono::milliseconds min_hold,
                     EventSink events)
    : name_(std::move(name)),
      ranks_per_gpu_(std::max(ranks_per_gpu, 1)),
      min_hold_(min_hold),
      events_(std::move(events)) {}

int PoolState::total() const {
  int n = 0;
  for (const PoolHost& h : hosts_) n += h.slots;
  return n;
}

const std::string* PoolState::Device(const std::string& host, int slot) const {
  for (const PoolHost& h : hosts_) {
    if (h.name != host) continue;
    size_t gpu = static_cast<size_t>(slot / ranks_per_gpu_);
    return gpu < h.devices.size() ? &h.devices[gpu] : nullptr;
  }
  return nullptr;
}

discovery::StartRoute PoolState::StartThrough(const std::string& host) const {
  for (const PoolHost& h : hosts_) {
    if (h.name == host) return h.start_through;
  }
  return {};
}

std::map<std::string, std::set<int>> PoolState::Busy() const {
  std::map<std::string, std::set<int>> busy;
  for (const auto& [id, job] : jobs_) {
    for (const auto& [host, slots] : job.held) busy[host].insert(slots.begin(), slots.end());
    for (const Releasing& r : job.releasing) busy[r.host].insert(r.slot);
  }
  return busy;
}

void PoolState::SetHosts(std::vector<PoolHost> hosts, PoolTime now) {
  if (hosts == hosts_) return;
  hosts_ = std::move(hosts);
  for (auto& [id, job] : jobs_) GiveBackMissing(&job);
  nlohmann::json list = nlohmann::json::array();
  for (const PoolHost& h : hosts_) {
    list.push_back({{field::kHost, h.name}, {field::kSlots, h.slots}, {field::kDevices, h.devices}});
  }
  events_(events::kPoolHosts, {{field::kHosts, list}, {field::kTotal, total()}});
  Rebalance(now);
}

// Cuts each of the job's host lists at the first slot the pool does not have: later local ranks
// lose their place too (the job drops the highest local ranks first). Those ranks still run until
// the job drains them, so their slots (gone or not) stay the job's until it says so: a slot that
// comes back is not handed out under them.
void PoolState::GiveBackMissing(Job* job) const {
  std::map<std::string, int> slots;
  for (const PoolHost& h : hosts_) slots[h.name] = h.slots;
  bool cut_any = false;
  for (auto it = job->held.begin(); it != job->held.end();) {
    auto host = slots.find(it->first);
    std::vector<int>& list = it->second;
    size_t cut = 0;
    while (cut < list.size() && host != slots.end() && list[cut] >= 0 && list[cut] < host->second) ++cut;
    if (cut < list.size() && !cut_any) {
      cut_any = true;
      ++job->version;
    }
    for (size_t k = cut; k < list.size(); ++k) {
      job->releasing.push_back({it->first, static_cast<int>(k), list[k], job->version});
    }
    list.resize(cut);
    it = list.empty() ? job->held.erase(it) : std::next(it);
  }
}

Book PoolState::Holdings() const {
  Book book;
  book.pool = name_;
  for (const auto& [id, job] : jobs_) {
    book.jobs.push_back(static_cast<const BookJob&>(job));
  }
  return book;
}

void PoolState::Restore(const Book& book, PoolTime now) {
  for (const BookJob& entry : book.jobs) {
    if (entry.id.empty() || jobs_.count(entry.id) != 0 || entry.priority < 1 || entry.min_np < 1 ||
        entry.max_np < entry.min_np) {
      continue;
    }
    Job job;
    static_cast<BookJob&>(job) = entry;
    GiveBackMissing(&job);  // slots this pool does not have (now), as when hosts change
    job.restored = true;
    job.admitted = job.count() > 0;
    job.last_grow = now;
    job.last_heard = now;
    arrivals_ = std::max(arrivals_, job.arrival + 1);
    std::string id = job.id;
    jobs_[id] = std::move(job);
    std::string why;
    if (!Consistent(&why)) jobs_.erase(id);  // overlaps what is restored already: dropped
  }
  Rebalance(now);
}

std::string PoolState::Join(const JoinRequest& request, PoolTime now, std::string* err) {
  if (!CheckRequest(request, err)) return "";
  if (std::string id = Rejoin(request, now); !id.empty()) return id;
  std::string id = UniqueId(request.name);
  Job job;
  job.id = id;
  job.priority = request.priority;
  job.min_np = request.min_np;
  job.max_np = request.max_np;
  job.arrival = arrivals_++;
  job.pid = request.pid;
  job.pid_start = request.pid_start;
  job.local = request.local;
  job.last_heard = now;
  KeepHeld(request, &job);
  if (job.count() > 0) {
    job.admitted = true;
    job.last_grow = now;
  }
  ReportJoined(job);
  jobs_[id] = std::move(job);
  Rebalance(now);
  return id;
}

bool PoolState::CheckRequest(const JoinRequest& request, std::string* err) {
  if (request.min_np < 1 || request.max_np < request.min_np) {
    *err = "--min-np " + std::to_string(request.min_np) + " and --max-np " +
           std::to_string(request.max_np) + ": need 1 <= min-np <= max-np";
    return false;
  }
  if (request.priority < 1 || request.priority > kMaxPriority) {
    *err = "--priority " + std::to_string(request.priority) + " is out of range: give 1.." +
           std::to_string(kMaxPriority) + " (default " + std::to_string(kDefaultPriority) + ")";
    return false;
  }
  return true;
}

// The job of a restored placeholder joining again: it keeps its id and the book's holdings
// (newer than the job's own idea of them). Returns its id, or "" when no placeholder is its.
std::string PoolState::Rejoin(const JoinRequest& request, PoolTime now) {
  for (auto& [id, job] : jobs_) {
    if (!job.restored) continue;
    bool same = job.local ? request.local && request.pid == job.pid && request.pid > 0 &&
                                request.pid_start == job.pid_start
                          : !request.local && id == request.name;
    if (!same) continue;
    job.restored = false;
    job.priority = request.priority;
    job.min_np = request.min_np;
    job.max_np = request.max_np;
    job.last_heard = now;
    ReportJoined(job);
    std::string kept = id;
    Rebalance(now);
    return kept;
  }
  return "";
}

// Ids go into URLs and file names: letters, digits, '.', '_' and '-' only; "-2", "-3"... when
// taken.
std::string PoolState::UniqueId(const std::string& name) const {
  std::string base = name.empty() ? "job" : name.substr(0, 200);
  for (char& c : base) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  std::string id = base;
  for (int n = 2; jobs_.count(id) != 0; ++n) id = base + "-" + std::to_string(n);
  return id;
}

int PoolState::SlotsOf(const std::string& host) const {
  int slots = -1;
  for (const PoolHost& h : hosts_) {
    if (h.name == host) slots = h.slots;
  }
  return slots;
}

// Re-registration: keep what the job holds where the slot exists and nobody else has it; a list
// is cut at the first slot it cannot keep (the job drops those local ranks). Local ranks past
// the cut, and slots the job says it still drains, run until the job drains them: those slots
// that exist and are free stay the job's (releasing) until then.
void PoolState::KeepHeld(const JoinRequest& request, Job* job) const {
  std::map<std::string, std::set<int>> busy = Busy();
  auto claim = [&busy](const std::string& host, int slot, int slots) {
    if (slot < 0 || slot >= slots || busy[host].count(slot) != 0) return false;
    busy[host].insert(slot);
    return true;
  };
  for (const auto& [host, list] : request.held) {
    int slots = SlotsOf(host);
    std::vector<int> kept;
    size_t k = 0;
    for (; k < list.size() && claim(host, list[k], slots); ++k) kept.push_back(list[k]);
    for (; k < list.size(); ++k) {
      if (claim(host, list[k], slots)) job->releasing.push_back({host, static_cast<int>(k), list[k]});
    }
    if (!kept.empty()) job->held[host] = std::move(kept);
  }
  for (const Releasing& r : request.releasing) {
    if (claim(r.host, r.slot, SlotsOf(r.host))) job->releasing.push_back(r);
  }
}

void PoolState::ReportJoined(const Job& job) {
  events_(events::kPoolJobJoined, {{field::kJob, job.id}, {field::kPriority, job.priority},
                                   {field::kMinNp, job.min_np}, {field::kMaxNp, job.max_np},
                                   {field::kSlots, job.count()}});
}

bool PoolState::Sync(const std::string& id, const HostLists& live, int64_t seen, PoolTime now,
                     Grant* grant, std::string* err) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    *err = "no job '" + id + "' in pool '" + name_ + "'";
    return false;
  }
  Job& job = it->second;
  job.last_heard = now;
  std::erase_if(job.releasing, [&live, seen](const Releasing& r) {
    if (r.version > seen) return false;  // the job has not applied the grant without it yet
    auto host = live.find(r.host);
    return host == live.end() ||
           std::find(host->second.begin(), host->second.end(), r.local_rank) == host->second.end();
  });
  Rebalance(now);
  grant->hosts.clear();
  for (const auto& [host, slots] : job.held) {
    discovery::StartRoute route = StartThrough(host);
    Grant::Host h{host, slots, {}, route.command, route.kind != nullptr ? route.kind->words().name : ""};
    for (int slot : slots) {
      const std::string* device = Device(host, slot);
      h.devices.push_back(device != nullptr ? *device : "");
    }
    grant->hosts.push_back(std::move(h));
  }
  grant->target = job.target;
  grant->queued = !job.admitted;
  grant->version = job.version;
  return true;
}

bool PoolState::Leave(const std::string& id, const char* reason, PoolTime now) {
  if (jobs_.erase(id) == 0) return false;
  events_(events::kPoolJobLeft, {{field::kJob, id}, {field::kReason, reason}});
  Rebalance(now);
  return true;
}

bool PoolState::SetPriority(const std::string& id, int priority, PoolTime now, std::string* err) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    std::string names;
    for (const auto& [name, job] : jobs_) names += (names.empty() ? "" : ", ") + name;
    *err = "no job '" + id + "' in pool '" + name_ + "' (jobs: " + (names.empty() ? "none" : names) + ")";
    return false;
  }
  if (priority < 1 || priority > kMaxPriority) {
    *err = "priority " + std::to_string(priority) + " is out of range: give 1.." + std::to_string(kMaxPriority);
    return false;
  }
  it->second.priority = priority;
  events_(events::kPoolPriority, {{field::kJob, id}, {field::kPriority, priority}});
  Rebalance(now);
  return true;
}

void PoolState::Rebalance(PoolTime now) {
  std::vector<PoolJob> in;
  for (const auto& [id, job] : jobs_) {
    in.push_back({id, job.priority, job.min_np, job.max_np, job.arrival,
                  job.admitted ? std::max(job.count(), 1) : 0});
  }
  Allocation allocation = Allocate(total(), in);
  for (auto& [id, job] : jobs_) {
    job.target = allocation.slots[id];
    job.admitted = job.target > 0;
    int count = job.count();
    // A job that just grew keeps its slots for min_hold; one queued again (its hosts left) does not.
    if (count > job.target && (job.target == 0 || now - job.last_grow >= min_hold_)) {
      Shrink(&job, count - job.target);
    }
  }
  std::vector<Job*> order;
  for (auto& [id, job] : jobs_) order.push_back(&job);
  std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
    return HigherFirst(a->priority, a->arrival, b->priority, b->arrival);
  });
  for (Job* job : order) {
    // A placeholder only keeps what it had: it grows once its job is back.
    if (job->admitted && !job->restored && job->count() < job->target) {
      Grow(job, job->target - job->count(), now);
    }
  }
  ReportAllocation();
}

// Gives back `by` slots: whole hosts where the job has least first (fewer hosts to drain), the
// highest local ranks of a host first.
void PoolState::Shrink(Job* job, int by) {
  if (by > 0 && !job->held.empty()) ++job->version;
  while (by > 0 && !job->held.empty()) {
    auto smallest = job->held.begin();
    for (auto it = job->held.begin(); it != job->held.end(); ++it) {
      if (it->second.size() <= smallest->second.size()) smallest = it;
    }
    std::vector<int>& list = smallest->second;
    job->releasing.push_back({smallest->first, static_cast<int>(list.size()) - 1, list.back(), job->version});
    list.pop_back();
    --by;
    if (list.empty()) job->held.erase(smallest);
  }
}

// Takes up to `by` free slots: hosts the job is on first (most of its slots first), then the
// hosts with most free slots; never a host where it still gives slots back. A job holding
// nothing takes nothing unless its whole minimum is free (gang admission).
void PoolState::Grow(Job* job, int by, PoolTime now) {
  std::map<std::string, std::set<int>> busy = Busy();
  std::set<std::string> giving_back;
  for (const Releasing& r : job->releasing) giving_back.insert(r.host);
  struct Candidate {
    const PoolHost* host;
    int mine;
    std::vector<int> free;
  };
  std::vector<Candidate> candidates;
  int free_total = 0;
  for (const PoolHost& h : hosts_) {
    if (giving_back.count(h.name) != 0) continue;
    Candidate c{&h, 0, {}};
    if (auto mine = job->held.find(h.name); mine != job->held.end()) c.mine = static_cast<int>(mine->second.size());
    const std::set<int>& taken = busy[h.name];
    for (int s = 0; s < h.slots; ++s) {
      if (taken.count(s) == 0) c.free.push_back(s);
    }
    free_total += static_cast<int>(c.free.size());
    if (!c.free.empty()) candidates.push_back(std::move(c));
  }
  if (job->count() == 0 && free_total < job->min_np) return;
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.mine != b.mine) return a.mine > b.mine;
    return a.free.size() > b.free.size();
  });
  bool grew = false;
  for (const Candidate& c : candidates) {
    for (int slot : c.free) {
      if (by == 0) break;
      job->held[c.host->name].push_back(slot);
      --by;
      grew = true;
    }
  }
  if (grew) job->last_grow = now;
}

void PoolState::ReportAllocation() {
  nlohmann::json held = nlohmann::json::object(), target = nlohmann::json::object();
  nlohmann::json queued = nlohmann::json::array();
  std::vector<const Job*> waiting;
  for (const auto& [id, job] : jobs_) {
    held[id] = job.count() + static_cast<int>(job.releasing.size());
    target[id] = job.target;
    if (!job.admitted) waiting.push_back(&job);
  }
  std::sort(waiting.begin(), waiting.end(), [](const Job* a, const Job* b) {
    return HigherFirst(a->priority, a->arrival, b->priority, b->arrival);
  });
  for (const Job* job : waiting) queued.push_back(job->id);
  nlohmann::json allocation = {{field::kTotal, total()}, {field::kHeld, held},
                               {field::kTarget, target}, {field::kQueued, queued}};
  if (allocation == last_allocation_) return;
  last_allocation_ = allocation;
  events_(events::kPoolAllocation, allocation);
}

int64_t PoolState::Version(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? 0 : it->second.version;
}

std::vector<PoolState::LocalJob> PoolState::LocalJobs() const {
  std::vector<LocalJob> out;
  for (const auto& [id, job] : jobs_) {
    if (job.local && job.pid > 0) out.push_back({id, job.pid, job.pid_start});
  }
  return out;
}

std::vector<std::pair<std::string, PoolTime>> PoolState::RemoteJobs() const {
  std::vector<std::pair<std::string, PoolTime>> out;
  for (const auto& [id, job] : jobs_) {
    if (!job.local || job.pid <= 0) out.emplace_back(id, job.last_heard);
  }
  return out;
}

nlohmann::json PoolState::Status(PoolTime now) const {
  nlohmann::json hosts = nlohmann::json::array();
  for (const PoolHost& h : hosts_) {
    hosts.push_back({{"host", h.name}, {"slots", h.slots}, {"devices", h.devices}});
    if (!h.start_through.command.empty()) hosts.back()["start_through"] = h.start_through.command;
  }
  std::vector<const Job*> order;
  for (const auto& [id, job] : jobs_) order.push_back(&job);
  std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) { return a->arrival < b->arrival; });
  nlohmann::json jobs = nlohmann::json::array();
  int used = 0;
  for (const auto& [host, busy] : Busy()) {
    for (const PoolHost& h : hosts_) {
      if (h.name != host) continue;
      for (int slot : busy) used += slot < h.slots;
    }
  }
  for (const Job* job : order) {
    nlohmann::json slots = nlohmann::json::object();
    for (const auto& [host, list] : job->held) {
      nlohmann::json entries = nlohmann::json::array();
      for (int slot : list) {
        const std::string* device = Device(host, slot);
        entries.push_back(device != nullptr ? nlohmann::json({{"slot", slot}, {"gpu", *device}})
                                            : nlohmann::json({{"slot", slot}}));
      }
      slots[host] = entries;
    }
    const char* state = job->restored ? "rejoining"
                        : !job->admitted ? "queued"
                        : job->count() == 0 ? "waiting" : "running";
    jobs.push_back({{"job", job->id}, {"priority", job->priority}, {"min_np", job->min_np},
                    {"max_np", job->max_np}, {"state", state}, {"held", job->count()},
                    {"releasing", job->releasing.size()}, {"target", job->target},
                    {"pid", job->pid}, {"slots", slots},
                    {"idle_s", std::chrono::duration<double>(now - job->last_heard).count()}});
  }
  return {{"pool", name_}, {"total", total()}, {"free", total() - used}, {"hosts", hosts},
          // Before the first allocation there is none (null): nothing is queued yet.
          {"jobs", jobs},
          {"queued", last_allocation_.is_object()
                         ? last_allocation_.value(field::kQueued, nlohmann::json::array())
                         : nlohmann::json::array()},
          {"ranks_per_gpu", ranks_per_gpu_},
          {"min_hold_s", std::chrono::duration<double>(min_hold_).count()}};
}

bool PoolState::Consistent(std::string* why) const {
  std::map<std::string, int> slots;
  for (const PoolHost& h : hosts_) slots[h.name] = h.slots;
  std::map<std::pair<std::string, int>, std::string> owner;
  auto claim = [&](const std::string& job, const std::string& host, int slot, bool releasing) {
    auto known = slots.find(host);
    if (!releasing && (known == slots.end() || slot < 0 || slot >= known->second)) {
      *why = job + " holds " + host + "/" + std::to_string(slot) + ", which the pool does not have";
      return false;
    }
    auto [it, fresh] = owner.emplace(std::make_pair(host, slot), job);
    if (!fresh) {
      *why = host + "/" + std::to_string(slot) + " is held by both " + it->second + " and " + job;
      return false;
    }
    return true;
  };
  for (const auto& [id, job] : jobs_) {
    for (const auto& [host, list] : job.held) {
      for (int slot : list) {
        if (!claim(id, host, slot, false)) return false;
      }
    }
    for (const Releasing& r : job.releasing) {
      if (!claim(id, r.host, r.slot, true)) return false;
    }
  }
  return true;
}

}  // namespace etrun::pool
