// A rank's command as its host's agent runs it (rank_command.h's RankCommand with HostNetwork),
// run for real under sh and awk on this machine, as a remote host would run it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "launcher/agent/rank_command.h"

namespace etrun::launcher::agent {
namespace {

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

std::string ReadAll(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

// Runs `argv` with exactly `env`, its stdin a pipe held open until it has written everything.
Run Execute(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int in[2], out[2], err[2];
  REQUIRE(pipe(in) == 0);
  REQUIRE(pipe(out) == 0);
  REQUIRE(pipe(err) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    std::vector<char*> a, e;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    for (const std::string& s : env) e.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    e.push_back(nullptr);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  Run run;
  run.out = ReadAll(out[0]);
  run.err = ReadAll(err[0]);
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

// A rank printing what it was told, run as its agent runs it: `sh -c <its command>`.
Run RunRank(const HostNetwork& network, bool ssh_connection, const std::string& ssh_env) {
  RemoteRank rank;
  rank.host = "h1";
  rank.cwd = "/";
  rank.env = {"HOROVOD_GLOO_RENDEZVOUS_ADDR=127.0.0.1", "HOROVOD_GLOO_IFACE=br-launcher",
              "MASTER_ADDR=127.0.0.1", "KEPT=yes"};
  rank.argv = {"sh", "-c", "echo \"$HOROVOD_GLOO_RENDEZVOUS_ADDR $HOROVOD_GLOO_IFACE $MASTER_ADDR $KEPT\""};
  rank.network = network;
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  if (!ssh_env.empty()) env.push_back("SSH_CONNECTION=" + ssh_env);
  return Execute({"/bin/sh", "-c", RankCommand(rank, ssh_connection)}, env);
}

HostNetwork Resolving(const std::string& launcher_address) {
  HostNetwork net;
  net.resolve = true;
  net.launcher_address = launcher_address;
  net.address_vars = {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "MASTER_ADDR"};
  net.interface_vars = {"HOROVOD_GLOO_IFACE"};
  return net;
}

TEST_CASE("the route program picks the longest matching up route, then the lowest metric") {
  // /proc/net/route from a little-endian machine: default via eth0; 198.18.0.0/24 on eth1 (and,
  // costlier, on eth3); 198.18.0.0/16 on eth2; 203.0.113.0/24 on eth4 but not up.
  std::string path = "/tmp/etrun-route-" + std::to_string(getpid());
  std::ofstream(path) << "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
                         "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
                         "eth3\t000012C6\t00000000\t0001\t0\t0\t200\t00FFFFFF\t0\t0\t0\n"
                         "eth1\t000012C6\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
                         "eth2\t000012C6\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
                         "eth4\t007100CB\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
  auto route = [&path](const std::string& address) {
    Run r = Execute({"/usr/bin/awk", "-v", "a=" + address, RouteAwkProgram(), path}, {});
    CHECK(r.err == "");
    return r.out;
  };
  CHECK(route("198.18.0.7") == "eth1\n");
  CHECK(route("198.18.9.7") == "eth2\n");
  CHECK(route("203.0.113.5") == "eth0\n");  // its own route is down: the default
  CHECK(route("127.0.0.1") == "lo\n");
  CHECK(route("fe80::1") == "");
  std::ofstream(path) << "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
                         "eth1\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
  CHECK(route("203.0.113.5") == "");  // no default route, no match
  std::remove(path.c_str());
}

TEST_CASE("a remote rank is told the launcher address its SSH connection came from") {
  // 127.0.0.5 stands for the launcher's address as the host sees it; loopback routes are "lo".
  Run r = RunRank(Resolving("198.18.0.1"), true, "127.0.0.5 40000 127.0.0.9 22");
  CHECK(r.code == 0);
  CHECK(r.err == "");
  CHECK(r.out == "127.0.0.5 lo 127.0.0.5 yes\n");
}

TEST_CASE("without a usable SSH connection a remote rank is told the launcher's address") {
  // Through a remote shell (ssh_connection false) SSH_CONNECTION may name a bastion: ignored.
  CHECK(RunRank(Resolving("127.0.0.6"), false, "127.0.0.5 40000 127.0.0.9 22").out ==
        "127.0.0.6 lo 127.0.0.6 yes\n");
  // An IPv6 connection gives no IPv4 launcher address: the given one.
  CHECK(RunRank(Resolving("127.0.0.6"), true, "::1 40000 ::1 22").out == "127.0.0.6 lo 127.0.0.6 yes\n");
  // Resolution off: the variables as set.
  CHECK(RunRank(HostNetwork{}, true, "127.0.0.5 40000 127.0.0.9 22").out ==
        "127.0.0.1 br-launcher 127.0.0.1 yes\n");
}

TEST_CASE("a host with no route to the launcher, or without the named interface, fails in one line") {
  Run r = RunRank(Resolving("not-an-address"), false, "");
  CHECK(r.code == kHostNetworkFailure);
  CHECK(r.out == "");
  CHECK(r.err == "etrun: error: host h1 has no route to the launcher at not-an-address: name the "
                 "launcher's interface the hosts reach with --network-interface\n");
  HostNetwork named;
  named.require_interface = "nosuch0";
  r = RunRank(named, true, "");
  CHECK(r.code == kHostNetworkFailure);
  CHECK(r.err == "etrun: error: host h1 has no interface nosuch0 (--network-interface): name one "
                 "every host has, or leave the flag out to let etrun find each host's\n");
  named.require_interface = "lo";
  CHECK(RunRank(named, true, "").out == "127.0.0.1 br-launcher 127.0.0.1 yes\n");
}

TEST_CASE("a rank's command runs in its directory with its environment over the login's") {
  RemoteRank rank;
  rank.host = "h1";
  rank.cwd = "/tmp";
  rank.env = {"GIVEN=it's here", "LOGIN=replaced"};
  rank.argv = {"sh", "-c", "echo \"$(pwd) $GIVEN $LOGIN $FROM_LOGIN\"; printf 'no newline' >&2; exit 3"};
  Run r = Execute({"/bin/sh", "-c", RankCommand(rank, false)},
                  {"PATH=/usr/bin:/bin", "LOGIN=login", "FROM_LOGIN=kept"});
  CHECK(r.code == 3);
  CHECK(r.out == "/tmp it's here replaced kept\n");
  CHECK(r.err == "no newline");
  rank.cwd = "/no/such/dir";  // the cd fails quietly: the rank runs where the login left it
  rank.argv = {"true"};
  r = Execute({"/bin/sh", "-c", RankCommand(rank, false)}, {"PATH=/usr/bin:/bin"});
  CHECK(r.code == 0);
  CHECK(r.err == "");
}

}  // namespace
}  // namespace etrun::launcher::agent
