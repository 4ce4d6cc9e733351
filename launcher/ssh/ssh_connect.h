// ssh_connect: how an SshHost (ssh_host.h) opens one SSH connection: a TCP connection with a
// timeout and TCP liveness settings, the SSH handshake (the cheap modern key exchanges first), the
// host key checked against ~/.ssh/known_hosts (a new host's recorded there, as OpenSSH's
// accept-new does, and reported in one line for all: known_hosts.h, new_host_keys.h), and
// public-key authentication (-i, else ssh-agent, else ~/.ssh/id_{ed25519,ecdsa,rsa}). Internal to
// launcher/ssh/. Different connections may be opened on different threads at once: they share
// only known_hosts, whose updates serialize themselves.
#ifndef ETRUN_LAUNCHER_SSH_SSH_CONNECT_H_
#define ETRUN_LAUNCHER_SSH_SSH_CONNECT_H_

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <string>

#include <libssh2.h>

#include "launcher/ssh/ssh_host.h"

namespace etrun::launcher {

// A TCP connection and the libssh2 session over it (non-blocking). Owned by whoever opened it;
// CloseSshConnection releases both.
struct SshConnection {
  int sock = -1;
  LIBSSH2_SESSION* ssh = nullptr;
};


// libssh2's last error on `session`; "unknown libssh2 error" when it has none.
std::string SshSessionError(LIBSSH2_SESSION* session);

// Repeats a non-blocking libssh2 call until it stops answering EAGAIN, waiting on the socket in
// the direction libssh2 is blocked on. Gives up with LIBSSH2_ERROR_TIMEOUT after timeout_ms.
template <typename F>
int AwaitSsh(SshConnection* c, F call, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  int rc;
  while ((rc = call()) == LIBSSH2_ERROR_EAGAIN) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return LIBSSH2_ERROR_TIMEOUT;
    struct pollfd p = {c->sock, 0, 0};
    int dir = libssh2_session_block_directions(c->ssh);
    if (dir & LIBSSH2_SESSION_BLOCK_INBOUND) p.events |= POLLIN;
    if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) p.events |= POLLOUT;
    if (p.events == 0) p.events = POLLIN;
    poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
  }
  return rc;
}

// Connects to `target`, makes the SSH handshake, checks the host key and authenticates; each
// step is bounded by target.connect_timeout_s. Returns true with *c open and non-blocking.
// Returns false and sets *err (one line, without SshLabel) when a step fails; *c is then closed.
// REQUIRES: *c is closed; libssh2_init has run.
bool OpenSshConnection(const SshTarget& target, SshConnection* c, std::string* err);

// Says goodbye to the server (best effort, 200 ms at most), frees the session and closes the
// socket; *c is closed afterwards. Harmless on a closed connection.
void CloseSshConnection(SshConnection* c);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_SSH_CONNECT_H_
