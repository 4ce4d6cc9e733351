// The TCP backend: host buffers and a TcpRing.
#include <cstring>
#include <new>

#include "smoke/backend.h"
#include "smoke/tcp_ring.h"

namespace etrun::smoke {
namespace {

class TcpBackend : public Backend {
 public:
  std::string name() const override { return "tcp"; }
  std::string description() const override {
    return ring_.description().empty() ? "tcp, alone (no network)" : "tcp " + ring_.description();
  }

  bool Connect(const World& world, KvClient* kv, std::chrono::milliseconds timeout,
               bool corrupt_for_test, std::string* err) {
    if (corrupt_for_test) ring_.TEST_CorruptSends();
    return ring_.Connect(world.rank, world.size, kv, timeout, err);
  }

  bool Allocate(size_t max_count, std::string* err) override {
    try {
      input_.assign(max_count, 0.0f);
      output_.assign(max_count, 0.0f);
    } catch (const std::bad_alloc&) {
      *err = "cannot allocate 2 x " + std::to_string(max_count * sizeof(float)) +
             " bytes of host memory: lower -e/--maxbytes";
      return false;
    }
    return true;
  }
  bool SetInput(const float* host, size_t count, std::string* err) override {
    std::memcpy(input_.data(), host, count * sizeof(float));
    return true;
  }
  bool ClearOutput(size_t count, std::string* err) override {
    std::memset(output_.data(), 0, count * sizeof(float));
    return true;
  }
  bool GetOutput(float* host, size_t count, std::string* err) override {
    std::memcpy(host, output_.data(), count * sizeof(float));
    return true;
  }
  bool Allreduce(size_t count, std::string* err) override {
    return ring_.AllreduceSum(input_.data(), output_.data(), count, err);
  }
  bool Wait(std::string* err) override { return true; }
  bool SumHost(std::vector<double>* values, std::string* err) override {
    return ring_.AllreduceSum(values->data(), values->data(), values->size(), err);
  }

 private:
  TcpRing ring_;
  std::vector<float> input_;
  std::vector<float> output_;
};

}  // namespace

std::unique_ptr<Backend> ConnectTcpBackend(const World& world, KvClient* kv,
                                           std::chrono::milliseconds timeout,
                                           bool corrupt_for_test, std::string* err) {
  auto backend = std::make_unique<TcpBackend>();
  if (!backend->Connect(world, kv, timeout, corrupt_for_test, err)) return nullptr;
  return backend;
}

}  // namespace etrun::smoke
