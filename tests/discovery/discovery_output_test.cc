#include "discovery/discovery_output.h"

#include <doctest/doctest.h>

using etrun::discovery::HostSlots;
using etrun::discovery::ParseDiscoveryOutput;

TEST_CASE("discovery output keeps order, trims lines and fills missing slots (fixes spec 9.2)") {
  struct Case {
    const char* output;
    int default_slots;
    std::vector<HostSlots> want;
  } cases[] = {
      {"b:2\na:1\n", 1, {{"b", 2}, {"a", 1}}},              // output order, not a set's
      {"  b:2  \r\n\ta:1\r\n", 1, {{"b", 2}, {"a", 1}}},    // CRLF and indentation
      {"host-1\nhost-2:3\n", 4, {{"host-1", 4}, {"host-2", 3}}},  // --slots-per-host
      {"host-1\n", 1, {{"host-1", 1}}},                     // default of 1, not a crash
      {"", 1, {}},                                          // nothing available yet
      {"\n\n  \n", 1, {}},
      {"a : 2\n", 1, {{"a", 2}}},
      {"10.0.0.5:8\n", 1, {{"10.0.0.5", 8}}},
      {"a:0\n", 1, {{"a", 0}}},
      {"a:1", 1, {{"a", 1}}},                               // no final newline
  };
  for (const Case& c : cases) {
    CAPTURE(c.output);
    std::vector<HostSlots> hosts;
    std::vector<std::string> warnings;
    std::string err;
    REQUIRE(ParseDiscoveryOutput(c.output, c.default_slots, &hosts, &warnings, &err));
    CHECK(hosts == c.want);
    CHECK(warnings.empty());
  }
}

TEST_CASE("a host listed twice keeps its last slot count, with a warning") {
  std::vector<HostSlots> hosts;
  std::vector<std::string> warnings;
  std::string err;
  REQUIRE(ParseDiscoveryOutput("a:2\nb:1\na:4\na:4\n", 1, &hosts, &warnings, &err));
  CHECK(hosts == std::vector<HostSlots>{{"a", 4}, {"b", 1}});
  CHECK(warnings == std::vector<std::string>{"line 3: host a listed again with 4 slots (was 2): using 4"});
}

TEST_CASE("slots beyond the total cap are dropped from the last hosts, with one warning") {
  // Given 17 hosts of 4096 slots (69,632 in all; rank assignment builds an entry per slot), the
  // first hosts keep theirs up to kMaxDiscoveredSlots; the rest get none.
  using etrun::discovery::kMaxDiscoveredSlots;
  std::vector<HostSlots> hosts;
  std::vector<std::string> warnings;
  std::string err;
  std::string listing;
  for (int i = 0; i < 17; ++i) listing += "h" + std::to_string(i) + ":4096\n";
  REQUIRE(ParseDiscoveryOutput(listing, 1, &hosts, &warnings, &err));
  REQUIRE(hosts.size() == 17);
  CHECK(hosts[15] == HostSlots{"h15", 4096});
  CHECK(hosts[16] == HostSlots{"h16", 0});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "more than 65536 slots listed (69632): using the first 65536; use "
                       "--max-np to say how many ranks the job may use");
  warnings.clear();
  listing.resize(listing.rfind("h16:"));  // 16 x 4096: exactly at the cap
  REQUIRE(ParseDiscoveryOutput(listing, 1, &hosts, &warnings, &err));
  CHECK(hosts.size() == 16);
  CHECK(hosts.back() == HostSlots{"h15", 4096});
  CHECK(warnings.empty());
  CHECK(16 * 4096 == kMaxDiscoveredSlots);
}

TEST_CASE("bad discovery lines are errors that name the line") {
  struct Case {
    const char* output;
    const char* err;
  } cases[] = {
      {"a:1\nb:x\n", "line 2: expected host or host:slots with a whole number of slots, got \"b:x\""},
      {"a:1:2\n", "line 1: expected host or host:slots with a whole number of slots, got \"a:1:2\""},
      {"a:-1\n", "line 1: expected host or host:slots with a whole number of slots, got \"a:-1\""},
      {"a:\n", "line 1: expected host or host:slots with a whole number of slots, got \"a:\""},
      {"\nnode one:2\n", "line 2: expected host or host:slots (letters, digits, '.', '_', '-'), got \"node one:2\""},
      {":2\n", "line 1: expected host or host:slots (letters, digits, '.', '_', '-'), got \":2\""},
      // A name a command would read as an option (`ssh -G`) is refused, with or without slots.
      {"a:1\n-G:1\n", "line 2: host names cannot begin with '-' (ssh or a remote shell would read "
                       "'-G' as an option), got \"-G:1\""},
      {"  -oProxyCommand=x \r\n", "line 1: host names cannot begin with '-' (ssh or a remote shell "
                                   "would read '-oProxyCommand=x' as an option), got "
                                   "\"-oProxyCommand=x\""},
      {"- :2\n", "line 1: host names cannot begin with '-' (ssh or a remote shell would read '-' as "
                 "an option), got \"- :2\""},
      // A count no machine has (a typo) is a bad line, not 100 million ranks to try.
      {"a:2\nhuge:100000000\n", "line 2: at most 4096 slots per host, got \"huge:100000000\""},
      {"a:4097\n", "line 1: at most 4096 slots per host, got \"a:4097\""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.output);
    std::vector<HostSlots> hosts = {{"keep", 1}};
    std::vector<std::string> warnings;
    std::string err;
    CHECK_FALSE(ParseDiscoveryOutput(c.output, 1, &hosts, &warnings, &err));
    CHECK(err == c.err);
    CHECK(hosts == std::vector<HostSlots>{{"keep", 1}});
  }
}
