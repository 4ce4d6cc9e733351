// rendezvous_floor: what Gloo's rendezvous traffic costs this machine with no HTTP server, store
// or parsing at all: the floor under etrun_rendezvous_bench's `scope N` (rendezvous_load.cc).
//
//   rendezvous_floor N [server_threads] [client_threads] [--event-driven] [--workers]
//
// The same connections as one `global` scope of N Gloo workers over Horovod's HTTPStore, when no
// key is ever missing (the fewest requests there can be): 3N + N(N-1)/2 + 2N(N-1), each on a new
// loopback TCP connection. 2N(N-1) of them are GETs answered with a whole address list of
// 136(N-1) bytes (Gloo's wait() and get() each fetch it), N are PUTs carrying one, the rest are
// small (PUT/GET rank_<r>, DELETE). The server (server_threads, default: one per core) accepts,
// reads the request to its end, writes one fixed answer from a shared buffer with writev and
// closes; the clients (client_threads, default: one per core) connect, write, read the answer
// to its last byte and close with SO_LINGER 0, as etrun_rendezvous_bench's workers do. Prints
// the wall time and the CPU of each side. Build: cc -O2 -pthread -o rendezvous_floor
// rendezvous_floor.c
//
// --event-driven: the floor of a server that can hold requests open, as a rendezvous store must
// (a thousand workers' GETs waiting on keys not set yet: no thread each), and that keeps an
// HTTP/1.1 client's connection until the client closes it (the C++ client asks for keep-alive).
// Each server thread has a listener of its own (SO_REUSEPORT) and an epoll loop: accept4 (one
// per wake-up), epoll_ctl (edge-triggered), read when the request came, writev, then close when
// the client's reset arrives. That is the least any such server does per connection; the
// blocking server above closes first and never waits. Same clients, same bytes.
//
// --workers: clients shaped as the store's bench's (see FloorWorker): N workers, each with a
// request in flight and Gloo's sequence of them, instead of one blocking request per client
// thread: the load the store itself is measured under. scripts/bench/rendezvous.sh runs the
// event-driven floor so.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { kSmall = 0, kValueGet = 1, kValuePut = 2 };

static int listener;
static int listeners[256];  // --event-driven: one per server thread
static atomic_int stopping;
static size_t value_bytes;
static char* value;  // one shared buffer: every value answer and value PUT body
static atomic_long next_request;
static long total_requests, small_gets, value_gets;
static atomic_long server_done;
static double server_cpu, client_cpu;
static pthread_mutex_t cpu_lock = PTHREAD_MUTEX_INITIALIZER;

static double server_user;

// Adds the calling thread's CPU time to *total, and its user-space part to *user unless NULL.
static void AddThreadCpu(double* total, double* user) {
  struct rusage u;
  getrusage(RUSAGE_THREAD, &u);
  double user_s = u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6;
  pthread_mutex_lock(&cpu_lock);
  *total += user_s + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
  if (user != NULL) *user += user_s;
  pthread_mutex_unlock(&cpu_lock);
}

static void Die(const char* what) {
  fprintf(stderr, "rendezvous_floor: %s: %s\n", what, strerror(errno));
  exit(1);
}

// Request k's kind: the value GETs first, then the N value PUTs, then the small ones.
static int KindOf(long k) {
  if (k < value_gets) return kValueGet;
  return k < total_requests - small_gets ? kValuePut : kSmall;
}

// Reads until `need` bytes came, or the peer closed; returns what came.
static size_t ReadAll(int fd, char* buf, size_t cap, size_t need) {
  size_t got = 0;
  while (got < need) {
    ssize_t n = read(fd, buf + (got % cap), cap - (got % cap) < need - got ? cap - (got % cap) : need - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  return got;
}

static const char kHeader[] = "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n";

static void* Serve(void* unused) {
  (void)unused;
  char buf[1 << 16];
  char head[128];
  int small_len = snprintf(head, sizeof(head), kHeader, (size_t)0);
  char value_head[128];
  int value_len = snprintf(value_head, sizeof(value_head), kHeader, value_bytes);
  for (;;) {
    int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // shut down
    }
    // The request: a 1-byte kind, an 8-byte body length, then the body.
    char intro[9];
    if (ReadAll(fd, intro, sizeof(intro), sizeof(intro)) != sizeof(intro)) Die("short request");
    size_t body;
    memcpy(&body, intro + 1, sizeof(body));
    if (ReadAll(fd, buf, sizeof(buf), body) != body) Die("short body");
    struct iovec iov[2] = {{head, (size_t)small_len}, {value, 0}};
    if (intro[0] == kValueGet) {
      iov[0] = (struct iovec){value_head, (size_t)value_len};
      iov[1].iov_len = value_bytes;
    }
    size_t want = iov[0].iov_len + iov[1].iov_len, sent = 0;
    while (sent < want) {
      ssize_t n = writev(fd, iov, 2);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) Die("writev");
      sent += (size_t)n;
      for (int i = 0; i < 2; ++i) {  // advance past what went out
        size_t d = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
        iov[i].iov_base = (char*)iov[i].iov_base + d;
        iov[i].iov_len -= d;
        n -= (ssize_t)d;
      }
    }
    close(fd);
    atomic_fetch_add(&server_done, 1);
  }
  AddThreadCpu(&server_cpu, &server_user);
  return NULL;
}

