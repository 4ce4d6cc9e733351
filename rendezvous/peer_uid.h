// PeerUid: which user owns the other end of a TCP connection that comes from this machine, asked
// of the kernel. The rendezvous store admits a peer on this machine only when its socket is the
// job user's (HttpServer::set_local_user); TCP has no SO_PEERCRED, but the peer's socket is in
// this machine's socket table, and its owner (the uid that created it) is there too.
//
// The lookup is an exact match on the connection's four-tuple (the peer's address and port as
// the socket's local end, ours as its remote end): one NETLINK_SOCK_DIAG request answered from
// the kernel's hash of connected sockets, about a microsecond. Where netlink is refused (a
// sandbox that filters it), /proc/net/tcp and /proc/net/tcp6 are read instead (a scan of every
// socket: milliseconds on a busy machine, so its caller asks for many connections at once,
// FindAll). It is sound against reused ports because the caller
// asks while it holds its own end of the connection open: no other socket can have that
// four-tuple meanwhile. A socket with no owner any more (closed by its process, waiting in
// FIN_WAIT or TIME_WAIT, whose uid the kernel reports as 0) is unknown, not root's.
//
// Thread-compatible: one PeerUid per thread (the accept loop owns one).
#ifndef ETRUN_RENDEZVOUS_PEER_UID_H_
#define ETRUN_RENDEZVOUS_PEER_UID_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace etrun::rendezvous {

// A TCP connection as seen from our side; IPv4, host byte order.
struct TcpFourTuple {
  uint32_t peer_address = 0;
  uint16_t peer_port = 0;
  uint32_t local_address = 0;
  uint16_t local_port = 0;
};

// The owners of the peer sockets of `connections`, in order, from one reading of /proc/net/tcp and
// tcp6 under `proc_net` (the fallback; public for tests). Nullopt for a connection no live socket
// matches; *err then says why (for the last such one).
std::vector<std::optional<uint32_t>> PeerUidsFromProcNet(const std::vector<TcpFourTuple>& connections,
                                                         std::string* err,
                                                         const std::string& proc_net = "/proc/net");

class PeerUid {
 public:
  PeerUid();
  ~PeerUid();
  PeerUid(const PeerUid&) = delete;
  PeerUid& operator=(const PeerUid&) = delete;

  // The uid that owns the peer end of `c`, or nullopt with *err saying why: no live socket of
  // this machine's network namespace has that four-tuple (the peer is elsewhere, or already
  // closed its end), or neither netlink nor /proc answered.
  std::optional<uint32_t> Find(const TcpFourTuple& c, std::string* err);

  // Find for several connections, in order: one netlink request each, or one reading of /proc
  // for all of them (so a caller on /proc asks for every connection it holds at once: each is
  // still sound, as each is asked while held). *err says why for the last one not found.
  std::vector<std::optional<uint32_t>> FindAll(const std::vector<TcpFourTuple>& connections, std::string* err);

  // Whether lookups go to /proc because netlink was refused.
  bool using_proc() const { return fd_ < 0; }

  // Makes the next lookups read /proc, as when netlink is refused. For tests.
  void TEST_UseProc();

 private:
  // 1: found (*uid set), 0: no live socket, -1: netlink failed (errno-like code in *err).
  int FindByNetlink(const TcpFourTuple& c, uint32_t* uid, std::string* err);

  int fd_ = -1;  // the NETLINK_SOCK_DIAG socket, or -1
  uint32_t sequence_ = 0;
};

}  // namespace etrun::rendezvous

#endif  // ETRUN_RENDEZVOUS_PEER_UID_H_
