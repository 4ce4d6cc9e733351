#include "pool/pool_client.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <charconv>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "discovery/network.h"
#include "pool/pool_wire.h"

namespace etrun::pool {

namespace {

constexpr std::chrono::milliseconds kRequestTimeout(3000);

}  // namespace

bool SplitHostPort(const std::string& text, std::string* host, int* port, bool allow_any_port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, *port);
  if (ec != std::errc() || end != last || *port < (allow_any_port ? 0 : 1) || *port > 65535) return false;
  *host = text.substr(0, colon);
  return true;
}

bool FindPool(const std::string& name, control::JobEntry* out, std::string* err) {
  std::vector<control::JobEntry> pools = control::ListJobs(err, control::kPoolRegistry);
  if (!err->empty()) return false;
  std::string names;
  for (const control::JobEntry& p : pools) {
    if (p.job == name || (name.empty() && pools.size() == 1)) {
      *out = p;
      return true;
    }
    names += (names.empty() ? "" : ", ") + p.job;
  }
  if (name.empty()) {
    *err = pools.empty() ? "no pool of this user is running: start one with `etrun pool start NAME -H HOST:SLOTS`"
                         : "several pools are running (" + names + "): name one";
  } else {
    *err = "no pool named '" + name + "' (running: " + (names.empty() ? "none" : names) +
           "): start it with `etrun pool start " + name + " -H HOST:SLOTS`";
  }
  return false;
}

PoolClient::PoolClient(ClientOptions options) : options_(std::move(options)) {}

PoolClient::~PoolClient() { Stop(); }

bool PoolClient::Find(control::JobEntry* entry, std::string* err) const {
  std::string host;
  int port = 0;
  if (SplitHostPort(options_.pool, &host, &port)) {
    std::vector<uint32_t> ips = discovery::ResolveIPv4(host);
    if (ips.empty()) {
      *err = "--pool " + options_.pool + ": cannot resolve " + host;
      return false;
    }
    if (options_.token.empty()) {
      *err = "--pool " + options_.pool + " is on another machine: set ETRUN_POOL_TOKEN to the token "
             "its `etrun pool start --listen` printed";
      return false;
    }
    in_addr a{htonl(ips[0])};
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, text, sizeof(text));
    entry->job = options_.pool;
    entry->kind = "pool";
    entry->address = text;
    entry->port = port;
    entry->token = options_.token;
    return true;
  }
  return FindPool(options_.pool, entry, err);
}

bool PoolClient::by_address() const {
  std::string host;
  int port = 0;
  return SplitHostPort(options_.pool, &host, &port);
}

JoinRequest PoolClient::Request() const {
  JoinRequest request = options_.join;
  std::lock_guard<std::mutex> lock(mu_);
  request.held = Held();
  request.releasing.clear();
  // Live local ranks past the grant still drain slots given back: the pool must know them.
  for (const auto& [host, ranks] : live_) {
    auto granted = request.held.find(host);
    size_t have = granted == request.held.end() ? 0 : granted->second.size();
    auto views = slots_.find(host);
    for (int rank : ranks) {
      if (rank < 0 || static_cast<size_t>(rank) < have || views == slots_.end() ||
          static_cast<size_t>(rank) >= views->second.size() || views->second[rank].slot < 0) {
        continue;
      }
      request.releasing.push_back({host, rank, views->second[rank].slot});
    }
  }
  return request;
}

