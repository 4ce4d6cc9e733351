// The rank-start policy (RankLauncher) over a fake spawner: environment, ports, GPUs, per-rank
// files, events and admission, with no process started.
#include "launcher/rank_launcher.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include "launcher/agent/agent.h"
#include "launcher/agent/agent_bootstrap.h"
#include "launcher/agent/wire.h"
#include "launcher/output/output_sink.h"
#include "launcher/process/shell_words.h"
#include "launcher/ssh/remote_shell.h"
#include "tests/launcher/fake_remote.h"
#include "tests/launcher/process/fake_spawner.h"

namespace etrun::launcher {
namespace {

uint32_t Ip(const char* text) {
  struct in_addr a;
  REQUIRE(inet_pton(AF_INET, text, &a) == 1);
  return ntohl(a.s_addr);
}

// A launcher over fakes: this machine is "localhost" (and 127.0.0.1); 127.0.0.2 is another host.
struct Fixture {
  Fixture() {
    config.command = {"python3", "train.py"};
    config.num_proc = 12;
    events.Capture();
    hosts.Resolve({"localhost", "127.0.0.2"});
  }
  RankLauncher& Launcher() {
    if (!launcher) {
      launcher = std::make_unique<RankLauncher>(config, environment, &ranks, &sink,
                                                ConsoleOutput(config, &sink), &remote, &hosts,
                                                &access, &events);
    }
    return *launcher;
  }
  static RankRequest Request(const std::string& host, int rank, int local_rank) {
    RankRequest r;
    r.slot.hostname = host;
    r.slot.rank = rank;
    r.slot.local_rank = local_rank;
    r.slot.size = 12;
    r.slot.local_size = 4;
    r.group_rank = 1;
    r.run.rendezvous_addr = "127.0.0.1";
    r.run.rendezvous_port = 4242;
    r.run.master_addr = "127.0.0.1";
    r.run.master_port = 29500;
    r.round = 3;
    return r;
  }

