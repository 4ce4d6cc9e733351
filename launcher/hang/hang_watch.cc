#include "launcher/hang/hang_watch.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "launcher/hang/python_hook.h"

namespace etrun::launcher::hang {

namespace asio = boost::asio;

namespace {

// A rank's stderr kept for its dump: enough for hundreds of threads' stacks.
constexpr size_t kMaxCapture = 1 << 20;

}  // namespace

HangWatch::HangWatch(asio::io_context* io, RankSet* ranks, Options options,
                     std::function<void(const Verdict&)> on_hang)
    : io_(io),
      ranks_(ranks),
      options_(options),
      on_hang_(std::move(on_hang)),
      check_timer_(*io),
      collect_timer_(*io),
      quiet_since_(std::chrono::steady_clock::now()) {}

HangWatch::~HangWatch() { Stop(); }

void HangWatch::Start() {
  if (options_.timeout.count() <= 0 || watching_) return;
  watching_ = true;
  quiet_since_ = std::chrono::steady_clock::now();
  check_timer_.expires_after(options_.check);
  check_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
    if (!ec && alive.lock()) Check();
  });
}

void HangWatch::Stop() {
  watching_ = false;
  check_timer_.cancel();
  if (dumping_) {
    dumping_ = false;
    collect_timer_.cancel();
    ranks_->set_output_tap(nullptr);
    ranks_->set_facts_tap(nullptr);
    // Whoever asked (etrun dump) hears that the job ended first rather than waiting in vain.
    Verdict ended;
    ended.why = why_;
    ended.summary = "the job ended before the dump was complete";
    ended.line = "etrun: hang: " + why_ + ": " + ended.summary;
    std::vector<std::function<void(const Verdict&)>> waiting;
    waiting.swap(waiting_);
    for (auto& done : waiting) done(ended);
  }
}

void HangWatch::Check() {
  if (!watching_) return;
  auto now = std::chrono::steady_clock::now();
  // Output not read (a congested console: a paused pager, a stalled pipe) is no silence of the
  // ranks: the clock starts once reading goes on.
  if (ranks_->reading_paused()) quiet_since_ = now;
  auto since = std::max(ranks_->last_activity(), quiet_since_);
  if (!dumping_ && ranks_->active() > 0 && now - since >= options_.timeout) {
    timed_out_ = true;
    auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - since).count();
    Begin(fmt::format("no output for {} s", silent));
  }
  check_timer_.expires_after(options_.check);
  check_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
    if (!ec && alive.lock()) Check();
  });
}

void HangWatch::DumpNow(std::function<void(const Verdict&)> done) {
  waiting_.push_back(std::move(done));
  if (!dumping_) Begin("on request");
}

void HangWatch::Begin(std::string why) {
  dumping_ = true;
  why_ = std::move(why);
  stderr_.clear();
  facts_.clear();
  ranks_dumped_ = ranks_->Unfinished();
  ranks_->set_output_tap([this](int id, bool is_stderr, std::string_view data) {
    if (!is_stderr) return;
    std::string& kept = stderr_[id];
    if (kept.size() < kMaxCapture) kept.append(data.substr(0, kMaxCapture - kept.size()));
  });
  ranks_->set_facts_tap([this](int id, std::string_view text) {
    ProcFacts facts;
    if (ParseProcFacts(text, &facts)) facts_[id] = facts;
  });
  spdlog::debug("dumping the stacks of {} ranks: {}", ranks_dumped_.size(), why_);
  for (const RankSet::Running& r : ranks_dumped_) {
    ranks_->Signal(r.id, kStackSignal);
    ranks_->ProbeRemote(r.id);  // a local rank's facts are read when the dump is over
  }
  collect_timer_.expires_after(options_.collect);
  collect_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
    if (!ec && alive.lock()) Finish();
  });
}

void HangWatch::Finish() {
  if (!dumping_) return;
  ranks_->set_output_tap(nullptr);
  ranks_->set_facts_tap(nullptr);
  std::vector<int> running;  // a rank that ended meanwhile is not hung
  for (const RankSet::Running& r : ranks_->Unfinished()) running.push_back(r.id);
  std::vector<RankObservation> seen;
  for (const RankSet::Running& r : ranks_dumped_) {
    if (std::find(running.begin(), running.end(), r.id) == running.end()) continue;
    RankObservation o;
    o.rank = r.rank;
    o.host = r.host;
    if (auto it = stderr_.find(r.id); it != stderr_.end()) {
      o.where = MainThreadFrame(ParseStackDump(it->second));
      if (o.where) o.dump = std::move(it->second);
    }
    if (auto it = facts_.find(r.id); it != facts_.end()) {
      o.facts = it->second;
    } else if (ProcFacts facts; ranks_->pid(r.id) > 0 && ReadProcFacts(ranks_->pid(r.id), &facts)) {
      o.facts = facts;  // a local rank
    }
    seen.push_back(std::move(o));
  }
  Verdict verdict = JudgeHang(why_, std::move(seen));
  dumping_ = false;
  // After a timeout's dump the next one follows another timeout of silence; a dump on request
  // (etrun dump) does not put the watchdog off.
  if (timed_out_) quiet_since_ = std::chrono::steady_clock::now();
  bool timed_out = timed_out_;
  timed_out_ = false;
  std::vector<std::function<void(const Verdict&)>> waiting;
  waiting.swap(waiting_);
  for (auto& done : waiting) done(verdict);
  if (timed_out && on_hang_) on_hang_(verdict);
}

}  // namespace etrun::launcher::hang
