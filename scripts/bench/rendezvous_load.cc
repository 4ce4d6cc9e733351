// etrun_rendezvous_bench: load for etrun's rendezvous HTTP server (rendezvous/http_server.h over
// KvHandler and KvStore), shaped like Horovod's Gloo workers (spec §4.5-4.7).
//
//   serve [--port P] [--server-threads T]
//     The real server on 127.0.0.1 (plan: 16 ranks on "localhost"), /global/0 preset to 100
//     bytes. Prints "port <N>" and serves until SIGINT or SIGTERM. For wrk.
//   scope N [--value-bytes B] [--poll-ms 10] [--threads T] [--stagger-ms 0] [--straggler-ms 0]
//           [--server-threads T] [--hold-ms 1000] [--deadline-s 120] [--graceful-close]
//     One `global` scope rendezvous of N workers against the real server, which runs in-process
//     as etrun runs it: on T threads of its own (default: one per core, as etrun's
//     --rendezvous-threads), GETs of missing keys held up to --hold-ms (etrun's bound; 0: answered
//     at once). --stagger-ms spreads every worker's start uniformly over that time;
//     --straggler-ms starts one worker (rank N/2) that late and the rest at once. The server's
//     CPU is the sum over its threads. With --connect P the workers use the store of a running
//     etrun job on 127.0.0.1:P instead, in scope --scope-name (an ad-hoc scope there: it loses a
//     key per DELETE, and without Gloo's barrier a DELETE would take a value from peers still
//     reading it, so the workers send none), and no server CPU is measured. The workers are
//     state machines on `--threads` event loops (default: one per core, as the floor's
//     clients), each doing what Gloo's connectFullMesh plus Horovod's HTTPStore do:
//     PUT rank_<r>, GET rank_<i> for i<r, PUT <r> (B bytes; default 136*(N-1), the size of
//     N-1 Gloo TCP pair addresses), then for each i != r poll GET <i> every poll-ms until 200
//     and GET it once more, then DELETE <r>. Every request is a new connection carrying the
//     C++ client's exact bytes. Values derive from the rank, so every fetched byte is checked.
//     Prints a report and a final "RESULT key=value ..." line; exits 1 on any error, corrupted
//     value, deadline miss, or a `global` scope left uncleared after the N DELETEs.
//
// Sockets: Horovod's client closes first, so TIME_WAIT lands on the client. At tens of
// thousands of connections per second the 28k ephemeral ports of one loopback address run out
// within a second and connect() fails or crawls through the port search. So the client closes
// with SO_LINGER 0 (RST, no TIME_WAIT) once it has the whole response; the server then sees
// a reset instead of EOF while it waits for a keep-alive request, which it treats the same
// (closes).
// `--graceful-close` sends a FIN instead, as the real client does; use it for small N only.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "rendezvous/assign.h"
#include "rendezvous/event_loop.h"
#include "rendezvous/http_server.h"
#include "rendezvous/kv_handler.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/service_threads.h"

namespace etrun::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

