#include "launcher/agent/agent_link.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

namespace etrun::launcher::agent {

namespace asio = boost::asio;

namespace {

constexpr size_t kMaxPreamble = 1 << 20;  // a login that prints more is not reaching an agent
constexpr size_t kErrorLinesKept = 4;
constexpr int64_t kYearUs = int64_t{366} * 24 * 3600 * 1000 * 1000;  // longer than any agent runs

}  // namespace

const std::string& AgentImage::sha256() {
  if (!sha256_.empty()) return sha256_;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes_.data(), bytes_.size(), digest, &length, EVP_sha256(), nullptr);
  static const char kDigits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < length; ++i) {
    sha256_ += kDigits[digest[i] >> 4];
    sha256_ += kDigits[digest[i] & 15];
  }
  return sha256_;
}

AgentLink::AgentLink(asio::io_context* io, RankHostEvents* events, Options options)
    : io_(io),
      events_(events),
      options_(std::move(options)),
      timer_(*io),
      reap_timer_(*io),
      judge_(options_.lost_after_s, options_.unresponsive_after_s) {}

AgentLink::~AgentLink() {
  alive_.reset();
  timer_.cancel();
  reap_timer_.cancel();
  CloseStreams();
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void AgentLink::Begin(AgentTransport transport) {
  for (int fd : {transport.to_agent, transport.from_agent, transport.agent_stderr}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  to_.emplace(*io_, transport.to_agent);
  from_.emplace(*io_, transport.from_agent);
  if (transport.agent_stderr >= 0) err_.emplace(*io_, transport.agent_stderr);
  pid_ = transport.pid;
  transport_peer_ = std::move(transport.peer_acking);
  state_ = State::kStarting;
  began_ = std::chrono::steady_clock::now();
  last_tick_ = began_;
  script_ = options_.script;
  Flush();
  Read();
  if (err_) ReadStderr();
  Tick();
}

void AgentLink::Fail(const std::string& why) { Lose(why); }

void AgentLink::StartRank(int id, const std::string& command, const GpuShare& gpus) {
  if (state_ == State::kLost || state_ == State::kClosed) {
    events_->OnRemoteOutput(this, id, true, lost_line_);
    events_->OnRemoteExit(this, id, ExitStatus::Exited(kHostLost), std::chrono::steady_clock::now());
    return;
  }
  std::string frame;
  if (gpus.enabled()) AppendFrame(&frame, kGpus, static_cast<uint32_t>(id), GpuShareText(gpus));
  AppendFrame(&frame, kStart, static_cast<uint32_t>(id), command);
  Send(std::move(frame));
}

void AgentLink::SignalRank(int id, int sig) {
  if (state_ == State::kLost || state_ == State::kClosed) return;
  std::string frame;
  AppendFrame(&frame, kSignal, static_cast<uint32_t>(id), std::to_string(sig));
  Send(std::move(frame));
}

void AgentLink::ProbeRank(int id) {
  if (state_ == State::kLost || state_ == State::kClosed) return;
  std::string frame;
  AppendFrame(&frame, kProbe, static_cast<uint32_t>(id), "");
  Send(std::move(frame));
}

void AgentLink::CheckHost(const std::string& key, const std::string& rank_start, int slots) {
  if (state_ == State::kLost || state_ == State::kClosed) {
    events_->OnRemoteCheck(this, "lost\n" + lost_line_);
    return;
  }
  std::string frame;
  AppendFrame(&frame, kCheck, static_cast<uint32_t>(std::max(slots, 0)), key + "\n" + rank_start);
  Send(std::move(frame));
}

void AgentLink::CheckPeers(const std::string& peers) {
  if (state_ == State::kLost || state_ == State::kClosed) {
    if (!peers.empty()) events_->OnRemoteCheck(this, "lost\n" + lost_line_);
    return;
  }
  std::string frame;
  AppendFrame(&frame, kPeers, 0, peers);
  Send(std::move(frame));
}

bool AgentLink::RunDetached(const std::string& command) {
  if (state_ != State::kUp) return false;
  std::string frame;
  AppendFrame(&frame, kRun, 0, command);
  Send(std::move(frame));
  return true;
}

void AgentLink::Resume() {
  if (!paused_) return;
  paused_ = false;
  if (!reading_ && from_) Read();
}

void AgentLink::Read() {
  if (!from_ || reading_) return;
  reading_ = true;
  std::weak_ptr<bool> alive = alive_;
  from_->async_read_some(asio::buffer(buffer_, sizeof(buffer_)),
                         [this, alive](const boost::system::error_code& ec, size_t n) {
                           if (!alive.lock()) return;
                           reading_ = false;
                           if (ec == asio::error::operation_aborted) return;
                           if (n > 0) OnData(buffer_, n);
                           if (state_ == State::kLost || state_ == State::kClosed) return;
                           if (ec) return OnStreamEnd(0);
                           if (!paused_) Read();
                         });
}

void AgentLink::OnStreamEnd(int waited) {
  // A remote shell that ended says how (its exit status), and its last words (or the SSH
  // connection's failure) may still be on their way on stderr: give both a moment.
  if (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      shell_status_ = status;
    }
  }
  bool stderr_open = err_.has_value() && !err_ended_;
  if ((pid_ > 0 || stderr_open) && waited < 50) {
    reap_timer_.expires_after(std::chrono::milliseconds(20));
    std::weak_ptr<bool> alive = alive_;
    reap_timer_.async_wait([this, alive, waited](const boost::system::error_code& ec) {
      if (!ec && alive.lock() && state_ != State::kLost && state_ != State::kClosed) {
        OnStreamEnd(waited + 1);
      }
    });
    return;
  }
  std::string last = last_errors_.empty() ? "" : last_errors_.back();
  if (shell_status_) {
    int status = *shell_status_;
    if (WIFSIGNALED(status)) {
      return Lose(fmt::format("etrun: error: remote shell for {} was killed by signal {}: the host's "
                              "ranks are lost", options_.host, WTERMSIG(status)),
                  /*whole_line=*/true);
    }
    if (options_.via == Via::kClusterStep) {  // a cluster's step (srun) exits 0 when its node fails
      return Lose(fmt::format("etrun: error: the {} step on {} ended (exit {}) without the rank's exit "
                              "status: its node failed, or its step or allocation was cancelled; the "
                              "host's ranks are lost{}", options_.step, options_.host, WEXITSTATUS(status),
                              last.empty() ? "" : " (" + last + ")"),
                  /*whole_line=*/true);
    }
    if (state_ == State::kStarting && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      return Lose("the remote shell ended before etrun's agent ran" + (last.empty() ? "" : ": " + last));
    }
    return Lose(fmt::format("etrun: error: the remote shell for {} ended (exit {}) before its ranks did: "
                            "the host's ranks are lost{}", options_.host, WEXITSTATUS(status),
                            last.empty() ? "" : " (" + last + ")"),
                /*whole_line=*/true);
  }
  // Over SSH, the connection's own failure is already one line of etrun's.
  if (last.starts_with("etrun: error: ")) return Lose(last, /*whole_line=*/true);
  std::string why = state_ == State::kUp ? "the agent's connection closed" : "the agent did not start";
  Lose(last.empty() ? why : why + ": " + last);
}

void AgentLink::OnData(const char* data, size_t n) {
  if (state_ == State::kStarting) return OnPreamble(data, n);
  last_heard_ = std::chrono::steady_clock::now();
  if (!reader_.Feed({data, n}, [this](Frame& f) { OnFrame(f); })) {
    Lose("the agent's stream is garbled");
  }
}

void AgentLink::OnPreamble(const char* data, size_t n) {
  preamble_.append(data, n);
  size_t start = 0;
  while (state_ == State::kStarting) {
    size_t end = preamble_.find('\n', start);
    if (end == std::string::npos) break;
    std::string_view line(preamble_.data() + start, end - start);
    start = end + 1;
    if (line.starts_with(kHelloLine)) {
      std::string id(line.substr(sizeof(kHelloLine) - 1));
      spdlog::debug("{}: the agent there is build {}", options_.host, id);
      state_ = State::kUp;
      last_heard_ = std::chrono::steady_clock::now();
      spdlog::debug("{}: agent up after {:.3f} s", options_.host,
                    std::chrono::duration<double>(last_heard_ - began_).count());
      std::string rest = preamble_.substr(start);
      preamble_.clear();
      preamble_.shrink_to_fit();
      Flush();
      if (!rest.empty()) OnData(rest.data(), rest.size());
      return;
    }
    if (line.starts_with(kNeedLine)) {
      if (options_.image == nullptr) return Lose("no etrun agent on the host");
      spdlog::debug("{}: no usable etrun there; sending this one", options_.host);
      SendImage();
      continue;
    }
    spdlog::debug("{} login: {}", options_.host, line);
  }
  preamble_.erase(0, start);
  if (preamble_.size() > kMaxPreamble) Lose("no etrun agent answered (the login printed 1 MB)");
}

void AgentLink::OnFrame(Frame& f) {
  if (state_ != State::kUp) return;
  int id = static_cast<int>(f.id);
  switch (f.op) {
    case kStdout:
    case kStderr:
      if (!events_->OnRemoteOutput(this, id, f.op == kStderr, f.data)) paused_ = true;
      return;
    case kExit: {
      ExitStatus status;
      int64_t at_us = -1;
      if (!ParseExitText(f.data, &status, &at_us)) status = ExitStatus::Exited(kHostLost);
      auto now = std::chrono::steady_clock::now();
      auto exited_at = now;
      if (at_us >= 0 && agent_epoch_) {  // at most a year of the agent's clock: no overflow
        int64_t us = std::min<int64_t>(at_us, kYearUs);
        exited_at = std::min(now, *agent_epoch_ + std::chrono::microseconds(us));
      }
      events_->OnRemoteExit(this, id, status, exited_at);
      return;
    }
    case kFacts: {
      facts_ = f.data;
      // The agent's clock as it said hello: its exit times translate to ours from here (late by
      // the hello's way over, alike for every rank of the host).
      size_t at = facts_.find("clock_us=");
      if (at != std::string::npos && (at == 0 || facts_[at - 1] == '\n')) {
        int64_t us = std::clamp<int64_t>(atoll(facts_.c_str() + at + 9), 0, kYearUs);
        agent_epoch_ = std::chrono::steady_clock::now() - std::chrono::microseconds(us);
      }
      return;
    }
    case kRankFacts:
      return events_->OnRemoteFacts(this, id, f.data);
    case kChecked:
      return events_->OnRemoteCheck(this, f.data);
    case kAlive:
      judge_.Beat(std::chrono::steady_clock::now());
      return;
    case kNewline:
      return;
    case kTerm:
      spdlog::debug("{}: the agent got SIGTERM", options_.host);
      // Now, not through a signal to etrun: a signal is taken in after the exits this read may
      // hold, and a rank that drained on the cluster's SIGTERM would read as finished.
      if (options_.on_term) options_.on_term();
      return;
    default:
      return Lose(fmt::format("the agent sent an unknown frame ({:d})", static_cast<int>(f.op)));
  }
}

void AgentLink::ReadStderr() {
  std::weak_ptr<bool> alive = alive_;
  err_->async_read_some(asio::buffer(err_buffer_, sizeof(err_buffer_)),
                        [this, alive](const boost::system::error_code& ec, size_t n) {
                          if (!alive.lock() || ec == asio::error::operation_aborted) return;
                          for (size_t i = 0; i < n; ++i) {
                            char c = err_buffer_[i];
                            if (c != '\n') {
                              if (err_line_.size() < 4096) err_line_ += c;
                              continue;
                            }
                            if (err_line_.starts_with("etrun agent on ")) {
                              spdlog::warn("{}", err_line_.substr(6));  // the agent's own words
                            } else {
                              spdlog::debug("{} stderr: {}", options_.host, err_line_);
                            }
                            if (!err_line_.empty()) last_errors_.push_back(std::move(err_line_));
                            if (last_errors_.size() > kErrorLinesKept) last_errors_.pop_front();
                            err_line_.clear();
                          }
                          if (ec) {
                            if (!err_line_.empty()) last_errors_.push_back(std::move(err_line_));
                            err_ended_ = true;
                            return;
                          }
                          ReadStderr();
                        });
}

void AgentLink::Send(std::string bytes) {
  outgoing_ += bytes;
  Flush();
}

void AgentLink::SendImage() {
  if (options_.image->bytes().empty()) return Lose("this etrun carries no agent to send");
  image_queued_ = true;
  Flush();
}

void AgentLink::Flush() {
  if (writing_ || !to_) return;
  std::weak_ptr<bool> alive = alive_;
  auto done = [this, alive](const boost::system::error_code& ec, size_t) {
    if (!alive.lock()) return;
    writing_ = false;
    if (ec) {
      // The read side sees the stream end and says why; nothing more can be sent.
      script_.clear();
      outgoing_.clear();
      image_queued_ = false;
      return;
    }
    Flush();
  };
  if (image_queued_) {
    image_queued_ = false;
    writing_ = true;
    std::string_view bytes = options_.image->bytes();
    asio::async_write(*to_, asio::buffer(bytes.data(), bytes.size()), done);
    return;
  }
  // The bootstrap goes first; frames wait until the agent runs (what comes before it is the
  // bootstrap's input).
  std::string* next = !script_.empty() ? &script_ : state_ == State::kUp ? &outgoing_ : nullptr;
  if (next == nullptr || next->empty()) return;
  in_flight_.clear();
  in_flight_.swap(*next);
  writing_ = true;
  asio::async_write(*to_, asio::buffer(in_flight_), done);
}

void AgentLink::Tick() {
  timer_.expires_after(std::chrono::seconds(1));
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || !alive.lock()) return;
    auto now = std::chrono::steady_clock::now();
    // A tick that comes late found this loop busy elsewhere: what the agent sent meanwhile may
    // still wait to be read. Judge silence on the next tick then (one pass at a time, so a loop
    // that is always late still finds a lost host).
    bool late = now - last_tick_ > std::chrono::milliseconds(1500) && !passed_;
    passed_ = late;
    last_tick_ = now;
    if (state_ == State::kStarting &&
        now - began_ > std::chrono::duration<double>(options_.start_timeout_s)) {
      return Lose(fmt::format("etrun's agent did not start within {:g} s", options_.start_timeout_s));
    }
    if (state_ == State::kUp) {
      // Unread while the console is congested: what the agent says waits for us, not it for us.
      if (paused_) last_heard_ = now;
      if (!late && Judge(now)) return;
      std::string frame;
      AppendFrame(&frame, kPing, 0, "");
      Send(std::move(frame));
    }
    if (state_ == State::kStarting || state_ == State::kUp) Tick();
  });
}

