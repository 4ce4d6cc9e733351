#include "launcher/preflight_run.h"

#include <algorithm>
#include <cmath>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "events/schema.h"


namespace etrun::launcher {

namespace asio = boost::asio;
namespace field = events::field;

std::string SickNames(const PreflightResult& result) {
  std::string names;
  for (const preflight::SickHost& s : result.sick) names += (names.empty() ? "" : ", ") + s.host;
  return names;
}

void ReportPreflight(const PreflightResult& result, const std::string& action, events::EventLog* events) {
  for (const preflight::SickHost& s : result.sick) {
    if (action == "refuse") {
      spdlog::error("pre-flight: {}: {}", s.host, s.why);
    } else if (action == "warn") {
      spdlog::warn("pre-flight: {}: {}; its ranks run anyway (--preflight=warn)", s.host, s.why);
    } else {
      spdlog::warn("pre-flight: {}: {}; left out of the job", s.host, s.why);
    }
  }
  std::string figures;
  if (result.median_mbit_s >= 0) figures += ", median stream " + preflight::RateText(result.median_mbit_s);
  if (result.rtt_ms_max >= 0) figures += fmt::format(", round trips up to {:.2f} ms", result.rtt_ms_max);
  spdlog::info("pre-flight: {} host{} checked in {:.2f} s, {} sick{}", result.hosts.size(),
               result.hosts.size() == 1 ? "" : "s", result.seconds, result.sick.size(), figures);
  if (events == nullptr || !events->enabled()) return;
  nlohmann::json sick = nlohmann::json::array();
  for (const preflight::SickHost& s : result.sick) sick.push_back({{field::kHost, s.host}, {field::kWhy, s.why}});
  auto rounded = [](double v, double unit) {
    return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(std::round(v / unit) * unit);
  };
  events->Emit(events::kPreflight, {{field::kHosts, result.hosts},
                                    {field::kSick, sick},
                                    {field::kSeconds, rounded(result.seconds, 0.001)},
                                    {field::kMedianMbitS, rounded(result.median_mbit_s, 0.1)},
                                    {field::kMaxRttMs, rounded(result.rtt_ms_max, 0.001)},
                                    {field::kAction, action}});
}

PreflightRun::PreflightRun(asio::io_context* io, std::vector<PreflightHost> hosts, Limits limits,
                           std::function<void(const PreflightResult&)> done)
    : io_(io), hosts_(std::move(hosts)), limits_(limits), done_(std::move(done)),
      states_(hosts_.size()), timer_(*io) {
  for (size_t i = 0; i < hosts_.size(); ++i) states_[i].check.host = hosts_[i].name;
}

PreflightRun::~PreflightRun() {
  *alive_ = false;
  timer_.cancel();
  cancel_->store(true);
  for (std::thread& t : threads_) t.join();  // a batch of probes at most: bounded by their deadlines
  if (phase_ != Phase::kDone) {
    for (const PreflightHost& h : hosts_) {
      if (h.spec.remote_host != nullptr) h.spec.remote_host->CheckPeers("");
    }
  }
}

template <typename T>
void PreflightRun::OffLoop(std::function<T()> work, std::function<void(T)> then) {
  std::weak_ptr<bool> alive = alive_;
  threads_.emplace_back([io = io_, alive, work = std::move(work), then = std::move(then)] {
    T value = work();
    asio::post(*io, [alive, then, value = std::move(value)]() mutable {
      if (auto live = alive.lock(); live && *live) then(std::move(value));
    });
  });
}

void PreflightRun::Start() {
  started_ = std::chrono::steady_clock::now();
  Arm(limits_.answer);
  busy_ = true;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const PreflightHost& h = hosts_[i];
    if (!h.problem.empty()) {
      states_[i].check.problems.push_back(h.problem);
      states_[i].answered = true;
      continue;
    }
    if (h.spec.remote_host != nullptr) {
      h.spec.remote_host->CheckHost(key_, h.spec.remote_command, h.slots);
      continue;
    }
    std::string err;
    std::vector<std::string> problems;
    auto server = std::make_unique<preflight::ProbeServer>();
    int port = 0;
    if (server->Start(key_, &err)) {
      port = server->port();
      local_servers_.push_back(std::move(server));
    } else {
      problems.push_back(err);
    }
    LaunchSpec spec = h.spec;
    OffLoop<preflight::SelfCheck>(
        [spec, problems, port] {
          preflight::SelfCheck check = preflight::CheckSelf(spec.argv, spec.env, spec.cwd, std::chrono::seconds(2));
          check.problems.insert(check.problems.begin(), problems.begin(), problems.end());
          check.probe_port = port;
          return check;
        },
        [this, i](preflight::SelfCheck check) { OnSelf(i, std::move(check)); });
  }
  busy_ = false;
  MaybeAdvance();
}

