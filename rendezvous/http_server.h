// HttpServer: a small HTTP/1.1 server on epoll loops of its own that fronts the rendezvous store. A connection closes after its response unless the client asked
// for keep-alive (Horovod's own server closes always; its clients cope with both); every
// response carries `Content-Length` spelled exactly so (Horovod's C++ client needs it, spec §4.5).
// Hardened where Horovod's server is fragile (§9.10, §9.12, §9.20): bounded header and body
// sizes, a read timeout, and every malformed request answered (400, 405, 411, 413) rather than
// dropped; a client that stalls mid-request is disconnected after the read timeout. It never
// serves files.
// Peers outside the job can be refused (set_access, spec §9 "no auth at all" in horovodrun), and
// peers on this machine that are not the job's user (set_local_user: the kernel says who owns
// the peer's socket, rendezvous/peer_uid.h).
//
// Bounded (HttpLimits, ServerCaps): connections in total and per peer address, request body
// bytes being received at once, each request's header and body, and the time a request may take
// to arrive. A connection past a cap is answered 503 with a short body and `Connection: close`
// at once, its request unread: it costs an accept and a write, and nobody waits. A handler that
// drops every copy of `respond` unanswered gets its client a 500, so a held connection never
// waits forever.
// The handler may answer later (rank_and_size is held until a barrier opens; a GET of a missing
// key until it is set), from any thread.
//
// Threads. The server serves on one EventLoop (tests) or on several shards (the rendezvous store,
// rendezvous/service_threads.h), each run by one thread. Each shard has a listener of its own on
// the same port (SO_REUSEPORT: the kernel spreads new connections over them), and each connection
// lives on its listener's shard: its reads, writes and deadline run on that one thread, and
// `respond` hops onto it from whichever thread calls it. The handler is called on the
// connection's shard, so with several shards it is called concurrently and must be thread-safe
// itself (KvHandler is: KvStore has its own mutex; the elastic routes post what the driver owns
// to the driver's loop, see elastic_handler.h).
// Listen, Stop and set_access are the owner's calls: before the loops' threads run, on the one
// thread of a one-loop server, or after they stopped.
//
// Sockets (rendezvous/event_loop.h): non-blocking from accept4, registered once with epoll,
// edge-triggered; the peer's address comes from accept4, TCP_NODELAY from the listener. A request
// is read when epoll says its bytes came, never tried before. A head in the simple shape every
// client of the store sends, whole in the bytes read, is parsed in place (ParseSimpleHead,
// rendezvous/http_request.h); any other request goes to Beast's parser from its first byte. A connection the client reset (a killed worker's kernel does) is closed at
// once, even while its request is held: it frees its place then, not at the hold's bound. One
// the client only half-closed still gets its answer.
//
// Zero copy: a response may carry its body as a shared immutable buffer (a stored value); it
// goes out with the header in one gathered write, never copied into a response object.
#ifndef ETRUN_RENDEZVOUS_HTTP_SERVER_H_
#define ETRUN_RENDEZVOUS_HTTP_SERVER_H_

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/access_list.h"
#include "rendezvous/event_loop.h"
#include "rendezvous/peer_uid.h"
#include "rendezvous/server_caps.h"

namespace etrun::rendezvous {

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // raw path, no decoding
  std::string body;
  std::string authorization;  // the Authorization header, if any (etrun's control endpoint)
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int s, std::string b) : status(s), body(std::move(b)) {}
  HttpResponse(int s, std::shared_ptr<const std::string> shared) : status(s), shared_body(std::move(shared)) {}

  int status = 200;
  std::string body;
  // When set, the body instead of `body`: written from this buffer as it is, shared, not copied.
  std::shared_ptr<const std::string> shared_body;
};

// How a handler answers one request: call it once, now or later, from any thread; calling it
// after the client went away is harmless. Copies share one answer (a reference count, no
// allocation to copy): the server's sends the first call's response and, when its last copy goes
// uncalled, a 500. Made from any callable too (tests, other callers): that one is called on every
// call. The server's costs one allocation a request, where a std::function holding a shared
// answer cost two.
class Responder {
 public:
  // What copies share. Deleted when the last copy goes.
  class Target {
   public:
    virtual ~Target() = default;
    virtual void Send(HttpResponse response) = 0;

   private:
    friend class Responder;
    std::atomic<long> refs_{0};
  };

