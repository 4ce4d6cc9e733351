#include "discovery/host_slots.h"

#include <cstdint>
#include <limits>

#include <doctest/doctest.h>

using etrun::discovery::FormatHosts;
using etrun::discovery::HostSlots;
using etrun::discovery::IsValidHostName;
using etrun::discovery::OptionLikeHostError;
using etrun::discovery::ParseHostfile;
using etrun::discovery::ParseHostsFlag;
using etrun::discovery::StartsLikeOption;
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

TEST_CASE("a host name is letters, digits, '.', '_', '-', and never begins with '-'") {
  // Given names as users and scripts write them, the shared rule takes real names (a '-' inside,
  // a leading digit, '.' or '_') and refuses what a command would read as an option (issue 35).
  struct Case {
    const char* name;
    bool valid;
    bool option_like;
  } cases[] = {
      {"worker-0", true, false},  {"127.0.0.1", true, false}, {"a", true, false},
      {"0node", true, false},     {".hidden", true, false},   {"_x", true, false},
      {"node-", true, false},     {"a--b", true, false},      {"-G", false, true},
      {"-", false, true},         {"--", false, true},        {"-oProxyCommand", false, true},
      {"", false, false},         {"a b", false, false},      {"user@a", false, false},
      {"-a b", false, true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK(IsValidHostName(c.name) == c.valid);
    CHECK(StartsLikeOption(c.name) == c.option_like);
  }
  CHECK(OptionLikeHostError("-G") ==
        "host names cannot begin with '-' (ssh or a remote shell would read '-G' as an option)");
}

TEST_CASE("-H refuses a host name beginning with '-', saying why and what to write instead") {
  // Given -H=-G:1, ssh would have run as `ssh -G sh -s`: the flag is refused and nothing kept.
  struct Case {
    const char* text;
    const char* err;
  } cases[] = {
      {"-G:1", "invalid host '-G:1' in -H '-G:1': host names cannot begin with '-' (ssh or a remote "
               "shell would read '-G' as an option): give each host's name or address, like "
               "worker-0:2,worker-1:2"},
      {"a:1, -oProxyCommand=x:2", "invalid host '-oProxyCommand=x:2' in -H 'a:1, -oProxyCommand=x:2': "
               "host names cannot begin with '-' (ssh or a remote shell would read "
               "'-oProxyCommand=x' as an option): give each host's name or address, like "
               "worker-0:2,worker-1:2"},
      {"-G", "invalid host '-G' in -H '-G': host names cannot begin with '-' (ssh or a remote shell "
             "would read '-G' as an option): give each host's name or address, like "
             "worker-0:2,worker-1:2"},
      {"-:1", "invalid host '-:1' in -H '-:1': host names cannot begin with '-' (ssh or a remote "
              "shell would read '-' as an option): give each host's name or address, like "
              "worker-0:2,worker-1:2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::vector<HostSlots> hosts = {{"keep", 1}};
    std::string err;
    CHECK_FALSE(ParseHostsFlag(c.text, &hosts, &err));
    CHECK(err == c.err);
    CHECK(hosts == std::vector<HostSlots>{{"keep", 1}});
  }
  std::vector<HostSlots> hosts;
  std::string err;
  REQUIRE(ParseHostsFlag("node-:1,a-b:2", &hosts, &err));  // a '-' elsewhere is fine
  CHECK(hosts == std::vector<HostSlots>{{"node-", 1}, {"a-b", 2}});
}

TEST_CASE("a hostfile line naming a host that begins with '-' is refused by file and line") {
  struct Case {
    const char* text;
    const char* err;
  } cases[] = {
      {"-G slots=1\n", "hosts.txt line 1: invalid host name '-G': host names cannot begin with '-' "
                       "(ssh or a remote shell would read '-G' as an option): give the host's name "
                       "or address, like 'worker-0 slots=4'"},
      {"a\n# c\n  -oProxyCommand=x\n", "hosts.txt line 3: invalid host name '-oProxyCommand=x': "
                       "host names cannot begin with '-' (ssh or a remote shell would read "
                       "'-oProxyCommand=x' as an option): give the host's name or address, like "
                       "'worker-0 slots=4'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    std::vector<HostSlots> hosts = {{"keep", 1}};
    std::string err;
    CHECK_FALSE(ParseHostfile("hosts.txt", c.text, &hosts, &err));
    CHECK(err == c.err);
    CHECK(hosts == std::vector<HostSlots>{{"keep", 1}});
  }
}