struct Options {
  int n = 0;
  std::optional<size_t> value_bytes;  // default: 136 * (n - 1)
  int poll_ms = 10;
  int threads = 0;  // 0: one per core
  int stagger_ms = 0;
  int straggler_ms = 0;
  int server_threads = 0;  // 0: one per core
  int hold_ms = 1000;
  int connect_port = 0;  // a running job's store instead of an in-process one
  std::string scope = "global";
  int deadline_s = 120;
  bool graceful_close = false;
  int port = 0;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A rank's value: splitmix64 bytes seeded by the rank, so a swapped or damaged value shows.
std::string ValueOf(int rank, size_t bytes) {
  std::string v(bytes, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(v.data() + i, &z, std::min<size_t>(8, bytes - i));
  }
  return v;
}

// etrun's real server stack: the store, its HTTP routes, the epoll server, on threads of its own
// with held GETs, as launcher/rendezvous_service.h runs it.
class ServerStack {
 public:
  ServerStack(int world_size, int hold_ms, int threads)
      : thread_count_(rendezvous::ServiceThreadCount(threads)),
        threads_(thread_count_),
        deadlines_(&threads_.loop()),
        handler_(&store_, &deadlines_, std::chrono::milliseconds(hold_ms)),
        server_(threads_.loops(), &handler_) {
    std::vector<rendezvous::SlotInfo> plan;
    std::string err;
    rendezvous::Assign({{"localhost", world_size}}, world_size, std::nullopt, &plan, &err);
    store_.Init(plan);
  }
  bool Listen(int port, std::string* err) { return server_.Listen("127.0.0.1", port, err); }
  int port() const { return server_.port(); }
  void Start() { threads_.Start(); }
  // Joins the threads; then the server's CPU time is known.
  void Stop() {
    threads_.Stop();
    server_.Stop();
  }
  int thread_count() const { return thread_count_; }
  double cpu_seconds() const { return threads_.cpu_seconds(); }
  double user_cpu_seconds() const { return threads_.user_cpu_seconds(); }
  rendezvous::KvStore& store() { return store_; }

 private:
  int thread_count_;
  rendezvous::ServiceThreads threads_;
  rendezvous::LoopDeadlines deadlines_;
  rendezvous::KvStore store_;
  rendezvous::KvHandler handler_;
  rendezvous::HttpServer server_;
};

// What all simulated workers share. Read-only during the run except the atomics and `error`.
struct Shared {
  Options opt;
  std::vector<rendezvous::EventLoop*> loops;  // the workers' threads
  sockaddr_in server{};
  std::vector<std::string> values;  // rank -> value
  std::vector<std::string> hosts;   // rank -> body of rank_<r>
  Clock::time_point start;
  std::atomic<int> done{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::string error;  // the first failure, guarded by error_mu

  void Fail(const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(error_mu);
      if (error.empty()) error = what;
    }
    failed = true;
    Stop();
  }
  void Stop() {
    for (rendezvous::EventLoop* loop : loops) loop->Stop();
  }
};

// One simulated Horovod worker, on one of the client threads' event loops. As the C++ client
// does it (blocking sockets, one request at a time), each request connects and sends with
// blocking calls, which loopback completes at once; only the wait for the answer goes through
// the loop (epoll), so that 256 workers share a thread or two instead of a thread each.
class Worker : public rendezvous::Watcher {
 public:
  Worker(Shared* shared, int rank, rendezvous::EventLoop* loop)
      : shared_(shared), rank_(rank), loop_(loop), buf_(4096) {}
  ~Worker() {
    if (fd_ >= 0) close(fd_);
  }

  // Before the loop runs, or on its thread.
  void Start(std::chrono::microseconds delay) {
    loop_->After(std::chrono::ceil<std::chrono::milliseconds>(delay), [this] {
      start_ = Clock::now();
      Send();
    });
  }

  uint64_t requests = 0, not_found = 0, bytes_received = 0;
  Clock::time_point keys_at, deleted_at;
  std::vector<uint32_t> latency_us;

 private:
  enum class Step { kPutHost, kGetHost, kPutValue, kPoll, kFetch, kDelete, kDone };