void PreflightRun::OnCheck(RankHost* from, std::string_view text) {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].spec.remote_host != from || from == nullptr || states_[i].answered) continue;
    size_t end = text.find('\n');
    std::string_view kind = text.substr(0, end);
    std::string_view rest = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (kind == "lost") {
      std::string line(rest);
      while (!line.empty() && line.back() == '\n') line.pop_back();
      const std::string prefix = "etrun: error: ";
      if (line.starts_with(prefix)) line.erase(0, prefix.size());
      Gone(i, line.empty() ? "its host was lost" : line);
    } else if (kind == "self" && phase_ == Phase::kSelf) {
      preflight::SelfCheck check;
      if (!preflight::ParseSelfCheckText(rest, &check)) {
        check = {};
        check.problems.push_back("its agent's pre-flight answer could not be read");
      }
      OnSelf(i, std::move(check));
    } else if (kind == "peers" && phase_ == Phase::kPeers) {
      std::vector<preflight::PeerResult> peers;
      while (!rest.empty()) {
        size_t nl = rest.find('\n');
        preflight::PeerResult r;
        if (preflight::ParsePeerResultLine(rest.substr(0, nl), &r)) peers.push_back(r);
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      }
      OnPeers(i, std::move(peers));
    }
    return;
  }
}

void PreflightRun::OnSelf(size_t i, preflight::SelfCheck self) {
  State& s = states_[i];
  if (s.answered || phase_ != Phase::kSelf) return;
  s.answered = true;
  s.check.problems.insert(s.check.problems.end(), self.problems.begin(), self.problems.end());
  s.self = std::move(self);
  MaybeAdvance();
}

void PreflightRun::OnPeers(size_t i, std::vector<preflight::PeerResult> peers) {
  State& s = states_[i];
  if (s.answered || phase_ != Phase::kPeers) return;
  s.answered = true;
  s.check.peers = std::move(peers);
  MaybeAdvance();
}

void PreflightRun::Gone(size_t i, const std::string& why) {
  State& s = states_[i];
  if (s.answered) return;
  s.answered = true;
  s.check.problems.push_back("unreachable: " + why);
  s.self.probe_port = 0;  // no peer probes it
  MaybeAdvance();
}

void PreflightRun::Arm(std::chrono::milliseconds after) {
  timer_.expires_after(after);
  std::weak_ptr<bool> alive = alive_;
  Phase phase = phase_;
  timer_.async_wait([this, alive, phase, after](const boost::system::error_code& ec) {
    if (ec || !alive.lock() || phase_ != phase) return;
    busy_ = true;  // every silent host of this phase, then the next phase
    for (size_t i = 0; i < states_.size(); ++i) {
      if (!states_[i].answered) {
        Gone(i, fmt::format("no pre-flight answer in {:g} s", after.count() / 1000.0));
      }
    }
    busy_ = false;
    MaybeAdvance();
  });
}

void PreflightRun::MaybeAdvance() {
  if (phase_ == Phase::kDone || busy_) return;
  if (!std::all_of(states_.begin(), states_.end(), [](const State& s) { return s.answered; })) return;
  if (phase_ == Phase::kSelf) return Probe();
  Finish();
}

void PreflightRun::Probe() {
  phase_ = Phase::kPeers;
  timer_.cancel();
  // Every host that answered with a listener probes and is probed; the others sit out.
  std::vector<size_t> in;
  std::vector<std::string> names, ips;
  std::vector<int> ports;
  for (size_t i = 0; i < states_.size(); ++i) {
    const preflight::SelfCheck& self = states_[i].self;
    if (self.probe_port <= 0 || self.probe_ip.empty()) continue;
    in.push_back(i);
    names.push_back(hosts_[i].name);
    ips.push_back(self.probe_ip);
    ports.push_back(self.probe_port);
  }
  for (State& s : states_) s.answered = true;
  for (size_t k = 0; k < in.size() && in.size() > 1; ++k) states_[in[k]].answered = false;
  Arm(limits_.probes);
  busy_ = true;
  if (in.size() > 1) {
    for (size_t k = 0; k < in.size(); ++k) {
      size_t i = in[k];
      std::vector<preflight::PeerTarget> targets = preflight::TargetsFor(k, names, ips, ports);
      if (hosts_[i].spec.remote_host != nullptr) {
        hosts_[i].spec.remote_host->CheckPeers(preflight::PeerTargetsText(targets));
        continue;
      }
      OffLoop<std::vector<preflight::PeerResult>>(
          [targets, key = key_, cancel = cancel_] {
            return preflight::ProbePeers(targets, key, preflight::ProbeLimits{}, cancel.get());
          },
          [this, i](std::vector<preflight::PeerResult> peers) { OnPeers(i, std::move(peers)); });
    }
  }
  busy_ = false;
  MaybeAdvance();
}

void PreflightRun::Finish() {
  phase_ = Phase::kDone;
  timer_.cancel();
  local_servers_.clear();
  for (const PreflightHost& h : hosts_) {
    if (h.spec.remote_host != nullptr) h.spec.remote_host->CheckPeers("");
  }
  PreflightResult result;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    result.hosts.push_back(hosts_[i].name);
    result.checks.push_back(states_[i].check);
    for (const preflight::PeerResult& p : states_[i].check.peers) {
      if (p.reached()) result.rtt_ms_max = std::max(result.rtt_ms_max, p.rtt_ms);
    }
  }
  result.sick = preflight::Judge(result.checks, &result.median_mbit_s);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  auto done = done_;
  done(result);  // last: it may end this run (the runtime posts that, but nothing here needs it)
}

}  // namespace etrun::launcher
