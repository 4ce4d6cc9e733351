// The runtime's one job_end: every way a job can end early writes exactly one, with its cause.
// A fake spawner stands in for processes; the events file is real.
#include "launcher/runtime.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "cli/flags.h"
#include "cli/wiring.h"
#include "tests/launcher/process/fake_spawner.h"

namespace etrun::launcher {
namespace {

class FixedClock : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(std::chrono::seconds(1000)); }
};

// Runs `config` on the runtime with `spawner`; returns the exit code and fills *events.
int RunJob(JobConfig config, FakeSpawner* spawner, std::vector<nlohmann::json>* events) {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("etrun-runtime-test-" + std::to_string(getpid()) + ".jsonl");
  config.events_file = path.string();
  FixedClock clock;
  JobServices services{spawner, nullptr, &clock, nullptr, {}};
  std::vector<std::string> environment = {"PATH=/usr/bin:/bin"};
  int code = Runtime(config, environment, services, cli::MakePolicy(config)).Run();
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) events->push_back(nlohmann::json::parse(line));
  std::filesystem::remove(path);
  return code;
}

int Count(const std::vector<nlohmann::json>& events, const std::string& name) {
  return static_cast<int>(std::count_if(events.begin(), events.end(),
                                        [&name](const nlohmann::json& e) { return e["event"] == name; }));
}

JobConfig Static(int np) {
  JobConfig config;
  config.num_proc = np;
  config.command = {"/bin/true"};
  return config;
}

// `etrun <flags> /bin/true` as the CLI parses it. -H and --hostfile are parsed (the file read)
// there, once; a bad one is no usage error but host_list_error, for the runtime to report.
JobConfig FromFlags(std::vector<std::string> flags) {
  flags.insert(flags.begin(), "etrun");
  flags.push_back("/bin/true");
  JobConfig config;
  const cli::ParseOutcome outcome = cli::ParseArgs(flags, &config);
  CAPTURE(outcome.err);
  REQUIRE(outcome.exit_code == -1);
  return config;
}

TEST_CASE("a job whose first rank cannot start ends once, naming the rank") {
  FakeSpawner spawner;
  spawner.refuse = true;
  std::vector<nlohmann::json> events;
  CHECK(RunJob(Static(2), &spawner, &events) == kExitFailure);
  REQUIRE(Count(events, "job_start") == 1);
  REQUIRE(Count(events, "job_end") == 1);
  CHECK(events.back()["event"] == "job_end");
  CHECK(events.back()["exit_code"] == kExitFailure);
  CHECK(events.back()["cause"] == "rank 0 on localhost: refused by the fake spawner");
  CHECK(spawner.started.size() == 1);  // the second rank was never asked for
}

TEST_CASE("every failure before anything starts writes one job_end with its cause") {
  struct Case {
    const char* what;
    JobConfig config;
    int code;
    const char* cause_start;
  };
  JobConfig bad_hosts = FromFlags({"-np", "2", "-H", "a:x"});
  JobConfig too_few = FromFlags({"-np", "4", "-H", "localhost:2"});
  JobConfig missing = Static(1);
  missing.command = {"/no/such/program"};
  JobConfig elastic_bad_nic = Static(1);
  elastic_bad_nic.min_np = 1;
  elastic_bad_nic.network_interfaces = {"no-such-nic0"};
  JobConfig elastic_bad_hostfile =
      FromFlags({"-np", "1", "--min-np", "1", "-hostfile", "/no/such/hostfile"});
  JobConfig mpi_bad_hosts = FromFlags({"--mpi", "-np", "1", "-H", "a:x"});
  std::vector<Case> cases = {
      {"bad -H", bad_hosts, kExitUsage, "invalid host 'a:x' in -H 'a:x'"},
      {"too few slots", too_few, kExitUsage,
       "requested 4 processes but the hosts provide only 2 slots"},
      {"no such program", missing, kExitCommandNotFound, "cannot run '/no/such/program'"},
      {"elastic, bad NIC", elastic_bad_nic, kExitUsage,
       "--network-interface no-such-nic0: no such interface with an IPv4 address"},
      {"elastic, no hostfile", elastic_bad_hostfile, kExitUsage,
       "cannot read hostfile /no/such/hostfile"},
      {"mpi, bad -H", mpi_bad_hosts, kExitUsage, "invalid host 'a:x' in -H 'a:x'"},
  };
  for (const Case& c : cases) {
    std::string what = c.what;
    CAPTURE(what);
    FakeSpawner spawner;
    std::vector<nlohmann::json> events;
    CHECK(RunJob(c.config, &spawner, &events) == c.code);
    CHECK(spawner.started.empty());
    REQUIRE(Count(events, "job_end") == 1);
    CHECK(events.back()["event"] == "job_end");
    CHECK(events.back()["exit_code"] == c.code);
    std::string cause = events.back()["cause"];
    CHECK_FALSE(cause.empty());
    REQUIRE_FALSE(std::string(c.cause_start).empty());  // else the check below always holds
    CHECK(cause.rfind(c.cause_start, 0) == 0);
  }
}

}  // namespace
}  // namespace etrun::launcher