  void Send() {
    if (step_ == Step::kDelete && shared_->opt.connect_port > 0) {  // see --connect
      deleted_at = Clock::now();
      if (keys_at == Clock::time_point()) keys_at = deleted_at;
      step_ = Step::kDone;
      if (++shared_->done == shared_->opt.n) shared_->Stop();
      return;
    }
    const char* method = "GET";
    std::string key = std::to_string(peer_);
    std::string_view body;
    switch (step_) {
      case Step::kPutHost:
        method = "PUT";
        key = "rank_" + std::to_string(rank_);
        body = shared_->hosts[rank_];
        break;
      case Step::kGetHost:
        key = "rank_" + key;
        break;
      case Step::kPutValue:
        method = "PUT";
        key = std::to_string(rank_);
        body = shared_->values[rank_];
        break;
      case Step::kDelete:
        method = "DELETE";
        key = std::to_string(rank_);
        break;
      default:
        break;
    }
    request_.clear();
    request_.append(method).append(" /").append(shared_->opt.scope).append("/").append(key);
    request_.append(" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ");
    request_.append(std::to_string(body.size())).append("\r\n\r\n").append(body);
    have_ = header_len_ = need_ = 0;
    status_ = 0;
    sent_at_ = Clock::now();
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Fail(std::string("socket: ") + std::strerror(errno));
    linger rst{1, 0};
    if (!shared_->opt.graceful_close) setsockopt(fd_, SOL_SOCKET, SO_LINGER, &rst, sizeof rst);
    const auto* to = reinterpret_cast<const sockaddr*>(&shared_->server);
    int rc;
    while ((rc = connect(fd_, to, sizeof shared_->server)) != 0 && errno == EINTR) {
    }
    if (rc != 0) return Fail(std::string("connect: ") + std::strerror(errno));
    for (size_t sent = 0; sent < request_.size();) {
      ssize_t n = send(fd_, request_.data() + sent, request_.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Fail(std::string("send: ") + std::strerror(errno));
      sent += static_cast<size_t>(n);
    }
    if (!loop_->Add(fd_, EPOLLIN | EPOLLRDHUP | EPOLLET, this)) {
      return Fail(std::string("epoll: ") + std::strerror(errno));
    }
  }

  // The answer's bytes came (edge-triggered: read until none is left or the answer is whole).
  void OnEvents(uint32_t) override {
    while (fd_ >= 0) {
      if (have_ == buf_.size()) buf_.resize(buf_.size() * 2);
      ssize_t n = recv(fd_, buf_.data() + have_, buf_.size() - have_, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) return Fail(n == 0 ? "closed before the whole response" : std::strerror(errno));
      if (!OnRead(static_cast<size_t>(n))) return;
    }
  }

  // Reads as HTTPRequest does: status = second token of the first line; the body is exactly
  // `Content-Length` (spelled so) bytes. True while the answer is incomplete.
  bool OnRead(size_t n) {
    have_ += n;
    bytes_received += n;
    std::string_view got(buf_.data(), have_);
    if (header_len_ == 0) {
      size_t end = got.find("\r\n\r\n");
      if (end == std::string_view::npos && have_ > (16 << 10)) return Fail("header too long"), false;
      if (end != std::string_view::npos) {
        header_len_ = end + 4;
        std::string_view head = got.substr(0, end + 2);
        size_t sp = head.find(' ');
        if (sp == std::string_view::npos || head.size() < sp + 4) return Fail("bad status line"), false;
        std::from_chars(head.data() + sp + 1, head.data() + sp + 4, status_);
        size_t cl = head.find("\r\nContent-Length:");
        if (cl == std::string_view::npos) return Fail("response without Content-Length"), false;
        size_t pos = cl + 17, length = 0;
        while (pos < head.size() && head[pos] == ' ') ++pos;
        std::from_chars(head.data() + pos, head.data() + head.size(), length);
        need_ = header_len_ + length;
        if (buf_.size() < need_) buf_.resize(need_);
      }
    }
    if (header_len_ != 0 && have_ >= need_) {
      if (have_ > need_) return Fail("bytes after the announced Content-Length"), false;
      loop_->Forget(fd_);
      close(fd_);  // with SO_LINGER 0: a reset (see the top)
      fd_ = -1;
      ++requests;
      latency_us.push_back(static_cast<uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent_at_).count()));
      OnResponse(got.substr(header_len_));
      return false;
    }
    return true;
  }

