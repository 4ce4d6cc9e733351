#include "launcher/preflight/probe.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>

namespace etrun::launcher::preflight {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One peer's connection to the server.
struct Conn {
  smoke::Fd fd;
  Clock::time_point accepted;
  std::string key;       // what it sent of the key so far
  bool proven = false;   // it sent the whole key
  bool sinking = false;  // after 'b': counting the stream
  uint64_t count = 0;
  std::string out;       // answers not yet sent
  bool closing = false;  // close once `out` is sent
};

// Sends what it can of c->out; false when the connection is done with (an error, or all sent
// of a closing one).
bool SendPending(Conn* c) {
  while (!c->out.empty()) {
    ssize_t n = send(c->fd.get(), c->out.data(), c->out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c->out.erase(0, static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      return true;
    } else {
      return false;
    }
  }
  return !c->closing;
}

// Compares in a time that does not depend on where they differ.
bool SameKey(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Takes in what the peer sent; false when the connection is done with (it is, at once, unless
// its first bytes are `key`).
bool Receive(Conn* c, const std::string& key) {
  char buffer[64 << 10];
  for (int reads = 0; reads < 16; ++reads) {  // others get their turn
    ssize_t n = recv(c->fd.get(), buffer, sizeof(buffer), 0);
    if (n == 0) {
      if (!c->sinking) return false;
      char length[8];
      for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((c->count >> (8 * i)) & 0xff);
      c->out.append(length, sizeof(length));
      c->closing = true;
      return SendPending(c);
    }
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    ssize_t i = 0;
    if (!c->proven) {
      size_t take = std::min(static_cast<size_t>(n), key.size() - c->key.size());
      c->key.append(buffer, take);
      i = static_cast<ssize_t>(take);
      if (c->key.size() < key.size()) continue;
      if (!SameKey(c->key, key)) return false;
      c->proven = true;
    }
    if (c->sinking) {
      c->count += static_cast<uint64_t>(n - i);
      continue;
    }
    for (; i < n; ++i) {
      if (buffer[i] == 'r') {
        c->out += 'r';
      } else if (buffer[i] == 'b') {
        c->sinking = true;
        c->count += static_cast<uint64_t>(n - i - 1);
        break;
      } else {
        return false;  // not a probe
      }
    }
    if (!SendPending(c)) return false;
  }
  return true;
}

PeerResult Probe(const PeerTarget& target, const std::string& key, const ProbeLimits& limits,
                 bool stream, smoke::Fd* kept) {
  PeerResult r;
  r.host = target.host;
  r.where = target.ip + ":" + std::to_string(target.port);
  auto start = Clock::now();
  smoke::Fd fd;
  if (!smoke::ConnectIpv4(target.ip, target.port, start + limits.timeout, &fd, &r.error)) {
    if (r.error == "cannot connect to " + r.where + ": timed out") {
      r.error = "cannot connect to " + r.where + ": no answer in " +
                std::to_string(limits.timeout.count()) + " ms";
    }
    return r;
  }
  r.connect_ms = MsSince(start);
  std::string err;
  if (!smoke::WriteAll(fd, key, Clock::now() + limits.timeout, &err)) {
    r.error = "cannot send the pre-flight's key to " + r.where + ": " + err;
    return r;
  }
  for (int i = 0; i < limits.round_trips; ++i) {
    auto sent = Clock::now();
    char c = 'r';
    if (!smoke::WriteAll(fd, std::string_view(&c, 1), sent + limits.timeout, &err) ||
        !smoke::ReadExact(fd, &c, 1, sent + limits.timeout, &err)) {
      r.error = "round trip to " + r.where + ": " + (err == "timed out" ? "no answer in " +
                std::to_string(limits.timeout.count()) + " ms" : err);
      r.rtt_ms = -1;  // not reached, whatever answered before
      return r;
    }
    double ms = MsSince(sent);
    r.rtt_ms = r.rtt_ms < 0 ? ms : std::min(r.rtt_ms, ms);
  }
  if (stream) *kept = std::move(fd);
  return r;
}

// Streams for limits.stream_for (or stream_bytes) on `fd`, a probed connection; sets r->mbit_s.
void Stream(const smoke::Fd& fd, const ProbeLimits& limits, PeerResult* r) {
  // A small send buffer: the stream's time is the link's, not how fast the kernel takes bytes in.
  int buffer_size = 256 << 10;
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &buffer_size, sizeof(buffer_size));
  static const std::string chunk(64 << 10, 'x');
  auto start = Clock::now();
  auto stop = start + limits.stream_for;
  auto deadline = stop + limits.timeout;
  std::string err;
  uint64_t sent = 0;
  r->mbit_s = 0;  // until it is through: a stream that fails moved nothing in time
  if (!smoke::WriteAll(fd, "b", deadline, &err)) {
    r->error = "stream to " + r->where + ": " + err;
    return;
  }
  while (Clock::now() < stop && sent < limits.stream_bytes) {
    ssize_t n = send(fd.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      pollfd p{fd.get(), POLLOUT, 0};
      poll(&p, 1, std::max(1, smoke::PollTimeoutMs(stop)));
    } else {
      r->error = "stream to " + r->where + ": " + std::strerror(errno);
      return;
    }
  }
  shutdown(fd.get(), SHUT_WR);
  char length[8];
  if (!smoke::ReadExact(fd, length, sizeof(length), deadline, &err)) {
    r->error = "stream to " + r->where + ": " + (err == "timed out" ? "its " + std::to_string(sent) +
               " bytes not taken in " + std::to_string((limits.stream_for + limits.timeout).count()) +
               " ms" : err);
    return;
  }
  uint64_t got = 0;
  for (int i = 0; i < 8; ++i) got |= uint64_t{static_cast<unsigned char>(length[i])} << (8 * i);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (got != sent) {
    r->error = "stream to " + r->where + ": " + std::to_string(got) + " of " + std::to_string(sent) +
               " bytes arrived";
    return;
  }
  r->mbit_s = seconds > 0 ? static_cast<double>(got) * 8 / seconds / 1e6 : 0;
}

// Runs fn(i) for i in [0, n), `width` threads at a time, until `cancel` is set.
template <typename Fn>
void InBatches(size_t n, size_t width, const std::atomic<bool>* cancel, Fn fn) {
  for (size_t begin = 0; begin < n; begin += width) {
    if (cancel != nullptr && cancel->load()) return;
    std::vector<std::thread> threads;
    for (size_t i = begin; i < std::min(n, begin + width); ++i) threads.emplace_back(fn, i);
    for (std::thread& t : threads) t.join();
  }
}

}  // namespace

ProbeServer::~ProbeServer() {
  if (thread_.joinable()) {
    char c = 'q';
    if (write(wake_[1], &c, 1) < 0) {
      // The pipe is ours and empty: a write cannot fail; the join below would then wait.
    }
    thread_.join();
  }
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

std::string NewProbeKey() {
  unsigned char bytes[kProbeKeyLength / 2];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      std::abort();  // Linux 3.17 and later; nothing sensible to fall back on for a key
    }
  }
  static const char kHex[] = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 0xf];
  }
  return key;
}