bool PoolClient::JoinWith(const control::JobEntry& entry, std::string* err) {
  std::string body = JoinRequestToJson(Request(), control::MachineName()).dump();
  std::string reply;
  int status = 0;
  // 503: the pool is starting (its hosts are not known yet); it answers within a discovery run.
  for (int attempt = 0; attempt < 100; ++attempt) {
    status = control::ControlRequest(entry, "POST", "/jobs", body, &reply, err, kRequestTimeout);
    if (status != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (status == 0) return false;
  JoinReply joined;
  if (status != 200 || !JoinReplyFromJson(nlohmann::json::parse(reply, nullptr, false), &joined)) {
    *err = "pool '" + options_.pool + "' refused the job: " + ErrorText(reply);
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  entry_ = entry;
  id_ = joined.id;
  // A pool without this job's book starts its versions again: what we saw of the old one's
  // says nothing about the new one's.
  seen_ = std::min(seen_, joined.version);
  return true;
}

bool PoolClient::Join(std::string* err) {
  control::JobEntry entry;
  if (!Find(&entry, err) || !JoinWith(entry, err)) return false;
  spdlog::info("joined pool '{}' as '{}' (priority {}, {}..{} slots)", options_.pool, id_,
               options_.join.priority, options_.join.min_np, options_.join.max_np);
  return true;
}

std::string PoolClient::job_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return id_;
}

void PoolClient::Leave() {
  Stop();
  control::JobEntry entry;
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry = entry_;
    id = id_;
  }
  if (id.empty()) return;
  std::string reply, err;
  int status = control::ControlRequest(entry, "DELETE", "/jobs/" + id, "", &reply, &err, kRequestTimeout);
  if (status != 200) {
    spdlog::warn("could not tell pool '{}' that the job ended ({}); it frees the slots when it "
                 "sees etrun gone", options_.pool, status == 0 ? err : ErrorText(reply));
  }
}

void PoolClient::Poll(std::function<void(discovery::HostGrant)> done) {
  if (thread_.joinable()) thread_.join();
  thread_ = std::thread([this, done = std::move(done)] { done(Sync()); });
}

void PoolClient::Stop() {
  if (thread_.joinable()) thread_.join();
}

void PoolClient::ReportLive(std::map<std::string, std::vector<int>> live) {
  std::lock_guard<std::mutex> lock(mu_);
  live_ = std::move(live);
}

discovery::HostSourceTraits PoolClient::traits() const {
  return {true, options_.pool, job_id()};
}

// One sync; on the sync thread.
discovery::HostGrant PoolClient::Sync() {
  control::JobEntry entry;
  std::string id;
  SyncRequest request;
  discovery::HostGrant last;
  bool lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry = entry_;
    id = id_;
    request.live = live_;
    // The previous grant reached the driver before this run began (runs are one at a time, each
    // after the last result was applied): its version is what the job has seen.
    request.seen = seen_;
    last = Granted();
    lost = lost_;
  }
  std::string reply, err;
  int status = lost ? 0 : PostSync(entry, id, request, &reply, &err);
  if (status == 503) return last;  // the pool is starting: train on
  if (status == 0 || status == 410) {
    // The pool went away, or restarted (a new port and token, or no book of this job), or
    // counted this job gone: join it again with what we hold; until then train on the last grant.
    if (!lost) {
      lost_why_ = status == 0 ? err : "pool '" + options_.pool + "' no longer knows this job";
      spdlog::warn("{}: training on the slots held; joining again when it is back", lost_why_);
    }
    if (!Rejoin(&request, &reply, &status)) return last;
  }
  return Apply(status, reply);
}

int PoolClient::PostSync(const control::JobEntry& entry, const std::string& id,
                         const SyncRequest& request, std::string* reply, std::string* err) const {
  return control::ControlRequest(entry, "POST", "/jobs/" + id + "/sync", SyncRequestToJson(request).dump(),
                                 reply, err, kRequestTimeout);
}

bool PoolClient::Rejoin(SyncRequest* request, std::string* reply, int* status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_ = true;
  }
  control::JobEntry found;
  std::string why;
  if (!Find(&found, &why)) return false;  // still away
  if (!JoinWith(found, &why)) {
    // Said once per reason: a pool that answers now but does not prove it knows our token (one
    // restarted with a new token, reached by address) says how to get the new one.
    if (why != lost_why_) spdlog::warn("{}: training on the slots held", why);
    lost_why_ = why;
    return false;
  }
  lost_why_.clear();
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_ = false;
    id = id_;
    request->seen = seen_;
  }
  spdlog::info("joined pool '{}' again as '{}'", options_.pool, id);
  std::string err;
  *status = PostSync(found, id, *request, reply, &err);
  return *status != 0;
}