  Responder() = default;
  // Shares `target` (new, or already shared by other Responders).
  explicit Responder(Target* target) : target_(target) { Acquire(); }
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Responder> &&
                                                    std::is_invocable_v<std::decay_t<F>&, HttpResponse>>>
  Responder(F&& fn) : Responder(new Callable<std::decay_t<F>>(std::forward<F>(fn))) {}  // NOLINT: implicit on purpose
  Responder(const Responder& other) : target_(other.target_) { Acquire(); }
  Responder(Responder&& other) noexcept : target_(std::exchange(other.target_, nullptr)) {}
  Responder& operator=(Responder other) noexcept {
    std::swap(target_, other.target_);
    return *this;
  }
  ~Responder() { Release(); }

  // REQUIRES: not default-constructed or moved from.
  void operator()(HttpResponse response) const { target_->Send(std::move(response)); }
  explicit operator bool() const { return target_ != nullptr; }

 private:
  template <typename F>
  struct Callable : Target {
    explicit Callable(F f) : fn(std::move(f)) {}
    void Send(HttpResponse response) override { fn(std::move(response)); }
    F fn;
  };
  void Acquire() {
    if (target_ != nullptr) target_->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void Release() {
    if (target_ != nullptr && target_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete target_;
    target_ = nullptr;
  }

  Target* target_ = nullptr;
};

// Answers requests through `respond` (above): exactly once, now or later, from any thread.
// `request` is the server's until Handle returns: what the handler keeps, it moves out.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(HttpRequest&& request, Responder respond) = 0;
};

struct HttpLimits {
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 64 << 20;  // a 512-rank Gloo address blob is ~100 KB
  std::chrono::milliseconds read_timeout{10000};
  // Connections open at once, in total, and from one peer address. A Horovod worker holds one
  // connection at a time (two in an elastic job while it registers): a 1,024-worker job on one
  // machine, every worker from 127.0.0.1, needs about 2,048. Listen lowers the total to half the
  // process's open-file limit when that is less, so accept never runs out of descriptors first.
  size_t max_connections = 16384;
  size_t max_connections_per_peer = 4096;
  // Request body bytes being received at once, over all connections, and a quarter of it from
  // one peer address (a body is reserved whole, by its Content-Length, before it is read; a
  // chunked one as max_body_bytes). 1,024 workers on one machine each sending their ~140 KB
  // Gloo address blob at once need ~140 MB.
  size_t max_body_bytes_in_flight = size_t{1} << 30;
};

// A socket listening on IPv4 `address`:`port` (0: a free port) with SO_REUSEADDR, TCP_NODELAY
// (which accepted sockets inherit) and the kernel's longest backlog: the rendezvous store's and
// the control endpoint's listeners. With `reuse_port`, SO_REUSEPORT first (other sockets of this
// user that set it too may then listen on the same port). Non-blocking, close-on-exec. -1, with
// one line in *err naming the address, when it cannot.
int ListenSocket(const std::string& address, int port, bool reuse_port, std::string* err);
// The same socket, opened into `acceptor` (etrun's control endpoint, on Asio).
bool OpenListener(boost::asio::ip::tcp::acceptor& acceptor, const std::string& address, int port,
                  std::string* err);

class HttpServer {
 public:
  // Serves on `loop` alone.
  HttpServer(EventLoop* loop, HttpHandler* handler, HttpLimits limits = {});
  // Serves on every shard: a listener on each (SO_REUSEPORT on one port when there are several;
  // the kernel spreads new connections over them), each connection on its listener's shard.
  // REQUIRES: `shards` not empty (ServiceThreads::loops()).
  HttpServer(std::vector<EventLoop*> shards, HttpHandler* handler, HttpLimits limits = {});
  // Closes the connections still open: they keep themselves alive until closed, so only this
  // ends those that wait on the handler's answer (a held GET, a barrier) or an idle client.
  // REQUIRES: no thread runs the loops (their threads joined), or only the calling thread does.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds `address` (IPv4 dotted quad; "0.0.0.0" for all) on `port` (0: any free port) and
  // starts accepting. Returns false and sets *err when the address cannot be bound.
  bool Listen(const std::string& address, int port, std::string* err);

  // The bound port, after Listen.
  int port() const { return port_; }

  // Stops accepting; connections in flight finish or time out.
  void Stop();

  // From now on, peers `access` does not allow get 403 and are disconnected; each refused
  // address is logged once. Null (the default) admits everyone. `access` must outlive the server.
  void set_access(const AccessList* access) { access_ = access; }

