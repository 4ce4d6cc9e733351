#include "discovery/host_slots.h"

#include <cstdint>
#include <limits>

#include <doctest/doctest.h>

using etrun::discovery::FormatHosts;
using etrun::discovery::HostSlots;
using etrun::discovery::ParseHostfile;
using etrun::discovery::ParseHostsFlag;
using etrun::discovery::TotalSlots;

TEST_CASE("-H accepts host:slots pairs in order, with spaces around elements") {
  struct Case {
    const char* text;
    std::vector<HostSlots> want;
  } cases[] = {
      {"localhost:2", {{"localhost", 2}}},
      {"a:2,b:3", {{"a", 2}, {"b", 3}}},
      {" a:1 , b.example-1_x:0 ", {{"a", 1}, {"b.example-1_x", 0}}},
      {"127.0.0.1:4,localhost:1", {{"127.0.0.1", 4}, {"localhost", 1}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::vector<HostSlots> hosts;
    std::string err;
    REQUIRE(ParseHostsFlag(c.text, &hosts, &err));
    CHECK(hosts == c.want);
  }
}

TEST_CASE("-H rejects what horovodrun's pattern rejects, naming the element") {
  const char* bad[] = {"a",       "a:",     ":2",     "a:2,",  "a:-1", "a:x",
                       "user@a:2", "::1:2", "a:2,,b:1", "a b:2", "",     "a:99999999999"};
  for (const char* text : bad) {
    CAPTURE(text);
    std::vector<HostSlots> hosts = {{"keep", 1}};
    std::string err;
    CHECK_FALSE(ParseHostsFlag(text, &hosts, &err));
    CHECK(err.find("expected host:slots pairs like worker-0:2,worker-1:2") != std::string::npos);
    CHECK(hosts == std::vector<HostSlots>{{"keep", 1}});  // unchanged on failure
  }
}

TEST_CASE("-H error text names the bad element and the whole flag") {
  std::vector<HostSlots> hosts;
  std::string err;
  CHECK_FALSE(ParseHostsFlag("a:1,gpu1", &hosts, &err));
  CHECK(err == "invalid host 'gpu1' in -H 'a:1,gpu1': expected host:slots pairs like worker-0:2,worker-1:2");
}

TEST_CASE("a host listed twice is an error rather than corrupt bookkeeping") {
  std::vector<HostSlots> hosts;
  std::string err;
  CHECK_FALSE(ParseHostsFlag("a:1,b:1,a:2", &hosts, &err));
  CHECK(err == "host 'a' is listed twice: give each host once with its total slots");
}

TEST_CASE("hostfiles take slots=N, comments, blank lines and bare hosts") {
  std::vector<HostSlots> hosts;
  std::string err;
  const char* text =
      "# cluster\n"
      "\n"
      "node-a slots=4\n"
      "  node-b   slots=2   # trailing comment\n"
      "node-c\n"
      "node-d slots=8 max_slots=8\r\n";
  REQUIRE(ParseHostfile("hosts.txt", text, &hosts, &err));
  CHECK(hosts == std::vector<HostSlots>{{"node-a", 4}, {"node-b", 2}, {"node-c", 1}, {"node-d", 8}});
  CHECK(FormatHosts(hosts) == "node-a:4,node-b:2,node-c:1,node-d:8");
}

TEST_CASE("total slots are summed in 64 bits") {
  // Each count may be INT_MAX; fuzz_host_slots's UBSan reported the old int sum overflowing.
  int max = std::numeric_limits<int>::max();
  CHECK(TotalSlots({{"a", max}, {"b", max}, {"c", 1}}) == 2 * int64_t{max} + 1);
  CHECK(TotalSlots({}) == 0);
}

TEST_CASE("hostfile errors name the file and line") {
  struct Case {
    const char* text;
    const char* err;
  } cases[] = {
      {"a slots=2\nb slots=x\n", "hosts.txt line 2: 'slots=x' is not a whole number of slots: write e.g. slots=4"},
      {"a slots=2\n\n# c\nb cpus=4\n", "hosts.txt line 4: unexpected 'cpus=4': expected a line like 'worker-0 slots=4'"},
      {"a:2\n", "hosts.txt line 1: invalid host name 'a:2': expected a line like 'worker-0 slots=4'"},
      {"a slots=1 slots=2\n", "hosts.txt line 1: slots= is given twice: keep one"},
      {"a\na slots=2\n", "hosts.txt line 2: host 'a' is listed twice: give each host once with its total slots"},
      {"# nothing\n\n", "hosts.txt: no hosts in hostfile: add lines like 'worker-0 slots=4'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::vector<HostSlots> hosts;
    std::string err;
    CHECK_FALSE(ParseHostfile("hosts.txt", c.text, &hosts, &err));
    CHECK(err == c.err);
  }
}
