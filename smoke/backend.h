// Backend: where an allreduce runs, behind one interface so the sweep is the same for every
// variant: TCP between CPUs (tcp_backend.cc, always built) and NCCL between GPUs
// (nccl_backend.cc, built only when CMake found CUDA and NCCL: ETRUN_SMOKE_HAVE_NCCL). Buffers
// live where the backend computes (host or GPU memory); the sweep moves data in and out through
// host arrays. Every rank calls the same methods in the same order. Not thread-safe.
#ifndef ETRUN_SMOKE_BACKEND_H_
#define ETRUN_SMOKE_BACKEND_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "smoke/kv_client.h"
#include "smoke/world.h"

namespace etrun::smoke {

class Backend {
 public:
  virtual ~Backend() = default;

  // "tcp" or "nccl".
  virtual std::string name() const = 0;
  // One line about this rank's end, for rank 0's header: its address and peer, or its GPU.
  virtual std::string description() const = 0;

  // Input and output buffers of `max_count` floats each. Call once, before the others.
  virtual bool Allocate(size_t max_count, std::string* err) = 0;
  // Copies `count` floats from host memory into the input buffer.
  virtual bool SetInput(const float* host, size_t count, std::string* err) = 0;
  // Zeroes the first `count` floats of the output buffer (so a check sees fresh results).
  virtual bool ClearOutput(size_t count, std::string* err) = 0;
  // Copies the first `count` floats of the output buffer into host memory; waits for pending
  // allreduces first.
  virtual bool GetOutput(float* host, size_t count, std::string* err) = 0;

  // Starts one out-of-place allreduce (sum) of `count` floats, input -> output. It may still
  // run when this returns (NCCL); Wait() ends every started one.
  virtual bool Allreduce(size_t count, std::string* err) = 0;
  virtual bool Wait(std::string* err) = 0;

  // Sums `values` over ranks, in place, in host memory: the sweep's times and error counts.
  // Also a barrier.
  virtual bool SumHost(std::vector<double>* values, std::string* err) = 0;
};

// Joins the TCP ring (TcpRing::Connect). nullptr and *err on failure. With `corrupt_for_test`
// this rank corrupts one element it sends per allreduce (tests of the check only).
std::unique_ptr<Backend> ConnectTcpBackend(const World& world, KvClient* kv,
                                           std::chrono::milliseconds timeout,
                                           bool corrupt_for_test, std::string* err);

#if defined(ETRUN_SMOKE_HAVE_NCCL) && ETRUN_SMOKE_HAVE_NCCL
// The number of CUDA devices this process sees; false and *err when CUDA cannot be used (no
// driver, no device).
bool CudaDeviceCount(int* count, std::string* err);

// Picks GPU local_rank % device count, shares rank 0's ncclUniqueId through the store (key
// "nccl_id") and creates the communicator. nullptr and *err on failure, within `timeout`.
std::unique_ptr<Backend> ConnectNcclBackend(const World& world, KvClient* kv,
                                            std::chrono::milliseconds timeout, std::string* err);
#endif

}  // namespace etrun::smoke

#endif  // ETRUN_SMOKE_BACKEND_H_