bool AgentLink::Judge(std::chrono::steady_clock::time_point now) {
  double silent = std::chrono::duration<double>(now - last_heard_).count();
  std::optional<bool> acking;
  if (transport_peer_ && silent > options_.lost_after_s) {
    acking = transport_peer_(std::chrono::milliseconds(static_cast<int64_t>(options_.lost_after_s * 1000)));
  }
  switch (judge_.Judge(silent, acking)) {
    case SilenceJudge::Verdict::kFine:
      said_late_ = false;
      return false;
    case SilenceJudge::Verdict::kLate:
      if (!said_late_ && options_.on_late) options_.on_late(options_.host, silent, options_.unresponsive_after_s);
      said_late_ = true;
      return false;
    case SilenceJudge::Verdict::kLost:
      break;
  }
  if (silent > options_.unresponsive_after_s) {
    // Alive by every sign but its agent's: busy for longer than a busy host may be, or frozen.
    Lose(fmt::format("etrun: error: no answer from {}'s agent for {:.0f} s, though the host is still "
                     "reachable (--unresponsive-host-timeout {:g}): the host's ranks are lost",
                     options_.host, silent, options_.unresponsive_after_s),
         /*whole_line=*/true);
  } else if (options_.via != Via::kSsh) {
    Lose(fmt::format("etrun: error: no answer from {} for {:g} s (--lost-host-timeout): the "
                     "host's ranks are lost", options_.host, options_.lost_after_s),
         /*whole_line=*/true);
  } else {
    Lose(fmt::format("connection lost: no answer for {:g} s (--lost-host-timeout)", options_.lost_after_s));
  }
  return true;
}