// --event-driven: one thread's epoll loop over its own listener (see the top). A connection is
// 0 while its request comes in (bytes counted in got[fd]), 1 once answered, until the client's
// reset closes it.
enum { kMaxFd = 1 << 20 };
static unsigned char* state;
static size_t* got;

static void* ServeEvents(void* listener_arg) {
  int lfd = *(int*)listener_arg;
  char buf[1 << 16];
  char head[128];
  int small_len = snprintf(head, sizeof(head), kHeader, (size_t)0);
  char value_head[128];
  int value_len = snprintf(value_head, sizeof(value_head), kHeader, value_bytes);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) Die("epoll");
  struct epoll_event events[256];
  while (!atomic_load(&stopping)) {
    int n = epoll_wait(ep, events, 256, 100);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == lfd) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) continue;
        if (c >= kMaxFd) Die("descriptor too large");
        state[c] = 0;
        got[c] = 0;
        struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) != 0) Die("epoll_ctl");
        continue;
      }
      if ((events[i].events & (EPOLLHUP | EPOLLERR)) || state[fd] == 1) {  // the client is done
        close(fd);
        continue;
      }
      // The request: as in Serve, a 9-byte intro then the body; read what came.
      char intro[9];
      for (;;) {
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (got[fd] < sizeof(intro)) memcpy(intro + got[fd], buf, (size_t)r < sizeof(intro) - got[fd] ? (size_t)r : sizeof(intro) - got[fd]);
        got[fd] += (size_t)r;
        if ((size_t)r < sizeof(buf)) break;
      }
      if (got[fd] < sizeof(intro)) continue;
      size_t body;
      memcpy(&body, intro + 1, sizeof(body));
      if (got[fd] < sizeof(intro) + body) continue;
      struct iovec iov[2] = {{head, (size_t)small_len}, {value, 0}};
      if (intro[0] == kValueGet) {
        iov[0] = (struct iovec){value_head, (size_t)value_len};
        iov[1].iov_len = value_bytes;
      }
      size_t want = iov[0].iov_len + iov[1].iov_len, sent = 0;
      while (sent < want) {  // a full socket: wait for room (rare on loopback; the floor blocks)
        ssize_t w = writev(fd, iov, 2);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
          struct pollfd p = {.fd = fd, .events = POLLOUT};
          poll(&p, 1, -1);
          continue;
        }
        if (w <= 0) Die("writev");
        sent += (size_t)w;
        for (int j = 0; j < 2; ++j) {
          size_t d = (size_t)w < iov[j].iov_len ? (size_t)w : iov[j].iov_len;
          iov[j].iov_base = (char*)iov[j].iov_base + d;
          iov[j].iov_len -= d;
          w -= (ssize_t)d;
        }
      }
      state[fd] = 1;
      atomic_fetch_add(&server_done, 1);
    }
  }
  close(ep);
  AddThreadCpu(&server_cpu, &server_user);
  return NULL;
}

// A client's request: a new connection (closed with a reset: SO_LINGER 0), the 9-byte intro of
// `kind` and its body, written at once. Returns the socket, the answer still to read.
static int SendRequest(const struct sockaddr_in* to, int kind, int nodelay) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die("socket");
  int one = 1;
  if (nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct linger rst = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
  while (connect(fd, (const struct sockaddr*)to, sizeof(*to)) != 0) {
    if (errno != EINTR) Die("connect");
  }
  char intro[9];
  intro[0] = (char)kind;
  size_t body = kind == kValuePut ? value_bytes : 0;
  memcpy(intro + 1, &body, sizeof(body));
  struct iovec iov[2] = {{intro, sizeof(intro)}, {value, body}};
  if (writev(fd, iov, 2) != (ssize_t)(sizeof(intro) + body)) Die("request");
  return fd;
}

