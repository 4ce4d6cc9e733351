#include "rendezvous/peer_uid.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <charconv>
#include <fstream>

namespace etrun::rendezvous {

namespace {

constexpr int kTimeWait = 6;  // TCP_TIME_WAIT in the kernel's numbering
constexpr int kListen = 10;   // TCP_LISTEN

// Whether a socket the kernel reports is the live peer end of `c`: its local end is the peer's,
// its remote end ours, it is still owned by an open file (inode != 0; a socket its process
// closed keeps no owner, and the kernel says uid 0 for it), and it is not a listener or a
// TIME_WAIT leftover.
bool IsLivePeer(const TcpFourTuple& c, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                int state, uint64_t inode) {
  return src == c.peer_address && sport == c.peer_port && dst == c.local_address &&
         dport == c.local_port && inode != 0 && state != kTimeWait && state != kListen;
}

// An IPv4 address as the kernel fills a diag message's four 32-bit words: the first word for an
// AF_INET socket, the last of ::ffff:a.b.c.d for an AF_INET6 one. False for other v6 addresses.
bool V4Of(int family, const uint32_t words[4], uint32_t* out) {
  if (family == AF_INET) {
    *out = ntohl(words[0]);
    return true;
  }
  if (words[0] != 0 || words[1] != 0 || ntohl(words[2]) != 0xffff) return false;
  *out = ntohl(words[3]);
  return true;
}

bool ParseHex32(std::string_view text, uint32_t* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "0100007F:1F90" (tcp) or 32 hex digits and a port (tcp6) -> an IPv4 address and port.
bool ParseProcEndpoint(std::string_view text, uint32_t* address, uint16_t* port) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  std::string_view hex = text.substr(0, colon);
  uint32_t words[4] = {0, 0, 0, 0};
  int family = 0;
  if (hex.size() == 8) {
    family = AF_INET;
    if (!ParseHex32(hex, &words[0])) return false;
  } else if (hex.size() == 32) {
    family = AF_INET6;
    for (int i = 0; i < 4; ++i) {
      if (!ParseHex32(hex.substr(8 * i, 8), &words[i])) return false;
    }
  } else {
    return false;
  }
  uint32_t p = 0;
  if (!ParseHex32(text.substr(colon + 1), &p) || p > 0xffff) return false;
  *port = static_cast<uint16_t>(p);
  // /proc prints each 32-bit word of the address as the host stores it: the bytes in network
  // order read as a native integer, which is what the diag message's words hold too.
  return V4Of(family, words, address);
}

}  // namespace

std::vector<std::optional<uint32_t>> PeerUidsFromProcNet(const std::vector<TcpFourTuple>& connections,
                                                         std::string* err, const std::string& proc_net) {
  std::vector<std::optional<uint32_t>> uids(connections.size());
  size_t found = 0;
  bool readable = false;
  for (const char* table : {"/tcp", "/tcp6"}) {
    std::ifstream in(proc_net + table);
    if (!in) continue;
    readable = true;
    std::string line;
    std::getline(in, line);  // the header
    while (found < connections.size() && std::getline(in, line)) {
      // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
      std::string_view fields[10];
      size_t n = 0, pos = 0;
      while (n < 10) {
        size_t begin = line.find_first_not_of(' ', pos);
        if (begin == std::string::npos) break;
        size_t end = line.find(' ', begin);
        if (end == std::string::npos) end = line.size();
        fields[n++] = std::string_view(line).substr(begin, end - begin);
        pos = end;
      }
      uint32_t src = 0, dst = 0, state = 0, uid = 0;
      uint16_t sport = 0, dport = 0;
      uint64_t inode = 0;
      if (n < 10 || !ParseProcEndpoint(fields[1], &src, &sport) || !ParseProcEndpoint(fields[2], &dst, &dport) ||
          !ParseHex32(fields[3], &state)) {
        continue;
      }
      std::from_chars(fields[7].data(), fields[7].data() + fields[7].size(), uid);
      std::from_chars(fields[9].data(), fields[9].data() + fields[9].size(), inode);
      for (size_t i = 0; i < connections.size(); ++i) {
        if (!uids[i] && IsLivePeer(connections[i], src, sport, dst, dport, static_cast<int>(state), inode)) {
          uids[i] = uid;
          ++found;
        }
      }
    }
  }
  if (found < connections.size()) {
    *err = readable ? "no live socket on this machine has that connection's address and port"
                    : "cannot read " + proc_net + "/tcp";
  }
  return uids;
}

PeerUid::PeerUid() {
  fd_ = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd_ < 0) return;
  // The kernel answers at once; a bound keeps a broken kernel from stalling the accept loop.
  timeval timeout{1, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
}

PeerUid::~PeerUid() {
  if (fd_ >= 0) close(fd_);
}

void PeerUid::TEST_UseProc() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::optional<uint32_t> PeerUid::Find(const TcpFourTuple& c, std::string* err) {
  if (fd_ >= 0) {
    uint32_t uid = 0;
    int found = FindByNetlink(c, &uid, err);
    if (found == 1) return uid;
    if (found == 0) return std::nullopt;
    // Refused (a seccomp filter, an LSM): /proc from now on.
    close(fd_);
    fd_ = -1;
  }
  return PeerUidsFromProcNet({c}, err)[0];
}

std::vector<std::optional<uint32_t>> PeerUid::FindAll(const std::vector<TcpFourTuple>& connections,
                                                      std::string* err) {
  if (fd_ < 0) return PeerUidsFromProcNet(connections, err);
  std::vector<std::optional<uint32_t>> uids;
  for (size_t i = 0; i < connections.size(); ++i) {
    if (fd_ < 0) {  // netlink was refused on the way: the rest from one reading of /proc
      auto rest = PeerUidsFromProcNet({connections.begin() + static_cast<std::ptrdiff_t>(i), connections.end()}, err);
      uids.insert(uids.end(), rest.begin(), rest.end());
      break;
    }
    uids.push_back(Find(connections[i], err));
  }
  return uids;
}

int PeerUid::FindByNetlink(const TcpFourTuple& c, uint32_t* uid, std::string* err) {
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof(message);
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;  // one socket, by its exact four-tuple
  message.header.nlmsg_seq = ++sequence_;
  inet_diag_req_v2& r = message.request;
  r.sdiag_family = AF_INET;
  r.sdiag_protocol = IPPROTO_TCP;
  r.idiag_states = ~0u;
  // The socket wanted has the peer's end as its source and ours as its destination.
  r.id.idiag_src[0] = htonl(c.peer_address);
  r.id.idiag_sport = htons(c.peer_port);
  r.id.idiag_dst[0] = htonl(c.local_address);
  r.id.idiag_dport = htons(c.local_port);
  r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_, &message, sizeof(message), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    *err = std::string("sock_diag request: ") + strerror(errno);
    return -1;
  }
  alignas(nlmsghdr) char buffer[8192];
  for (;;) {  // skip answers to earlier requests, should one have come late
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = std::string("sock_diag answer: ") + strerror(errno);
      return -1;
    }
    auto* h = reinterpret_cast<nlmsghdr*>(buffer);
    if (!NLMSG_OK(h, static_cast<size_t>(n))) {
      *err = "sock_diag answer: truncated";
      return -1;
    }
    if (h->nlmsg_seq != sequence_) continue;
    if (h->nlmsg_type == NLMSG_ERROR) {
      int code = -reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
      if (code == ENOENT) {
        *err = "no live socket on this machine has that connection's address and port";
        return 0;
      }
      *err = std::string("sock_diag: ") + strerror(code);
      return -1;
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      *err = "sock_diag answer: unexpected message";
      return -1;
    }
    auto* m = reinterpret_cast<inet_diag_msg*>(NLMSG_DATA(h));
    uint32_t src = 0, dst = 0;
    if (V4Of(m->idiag_family, m->id.idiag_src, &src) && V4Of(m->idiag_family, m->id.idiag_dst, &dst) &&
        IsLivePeer(c, src, ntohs(m->id.idiag_sport), dst, ntohs(m->id.idiag_dport), m->idiag_state,
                   m->idiag_inode)) {
      *uid = m->idiag_uid;
      return 1;
    }
    *err = "the socket at that connection's address and port has no owner any more";
    return 0;
  }
}

}  // namespace etrun::rendezvous