  void OnResponse(std::string_view body) {
    const int n = shared_->opt.n;
    switch (step_) {
      case Step::kPutHost:
        if (status_ != 200) return Fail("status " + std::to_string(status_));
        peer_ = 0;
        step_ = rank_ > 0 ? Step::kGetHost : Step::kPutValue;
        break;
      case Step::kGetHost:  // 404 only feeds a hint inside Gloo; a 200 must be the right host
        if (status_ == 200 && body != shared_->hosts[peer_]) return Fail("wrong hostname value");
        if (status_ != 200 && status_ != 404) return Fail("status " + std::to_string(status_));
        if (++peer_ == rank_) step_ = Step::kPutValue;
        break;
      case Step::kPutValue:
        if (status_ != 200) return Fail("status " + std::to_string(status_));
        peer_ = rank_ == 0 ? 1 : 0;
        step_ = peer_ < n ? Step::kPoll : Step::kDelete;
        break;
      case Step::kPoll:
        if (status_ == 404) {
          ++not_found;
          if (Clock::now() - start_ > std::chrono::seconds(shared_->opt.deadline_s)) {
            return Fail("deadline passed waiting for key " + std::to_string(peer_));
          }
          return loop_->After(std::chrono::milliseconds(shared_->opt.poll_ms), [this] { Send(); });
        }
        if (!Check(body)) return;
        step_ = Step::kFetch;
        break;
      case Step::kFetch:
        if (!Check(body)) return;
        if (++peer_ == rank_) ++peer_;
        if (peer_ >= n) {
          keys_at = Clock::now();
          step_ = Step::kDelete;
        } else {
          step_ = Step::kPoll;
        }
        break;
      case Step::kDelete:
        if (status_ != 200) return Fail("status " + std::to_string(status_));
        deleted_at = Clock::now();
        step_ = Step::kDone;
        if (keys_at == Clock::time_point()) keys_at = deleted_at;
        if (++shared_->done == shared_->opt.n) shared_->Stop();
        return;
      case Step::kDone:
        return;
    }
    Send();
  }

  // A 200 whose body is rank peer_'s value, byte for byte.
  bool Check(std::string_view body) {
    const std::string& want = shared_->values[peer_];
    if (status_ != 200) {
      Fail("status " + std::to_string(status_));
    } else if (body.size() != want.size()) {
      Fail(std::to_string(body.size()) + " bytes, expected " + std::to_string(want.size()));
    } else if (body != want) {
      Fail("value differs from what rank " + std::to_string(peer_) + " put");
    } else {
      return true;
    }
    return false;
  }

  void Fail(const std::string& what) {
    static const char* kSteps[] = {"PUT", "GET", "PUT", "GET (poll)", "GET", "DELETE", "(done)"};
    const char* step = kSteps[static_cast<int>(step_)];
    int key = step_ == Step::kPutValue || step_ == Step::kDelete || step_ == Step::kPutHost ? rank_
                                                                                            : peer_;
    shared_->Fail("rank " + std::to_string(rank_) + ": " + step + " /" + shared_->opt.scope + "/" +
                  (step_ <= Step::kGetHost ? "rank_" : "") + std::to_string(key) + ": " + what);
  }

  Shared* shared_;
  const int rank_;
  rendezvous::EventLoop* loop_;
  int fd_ = -1;
  Step step_ = Step::kPutHost;
  int peer_ = 0;
  Clock::time_point start_, sent_at_;
  std::string request_;
  std::vector<char> buf_;
  size_t have_ = 0, header_len_ = 0, need_ = 0;
  int status_ = 0;
};

// Ends the run when the whole rendezvous overstays the deadline (a hung connection never
// reaches the per-worker check in the poll loop).
void Watch(rendezvous::EventLoop* loop, Shared* shared) {
  loop->After(std::chrono::milliseconds(100), [loop, shared] {
    if (shared->done == shared->opt.n || shared->failed) return;
    auto limit = std::chrono::seconds(shared->opt.deadline_s) +
                 std::chrono::milliseconds(shared->opt.stagger_ms + shared->opt.straggler_ms) +
                 std::chrono::seconds(5);
    if (Clock::now() - shared->start > limit) {
      return shared->Fail(std::to_string(shared->opt.n - shared->done) + " of " +
                          std::to_string(shared->opt.n) + " workers unfinished at the deadline");
    }
    Watch(loop, shared);
  });
}

