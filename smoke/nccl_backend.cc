// The NCCL backend: one GPU per local rank, rank 0's ncclUniqueId shared through etrun's store.
// Built only when CMake found CUDA and NCCL (ETRUN_SMOKE_HAVE_NCCL). The communicator is
// non-blocking so that every wait (creation, allreduce) can give up after --timeout instead of
// hanging on a peer that is gone; a communicator that failed is aborted, not finalized.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "smoke/backend.h"

namespace etrun::smoke {
namespace {

bool CudaOk(cudaError_t rc, const char* what, std::string* err) {
  if (rc == cudaSuccess) return true;
  *err = std::string(what) + ": " + cudaGetErrorString(rc);
  return false;
}

class NcclBackend : public Backend {
 public:
  explicit NcclBackend(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~NcclBackend() override {
    if (comm_ != nullptr) {
      std::string ignored;
      if (!failed_ && Settle(ncclCommFinalize(comm_), "ncclCommFinalize", &ignored)) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    for (void* p : {static_cast<void*>(input_), static_cast<void*>(output_),
                    static_cast<void*>(scratch_)}) {
      if (p != nullptr) cudaFree(p);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  bool Connect(const World& world, KvClient* kv, std::string* err) {
    int devices = 0;
    if (!CudaDeviceCount(&devices, err)) {
      *err += ": use --backend tcp on machines without GPUs";
      return false;
    }
    device_ = world.local_rank % devices;
    if (!CudaOk(cudaSetDevice(device_), "cudaSetDevice", err)) return false;
    cudaDeviceProp prop{};
    char bus[32] = "";
    if (!CudaOk(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties", err) ||
        !CudaOk(cudaDeviceGetPCIBusId(bus, sizeof(bus), device_), "cudaDeviceGetPCIBusId", err) ||
        !CudaOk(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate",
                err)) {
      return false;
    }
    description_ = "nccl " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                   ", GPU " + std::to_string(device_) + " of " + std::to_string(devices) + " (" +
                   prop.name + ", " + bus + ")";

    ncclUniqueId id;
    if (world.rank == 0) {
      if (!NcclOk(ncclGetUniqueId(&id), "ncclGetUniqueId", err) ||
          !kv->Put("nccl_id", std::string(id.internal, sizeof(id.internal)), err)) {
        return false;
      }
    } else {
      std::string bytes;
      if (!kv->WaitFor("nccl_id", timeout_, &bytes, err)) return false;
      if (bytes.size() != sizeof(id.internal)) {
        *err = "nccl_id in the rendezvous store has " + std::to_string(bytes.size()) +
               " bytes, not " + std::to_string(sizeof(id.internal)) +
               ": rank 0 runs another NCCL version";
        return false;
      }
      std::memcpy(id.internal, bytes.data(), bytes.size());
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return Settle(ncclCommInitRankConfig(&comm_, world.size, id, world.rank, &config),
                  "ncclCommInitRank", err);
  }

  std::string name() const override { return "nccl"; }
  std::string description() const override { return description_; }

  bool Allocate(size_t max_count, std::string* err) override {
    const size_t bytes = max_count * sizeof(float);
    if (!CudaOk(cudaMalloc(reinterpret_cast<void**>(&input_), bytes), "cudaMalloc", err) ||
        !CudaOk(cudaMalloc(reinterpret_cast<void**>(&output_), bytes), "cudaMalloc", err) ||
        !CudaOk(cudaMalloc(reinterpret_cast<void**>(&scratch_), kScratchDoubles * sizeof(double)),
                "cudaMalloc", err)) {
      *err += " (2 x " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device_) +
              ": lower -e/--maxbytes)";
      return false;
    }
    return true;
  }
  bool SetInput(const float* host, size_t count, std::string* err) override {
    return Copy(input_, host, count * sizeof(float), cudaMemcpyHostToDevice, err);
  }
  bool ClearOutput(size_t count, std::string* err) override {
    // On our stream, so it is ordered before the next allreduce.
    return CudaOk(cudaMemsetAsync(output_, 0, count * sizeof(float), stream_), "cudaMemsetAsync",
                  err);
  }
  bool GetOutput(float* host, size_t count, std::string* err) override {
    return Copy(host, output_, count * sizeof(float), cudaMemcpyDeviceToHost, err);
  }
  bool Allreduce(size_t count, std::string* err) override {
    return Settle(ncclAllReduce(input_, output_, count, ncclFloat, ncclSum, comm_, stream_),
                  "ncclAllReduce", err);
  }

  // Spins on the stream (as nccl-tests does: a sleep would distort small-size times), watching
  // the communicator for errors and giving up after the timeout.
  bool Wait(std::string* err) override {
    const auto deadline = Clock::now() + timeout_;
    for (;;) {
      cudaError_t rc = cudaStreamQuery(stream_);
      if (rc == cudaSuccess) return true;
      if (rc != cudaErrorNotReady) return Failed(CudaOk(rc, "allreduce on the GPU", err));
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        return NcclOk(state, "allreduce", err);
      }
      if (Clock::now() > deadline) {
        *err = "an allreduce did not finish within " + std::to_string(timeout_.count() / 1000) +
               " s: a peer is gone or stuck";
        return Failed(false);
      }
    }
  }

  bool SumHost(std::vector<double>* values, std::string* err) override {
    if (values->size() > kScratchDoubles) {
      *err = "SumHost: too many values";
      return false;
    }
    const size_t bytes = values->size() * sizeof(double);
    return Copy(scratch_, values->data(), bytes, cudaMemcpyHostToDevice, err) &&
           Settle(ncclAllReduce(scratch_, scratch_, values->size(), ncclDouble, ncclSum, comm_,
                                stream_),
                  "ncclAllReduce", err) &&
           Copy(values->data(), scratch_, bytes, cudaMemcpyDeviceToHost, err);
  }

 private:
  static constexpr size_t kScratchDoubles = 64;

  // Copies on our stream (a non-blocking stream is not ordered with cudaMemcpy's default
  // stream), after every allreduce queued before it, and waits for the copy.
  bool Copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind, std::string* err) {
    return CudaOk(cudaMemcpyAsync(to, from, bytes, kind, stream_),
                  kind == cudaMemcpyHostToDevice ? "copy to the GPU" : "copy from the GPU",
                  err) &&
           Wait(err);
  }

  bool Failed(bool ok) {
    if (!ok) failed_ = true;
    return ok;
  }

  bool NcclOk(ncclResult_t rc, const char* what, std::string* err) {
    if (rc == ncclSuccess) return true;
    *err = std::string(what) + ": " + ncclGetErrorString(rc);
    const char* detail = comm_ != nullptr ? ncclGetLastError(comm_) : ncclGetLastError(nullptr);
    if (detail != nullptr && *detail != '\0') *err += " (" + std::string(detail) + ")";
    return Failed(false);
  }

  // A non-blocking communicator's call may return ncclInProgress: wait, within the timeout,
  // until the communicator leaves that state before anything else touches it.
  bool Settle(ncclResult_t rc, const char* what, std::string* err) {
    const auto deadline = Clock::now() + timeout_;
    while (rc == ncclInProgress) {
      if (Clock::now() > deadline) {
        *err = std::string(what) + " did not finish within " +
               std::to_string(timeout_.count() / 1000) + " s: a peer is missing or stuck";
        return Failed(false);
      }
      std::this_thread::yield();
      if (ncclCommGetAsyncError(comm_, &rc) != ncclSuccess) break;
    }
    return NcclOk(rc, what, err);
  }

  std::chrono::milliseconds timeout_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  float* input_ = nullptr;
  float* output_ = nullptr;
  double* scratch_ = nullptr;
  std::string description_;
  bool failed_ = false;
};

}  // namespace

bool CudaDeviceCount(int* count, std::string* err) {
  *count = 0;
  cudaError_t rc = cudaGetDeviceCount(count);
  if (rc != cudaSuccess) {
    *err = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(rc) +
           ")";
    return false;
  }
  if (*count == 0) {
    *err = "no CUDA device";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> ConnectNcclBackend(const World& world, KvClient* kv,
                                            std::chrono::milliseconds timeout, std::string* err) {
  auto backend = std::make_unique<NcclBackend>(timeout);
  if (!backend->Connect(world, kv, err)) {
    *err = "--backend nccl: " + *err;
    return nullptr;
  }
  return backend;
}

}  // namespace etrun::smoke