  JobConfig config;
  std::vector<std::string> environment = {"PATH=/usr/bin:/bin", "HOROVOD_RANK=99", "MINE=1"};
  boost::asio::io_context io;
  FakeSpawner spawner;
  OutputSink sink;
  RankSet ranks{&io, &spawner, &sink, nullptr, std::chrono::milliseconds(100)};
  FakeRemote remote{config};
  discovery::HostDirectory hosts{{{"lo", {"127.0.0.1"}}}};
  rendezvous::AccessList access{{}, {}};
  events::EventLog events;
  std::unique_ptr<RankLauncher> launcher;
};

// The rank a remote rank's spec asks its agent to start (the agent wire's kStart data).
agent::RankStart Started(const LaunchSpec& spec) {
  agent::RankStart start;
  std::string err;
  REQUIRE(agent::ParseRankStart(spec.remote_command, &start, &err));
  return start;
}

bool Has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST_CASE("a local rank runs the command with its slot's variables, the run's ports and extras") {
  // Given rank 5 (local rank 1) on this machine in round 3 with a restart count, when started,
  // the spawner gets the command with the slot's Horovod and torch variables winning over
  // inherited ones, and the extra variables set once, last.
  Fixture f;
  RankRequest request = Fixture::Request("localhost", 5, 1);
  request.extra_env = {"TORCHELASTIC_RESTART_COUNT=2"};
  f.environment.push_back("TORCHELASTIC_RESTART_COUNT=0");
  int id = -1;
  std::string err;
  REQUIRE(f.Launcher().Start(request, &id, &err));
  REQUIRE(f.spawner.started.size() == 1);
  const LaunchSpec& spec = f.spawner.started[0];
  CHECK(spec.argv == std::vector<std::string>{"python3", "train.py"});
  CHECK_FALSE(spec.supervisor);
  CHECK(EnvOf(spec, "HOROVOD_RANK") == "5");
  CHECK(EnvOf(spec, "HOROVOD_LOCAL_RANK") == "1");
  CHECK(EnvOf(spec, "HOROVOD_GLOO_RENDEZVOUS_PORT") == "4242");
  CHECK(EnvOf(spec, "MASTER_PORT") == "29500");
  CHECK(EnvOf(spec, "GROUP_RANK") == "1");
  CHECK(EnvOf(spec, "MINE") == "1");
  CHECK(std::count_if(spec.env.begin(), spec.env.end(), [](const std::string& kv) {
          return kv.starts_with("TORCHELASTIC_RESTART_COUNT=");
        }) == 1);
  CHECK(spec.env.back() == "TORCHELASTIC_RESTART_COUNT=2");
}

TEST_CASE("a started rank is announced with its pid and round, and its host admitted") {
  Fixture f;
  int id = -1;
  std::string err;
  CHECK_FALSE(f.access.Allows(Ip("127.0.0.2")));
  REQUIRE(f.Launcher().Start(Fixture::Request("127.0.0.2", 7, 0), &id, &err));
  REQUIRE(f.events.captured().size() == 1);
  const nlohmann::json& e = f.events.captured()[0];
  CHECK(e["event"] == "rank_started");
  CHECK(e["rank"] == 7);
  CHECK(e["host"] == "127.0.0.2");
  CHECK(e["round"] == 3);
  CHECK(e["pid"].is_null());  // its host's agent runs it
  REQUIRE(f.Launcher().Start(Fixture::Request("localhost", 8, 0), &id, &err));
  CHECK(f.events.captured()[1]["pid"] == FakeSpawner::kFirstPid);
  CHECK(f.access.Allows(Ip("127.0.0.2")));
  CHECK(f.hosts.misses() == 0);  // nothing was looked up on the "loop"
}

TEST_CASE("a rank on another host is its agent's, with the exported environment") {
  // Given 127.0.0.2, not this machine: the rank is planned on its host's agent with a command
  // that carries the slot's variables but not the launcher's CUDA_VISIBLE_DEVICES; starting it
  // asks that agent, not the spawner.
  Fixture f;
  f.environment.push_back("CUDA_VISIBLE_DEVICES=0,1");
  LaunchSpec spec;
  std::string err;
  REQUIRE(f.Launcher().Plan(Fixture::Request("127.0.0.2", 2, 0), &spec, &err));
  CHECK(spec.remote_host == &f.remote);
  agent::RankStart start = Started(spec);
  CHECK(Has(start.env, "HOROVOD_RANK=2"));
  CHECK(Has(start.env, "MINE=1"));
  CHECK(EnvValue(start.env, "CUDA_VISIBLE_DEVICES").empty());
  CHECK(start.argv == std::vector<std::string>{"python3", "train.py"});
  int id = -1;
  REQUIRE(f.Launcher().Start(Fixture::Request("127.0.0.2", 2, 0), &id, &err));
  CHECK(f.remote.started == std::vector<int>{id});
  CHECK(f.spawner.started.empty());
  CHECK(f.ranks.active() == 1);
}

TEST_CASE("a remote rank is told to find its network there; a named interface is checked there") {
  // Per host (no --network-interface, hosts elsewhere): the agent sets the rendezvous address,
  // MASTER_ADDR (rank 0 here) and the interfaces on the host (host_network_test finds them).
  Fixture f;
  RankRequest request = Fixture::Request("127.0.0.2", 2, 0);
  request.run.per_host = true;
  request.run.master_is_launcher = true;
  request.run.nics = {"lo"};
  LaunchSpec spec;
  std::string err;
  REQUIRE(f.Launcher().Plan(request, &spec, &err));
  agent::RankStart start = Started(spec);
  CHECK(start.ssh_connection);
  CHECK(start.network.resolve);
  CHECK(start.network.address_vars == std::vector<std::string>{"HOROVOD_GLOO_RENDEZVOUS_ADDR", "MASTER_ADDR"});
  for (const char* v : {"HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    CHECK_MESSAGE(Has(start.network.interface_vars, v), v);
  }
  // The user's own GLOO_SOCKET_IFNAME is kept; rank 0 elsewhere: MASTER_ADDR is its host's.
  f.environment.push_back("GLOO_SOCKET_IFNAME=ib0");
  request.run.master_is_launcher = false;
  REQUIRE(f.Launcher().Plan(request, &spec, &err));
  start = Started(spec);
  CHECK_FALSE(Has(start.network.interface_vars, "GLOO_SOCKET_IFNAME"));
  CHECK_FALSE(Has(start.network.address_vars, "MASTER_ADDR"));
  CHECK(Has(start.network.interface_vars, "HOROVOD_GLOO_IFACE"));
  // --network-interface: horovodrun's meaning, the name checked on the host; nothing resolved.
  f.config.network_interfaces = {"lo"};
  request.run.per_host = false;
  REQUIRE(f.Launcher().Plan(request, &spec, &err));
  start = Started(spec);
  CHECK(start.network.require_interface == "lo");
  CHECK_FALSE(start.network.resolve);
}

TEST_CASE("GPU slots give each local rank its devices, and refuse a rank beyond them") {
  Fixture f;
  RankRequest request = Fixture::Request("localhost", 3, 1);
  request.run.gpus.gpus_per_rank = 2;
  request.run.gpus.pool = {"0", "1", "2", "3"};
  request.run.gpus.counted = true;
  LaunchSpec spec;
  std::string err;
  REQUIRE(f.Launcher().Plan(request, &spec, &err));
  CHECK(EnvOf(spec, "CUDA_VISIBLE_DEVICES") == "2,3");
  request.slot.local_rank = 2;
  CHECK_FALSE(f.Launcher().Plan(request, &spec, &err));
  CHECK(err.find("lower --max-np or the host's slots") != std::string::npos);
}

TEST_CASE("--output-filename gives each rank its own files; an unwritable directory fails it") {
  Fixture f;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("etrun-rank-launcher-" + std::to_string(getpid()));
  f.config.output_filename = dir.string();
  int id = -1;
  std::string err;
  REQUIRE(f.Launcher().Start(Fixture::Request("localhost", 4, 0), &id, &err));
  CHECK(std::filesystem::exists(dir / "rank.04" / "stdout"));
  CHECK(std::filesystem::exists(dir / "rank.04" / "stderr"));
  f.config.output_filename = "/proc/no-such-dir";
  CHECK_FALSE(f.Launcher().Start(Fixture::Request("localhost", 5, 0), &id, &err));
  CHECK(err.find("choose a writable --output-filename directory") != std::string::npos);
  CHECK(f.spawner.started.size() == 1);  // the second never reached the spawner
  std::filesystem::remove_all(dir);
}

TEST_CASE("a rank the spawner refuses is reported with its rank and host, and not announced") {
  Fixture f;
  f.spawner.refuse = true;
  int id = -1;
  std::string err;
  CHECK_FALSE(f.Launcher().Start(Fixture::Request("localhost", 1, 1), &id, &err));
  CHECK(err == "rank 1 on localhost: refused by the fake spawner");
  CHECK(f.events.captured().empty());
  CHECK(f.ranks.active() == 0);
}

TEST_CASE("rank directories are padded to the digits of np-1") {
  CHECK(RankDirName(0, 1) == "rank.0");
  CHECK(RankDirName(3, 10) == "rank.3");
  CHECK(RankDirName(3, 11) == "rank.03");
  CHECK(RankDirName(42, 1000) == "rank.042");
}

}  // namespace
}  // namespace etrun::launcher

namespace etrun::launcher {
namespace {

TEST_CASE("with --remote-shell a host's agent starts through the command, {host} quoted") {
  // The one command per host: the template with the host quoted, running the bootstrap that
  // finds (or receives) this build of etrun and runs it as the host's agent.
  agent::AgentOptions options;
  options.host = "127.0.0.2";
  std::string bootstrap = agent::BootstrapCommand({"abc123", 4096, "/opt/etrun/bin/etrun-agent"}, options);
  CHECK(bootstrap.find("sha256sum") != std::string::npos);  // every candidate checked by content
  CHECK(bootstrap.find("--host '127.0.0.2'") != std::string::npos);
  CHECK(bootstrap.find("head -c 4096") != std::string::npos);
  CHECK(bootstrap.find('\n') == std::string::npos);  // one line: `sh -s` there reads it whole
  // The command runs `sh -s`, which reads the bootstrap from its stdin: the same words whether
  // the command passes them on as arguments (kubectl) or as one line to parse again (ssh).
  CHECK(RemoteShellCommand("kubectl exec -i {host} -n ns --", "127.0.0.2") ==
        "exec kubectl exec -i '127.0.0.2' -n ns -- sh -s");
  // A rank's own route (a node of another allocation) reaches the starter with the rank; a rank
  // with none gets the job's (--remote-shell, the allocation's step): the one place they meet.
  Fixture f;
  f.config.start = {"kubectl exec -i {host} --", nullptr, true};
  RankRequest request = Fixture::Request("127.0.0.2", 2, 0);
  request.start = {"srun --overlap --nodelist={host}", nullptr, false};
  LaunchSpec spec;
  std::string err;
  REQUIRE(f.Launcher().Plan(request, &spec, &err));
  REQUIRE(f.Launcher().Plan(Fixture::Request("127.0.0.2", 3, 1), &spec, &err));
  REQUIRE(f.remote.planned.size() == 2);
  CHECK(f.remote.planned[0].start == discovery::StartRoute{"srun --overlap --nodelist={host}", nullptr, false});
  CHECK(f.remote.planned[1].start == f.config.start);
  std::string unused;
  CHECK(CheckRemoteShell("ssh -p 2222 {host}", &unused));
  CHECK_FALSE(CheckRemoteShell("kubectl exec -i pod --", &unused));
}

TEST_CASE("a host name beginning with '-' never reaches the remote shell's command") {
  // Given host '-G' (ssh would read it as -G, print its configuration and run nothing), the line
  // runs nothing of the template: it says why on stderr and exits 2. Every entry refuses such
  // names first (issue 35); this is the last line.
  const std::string shell = "touch marker && ssh {host}";
  for (const char* host : {"-G", "-oProxyCommand=touch x", "--", "-", "-'q"}) {
    CAPTURE(host);
    std::string why = "host names cannot begin with '-' (the remote shell would read '" +
                      std::string(host) + "' as an option): " + shell + " was not run";
    CHECK(RemoteShellCommand(shell, host) == "printf '%s\\n' " + ShellQuote(why) + " >&2; exit 2");
  }
  // A name with '-' inside is a name like any other.
  CHECK(RemoteShellCommand("ssh {host}", "node-1") == "exec ssh 'node-1' sh -s");
}

}  // namespace
}  // namespace etrun::launcher