  // From now on, a peer on this machine (AccessList::IsThisMachine; needs set_access) is admitted
  // only when the kernel says its socket belongs to `uid`; others get 403, each refused user is
  // logged once. Connections from other machines are the access list's alone.
  void set_local_user(uint32_t uid);

  // What the server holds now, for tests. Null before Listen.
  const ServerCaps* caps() const { return caps_.get(); }

  // Looks owners up in /proc, as where netlink is refused. REQUIRES: set_local_user. For tests.
  void TEST_LookUpOwnersInProc();

  // The number of listeners (one per shard). For tests.
  size_t listener_count() const { return listeners_.size(); }

  // The number of connections open on every shard. From a loop's thread for a one-loop server,
  // or once the threads are joined. For tests.
  size_t open_count() const;

 private:
  class Connection;
  // One shard's connections, shared with them (a connection may outlive the server), all on the
  // shard's thread only. Two lists linked through the connections themselves (nothing allocated
  // or hashed per connection):
  //  - every open one (each keeps itself alive until closed; the destructor closes the rest);
  //  - those reading a request or writing an answer, each with its deadline: one timer sweeps
  //    them, closing the late ones, instead of a timer per read and write.
  // What its connections share is here, set by Listen, so that a connection copies no shared_ptr
  // that another shard's connections copy too (each copy was a write to a cache line that both
  // shards' threads wrote).
  struct Shard {
    explicit Shard(EventLoop* event_loop) : loop(event_loop) {}
    EventLoop* loop;
    HttpHandler* handler = nullptr;
    HttpLimits limits;
    std::shared_ptr<ServerCaps> caps;  // the server's, shared by every shard
    std::weak_ptr<bool> server_alive;  // expires when the server stops
    Connection* open = nullptr;  // the first of the open ones
    size_t open_count = 0;
    Connection* timed = nullptr;  // the first of those with a deadline
    bool sweeping = false;        // a sweep is due
    std::vector<char> scratch = std::vector<char>(64 << 10);  // each read lands here first
  };
  // A connection just accepted, before it is admitted.
  struct Arrival {
    int fd = -1;
    sockaddr_in peer{};
    uint32_t address = 0;
    bool ask_owner = false;  // from this machine: its owner is looked up
  };
  // One shard's accept loop: its socket, and what only that loop touches.
  struct Listener : Watcher {
    Listener(HttpServer* owner, EventLoop* event_loop) : server(owner), loop(event_loop) {}
    void OnEvents(uint32_t events) override;
    HttpServer* server;
    EventLoop* loop;
    int fd = -1;
    std::unique_ptr<PeerUid> peer_uid;  // with local_user_
    bool out_of_descriptors = false;    // warned about EMFILE on accept; accepting paused
    std::shared_ptr<Shard> shard = std::make_shared<Shard>(loop);  // this shard's connections
    std::vector<Arrival> arrivals;  // AcceptReady's batch, kept for the next one
  };
  // Takes the connections waiting on `listener` (a bounded batch: one /proc reading serves all
  // of them when owners are looked up there) and admits them. The listener's loop only.
  void AcceptReady(Listener* listener);
  // Admits new connections, or answers each at once and closes it (set_access, set_local_user,
  // the caps). The listener's loop only.
  void Admit(Listener* listener, std::vector<Arrival>& arrivals);
  bool IsJobUser(const Arrival& arrival, const std::optional<uint32_t>& uid, const std::string& err);
  // Writes `response` to a new connection whose request is not read, and closes it.
  static void Refuse(int fd, const std::string& response);
  // True the first time `key` is seen in `seen` (at most kMaxLogged kept), under log_mu_.
  bool FirstTime(std::set<uint32_t>* seen, uint32_t key);

  HttpHandler* handler_;
  HttpLimits limits_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  int port_ = 0;
  const AccessList* access_ = nullptr;
  std::optional<uint32_t> local_user_;
  std::shared_ptr<ServerCaps> caps_;  // shared with the connections, which may outlive us
  // What the accept loops have logged (each set at most kMaxLogged entries: beyond, not logged).
  std::mutex log_mu_;
  std::set<uint32_t> refused_;        // addresses refused by the access list
  std::set<uint32_t> refused_users_;  // uids refused on this machine
  std::set<uint32_t> capped_;         // addresses past the per-peer cap
  bool warned_unknown_owner_ = false;
  bool warned_total_ = false;
  std::shared_ptr<bool> alive_;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_HTTP_SERVER_H_
