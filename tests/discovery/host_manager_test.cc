#include "discovery/host_manager.h"

#include <limits>

#include <doctest/doctest.h>

using etrun::discovery::HostManager;
using etrun::discovery::HostSlots;
using etrun::discovery::kAdded;
using etrun::discovery::kMixed;
using etrun::discovery::kNoUpdate;
using etrun::discovery::kRemoved;
using etrun::discovery::TimePoint;
using std::chrono::seconds;

namespace {
TimePoint T(int s) { return TimePoint() + seconds(s); }
std::vector<std::string> Names(const std::vector<HostSlots>& hosts) {
  std::vector<std::string> out;
  for (const HostSlots& h : hosts) out.push_back(h.name);
  return out;
}
}  // namespace

TEST_CASE("update flags follow spec 5.5: hosts and slots gained or lost") {
  HostManager m(std::nullopt, [] { return 0.0; });
  CHECK(m.Update({{"a", 2}}, T(0)) == kAdded);
  CHECK(m.Update({{"a", 2}}, T(1)) == kNoUpdate);
  CHECK(m.Update({{"a", 3}}, T(2)) == kAdded);                // more slots
  CHECK(m.Update({{"a", 1}}, T(3)) == kRemoved);              // fewer slots
  CHECK(m.Update({{"a", 1}, {"b", 1}}, T(4)) == kAdded);
  CHECK(m.Update({{"b", 1}, {"c", 1}}, T(5)) == kMixed);      // a gone, c new
  CHECK(m.Update({}, T(6)) == kRemoved);
}

TEST_CASE("the first order follows the script; later hosts append so survivors keep low ranks") {
  HostManager m(std::nullopt, [] { return 0.0; });
  m.Update({{"localhost", 1}, {"127.0.0.1", 1}}, T(0));
  CHECK(Names(m.Available()) == std::vector<std::string>{"localhost", "127.0.0.1"});
  m.Update({{"new", 2}, {"127.0.0.1", 1}, {"localhost", 1}}, T(1));  // output reordered
  CHECK(Names(m.Available()) == std::vector<std::string>{"localhost", "127.0.0.1", "new"});
  m.Update({{"new", 2}, {"127.0.0.1", 1}}, T(2));  // the first host leaves
  CHECK(Names(m.Available()) == std::vector<std::string>{"127.0.0.1", "new"});
  m.Update({{"localhost", 1}, {"new", 2}, {"127.0.0.1", 1}}, T(3));  // and comes back: last
  CHECK(Names(m.Available()) == std::vector<std::string>{"127.0.0.1", "new", "localhost"});
  CHECK(m.AvailableSlots() == 4);
}

TEST_CASE("huge slot counts from a script add up without overflowing") {
  // Given two hosts with INT_MAX slots each (the parser allows any int), the total is capped at
  // INT_MAX instead of overflowing (fuzz_host_slots's UBSan caught the same sum in TotalSlots).
  HostManager m(std::nullopt, [] { return 0.0; });
  m.Update({{"a", std::numeric_limits<int>::max()}, {"b", std::numeric_limits<int>::max()}}, T(0));
  CHECK(m.AvailableSlots() == std::numeric_limits<int>::max());
}

TEST_CASE("without a cooldown range a blacklisted host is gone for good") {
  HostManager m(std::nullopt, [] { return 0.0; });
  m.Update({{"a", 1}, {"b", 1}}, T(0));
  m.Blacklist("a", T(1));
  CHECK(m.IsBlacklisted("a"));
  CHECK(Names(m.Available()) == std::vector<std::string>{"b"});
  CHECK(m.Update({{"a", 1}, {"b", 1}}, T(100000)) == kNoUpdate);
  CHECK(Names(m.Available()) == std::vector<std::string>{"b"});
  CHECK_FALSE(m.CooldownEnd("a").has_value());
}

TEST_CASE("a leasing source's host that leaves and comes back is a new lease, not blacklisted") {
  for (bool forget : {false, true}) {
    CAPTURE(forget);
    HostManager m(std::nullopt, [] { return 0.0; });
    m.set_forget_departed(forget);
    m.Update({{"a", 1}, {"b", 1}}, T(0));
    m.Blacklist("b", T(1));
    m.Update({{"a", 1}, {"b", 1}}, T(2));  // still listed: blacklisted either way
    CHECK(m.IsBlacklisted("b"));
    m.Update({{"a", 1}}, T(3));             // its allocation ended
    CHECK(m.Update({{"a", 1}, {"b", 1}}, T(4)) == kAdded);
    CHECK(m.IsBlacklisted("b") == !forget);
    CHECK(Names(m.Available()) == (forget ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"a"}));
  }
}

TEST_CASE("cooldown grows exponentially, clamps to the range, and resurrects as added") {
  // Given --blacklist-cooldown-range 10 100 and U(0,1) = 0.5:
  // first blacklisting waits 10*2 + 5 = 25 s, the second 10*4 + 5 = 45 s, the third 85 s,
  // the fourth min(165, 100) = 100 s.
  HostManager m(std::pair{10, 100}, [] { return 0.5; });
  m.Update({{"a", 1}, {"b", 1}}, T(0));
  int t = 0;
  for (int want : {25, 45, 85, 100}) {
    CAPTURE(want);
    m.Blacklist("a", T(t));
    REQUIRE(m.CooldownEnd("a") == T(t + want));
    m.Blacklist("a", T(t + 1));  // inside the window: nothing changes
    CHECK(m.CooldownEnd("a") == T(t + want));
    CHECK(m.Update({{"a", 1}, {"b", 1}}, T(t + want - 1)) == kNoUpdate);
    CHECK(m.IsBlacklisted("a"));
    CHECK(m.Update({{"a", 1}, {"b", 1}}, T(t + want)) == kAdded);  // resurrected
    CHECK_FALSE(m.IsBlacklisted("a"));
    CHECK(Names(m.Available()) == std::vector<std::string>{"b", "a"});
    t += want + 1;
  }
}