static void* Client(void* port_arg) {
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(*(int*)port_arg)};
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  char buf[1 << 16];
  size_t small_answer = (size_t)snprintf(buf, sizeof(buf), kHeader, (size_t)0);
  size_t value_answer = (size_t)snprintf(buf, sizeof(buf), kHeader, value_bytes) + value_bytes;
  for (;;) {
    long k = atomic_fetch_add(&next_request, 1);
    if (k >= total_requests) break;
    int kind = KindOf(k);
    int fd = SendRequest(&to, kind, 1);
    size_t want = kind == kValueGet ? value_answer : small_answer;
    if (ReadAll(fd, buf, sizeof(buf), want) != want) Die("short answer");
    close(fd);
  }
  AddThreadCpu(&client_cpu, NULL);
  return NULL;
}

// --workers: clients shaped as etrun_rendezvous_bench's simulated workers (rendezvous_load.cc),
// so that the server sees the load the store sees: N workers, worker r on client thread r mod T,
// each with one request in flight and Gloo's own sequence of them (as the bench's worker r sends
// them when no key is missing): PUT rank_r, GET rank_0 .. rank_<r-1>, PUT its value, two value
// GETs for each of the N-1 others, DELETE. A worker connects and sends with blocking calls
// (loopback completes them at once), waits for the answer through epoll (edge-triggered), reads
// it to its last byte and closes with SO_LINGER 0, then sends its next request. Without
// --workers, each client thread has one request in flight at a time.
static int use_workers;
static long world;  // N

struct FloorWorker {
  int fd;
  long rank, step;  // the next request: step of worker rank's sequence above
  size_t want, have;
};

// The kind of worker w's next request, or -1 when its sequence is done.
static int NextKind(const struct FloorWorker* w) {
  long s = w->step, r = w->rank;
  if (s <= r) return kSmall;                 // PUT rank_r, then GET rank_0 .. rank_<r-1>
  if (s == r + 1) return kValuePut;          // its value
  if (s <= r + 1 + 2 * (world - 1)) return kValueGet;  // wait() then get() for each other rank
  if (s == r + 2 + 2 * (world - 1)) return kSmall;  // DELETE
  return -1;
}

static int StartNext(struct FloorWorker* w, int ep, const struct sockaddr_in* to,
                     size_t small_answer, size_t value_answer) {
  int kind = NextKind(w);
  if (kind < 0) return 0;
  ++w->step;
  w->fd = SendRequest(to, kind, 0);  // no TCP_NODELAY: the store's bench's workers set none
  w->want = kind == kValueGet ? value_answer : small_answer;
  w->have = 0;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = w};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, w->fd, &ev) != 0) Die("epoll_ctl");
  return 1;
}

static void* WorkerClients(void* port_arg) {
  static atomic_int thread_index;
  int index = atomic_fetch_add(&thread_index, 1);
  int threads = *((int*)port_arg + 1);
  int count = (int)(world / threads + (index < world % threads ? 1 : 0));
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(*(int*)port_arg)};
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  char buf[1 << 16];
  size_t small_answer = (size_t)snprintf(buf, sizeof(buf), kHeader, (size_t)0);
  size_t value_answer = (size_t)snprintf(buf, sizeof(buf), kHeader, value_bytes) + value_bytes;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) Die("epoll");
  struct FloorWorker* workers = calloc((size_t)count + 1, sizeof(*workers));
  int active = 0;
  for (int i = 0; i < count; ++i) {
    workers[i].rank = index + (long)i * threads;  // worker r on thread r mod T, as the bench
    active += StartNext(&workers[i], ep, &to, small_answer, value_answer);
  }
  struct epoll_event events[256];
  while (active > 0) {
    int n = epoll_wait(ep, events, 256, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Die("epoll_wait");
    for (int i = 0; i < n; ++i) {
      struct FloorWorker* w = events[i].data.ptr;
      for (;;) {
        ssize_t r = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r <= 0) Die("short answer");
        w->have += (size_t)r;
        if (w->have >= w->want) break;
      }
      if (w->have < w->want) continue;
      if (w->have > w->want) Die("long answer");
      close(w->fd);  // with SO_LINGER 0: a reset; closing takes it out of epoll
      if (!StartNext(w, ep, &to, small_answer, value_answer)) --active;
    }
  }
  free(workers);
  close(ep);
  AddThreadCpu(&client_cpu, NULL);
  return NULL;
}