bool IsProbeKey(std::string_view key) {
  return key.size() == kProbeKeyLength &&
         std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool ProbeServer::Start(const std::string& key, std::string* err) {
  if (!IsProbeKey(key)) {  // an empty one would let every connection through
    *err = "cannot listen for probes: no key for them";
    return false;
  }
  key_ = key;
  if (!smoke::Listen(&listener_, &port_, err, SOMAXCONN)) return false;
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    *err = std::string("cannot listen for probes: pipe: ") + std::strerror(errno);
    return false;
  }
  thread_ = std::thread([this] { Serve(); });
  return true;
}

void ProbeServer::Serve() {
  constexpr size_t kMaxConnections = 4096;
  // Connections that have not sent the key yet: past this many, the oldest goes for a new one,
  // so that someone who opens connections and sends nothing cannot crowd out the run's probes
  // (which send the key at once).
  constexpr size_t kMaxUnproven = 256;
  std::map<int, std::unique_ptr<Conn>> conns;
  std::vector<pollfd> polled;
  for (;;) {
    polled.clear();
    polled.push_back({wake_[0], POLLIN, 0});
    polled.push_back({listener_.get(), POLLIN, 0});
    for (const auto& [fd, c] : conns) {
      // A closing one has its stream's length to send, nothing more to read.
      short events = static_cast<short>((c->closing ? 0 : POLLIN) | (c->out.empty() ? 0 : POLLOUT));
      polled.push_back({fd, events, 0});
    }
    // Connections that have not proven the key yet are closed at their deadline.
    int timeout = -1;
    for (const auto& [fd, c] : conns) {
      if (!c->proven) {
        int ms = smoke::PollTimeoutMs(c->accepted + kKeyWithin);
        timeout = timeout < 0 ? ms : std::min(timeout, ms);
      }
    }
    if (poll(polled.data(), polled.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (polled[0].revents != 0) return;
    if (polled[1].revents != 0) {
      for (;;) {
        int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        size_t unproven = 0;
        auto oldest = conns.end();
        for (auto it = conns.begin(); it != conns.end(); ++it) {
          if (it->second->proven) continue;
          ++unproven;
          if (oldest == conns.end() || it->second->accepted < oldest->second->accepted) oldest = it;
        }
        if (unproven >= kMaxUnproven) conns.erase(oldest);
        if (conns.size() >= kMaxConnections) {
          close(fd);
          continue;
        }
        auto c = std::make_unique<Conn>();
        c->fd = smoke::Fd(fd);
        c->accepted = Clock::now();
        conns[fd] = std::move(c);
      }
    }
    for (size_t i = 2; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      auto it = conns.find(polled[i].fd);
      if (it == conns.end()) continue;
      Conn* c = it->second.get();
      bool keep = true;
      if (polled[i].revents & POLLOUT) keep = SendPending(c);
      if (keep && !c->closing && (polled[i].revents & (POLLIN | POLLHUP | POLLERR))) keep = Receive(c, key_);
      if (keep && c->closing && (polled[i].revents & (POLLHUP | POLLERR))) keep = false;
      if (!keep) conns.erase(it);
    }
    auto now = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {
      it = !it->second->proven && now >= it->second->accepted + kKeyWithin ? conns.erase(it) : std::next(it);
    }
  }
}

std::vector<PeerResult> ProbePeers(const std::vector<PeerTarget>& targets, const std::string& key,
                                   const ProbeLimits& limits, const std::atomic<bool>* cancel) {
  std::vector<PeerResult> results(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    results[i].host = targets[i].host;
    results[i].where = targets[i].ip + ":" + std::to_string(targets[i].port);
    results[i].error = "cancelled";
  }
  std::vector<smoke::Fd> kept(targets.size());
  constexpr size_t kWidth = 64;
  InBatches(targets.size(), kWidth, cancel, [&](size_t i) {
    results[i] = Probe(targets[i], key, limits, targets[i].stream, &kept[i]);
  });
  std::vector<size_t> streams;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (kept[i].valid()) streams.push_back(i);
  }
  InBatches(streams.size(), kWidth, cancel, [&](size_t k) {
    size_t i = streams[k];
    Stream(kept[i], limits, &results[i]);
  });
  return results;
}

std::string PeerTargetsText(const std::vector<PeerTarget>& targets) {
  std::string text;
  for (const PeerTarget& t : targets) {
    text += t.host + " " + t.ip + " " + std::to_string(t.port) + (t.stream ? " 1\n" : " 0\n");
  }
  return text;
}

bool ParsePeerTargets(std::string_view text, std::vector<PeerTarget>* targets) {
  targets->clear();
  while (!text.empty()) {
    size_t end = text.find('\n');
    if (end == std::string_view::npos) return false;
    std::string line(text.substr(0, end));
    text.remove_prefix(end + 1);
    char host[256], ip[64];
    int port = 0, stream = 0, used = 0;
    if (std::sscanf(line.c_str(), "%255s %63s %d %d%n", host, ip, &port, &stream, &used) != 4 ||
        static_cast<size_t>(used) != line.size() || port <= 0 || port > 65535 || stream < 0 || stream > 1) {
      return false;
    }
    targets->push_back({host, ip, port, stream == 1});
  }
  return true;
}

std::string PeerResultLine(const PeerResult& r) {
  char figures[96];
  std::snprintf(figures, sizeof(figures), "%.3f %.3f %.1f", r.connect_ms, r.rtt_ms, r.mbit_s);
  std::string line = "peer " + r.host + " " + r.where + " " + figures;
  if (!r.ok()) {
    std::string text = r.error;
    std::replace(text.begin(), text.end(), '\n', ' ');
    line += " error " + text;
  }
  return line + "\n";
}

bool ParsePeerResultLine(std::string_view line, PeerResult* r) {
  if (!line.starts_with("peer ")) return false;
  std::string text(line.substr(5));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  *r = PeerResult{};
  char host[256], where[64];
  int used = 0;
  if (std::sscanf(text.c_str(), "%255s %63s %lf %lf %lf%n", host, where, &r->connect_ms, &r->rtt_ms,
                  &r->mbit_s, &used) != 5) {
    return false;
  }
  r->host = host;
  r->where = where;
  std::string rest = text.substr(static_cast<size_t>(used));
  if (rest.starts_with(" error ")) {
    r->error = rest.substr(7);
    if (r->error.empty()) r->error = "failed";
  } else if (!rest.empty()) {
    return false;
  }
  return true;
}

}  // namespace etrun::launcher::preflight
