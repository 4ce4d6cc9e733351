#include "smoke/tcp_ring.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace etrun::smoke {
namespace {

// The first bytes on every ring connection: who is calling, in which world. Catches a stray
// connection or a peer from another job on a reused port.
constexpr char kHelloMagic[8] = {'e', 't', 's', 'm', 'o', 'k', 'e', '1'};
constexpr size_t kHelloSize = 16;

std::string Hello(int rank, int size) {
  std::string hello(kHelloMagic, sizeof(kHelloMagic));
  for (uint32_t v : {static_cast<uint32_t>(rank), static_cast<uint32_t>(size)}) {
    for (int shift = 0; shift < 32; shift += 8) hello += static_cast<char>((v >> shift) & 0xff);
  }
  return hello;
}

std::string Key(int rank) { return "tcp_" + std::to_string(rank); }

}  // namespace

size_t SegmentBegin(size_t count, int parts, int index) {
  return count / parts * index + std::min<size_t>(count % parts, index);
}

bool TcpRing::Connect(int rank, int size, KvClient* kv, std::chrono::milliseconds timeout,
                      std::string* err) {
  rank_ = rank;
  size_ = size;
  timeout_ = timeout;
  if (size == 1) return true;
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  const auto deadline = Clock::now() + timeout;

  Fd listener;
  int port = 0;
  if (!Listen(&listener, &port, err)) return false;
  // Any request tells us our address on the route to the store: ask for our own key.
  std::string theirs;
  bool found = false;
  if (!kv->Get(Key(rank), &theirs, &found, err)) return false;
  const std::string mine = kv->local_address() + ":" + std::to_string(port);
  if (!kv->Put(Key(rank), mine, err)) return false;
  if (!kv->WaitFor(Key(next), timeout, &theirs, err)) return false;
  size_t colon = theirs.rfind(':');
  std::string why;
  if (colon == std::string::npos ||
      !smoke::Connect(theirs.substr(0, colon), std::atoi(theirs.c_str() + colon + 1), deadline,
                      &next_, &why) ||
      !WriteAll(next_, Hello(rank, size), deadline, &why)) {
    *err = "cannot reach rank " + std::to_string(next) + " at '" + theirs + "': " +
           (why.empty() ? "bad address" : why);
    return false;
  }

  char hello[kHelloSize];
  if (!Accept(listener, deadline, &prev_, &why) ||
      !ReadExact(prev_, hello, sizeof(hello), deadline, &why)) {
    *err = "rank " + std::to_string(prev) + " did not connect to " + mine + ": " + why;
    return false;
  }
  if (std::string(hello, sizeof(hello)) != Hello(prev, size)) {
    *err = "the connection to " + mine + " is not from rank " + std::to_string(prev) +
           " of this job (bad hello)";
    return false;
  }
  // rank-1 has read our address (it connected), and nobody else needs it.
  if (!kv->Delete(Key(rank), err)) return false;
  description_ = mine + ", sends to rank " + std::to_string(next) + " at " + theirs;
  return true;
}

bool TcpRing::Exchange(const char* send, size_t send_size, char* recv, size_t recv_size,
                       std::string* err) {
  auto deadline = Clock::now() + timeout_;
  while (send_size > 0 || recv_size > 0) {
    pollfd fds[2] = {{next_.get(), static_cast<short>(send_size > 0 ? POLLOUT : 0), 0},
                     {prev_.get(), static_cast<short>(recv_size > 0 ? POLLIN : 0), 0}};
    int ready = poll(fds, 2, PollTimeoutMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      *err = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (ready == 0) {
      *err = "no progress for " + std::to_string(timeout_.count() / 1000) + " s: rank " +
             std::to_string(recv_size > 0 ? (rank_ + size_ - 1) % size_ : (rank_ + 1) % size_) +
             " stopped exchanging data";
      return false;
    }
    if (send_size > 0 && fds[0].revents != 0) {
      ssize_t n = ::send(next_.get(), send, send_size, MSG_NOSIGNAL);
      if (n > 0) {
        send += n;
        send_size -= static_cast<size_t>(n);
        deadline = Clock::now() + timeout_;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        *err = "sending to rank " + std::to_string((rank_ + 1) % size_) + ": " +
               (errno == EPIPE || errno == ECONNRESET ? "connection closed by peer"
                                                       : std::strerror(errno));
        return false;
      }
    }
    if (recv_size > 0 && fds[1].revents != 0) {
      ssize_t n = ::recv(prev_.get(), recv, recv_size, 0);
      if (n > 0) {
        recv += n;
        recv_size -= static_cast<size_t>(n);
        deadline = Clock::now() + timeout_;
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        *err = "receiving from rank " + std::to_string((rank_ + size_ - 1) % size_) + ": " +
               (n == 0 || errno == ECONNRESET ? "connection closed by peer"
                                              : std::strerror(errno));
        return false;
      }
    }
  }
  return true;
}

template <typename T>
bool TcpRing::AllreduceSum(const T* in, T* out, size_t count, std::string* err) {
  if (in != out) std::memcpy(out, in, count * sizeof(T));
  if (size_ == 1) return true;
  const int n = size_;
  auto begin = [&](int index) { return SegmentBegin(count, n, index); };
  auto length = [&](int index) { return begin(index + 1) - begin(index); };
  scratch_.resize(length(0) * sizeof(T));  // segment 0 is never shorter than another
  T* scratch = reinterpret_cast<T*>(scratch_.data());

  if constexpr (std::is_same_v<T, float>) {
    if (corrupt_ && length(rank_) > 0) out[begin(rank_)] += 1;
  }
  // Reduce-scatter: at step s, send segment rank-s (summed over s+1 ranks so far) and add the
  // previous rank's segment rank-s-1 into ours. Afterwards segment rank+1 holds the full sum.
  for (int s = 0; s < n - 1; ++s) {
    const int send_index = (rank_ - s + n) % n;
    const int recv_index = (rank_ - s - 1 + n) % n;
    if (!Exchange(reinterpret_cast<const char*>(out + begin(send_index)),
                  length(send_index) * sizeof(T), reinterpret_cast<char*>(scratch),
                  length(recv_index) * sizeof(T), err)) {
      return false;
    }
    T* target = out + begin(recv_index);
    for (size_t i = 0, len = length(recv_index); i < len; ++i) target[i] += scratch[i];
  }
  // Allgather: pass the finished segments on around the ring, straight into place.
  for (int s = 0; s < n - 1; ++s) {
    const int send_index = (rank_ + 1 - s + n) % n;
    const int recv_index = (rank_ - s + n) % n;
    if (!Exchange(reinterpret_cast<const char*>(out + begin(send_index)),
                  length(send_index) * sizeof(T), reinterpret_cast<char*>(out + begin(recv_index)),
                  length(recv_index) * sizeof(T), err)) {
      return false;
    }
  }
  return true;
}

template bool TcpRing::AllreduceSum<float>(const float*, float*, size_t, std::string*);
template bool TcpRing::AllreduceSum<double>(const double*, double*, size_t, std::string*);

}  // namespace etrun::smoke
