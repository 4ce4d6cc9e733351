// Who owns the other end of a loopback connection, asked of the kernel over real sockets: by
// sock_diag netlink and by the /proc/net/tcp fallback.
#include "rendezvous/peer_uid.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace etrun::rendezvous {
namespace {

// A listening socket on 127.0.0.1 and the connections it accepts.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof(sin);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&sin), &len);
    port_ = ntohs(sin.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

  // Accepts one connection; *c describes it from the server's side. Returns its fd.
  int Accept(TcpFourTuple* c) {
    sockaddr_in peer{}, local{};
    socklen_t len = sizeof(peer);
    int fd = accept(fd_, reinterpret_cast<sockaddr*>(&peer), &len);
    REQUIRE(fd >= 0);
    len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    *c = {ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port), ntohl(local.sin_addr.s_addr), ntohs(local.sin_port)};
    return fd;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int ConnectV4(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(port));
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) == 0);
  return fd;
}

// The lookup both ways: netlink (unless `proc`), and /proc.
std::optional<uint32_t> Find(const TcpFourTuple& c, bool proc) {
  PeerUid lookup;
  if (proc) lookup.TEST_UseProc();
  std::string err;
  std::optional<uint32_t> uid = lookup.Find(c, &err);
  if (!proc) CHECK_FALSE(lookup.using_proc());  // netlink answered (not refused here)
  if (!uid) CHECK_FALSE(err.empty());
  return uid;
}

TEST_CASE("a loopback connection made by this process belongs to this process's user") {
  // Given a connection from this process, IPv4 or IPv6 with a v4-mapped address, both lookups
  // name our own uid.
  Listener listener;
  for (bool proc : {false, true}) {
    CAPTURE(proc);
    int client = ConnectV4(listener.port());
    TcpFourTuple c;
    int server = listener.Accept(&c);
    CHECK(Find(c, proc) == geteuid());
    close(client);
    close(server);
  }
  int client6 = socket(AF_INET6, SOCK_STREAM, 0);
  if (client6 >= 0) {  // an IPv6 stack is there
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(static_cast<uint16_t>(listener.port()));
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6.sin6_addr);
    REQUIRE(connect(client6, reinterpret_cast<sockaddr*>(&sin6), sizeof(sin6)) == 0);
    TcpFourTuple c;
    int server = listener.Accept(&c);
    CHECK(Find(c, false) == geteuid());
    CHECK(Find(c, true) == geteuid());
    close(client6);
    close(server);
  }
}

TEST_CASE("a peer that closed its end, or a connection nobody has, is unknown, not root's") {
  // Given a client that closed its socket (the kernel keeps it in FIN_WAIT or TIME_WAIT and
  // reports uid 0 for it), nothing is found: an unowned socket must not pass for root's.
  Listener listener;
  int client = ConnectV4(listener.port());
  TcpFourTuple c;
  int server = listener.Accept(&c);
  close(client);
  CHECK_FALSE(Find(c, false).has_value());
  CHECK_FALSE(Find(c, true).has_value());
  close(server);
  TcpFourTuple nobody{0x7f000001, 1, 0x7f000001, 2};
  CHECK_FALSE(Find(nobody, false).has_value());
  CHECK_FALSE(Find(nobody, true).has_value());
}

TEST_CASE("a loopback connection made by another user is that user's") {
  // Given a child that becomes nobody (65534) and connects, both lookups say 65534. Root only.
  if (geteuid() != 0) return;
  Listener listener;
  int ready[2], done[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(done) == 0);
  int port = listener.port();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(done[1]);  // so that the parent's close is an end of file here
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(static_cast<uint16_t>(port));
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) _exit(3);
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    if (read(done[0], &byte, 1) < 0) _exit(5);  // keep the socket open until the parent is done
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  TcpFourTuple c;
  int server = listener.Accept(&c);
  CHECK(Find(c, false) == 65534u);
  CHECK(Find(c, true) == 65534u);
  close(done[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WEXITSTATUS(status) == 0);
  close(server);
  for (int fd : {ready[0], ready[1], done[0]}) close(fd);
}

