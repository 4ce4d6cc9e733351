// The TCP ring allreduce with real sockets on loopback: ranks are threads of this process, each
// with its own store client, meeting through etrun's real rendezvous server.
#include "smoke/tcp_ring.h"

#include <functional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "smoke/socket.h"
#include "tests/smoke/test_store.h"

using etrun::smoke::KvClient;
using etrun::smoke::SegmentBegin;
using etrun::smoke::TcpRing;
using namespace std::chrono_literals;

namespace {

// Runs body(rank, ring) on `size` threads after each joined the ring; returns each rank's error
// (empty when all went well).
std::vector<std::string> RunRing(int size,
                                 const std::function<bool(int, TcpRing*, std::string*)>& body,
                                 std::chrono::milliseconds timeout = 5s, int corrupt_rank = -1) {
  etrun::testing::TestStore store;
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      KvClient kv("127.0.0.1", store.port(), 5s);
      TcpRing ring;
      if (rank == corrupt_rank) ring.TEST_CorruptSends();
      if (ring.Connect(rank, size, &kv, timeout, &errors[rank])) body(rank, &ring, &errors[rank]);
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("segments cover the buffer in order, the first ones one longer") {
  CHECK(SegmentBegin(10, 3, 0) == 0);
  CHECK(SegmentBegin(10, 3, 1) == 4);
  CHECK(SegmentBegin(10, 3, 2) == 7);
  CHECK(SegmentBegin(10, 3, 3) == 10);
  // Fewer elements than ranks: some segments are empty.
  CHECK(SegmentBegin(2, 4, 1) == 1);
  CHECK(SegmentBegin(2, 4, 2) == 2);
  CHECK(SegmentBegin(2, 4, 4) == 2);
}

TEST_CASE("every rank gets the exact sum, for any count and ring size") {
  for (int size : {1, 2, 3, 5}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1000},
                         size_t{300000}}) {
      CAPTURE(size);
      CAPTURE(count);
      std::vector<std::vector<float>> results(size);
      auto errors = RunRing(size, [&](int rank, TcpRing* ring, std::string* err) {
        std::vector<float> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(rank * 1000 + i % 97);
        results[rank].resize(count);
        return ring->AllreduceSum(in.data(), results[rank].data(), count, err);
      });
      for (int rank = 0; rank < size; ++rank) {
        CHECK(errors[rank] == "");
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          const float want = static_cast<float>(1000 * size * (size - 1) / 2 + size * (i % 97));
          wrong += results[rank][i] != want;
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("in-place doubles, repeated on the same connections") {
  std::vector<std::vector<double>> results(3);
  auto errors = RunRing(3, [&](int rank, TcpRing* ring, std::string* err) {
    std::vector<double> v = {0.5 * rank, 1e12, -1};
    for (int round = 0; round < 3; ++round) {
      if (!ring->AllreduceSum(v.data(), v.data(), v.size(), err)) return false;
    }
    results[rank] = v;
    return true;
  });
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(errors[rank] == "");
    CHECK(results[rank] == std::vector<double>{1.5 * 9, 27e12, -27});
  }
}

TEST_CASE("a corrupting rank makes one float wrong on every rank and leaves doubles alone") {
  std::vector<std::vector<float>> results(3);
  std::vector<std::vector<double>> doubles(3);
  auto errors = RunRing(
      3,
      [&](int rank, TcpRing* ring, std::string* err) {
        std::vector<float> in(30, 1.0f);
        results[rank].resize(30);
        doubles[rank] = {1, 2, 3};
        return ring->AllreduceSum(in.data(), results[rank].data(), 30, err) &&
               ring->AllreduceSum(doubles[rank].data(), doubles[rank].data(), 3, err);
      },
      5s, /*corrupt_rank=*/1);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(errors[rank] == "");
    CHECK(doubles[rank] == std::vector<double>{3, 6, 9});
    int wrong = 0;
    for (float v : results[rank]) wrong += v != 3.0f;
    CHECK(wrong == 1);
    CHECK(results[rank][10] == 4.0f);  // the first element of rank 1's segment
  }
}

TEST_CASE("a rank whose peer never publishes its address times out naming the key") {
  etrun::testing::TestStore store;
  KvClient kv("127.0.0.1", store.port(), 5s);
  TcpRing ring;
  std::string err;
  CHECK_FALSE(ring.Connect(0, 2, &kv, 200ms, &err));
  CHECK(err == "timed out after 0.2 s waiting for tcp_1 in the rendezvous store 127.0.0.1:" +
                   std::to_string(store.port()));
}

TEST_CASE("a peer that vanishes during an allreduce is an error, not a hang") {
  auto errors = RunRing(2, [&](int rank, TcpRing* ring, std::string* err) {
    if (rank == 1) return true;  // leaves at once: its sockets close with its ring
    std::vector<float> v(1 << 20, 1.0f);
    return ring->AllreduceSum(v.data(), v.data(), v.size(), err);
  });
  CHECK(errors[1] == "");
  const bool closed = errors[0] == "receiving from rank 1: connection closed by peer" ||
                      errors[0] == "sending to rank 1: connection closed by peer";
  CHECK_MESSAGE(closed, errors[0]);
}

TEST_CASE("a connection that does not say hello as the previous rank is refused") {
  // Given rank 0 of 2 and a stranger that plays rank 1 but greets as rank 5 of 9.
  etrun::testing::TestStore store;
  std::string err0;
  std::thread rank0([&] {
    KvClient kv("127.0.0.1", store.port(), 5s);
    TcpRing ring;
    ring.Connect(0, 2, &kv, 5s, &err0);
  });
  KvClient kv("127.0.0.1", store.port(), 5s);
  etrun::smoke::Fd listener, to_rank0, from_rank0;
  int port = 0;
  std::string err, address;
  REQUIRE(etrun::smoke::Listen(&listener, &port, &err));
  REQUIRE(kv.Put("tcp_1", "127.0.0.1:" + std::to_string(port), &err));
  REQUIRE(kv.WaitFor("tcp_0", 5s, &address, &err));
  const auto deadline = etrun::smoke::Clock::now() + 5s;
  REQUIRE(etrun::smoke::Connect("127.0.0.1", std::stoi(address.substr(address.rfind(':') + 1)),
                                deadline, &to_rank0, &err));
  REQUIRE(etrun::smoke::WriteAll(to_rank0, std::string("etsmoke1\5\0\0\0\x09\0\0\0", 16),
                                 deadline, &err));
  rank0.join();
  CHECK(err0 == "the connection to " + address + " is not from rank 1 of this job (bad hello)");
}
