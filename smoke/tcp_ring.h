// TcpRing: allreduce (sum) between CPUs over plain TCP, as a ring: each rank connects to the
// next rank's listener (whose address it reads from the rendezvous store) and accepts the
// previous rank's connection. An allreduce of N elements is a reduce-scatter then an allgather,
// n-1 steps each, in which every rank sends one of n segments to the next rank while it receives
// one from the previous one; each link carries 2(n-1)/n of the data, the bus bandwidth figure.
// Every wait is bounded by the timeout given to Connect. Not thread-safe; one per rank.
#ifndef ETRUN_SMOKE_TCP_RING_H_
#define ETRUN_SMOKE_TCP_RING_H_

#include <chrono>
#include <string>
#include <vector>

#include "smoke/kv_client.h"
#include "smoke/socket.h"

namespace etrun::smoke {

// [begin, end) of segment `index` when `count` elements are cut into `parts` near-equal parts.
size_t SegmentBegin(size_t count, int parts, int index);

class TcpRing {
 public:
  TcpRing() = default;
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  // Joins the ring of `size` ranks as `rank`: listens on a free port, publishes
  // "tcp_<rank>" = "<ip>:<port>" (ip: the address this rank reaches the store from), connects
  // to rank+1 and accepts rank-1, whose hello must name it. Deletes its own key once rank-1 is
  // in. A size of 1 needs no network. False with *err naming the peer on any failure.
  bool Connect(int rank, int size, KvClient* kv, std::chrono::milliseconds timeout,
               std::string* err);

  // out[i] = sum over ranks of in[i], for i < count; `in` may equal `out`. REQUIRES: Connect
  // succeeded, and every rank calls with the same count. T is float or double.
  template <typename T>
  bool AllreduceSum(const T* in, T* out, size_t count, std::string* err);

  // "127.0.0.1:41234, sends to rank 2 at 127.0.0.1:40111" (empty for a size of 1).
  const std::string& description() const { return description_; }

  // Test hook: from now on this rank adds 1 to the first element it sends in each float
  // allreduce (doubles, the sweep's own bookkeeping, stay right), so that every rank's result
  // is wrong in one place: proves that the check catches corruption.
  void TEST_CorruptSends() { corrupt_ = true; }

 private:
  // Sends `send_size` bytes to the next rank while receiving `recv_size` from the previous one.
  bool Exchange(const char* send, size_t send_size, char* recv, size_t recv_size,
                std::string* err);

  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{30000};
  Fd next_;  // to rank+1
  Fd prev_;  // from rank-1
  std::vector<char> scratch_;
  std::string description_;
  bool corrupt_ = false;
};

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_TCP_RING_H_