TEST_CASE("the /proc fallback reads tcp and tcp6 lines and skips unowned sockets") {
  // Given tables with a TIME_WAIT line (uid 0, inode 0), a listener and a live v4-mapped socket,
  // only the live socket with the exact four-tuple answers.
  char dir[] = "/tmp/etrun-proc-net-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string header =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
  // 127.0.0.1:40000 -> 127.0.0.1:8080 in TIME_WAIT; 127.0.0.1:40001 listening.
  std::ofstream(std::string(dir) + "/tcp")
      << header
      << "   0: 0100007F:9C40 0100007F:1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3\n"
      << "   1: 0100007F:9C41 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1\n";
  // ::ffff:127.0.0.1:40002 -> ::ffff:127.0.0.1:8080, established, uid 1234.
  std::ofstream(std::string(dir) + "/tcp6")
      << header
      << "   0: 0000000000000000FFFF00000100007F:9C42 0000000000000000FFFF00000100007F:1F90 01 "
         "00000000:00000000 00:00000000 00000000  1234        0 4242 1\n";
  std::string err;
  TcpFourTuple time_wait{0x7f000001, 40000, 0x7f000001, 8080};
  TcpFourTuple listening{0x7f000001, 40001, 0x7f000001, 8080};
  TcpFourTuple mapped{0x7f000001, 40002, 0x7f000001, 8080};
  TcpFourTuple other_port{0x7f000001, 40002, 0x7f000001, 8081};
  auto uids = PeerUidsFromProcNet({time_wait, listening, mapped, other_port}, &err, dir);
  REQUIRE(uids.size() == 4);
  CHECK_FALSE(uids[0].has_value());
  CHECK_FALSE(uids[1].has_value());
  CHECK(uids[2] == 1234u);
  CHECK_FALSE(uids[3].has_value());
  CHECK(err == "no live socket on this machine has that connection's address and port");
  CHECK_FALSE(PeerUidsFromProcNet({mapped}, &err, std::string(dir) + "/missing")[0].has_value());
  CHECK(err == std::string("cannot read ") + dir + "/missing/tcp");
  std::remove((std::string(dir) + "/tcp").c_str());
  std::remove((std::string(dir) + "/tcp6").c_str());
  rmdir(dir);
}

TEST_CASE("many connections are looked up at once, with one reading of /proc") {
  // Given three live connections and one whose client closed, FindAll names our uid for the
  // three and nobody for the closed one, both ways.
  Listener listener;
  std::vector<int> fds;
  std::vector<TcpFourTuple> connections;
  for (int i = 0; i < 4; ++i) {
    fds.push_back(ConnectV4(listener.port()));
    TcpFourTuple c;
    fds.push_back(listener.Accept(&c));
    connections.push_back(c);
  }
  close(fds[2]);  // the second connection's client
  fds[2] = -1;
  for (bool proc : {false, true}) {
    CAPTURE(proc);
    PeerUid lookup;
    if (proc) lookup.TEST_UseProc();
    std::string err;
    auto uids = lookup.FindAll(connections, &err);
    REQUIRE(uids.size() == 4);
    CHECK(uids[0] == geteuid());
    CHECK_FALSE(uids[1].has_value());
    CHECK(uids[2] == geteuid());
    CHECK(uids[3] == geteuid());
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

TEST_CASE("a netlink lookup costs microseconds") {
  // Given one live connection, 10,000 lookups (one per connection the store would admit) take
  // well under a second: about 1 us each on a 2-core VM.
  Listener listener;
  int client = ConnectV4(listener.port());
  TcpFourTuple c;
  int server = listener.Accept(&c);
  PeerUid lookup;
  std::string err;
  auto start = std::chrono::steady_clock::now();
  int found = 0;
  for (int i = 0; i < 10000; ++i) found += lookup.Find(c, &err).has_value() ? 1 : 0;
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / 10000;
  CHECK(found == 10000);
  CHECK_FALSE(lookup.using_proc());
  CHECK(us < 100);
  close(client);
  close(server);
}

}  // namespace
}  // namespace etrun::rendezvous
