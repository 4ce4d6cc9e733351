#include "launcher/process/rank_set.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "launcher/output/line_splitter.h"
#include "launcher/output/output_sink.h"
#include "launcher/process/guardian.h"

namespace etrun::launcher {

namespace asio = boost::asio;

static constexpr size_t kReadChunk = 64 << 10;
static constexpr size_t kLastLineBytes = 300;  // Finished::last_stderr

struct RankSet::Stream {
  // `fd` -1: a remote rank's stream, fed by its agent.
  Stream(asio::io_context* io, int fd, int r, bool is_stderr, const RankOutput& o)
      : formatter(r, is_stderr, o.timestamps, o.timestamp_format),
        console(is_stderr ? o.console_err : o.console_out),
        file(is_stderr ? o.file_err : o.file_out) {
    if (o.framer) framer = o.framer(is_stderr);
    if (fd >= 0) pipe.emplace(*io, fd);
  }
  Rank* owner = nullptr;
  std::optional<asio::posix::stream_descriptor> pipe;
  LineSplitter splitter;
  PrefixFormatter formatter;
  int console;
  int file;
  std::unique_ptr<LineFramer> framer;  // replaces splitter + formatter when set
  bool open = true;
  std::unique_ptr<char[]> buffer;  // local ranks' read buffer
};

struct RankSet::Rank {
  Rank(asio::io_context* io) : drain_timer(*io) {}
  int id = 0;
  int rank = 0;
  std::string host;
  int local_rank = -1;  // its slot on `host`; -1: none (mpirun, an agent's own ranks)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  SpawnedProcess process;
  bool supervisor = false;
  RankHost* remote = nullptr;  // its host's agent runs it
  bool exited = false;
  bool finished = false;
  // When etrun first sent it a stop signal; Finished::stopped compares it with exited_at.
  std::optional<std::chrono::steady_clock::time_point> stop_sent_at;
  std::chrono::steady_clock::time_point exited_at;
  std::string last_stderr;
  ExitStatus status;
  std::unique_ptr<Stream> out;
  std::unique_ptr<Stream> err;
  asio::steady_timer drain_timer;
};

RankSet::RankSet(asio::io_context* io, Spawner* spawner, OutputSink* sink, Guardian* guardian,
                 std::chrono::milliseconds drain_grace)
    : io_(io),
      spawner_(spawner),
      sink_(sink),
      guardian_(guardian),
      drain_grace_(drain_grace),
      alive_(std::make_shared<bool>(true)) {
  std::weak_ptr<bool> alive = alive_;
  sink_->set_on_drained([this, io, alive] {
    asio::post(*io, [this, alive] {
      if (alive.lock()) Resume();
    });
  });
}

RankSet::~RankSet() {
  sink_->set_on_drained(nullptr);
  for (auto& [id, r] : ranks_) {
    if (r->finished || r->remote != nullptr) continue;  // remote: stopped by its agent
    Kill(*r, SIGKILL);
    if (!r->exited) {
      int status;
      while (waitpid(r->process.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (guardian_ != nullptr && !r->supervisor) guardian_->Forget(r->process.pid);
  }
}

bool RankSet::Start(int rank, const std::string& host, int local_rank, const LaunchSpec& spec,
                    const RankOutput& output, std::string* err, int* id) {
  if (spec.remote_host != nullptr) {
    auto r = std::make_unique<Rank>(io_);
    r->rank = rank;
    r->host = host;
    r->local_rank = local_rank;
    r->remote = spec.remote_host;
    r->out = std::make_unique<Stream>(io_, -1, rank, false, output);
    r->err = std::make_unique<Stream>(io_, -1, rank, true, output);
    r->out->owner = r.get();
    r->err->owner = r.get();
    RankHost* remote = r->remote;
    int rank_id = Adopt(std::move(r), id);
    remote->StartRank(rank_id, spec.remote_command, spec.remote_gpus);  // a host already lost reports it at once
    return true;
  }
  SpawnedProcess process;
  int err_no = 0;
  if (!spawner_->Start(spec, &process, err, &err_no)) {
    start_errno_ = err_no;
    return false;
  }
  if (guardian_ != nullptr && !spec.supervisor) guardian_->Watch(process.pid);
  auto r = std::make_unique<Rank>(io_);
  r->rank = rank;
  r->host = host;
  r->local_rank = local_rank;
  r->process = process;
  r->supervisor = spec.supervisor;
  r->out = std::make_unique<Stream>(io_, process.stdout_fd, rank, false, output);
  r->err = std::make_unique<Stream>(io_, process.stderr_fd, rank, true, output);
  r->out->owner = r.get();
  r->err->owner = r.get();
  Arm(r->out.get());
  Arm(r->err.get());
  unawaited_.push_back(Adopt(std::move(r), id));
  return true;
}

int RankSet::Adopt(std::unique_ptr<Rank> r, int* id) {
  r->id = next_id_++;
  if (id != nullptr) *id = r->id;
  if (r->local_rank >= 0) {
    Slot slot{r->host, r->local_rank};
    slots_[slot].push_back(r->id);
    ++starts_[slot];
  }
  int adopted = r->id;
  last_activity_ = std::chrono::steady_clock::now();
  ranks_.emplace(adopted, std::move(r));
  ++active_;
  return adopted;
}

bool RankSet::AwaitExecs(std::string* err) {
  bool ok = true;
  std::vector<int> ids;
  ids.swap(unawaited_);
  for (int id : ids) {
    auto it = ranks_.find(id);
    if (it == ranks_.end()) continue;
    Rank* r = it->second.get();
    std::string why;
    int err_no = 0;
    if (!spawner_->AwaitStart(&r->process, &why, &err_no) && ok) {
      *err = "rank " + std::to_string(r->rank) + " on " + r->host + " could not start: " + why;
      start_errno_ = err_no;
      ok = false;
    }
  }
  return ok;
}

void RankSet::Arm(Stream* s) {
  if (s->buffer == nullptr) s->buffer.reset(new char[kReadChunk]);
  s->pipe->async_read_some(asio::buffer(s->buffer.get(), kReadChunk),
                          [this, s](const boost::system::error_code& ec, size_t n) { OnRead(s, ec, n); });
}

void RankSet::OnRead(Stream* s, const boost::system::error_code& ec, size_t n) {
  if (ec == asio::error::operation_aborted) return;
  if (n > 0) Emit(s, std::string_view(s->buffer.get(), n));
  if (ec) {  // EOF, or the pipe broke: either way this stream is over
    CloseStream(s);
    MaybeFinish(s->owner);
    return;
  }
  if (sink_->ShouldPause()) {
    paused_.push_back(s);
    return;
  }
  Arm(s);
}

void RankSet::Emit(Stream* s, std::string_view data) {
  last_activity_ = std::chrono::steady_clock::now();
  if (output_tap_) output_tap_(s->owner->id, s == s->owner->err.get(), data);
  scratch_.clear();
  if (s->framer) {
    s->framer->Feed(data, [this](std::string_view text) { scratch_.append(text); });
  } else {
    bool is_stderr = s == s->owner->err.get();
    s->splitter.Feed(data, [this, s, is_stderr](std::string_view piece, bool terminated) {
      s->formatter.Append(piece, terminated, &scratch_);
      if (is_stderr && terminated) {
        while (!piece.empty() && (piece.back() == '\n' || piece.back() == '\r')) piece.remove_suffix(1);
        if (!piece.empty()) s->owner->last_stderr.assign(piece.substr(0, kLastLineBytes));
      }
    });
  }
  sink_->Append(s->console, scratch_);
  if (s->file >= 0) sink_->Append(s->file, data);
}

bool RankSet::OnRemoteOutput(RankHost* from, int id, bool is_stderr, std::string_view data) {
  auto it = ranks_.find(id);
  if (it == ranks_.end() || from == nullptr || it->second->remote != from || it->second->exited) {
    return true;
  }
  Rank* r = it->second.get();
  Stream* s = is_stderr ? r->err.get() : r->out.get();
  if (s->open) Emit(s, data);
  if (!sink_->ShouldPause()) return true;
  if (std::find(paused_hosts_.begin(), paused_hosts_.end(), r->remote) == paused_hosts_.end()) {
    paused_hosts_.push_back(r->remote);
  }
  return false;
}

void RankSet::OnHostLost(RankHost* from, std::string_view line, const ExitStatus& status) {
  if (on_check_) on_check_(from, "lost\n" + std::string(line));  // a pre-flight may wait on it
  std::vector<int> ids;  // oldest first (ranks_ is ordered by id)
  for (const auto& [id, r] : ranks_) {
    if (r->remote == from && !r->exited) ids.push_back(id);
  }
  for (int id : ids) {
    if (id == ids.front()) OnRemoteOutput(from, id, true, line);
    OnRemoteExit(from, id, status, std::chrono::steady_clock::now());
  }
}

void RankSet::OnRemoteFacts(RankHost* from, int id, std::string_view facts) {
  auto it = ranks_.find(id);
  if (it == ranks_.end() || from == nullptr || it->second->remote != from) return;
  if (facts_tap_) facts_tap_(id, facts);
}

void RankSet::OnRemoteCheck(RankHost* from, std::string_view text) {
  if (on_check_) on_check_(from, text);
}

bool RankSet::ProbeRemote(int id) {
  auto it = ranks_.find(id);
  if (it == ranks_.end() || it->second->finished || it->second->remote == nullptr) return false;
  it->second->remote->ProbeRank(id);
  return true;
}

void RankSet::OnRemoteExit(RankHost* from, int id, const ExitStatus& status,
                           std::chrono::steady_clock::time_point exited_at) {
  auto it = ranks_.find(id);
  if (it == ranks_.end() || from == nullptr || it->second->remote != from || it->second->exited) return;
  Rank* r = it->second.get();
  r->exited = true;
  r->exited_at = exited_at;
  r->status = status;
  spdlog::debug("rank {} on {} {}", r->rank, r->host, r->status.Describe());
  CloseStream(r->out.get());
  CloseStream(r->err.get());
  MaybeFinish(r);
}

void RankSet::CloseStream(Stream* s) {
  if (!s->open) return;
  scratch_.clear();
  if (s->framer) {
    s->framer->Finish([this](std::string_view text) { scratch_.append(text); });
  }
  s->splitter.Finish([this, s](std::string_view piece, bool terminated) {
    s->formatter.Append(piece, terminated, &scratch_);
  });
  sink_->Append(s->console, scratch_);
  s->open = false;
  boost::system::error_code ignored;
  if (s->pipe) s->pipe->close(ignored);
  s->buffer.reset();
  std::erase(paused_, s);
  if (s->file >= 0) sink_->Release(s->file);
}

void RankSet::Resume() {
  std::vector<Stream*> paused;
  paused.swap(paused_);
  for (Stream* s : paused) {
    if (s->open) Arm(s);
  }
  std::vector<RankHost*> hosts;
  hosts.swap(paused_hosts_);
  for (RankHost* host : hosts) host->Resume();
}

void RankSet::Reap() {
  // By id, looked up anew each time. Ranks started meanwhile are checked too.
  for (int id = 0; id < next_id_; ++id) {
    auto it = ranks_.find(id);
    if (it == ranks_.end()) continue;
    Rank* r = it->second.get();
    if (r->exited || r->remote != nullptr) continue;
    int status;
    pid_t got = waitpid(r->process.pid, &status, WNOHANG);
    if (got != r->process.pid) continue;
    r->exited = true;
    r->exited_at = std::chrono::steady_clock::now();
    r->status = ExitStatus::FromWaitStatus(status);
    spdlog::debug("rank {} on {} (pid {}) {}", r->rank, r->host, r->process.pid, r->status.Describe());
    r->drain_timer.expires_after(drain_grace_);
    r->drain_timer.async_wait([this, r](const boost::system::error_code& ec) {
      if (!ec) OnDrainTimer(r, 1);
    });
    MaybeFinish(r);
  }
}

void RankSet::OnDrainTimer(Rank* r, int stage) {
  if (r->finished) return;
  if (stage == 1) {
    spdlog::warn("rank {} exited but its output is still held open by processes it started; "
                    "killing its process group", r->rank);
    Kill(*r, SIGKILL);
    r->drain_timer.expires_after(std::chrono::seconds(1));
    r->drain_timer.async_wait([this, r](const boost::system::error_code& ec) {
      if (!ec) OnDrainTimer(r, 2);
    });
    return;
  }
  spdlog::warn("rank {}: a process outside its group holds its output open; closing it", r->rank);
  CloseStream(r->out.get());
  CloseStream(r->err.get());
  MaybeFinish(r);
}

void RankSet::MaybeFinish(Rank* r) {
  if (r->finished || !r->exited || r->out->open || r->err->open) return;
  r->finished = true;
  last_activity_ = std::chrono::steady_clock::now();
  r->drain_timer.cancel();
  if (r->remote == nullptr && !r->supervisor) {
    Kill(*r, SIGKILL);  // whatever the rank left behind in its group (its agent does it there)
    if (guardian_ != nullptr) guardian_->Forget(r->process.pid);
  }
  // Forgotten, and handed out, once the handler running now (a read, a timer, a reap) has
  // returned.
  std::weak_ptr<bool> alive = alive_;
  asio::post(*io_, [this, alive, id = r->id] {
    if (alive.lock()) Forget(id);
  });
  bool stopped = r->stop_sent_at && r->exited_at >= *r->stop_sent_at;
  finished_.push_back({r->id, r->rank, r->host, r->process.pid, r->status, r->local_rank, stopped,
                       r->exited_at, r->last_stderr});
  if (finished_.size() == 1 && on_finished_) {
    asio::post(*io_, [this, alive] {
      if (alive.lock() && on_finished_) on_finished_();
    });
  }
}

bool RankSet::NextFinished(Finished* finished) {
  if (finished_.empty()) return false;
  *finished = std::move(finished_.front());
  finished_.pop_front();
  --active_;
  if (finished->local_rank >= 0) {
    // Handed out: its owner knows it ended, so its slot no longer holds it.
    auto slot = slots_.find({finished->host, finished->local_rank});
    if (slot != slots_.end()) {
      std::erase(slot->second, finished->id);
      if (slot->second.empty()) slots_.erase(slot);
    }
  }
  return true;
}

int RankSet::starts(const std::string& host, int local_rank) const {
  auto it = starts_.find({host, local_rank});
  return it == starts_.end() ? 0 : it->second;
}

void RankSet::Forget(int id) { ranks_.erase(id); }

bool RankSet::IsStop(int sig) { return sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP; }

void RankSet::NoteStop(Rank* r, int sig) {
  if (!r->stop_sent_at && IsStop(sig)) {
    r->stop_sent_at = std::chrono::steady_clock::now();
  }
}

void RankSet::Kill(const Rank& r, int sig) const {
  if (r.remote != nullptr) return r.remote->SignalRank(r.id, sig);
  if (r.supervisor) {
    kill(r.process.pid, sig);
  } else {
    kill(-r.process.pid, sig);  // its group: the parent made it at the spawn (setpgid), before this
  }
}

pid_t RankSet::pid(int id) const {
  auto it = ranks_.find(id);
  return it == ranks_.end() || it->second->finished ? -1 : it->second->process.pid;
}

std::vector<RankSet::Running> RankSet::Unfinished() const {
  std::vector<Running> out;
  for (const auto& [id, r] : ranks_) {
    if (!r->finished) {
      out.push_back({r->id, r->rank, r->host, r->process.pid, r->started, r->local_rank,
                     r->local_rank >= 0 ? starts(r->host, r->local_rank) : 1});
    }
  }
  return out;
}

void RankSet::Signal(int id, int sig) {
  auto it = ranks_.find(id);
  if (it == ranks_.end() || it->second->finished) return;
  if (IsStop(sig)) Reap();  // an exit that already happened is known as one before the stop
  NoteStop(it->second.get(), sig);
  Kill(*it->second, sig);
}

void RankSet::SignalAll(int sig) {
  if (IsStop(sig)) Reap();  // as Signal
  for (auto& [id, r] : ranks_) {
    if (r->finished) continue;
    NoteStop(r.get(), sig);
    Kill(*r, sig);
  }
}

}  // namespace etrun::launcher