void AgentLink::Lose(const std::string& why, bool whole_line) {
  if (state_ == State::kLost || state_ == State::kClosed) return;
  state_ = State::kLost;
  why_ = why;
  lost_line_ = (whole_line ? why : "etrun: error: " + options_.label + ": " + why) + "\n";
  lost_at_ = std::chrono::steady_clock::now();
  spdlog::debug("{}: {}", options_.label, why);
  timer_.cancel();
  CloseStreams();
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // a remote shell that still runs would hold nothing of use
    ReapLater(0);
  }
  // One line per host, not per rank: its first rank says why; every rank exits 255.
  events_->OnHostLost(this, lost_line_, ExitStatus::Exited(kHostLost));
}

void AgentLink::CloseStreams() {
  boost::system::error_code ignored;
  if (to_) to_->close(ignored);
  if (from_) from_->close(ignored);
  if (err_) err_->close(ignored);
  to_.reset();
  from_.reset();
  err_.reset();
}

void AgentLink::ReapLater(int attempts) {
  int status;
  pid_t got = waitpid(pid_, &status, WNOHANG);
  if (got == pid_ || (got < 0 && errno == ECHILD)) {
    pid_ = -1;
    return;
  }
  if (attempts == 20) kill(-pid_, SIGKILL);
  reap_timer_.expires_after(std::chrono::milliseconds(100));
  std::weak_ptr<bool> alive = alive_;
  reap_timer_.async_wait([this, alive, attempts](const boost::system::error_code& ec) {
    if (!ec && alive.lock()) ReapLater(attempts + 1);
  });
}

void AgentLink::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  timer_.cancel();
  reap_timer_.cancel();
  CloseStreams();  // EOF: the agent stops what still runs and exits
}

void AgentLink::Reap(std::chrono::steady_clock::time_point until) {
  if (pid_ <= 0) return;
  int status;
  while (true) {
    pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_ || (got < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= until) {
      kill(-pid_, SIGKILL);
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    usleep(10000);
  }
  pid_ = -1;
}

}  // namespace etrun::launcher::agent