discovery::HostGrant PoolClient::Apply(int status, const std::string& reply) {
  Grant from_pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    from_pool.version = seen_;  // kept when the pool sends none
  }
  std::string bad;
  if (status != 200 || !GrantFromJson(nlohmann::json::parse(reply, nullptr, false), &from_pool, &bad)) {
    discovery::HostGrant grant;
    std::string why = bad.empty() ? "answered " + std::to_string(status) + ": " + ErrorText(reply)
                                  : "sent a bad grant: " + bad;
    grant.failure = "pool '" + options_.pool + "' " + why;
    grant.fix = "see `etrun pool status " + options_.pool + "` and the pool's log";
    return grant;
  }
  if (by_address() && !options_.trust_start_through) {
    for (const Grant::Host& h : from_pool.hosts) {
      if (h.start_through.empty()) continue;
      // Quoted as JSON: the text is the pool's, control characters included.
      std::string shown = nlohmann::json(h.start_through.substr(0, 200)).dump(
          -1, ' ', true, nlohmann::json::error_handler_t::replace);
      discovery::HostGrant grant;
      grant.failure = "pool '" + options_.pool + "' (reached by address, not one of this user's "
                      "pools on this machine) asks this job to start its ranks on " + h.name +
                      " through the command " + shown + ": refused";
      grant.fix = "set ETRUN_POOL_TRUST_START=1 if you trust whoever runs that pool to run "
                  "commands as you";
      return grant;
    }
  }
  return Adopt(from_pool);
}

discovery::HostGrant PoolClient::Adopt(const Grant& from_pool) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = from_pool;
  seen_ = from_pool.version;
  // A local rank keeps its entry after it is given back (its process may still be starting or
  // draining); the pool grants that place again only with a new entry, written here first.
  for (const Grant::Host& h : from_pool.hosts) {
    if (h.slots.empty()) continue;
    std::vector<SlotView>& mine = slots_[h.name];
    if (mine.size() < h.slots.size()) mine.resize(h.slots.size());
    for (size_t k = 0; k < h.slots.size(); ++k) {
      mine[k] = {h.slots[k], k < h.devices.size() ? h.devices[k] : ""};
    }
  }
  return Granted();
}

HostLists PoolClient::Held() const {
  HostLists held;
  for (const Grant::Host& h : held_.hosts) {
    if (!h.slots.empty()) held[h.name] = h.slots;
  }
  return held;
}

discovery::HostGrant PoolClient::Granted() const {
  // The grant as one value: its hosts in the pool's order, every local rank's facts, its version.
  discovery::HostGrant grant;
  grant.ok = true;
  grant.version = static_cast<uint64_t>(seen_);
  for (const Grant::Host& h : held_.hosts) {
    if (h.slots.empty()) continue;
    grant.hosts.push_back({h.name, static_cast<int>(h.slots.size())});
    // A pool inside Slurm: srun in its allocation (a host that is this machine runs locally).
    if (!h.start_through.empty()) {
      grant.start_through[h.name] = {h.start_through, discovery::KindNamed(options_.kinds, h.start_kind),
                                     /*job_own=*/false};
    }
  }
  for (const auto& [host, list] : slots_) {
    std::vector<discovery::SlotFacts>& facts = grant.slots[host];
    for (const SlotView& v : list) {
      discovery::SlotFacts f;
      f.device = v.device;
      if (v.slot >= 0) f.env.push_back("ETRUN_POOL_SLOT=" + host + "/" + std::to_string(v.slot));
      if (!v.device.empty()) f.env.push_back("ETRUN_POOL_GPU=" + v.device);
      facts.push_back(std::move(f));
    }
  }
  return grant;
}

}  // namespace etrun::pool