int main(int argc, char** argv) {
  int event_driven = 0;
  const char* positional[3] = {NULL, NULL, NULL};
  int positionals = 0, bad = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--event-driven") == 0) {
      event_driven = 1;
    } else if (strcmp(argv[i], "--workers") == 0) {
      use_workers = 1;
    } else if (argv[i][0] == '-' || positionals == 3) {
      bad = 1;
    } else {
      positional[positionals++] = argv[i];
    }
  }
  if (bad || positionals == 0 || atol(positional[0]) < 2) {
    fprintf(stderr, "usage: rendezvous_floor N [server_threads] [client_threads] [--event-driven] "
                    "[--workers]\n");
    return 2;
  }
  long n = atol(positional[0]);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int server_threads = positional[1] ? atoi(positional[1]) : (int)cores;
  int client_threads = positional[2] ? atoi(positional[2]) : (int)cores;
  if (server_threads < 1 || server_threads > 256 || client_threads < 1 || client_threads > 256) {
    fprintf(stderr, "rendezvous_floor: server and client threads must be 1 to 256\n");
    return 2;
  }
  world = n;
  value_bytes = (size_t)(136 * (n - 1));
  value = malloc(value_bytes);
  memset(value, 'v', value_bytes);
  value_gets = 2 * n * (n - 1);
  small_gets = 2 * n + n * (n - 1) / 2;  // PUT/GET rank_<r> and DELETE <r>: N + N(N-1)/2 + N
  total_requests = value_gets + n + small_gets;

  struct sockaddr_in at = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  for (int i = 0; i < (event_driven ? server_threads : 1); ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (event_driven ? SOCK_NONBLOCK : 0), 0);
    int one = 1;
    if (event_driven && (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
                         setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)) {
      Die("setsockopt");
    }
    if (bind(fd, (struct sockaddr*)&at, sizeof(at)) != 0 || listen(fd, 4096) != 0) Die("listen");
    socklen_t len = sizeof(at);
    getsockname(fd, (struct sockaddr*)&at, &len);  // the port the first one got, for the others
    listeners[i] = fd;
  }
  listener = listeners[0];
  int port = ntohs(at.sin_port);
  if (event_driven) {
    state = calloc(kMaxFd, 1);
    got = calloc(kMaxFd, sizeof(size_t));
  }

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t servers[256], clients[256];
  for (int i = 0; i < server_threads; ++i) {
    pthread_create(&servers[i], NULL, event_driven ? ServeEvents : Serve, &listeners[i]);
  }
  int client_args[2] = {port, client_threads};  // WorkerClients: the port, then the thread count
  for (int i = 0; i < client_threads; ++i) {
    pthread_create(&clients[i], NULL, use_workers ? WorkerClients : Client, client_args);
  }
  for (int i = 0; i < client_threads; ++i) pthread_join(clients[i], NULL);
  while (atomic_load(&server_done) < total_requests) usleep(1000);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  atomic_store(&stopping, 1);
  shutdown(listener, SHUT_RDWR);
  for (int i = 0; i < server_threads; ++i) pthread_join(servers[i], NULL);
  double wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  double gb = (double)value_gets * (double)value_bytes / 1e9;
  char clients_text[64] = "";
  if (use_workers) snprintf(clients_text, sizeof(clients_text), " (%ld workers)", n);
  printf("N=%ld%s: %ld connections (%ld answered with %zu bytes: %.2f GB), %d server / %d client "
         "threads%s: wall %.2f s, server CPU %.2f s (user space %.2f s), client CPU %.2f s (%.1f us "
         "of both per connection)\n",
         n, event_driven ? " (event-driven)" : "", total_requests, value_gets, value_bytes, gb, server_threads, client_threads, clients_text, wall,
         server_cpu, server_user, client_cpu, (server_cpu + client_cpu) / (double)total_requests * 1e6);
  printf("RESULT n=%ld requests=%ld value_bytes=%zu wall_s=%.3f server_cpu_s=%.3f server_user_s=%.3f "
         "client_cpu_s=%.3f workers=%ld\n",
         n, total_requests, value_bytes, wall, server_cpu, server_user, client_cpu, use_workers ? n : 0);
  return 0;
}
