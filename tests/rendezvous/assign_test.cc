#include "rendezvous/assign.h"

#include <doctest/doctest.h>

using etrun::rendezvous::Assign;
using etrun::rendezvous::SlotInfo;

namespace {
// hostname, rank, size, local_rank, local_size, cross_rank, cross_size
SlotInfo S(const char* h, int r, int n, int lr, int ls, int cr, int cs) { return {h, r, n, lr, ls, cr, cs}; }
}  // namespace

TEST_CASE("assignment is host-major with cross ranks per local rank (spec 6.3 example)") {
  // Given A:2,B:3,C:1 and no cap, ranks follow host order; cross ranks count earlier hosts.
  std::vector<SlotInfo> slots;
  std::string err;
  REQUIRE(Assign({{"A", 2}, {"B", 3}, {"C", 1}}, 1, std::nullopt, &slots, &err));
  CHECK(slots == std::vector<SlotInfo>{
                     S("A", 0, 6, 0, 2, 0, 3), S("A", 1, 6, 1, 2, 0, 2), S("B", 2, 6, 0, 3, 1, 3),
                     S("B", 3, 6, 1, 3, 1, 2), S("B", 4, 6, 2, 3, 0, 1), S("C", 5, 6, 0, 1, 2, 3)});
}

TEST_CASE("max_np caps the world and leaves later hosts unused (spec 6.3)") {
  std::vector<SlotInfo> slots;
  std::string err;
  REQUIRE(Assign({{"A", 2}, {"B", 3}, {"C", 1}}, 1, 4, &slots, &err));
  CHECK(slots == std::vector<SlotInfo>{S("A", 0, 4, 0, 2, 0, 2), S("A", 1, 4, 1, 2, 0, 2),
                                       S("B", 2, 4, 0, 2, 1, 2), S("B", 3, 4, 1, 2, 1, 2)});
}

TEST_CASE("zero-slot hosts take no ranks and distinct names are distinct hosts") {
  std::vector<SlotInfo> slots;
  std::string err;
  REQUIRE(Assign({{"localhost", 2}, {"idle", 0}, {"127.0.0.1", 1}}, 3, 3, &slots, &err));
  CHECK(slots == std::vector<SlotInfo>{S("localhost", 0, 3, 0, 2, 0, 2), S("localhost", 1, 3, 1, 2, 0, 1),
                                       S("127.0.0.1", 2, 3, 0, 1, 1, 2)});
}

TEST_CASE("too few slots for min_np fails and leaves the output alone") {
  std::vector<SlotInfo> slots = {S("keep", 0, 1, 0, 1, 0, 1)};
  std::string err;
  CHECK_FALSE(Assign({{"A", 1}, {"B", 2}}, 4, std::nullopt, &slots, &err));
  CHECK(err == "requested 4 processes but the hosts provide only 3 slots");
  CHECK(slots.size() == 1);
}