bool RaiseFileLimit(size_t need, std::string* err) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need) {
    *err = "needs " + std::to_string(need) + " file descriptors, hard limit is " +
           std::to_string(lim.rlim_cur);
    return false;
  }
  return true;
}

// CPU time (user, system) of the calling thread so far, in seconds.
std::pair<double, double> ThreadCpu() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return {s(u.ru_utime), s(u.ru_stime)};
}

// Checks that the N DELETEs cleared the planned scope (the store is thread-safe).
std::string CheckCleared(ServerStack* server, int n) {
  for (int i = 0; i < n; ++i) {
    if (server->store().Get("global", std::to_string(i)) ||
        server->store().Get("global", "rank_" + std::to_string(i))) {
      return "key of rank " + std::to_string(i) + " still in scope global";
    }
  }
  if (server->store().scope_count() != 0) return "scopes left in the store";
  return "";
}

int RunScope(const Options& opt) {
  std::string err;
  if (!RaiseFileLimit(2 * static_cast<size_t>(opt.n) + 64, &err)) {
    std::fprintf(stderr, "etrun_rendezvous_bench: error: %s\n", err.c_str());
    return 1;
  }
  ServerStack server(opt.n, opt.hold_ms, opt.connect_port == 0 ? opt.server_threads : 1);  // unused with --connect
  if (opt.connect_port == 0 && !server.Listen(0, &err)) {
    std::fprintf(stderr, "etrun_rendezvous_bench: error: %s\n", err.c_str());
    return 1;
  }
  if (opt.connect_port == 0) server.Start();
  const int port = opt.connect_port > 0 ? opt.connect_port : server.port();

  const int client_threads = rendezvous::ServiceThreadCount(opt.threads);
  std::vector<std::unique_ptr<rendezvous::EventLoop>> loops;
  Shared shared;
  shared.opt = opt;
  for (int t = 0; t < client_threads; ++t) {
    loops.push_back(std::make_unique<rendezvous::EventLoop>());
    shared.loops.push_back(loops.back().get());
  }
  shared.server.sin_family = AF_INET;
  shared.server.sin_port = htons(static_cast<uint16_t>(port));
  shared.server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const size_t value_bytes = opt.value_bytes.value_or(136 * static_cast<size_t>(opt.n - 1));
  for (int r = 0; r < opt.n; ++r) {
    shared.values.push_back(ValueOf(r, value_bytes));
    shared.hosts.push_back("host-" + std::to_string(r));
  }
  std::vector<std::unique_ptr<Worker>> workers;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> stagger_us(0, opt.stagger_ms * 1000);
  shared.start = Clock::now();
  for (int r = 0; r < opt.n; ++r) {  // worker r on thread r mod T; timers set before the loops run
    workers.push_back(std::make_unique<Worker>(&shared, r, shared.loops[static_cast<size_t>(r % client_threads)]));
    auto delay = std::chrono::microseconds(stagger_us(rng));
    if (opt.straggler_ms > 0 && r == opt.n / 2) delay += std::chrono::milliseconds(opt.straggler_ms);
    workers.back()->Start(delay);
  }
  Watch(shared.loops.front(), &shared);
  // Every client thread's CPU, summed as it ends: (user, system).
  std::mutex cpu_mu;
  std::pair<double, double> client_cpu{0, 0};
  auto run = [&](rendezvous::EventLoop* loop) {
    loop->Run();
    auto [user, system] = ThreadCpu();
    std::lock_guard<std::mutex> lock(cpu_mu);
    client_cpu.first += user;
    client_cpu.second += system;
  };
  std::vector<std::thread> extra;
  for (int t = 1; t < client_threads; ++t) extra.emplace_back(run, shared.loops[static_cast<size_t>(t)]);
  run(shared.loops.front());
  for (auto& t : extra) t.join();

  std::string problem = shared.failed          ? shared.error
                        : opt.connect_port > 0 ? ""
                                               : CheckCleared(&server, opt.n);
  server.Stop();
  const double server_cpu = server.cpu_seconds();
  const double server_user = server.user_cpu_seconds();
  if (!problem.empty()) {
    std::fprintf(stderr, "etrun_rendezvous_bench: error: N=%d: %s\n", opt.n, problem.c_str());
    return 1;
  }

  uint64_t requests = 0, not_found = 0, bytes = 0;
  Clock::time_point keys = shared.start, deleted = shared.start;
  std::vector<uint32_t> lat;
  for (const auto& w : workers) {
    requests += w->requests;
    not_found += w->not_found;
    bytes += w->bytes_received;
    keys = std::max(keys, w->keys_at);
    deleted = std::max(deleted, w->deleted_at);
    lat.insert(lat.end(), w->latency_us.begin(), w->latency_us.end());
  }
  auto pct = [&lat](double p) {
    size_t i = std::min(lat.size() - 1, static_cast<size_t>(p * static_cast<double>(lat.size())));
    std::nth_element(lat.begin(), lat.begin() + static_cast<std::ptrdiff_t>(i), lat.end());
    return lat[i];
  };
  const uint64_t n = static_cast<uint64_t>(opt.n);
  const uint64_t floor = 3 * n + n * (n - 1) / 2 + 2 * n * (n - 1);  // no 404 poll at all
  const double keys_s = Seconds(keys - shared.start), deleted_s = Seconds(deleted - shared.start);
  uint32_t p50 = pct(0.50), p99 = pct(0.99), max = *std::max_element(lat.begin(), lat.end());
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("scope N=%d value=%zu bytes%s poll=%d ms threads=%d server threads=%d hold=%d ms%s\n",
              opt.n, value_bytes, opt.value_bytes ? "" : " (136*(N-1))", opt.poll_ms, client_threads,
              server.thread_count(), opt.hold_ms, opt.graceful_close ? " graceful-close" : "");
  if (opt.stagger_ms > 0 || opt.straggler_ms > 0) {
    std::printf("  starts spread over %d ms; rank %d %d ms late\n", opt.stagger_ms, opt.n / 2,
                opt.straggler_ms);
  }
  std::printf(
      "  requests %llu (floor %llu: 3N + N(N-1)/2 + 2N(N-1)), 404 answers %llu, received %.1f MB\n",
      static_cast<unsigned long long>(requests), static_cast<unsigned long long>(floor),
      static_cast<unsigned long long>(not_found), static_cast<double>(bytes) / 1e6);
  std::printf("  every worker has every key after %.3f s, all deleted after %.3f s, %.0f req/s\n",
              keys_s, deleted_s, static_cast<double>(requests) / deleted_s);
  std::printf("  request latency (connect to last byte) p50 %u us, p99 %u us, max %u us\n", p50,
              p99, max);
  std::printf("  CPU: server threads %.2f s (%.1f us/request, %.2f CPU-s/GB served; in user space "
              "%.2f s, %.1f us/request), client threads %.2f + %.2f s\n",
              server_cpu, server_cpu * 1e6 / static_cast<double>(requests),
              gb > 0 ? server_cpu / gb : 0.0, server_user,
              server_user * 1e6 / static_cast<double>(requests), client_cpu.first, client_cpu.second);
  if (opt.connect_port == 0) std::printf("  scope global cleared by the %d DELETEs: yes\n", opt.n);
  std::printf(
      "RESULT n=%d value_bytes=%zu requests=%llu not_found=%llu bytes=%llu keys_s=%.3f "
      "deleted_s=%.3f req_per_s=%.0f p50_us=%u p99_us=%u max_us=%u server_cpu_s=%.2f "
      "server_user_s=%.2f server_threads=%d hold_ms=%d straggler_ms=%d stagger_ms=%d cleared=1\n",
      opt.n, value_bytes, static_cast<unsigned long long>(requests),
      static_cast<unsigned long long>(not_found), static_cast<unsigned long long>(bytes), keys_s,
      deleted_s, static_cast<double>(requests) / deleted_s, p50, p99, max, server_cpu, server_user,
      server.thread_count(), opt.hold_ms, opt.straggler_ms, opt.stagger_ms);
  return 0;
}

