#include "pool/pool_client.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <charconv>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "discovery/network.h"

namespace etrun::pool {

namespace {

constexpr std::chrono::milliseconds kRequestTimeout(3000);

nlohmann::json Lists(const HostLists& lists) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [host, list] : lists) j[host] = list;
  return j;
}

std::string ErrorOf(const std::string& reply) {
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return reply;
}

// The hosts of a grant, [{"host", "slots": [ids], "devices": [ids]}], as slot ids and views per
// host (hosts without slots left out). Returns false on any other shape.
bool ReadGrant(const nlohmann::json& hosts, std::vector<discovery::HostSlots>* order, HostLists* held,
               std::map<std::string, std::vector<SlotView>>* views) {
  for (const nlohmann::json& h : hosts) {
    if (!h.is_object() || !h.contains("host") || !h["host"].is_string() || !h.contains("slots") ||
        !h["slots"].is_array() || !h.contains("devices") || !h["devices"].is_array()) {
      return false;
    }
    const std::string host = h["host"].get<std::string>();
    const nlohmann::json& slots = h["slots"];
    const nlohmann::json& devices = h["devices"];
    if (slots.empty()) continue;
    order->push_back({host, static_cast<int>(slots.size())});
    for (size_t k = 0; k < slots.size(); ++k) {
      if (!slots[k].is_number_integer() || (k < devices.size() && !devices[k].is_string())) return false;
      int slot = slots[k].get<int>();
      (*held)[host].push_back(slot);
      (*views)[host].push_back({slot, k < devices.size() ? devices[k].get<std::string>() : ""});
    }
  }
  return true;
}

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

PoolClient::PoolClient(ClientOptions options) : options_(std::move(options)) { last_grant_.ok = true; }

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
    entry->address = text;
    entry->port = port;
    entry->token = options_.token;
    return true;
  }
  return FindPool(options_.pool, entry, err);
}

bool PoolClient::JoinWith(const control::JobEntry& entry, std::string* err) {
  std::string machine = control::MachineName();
  HostLists held;
  nlohmann::json releasing = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = held_;
    // Live local ranks past the grant still drain slots given back: the pool must know them.
    for (const auto& [host, ranks] : live_) {
      auto granted = held_.find(host);
      size_t have = granted == held_.end() ? 0 : granted->second.size();
      auto views = slots_.find(host);
      for (int rank : ranks) {
        if (rank < 0 || static_cast<size_t>(rank) < have || views == slots_.end() ||
            static_cast<size_t>(rank) >= views->second.size() || views->second[rank].slot < 0) {
          continue;
        }
        releasing.push_back({host, rank, views->second[rank].slot});
      }
    }
  }
  const JoinRequest& r = options_.join;
  nlohmann::json body = {{"name", r.name}, {"priority", r.priority}, {"min_np", r.min_np},
                         {"max_np", r.max_np}, {"pid", r.pid}, {"machine", machine},
                         {"held", Lists(held)}, {"releasing", releasing}};
  std::string reply;
  int status = 0;
  // 503: the pool is starting (its hosts are not known yet); it answers within a discovery run.
  for (int attempt = 0; attempt < 100; ++attempt) {
    status = control::ControlRequest(entry, "POST", "/jobs", body.dump(), &reply, err, kRequestTimeout);
    if (status != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (status == 0) return false;
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (status != 200 || !j.is_object() || !j.contains("id") || !j["id"].is_string()) {
    *err = "pool '" + options_.pool + "' refused the job: " + ErrorOf(reply);
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  entry_ = entry;
  id_ = j["id"].get<std::string>();
  // A pool without this job's book starts its versions again: what we saw of the old one's
  // says nothing about the new one's.
  seen_ = std::min(seen_, j.value("version", int64_t{0}));
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
                 "sees etrun gone", options_.pool, status == 0 ? err : ErrorOf(reply));
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
  discovery::HostGrant last;
  HostLists live;
  bool lost;
  int64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry = entry_;
    id = id_;
    live = live_;
    last = last_grant_;
    lost = lost_;
    seen = seen_;
  }
  std::string reply, err;
  // The previous grant reached the driver before this run began (runs are one at a time, each
  // after the last result was applied): its version is what the job has seen.
  nlohmann::json body = {{"live", Lists(live)}, {"seen", seen}};
  int status = 0;
  if (!lost) {
    status = control::ControlRequest(entry, "POST", "/jobs/" + id + "/sync", body.dump(), &reply,
                                      &err, kRequestTimeout);
  }
  if (status == 503) return last;  // the pool is starting: train on
  if (status == 0 || status == 401 || status == 410) {
    // The pool went away, or restarted (a new port or token, or no book of this job), or counted
    // this job gone: join it again with what we hold; until then train on the last grant.
    control::JobEntry found;
    std::string why;
    if (!lost) {
      spdlog::warn("pool '{}' {}: training on the slots held; joining again when it is back",
                   options_.pool, status == 0 ? "cannot be reached (" + err + ")"
                                  : status == 401 ? "was restarted" : "no longer knows this job");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost_ = true;
    }
    if (!Find(&found, &why) || !JoinWith(found, &why)) return last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost_ = false;
      id = id_;
      body["seen"] = seen_;
    }
    spdlog::info("joined pool '{}' again as '{}'", options_.pool, id);
    err.clear();
    status = control::ControlRequest(found, "POST", "/jobs/" + id + "/sync", body.dump(), &reply,
                                      &err, kRequestTimeout);
    if (status == 0) return last;
  }
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  discovery::HostGrant grant;
  HostLists held;
  std::map<std::string, std::vector<SlotView>> views;
  if (status != 200 || !j.is_object() || !j.contains("hosts") || !j["hosts"].is_array()) {
    grant.failure = "pool '" + options_.pool + "' answered " + std::to_string(status) + ": " + ErrorOf(reply);
  } else if (!ReadGrant(j["hosts"], &grant.hosts, &held, &views)) {
    grant.failure = "pool '" + options_.pool + "' sent a bad grant: " + j["hosts"].dump();
  }
  if (!grant.failure.empty()) {
    grant.failure = "the host discovery script failed (" + grant.failure + ")";
    grant.hosts.clear();
    return grant;
  }
  std::lock_guard<std::mutex> lock(mu_);
  held_ = std::move(held);
  if (j.contains("version") && j["version"].is_number_integer()) seen_ = j["version"].get<int64_t>();
  // A local rank keeps its entry after it is given back (its process may still be starting or
  // draining); the pool grants that place again only with a new entry, written here first.
  for (auto& [host, list] : views) {
    std::vector<SlotView>& mine = slots_[host];
    if (mine.size() < list.size()) mine.resize(list.size());
    for (size_t k = 0; k < list.size(); ++k) mine[k] = list[k];
  }
  // The grant as one value: its hosts, every local rank's facts, its version.
  grant.ok = true;
  grant.version = static_cast<uint64_t>(seen_);
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
  last_grant_ = grant;
  return grant;
}

}  // namespace etrun::pool