int RunServe(const Options& opt) {
  ServerStack server(16, opt.hold_ms, opt.server_threads);
  server.store().Put("global", "0", ValueOf(0, 100));
  std::string err;
  if (!server.Listen(opt.port, &err)) {
    std::fprintf(stderr, "etrun_rendezvous_bench: error: %s\n", err.c_str());
    return 1;
  }
  server.Start();
  std::printf("port %d\n", server.port());
  std::fflush(stdout);
  asio::io_context io;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([](error_code, int) {});
  io.run();
  server.Stop();
  return 0;
}
bool ParseInt(const char* text, int min, int* out) {
  std::string_view s(text);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= min;
}

const char kUsage[] =
    "usage: etrun_rendezvous_bench serve [--port P] [--server-threads T]\n"
    "       etrun_rendezvous_bench scope N [--value-bytes B] [--poll-ms 10] [--threads T]\n"
    "                              [--stagger-ms 0] [--straggler-ms 0] [--server-threads T]\n"
    "                              [--hold-ms 1000] [--deadline-s 120] [--graceful-close]\n"
    "                              [--connect PORT --scope-name NAME]\n";

// Returns -1 when the arguments are good, else the exit code.
int ParseArgs(int argc, char** argv, std::string* mode, Options* opt) {
  if (argc < 2) return std::fputs(kUsage, stderr), 2;
  *mode = argv[1];
  int i = 2;
  if (*mode == "scope") {
    if (argc < 3 || !ParseInt(argv[2], 1, &opt->n)) return std::fputs(kUsage, stderr), 2;
    i = 3;
  } else if (*mode != "serve") {
    return std::fputs(kUsage, stderr), 2;
  }
  for (; i < argc; ++i) {
    std::string_view flag = argv[i];
    int value = 0;
    if (flag == "--graceful-close") {
      opt->graceful_close = true;
      continue;
    }
    if (flag == "--scope-name" && i + 1 < argc) {
      opt->scope = argv[++i];
      continue;
    }
    if (i + 1 >= argc || !ParseInt(argv[i + 1], 0, &value)) {
      std::fprintf(stderr, "etrun_rendezvous_bench: error: %s needs a number >= 0\n%s", argv[i],
                   kUsage);
      return 2;
    }
    ++i;
    if (flag == "--port")
      opt->port = value;
    else if (flag == "--value-bytes")
      opt->value_bytes = static_cast<size_t>(value);
    else if (flag == "--poll-ms")
      opt->poll_ms = value;
    else if (flag == "--threads")
      opt->threads = std::max(1, value);
    else if (flag == "--stagger-ms")
      opt->stagger_ms = value;
    else if (flag == "--straggler-ms")
      opt->straggler_ms = value;
    else if (flag == "--server-threads")
      opt->server_threads = value;
    else if (flag == "--hold-ms")
      opt->hold_ms = value;
    else if (flag == "--connect")
      opt->connect_port = value;
    else if (flag == "--deadline-s")
      opt->deadline_s = value;
    else
      return std::fprintf(stderr, "etrun_rendezvous_bench: error: unknown flag %s\n%s", flag.data(),
                          kUsage),
             2;
  }
  return -1;
}

}  // namespace
}  // namespace etrun::bench

int main(int argc, char** argv) {
  std::string mode;
  etrun::bench::Options opt;
  if (int code = etrun::bench::ParseArgs(argc, argv, &mode, &opt); code >= 0) return code;
  return mode == "serve" ? etrun::bench::RunServe(opt) : etrun::bench::RunScope(opt);
}
