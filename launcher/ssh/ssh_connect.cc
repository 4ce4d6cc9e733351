#include "launcher/ssh/ssh_connect.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "launcher/process/shell_words.h"
#include "launcher/ssh/known_hosts.h"
#include "launcher/ssh/new_host_keys.h"

namespace etrun::launcher {

namespace {

// Sets the session's preference for `method_type` to the names in `wanted` (comma-separated, in
// order) that this libssh2 supports. libssh2 1.10 (Debian 12) drops unsupported names itself with
// an overlapping memcpy -- undefined behaviour that ASan reports, and "rsa-sha2-512" is one it
// lacks -- so it is only ever handed names it knows.
void PreferMethods(LIBSSH2_SESSION* session, int method_type, std::string_view wanted) {
  const char** algs = nullptr;
  int count = libssh2_session_supported_algs(session, method_type, &algs);
  if (count <= 0) return;  // libssh2's own defaults then
  std::string supported;
  while (!wanted.empty()) {
    size_t comma = wanted.find(',');
    std::string_view name = wanted.substr(0, comma);
    wanted.remove_prefix(comma == std::string_view::npos ? wanted.size() : comma + 1);
    for (int i = 0; i < count; ++i) {
      if (name == algs[i]) {
        if (!supported.empty()) supported += ',';
        supported += name;
        break;
      }
    }
  }
  libssh2_free(session, algs);
  if (!supported.empty()) libssh2_session_method_pref(session, method_type, supported.c_str());
}

// Connects with a timeout; the socket comes back non-blocking. Returns -1 with *err set.
int Connect(const SshTarget& t, std::string* err) {
  struct addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* result = nullptr;
  std::string port = std::to_string(t.port);
  if (int rc = getaddrinfo(t.host.c_str(), port.c_str(), &hints, &result); rc != 0) {
    *err = std::string("cannot resolve the host name: ") + gai_strerror(rc);
    return -1;
  }
  *err = "no address";
  for (struct addrinfo* a = result; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      int n = poll(&p, 1, t.connect_timeout_s * 1000);
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0 && so_error == 0) {
        freeaddrinfo(result);
        return fd;
      }
      *err = n == 0 ? "connection timed out after " + std::to_string(t.connect_timeout_s) +
                          " s (--ssh-connect-timeout)"
                    : std::string("cannot connect: ") + strerror(so_error != 0 ? so_error : errno);
    } else {
      *err = std::string("cannot connect: ") + strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(result);
  return -1;
}

// A host that stops answering is lost after this long with data unacknowledged; keepalives
// make sure there is data in flight even when the ranks are quiet.
void ConfigureLiveness(int fd, const SshTarget& t) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  unsigned int user_timeout_ms = static_cast<unsigned int>(std::max(2 * t.connect_timeout_s, 4)) * 1000;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

// This user's passwd entry, read reentrantly: every SshHost runs on a thread of its own, and
// getpwuid's static buffer is shared (ThreadSanitizer caught two hosts authenticating at once).
bool OwnPasswd(std::string* name, std::string* dir) {
  struct passwd entry;
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return false;
  }
  *name = entry.pw_name;
  *dir = entry.pw_dir;
  return true;
}

std::string HomeDir() {
  const char* home = getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  std::string name, dir;
  return OwnPasswd(&name, &dir) ? dir : "/";
}

std::string UserName() {
  std::string name, dir;
  if (OwnPasswd(&name, &dir)) return name;
  const char* user = getenv("USER");
  return user != nullptr ? user : "root";
}

std::string KnownHostsPath() { return HomeDir() + "/.ssh/known_hosts"; }

// Checks the server's host key against `known` (the file at `path`, read before the handshake;
// see OpenSshConnection). An unknown host is accepted and recorded, as OpenSSH's
// StrictHostKeyChecking=accept-new does, unless --ssh-strict-host-keys.
bool CheckHostKey(const SshTarget& target, const KnownHosts& known, const std::string& path,
                  SshConnection* s, std::string* err) {
  size_t key_len = 0;
  int key_type = 0;
  const char* key_data = libssh2_session_hostkey(s->ssh, &key_len, &key_type);
  if (key_data == nullptr) {
    *err = "the server sent no host key";
    return false;
  }
  std::string_view key(key_data, key_len);
  std::string name = KnownHostsName(target.host, target.port);
  auto changed = [&] {
    *err = "the host key differs from the one in " + path + ": refusing to connect (if " + name +
           "'s key changed on purpose, remove the old one with " +
           JoinCommand({"ssh-keygen", "-f", path, "-R", name}) + ")";
    return false;
  };
  switch (known.Check(target.host, target.port, key, key_type)) {
    case KnownHosts::Verdict::kKnown: return true;
    case KnownHosts::Verdict::kChanged: return changed();
    case KnownHosts::Verdict::kUnknown: break;
  }
  if (target.strict_host_keys) {
    *err = "the host is not in " + path +
           " and --ssh-strict-host-keys is set: add it (e.g. ssh-keyscan) or drop the flag";
    return false;
  }
  // horovodrun runs ssh with StrictHostKeyChecking=no; etrun accepts too, but remembers the key
  // so that a later change is refused, and says so once for all the hosts (new_host_keys.h).
  std::string why;
  switch (RecordHostKey(path, target.host, target.port, key, key_type, &why)) {
    case Recorded::kAdded: ReportNewHostKey(path, name, ""); return true;
    case Recorded::kAlreadyKnown: return true;  // another connection recorded it just now
    case Recorded::kChanged: return changed();
    case Recorded::kFailed: ReportNewHostKey(path, name, why); return true;
  }
  return true;
}

// Authenticates as this user with -i's key, else ssh-agent's, else the default key files.
bool Authenticate(const SshTarget& target, SshConnection* s, std::string* err) {
  int timeout_ms = target.connect_timeout_s * 1000;
  std::string user = UserName();
  auto from_file = [&](const std::string& key) {
    return AwaitSsh(s, [&] {
      return libssh2_userauth_publickey_fromfile(s->ssh, user.c_str(), nullptr, key.c_str(), nullptr);
    }, timeout_ms);
  };
  if (!target.identity_file.empty()) {
    if (from_file(target.identity_file) == 0) return true;
    *err = "key " + target.identity_file + " was refused for user " + user + ": " + SshSessionError(s->ssh);
    return false;
  }
  // The agent talks over its own socket: use libssh2's blocking mode for it, bounded by the
  // session timeout.
  libssh2_session_set_blocking(s->ssh, 1);
  libssh2_session_set_timeout(s->ssh, timeout_ms);
  bool ok = false;
  if (LIBSSH2_AGENT* agent = libssh2_agent_init(s->ssh)) {
    if (libssh2_agent_connect(agent) == 0 && libssh2_agent_list_identities(agent) == 0) {
      struct libssh2_agent_publickey* identity = nullptr;
      while (!ok && libssh2_agent_get_identity(agent, &identity, identity) == 0) {
        ok = libssh2_agent_userauth(agent, user.c_str(), identity) == 0;
      }
      libssh2_agent_disconnect(agent);
    }
    libssh2_agent_free(agent);
  }
  libssh2_session_set_timeout(s->ssh, 0);
  libssh2_session_set_blocking(s->ssh, 0);
  if (ok) return true;
  for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
    std::string key = HomeDir() + "/.ssh/" + name;
    if (access(key.c_str(), R_OK) == 0 && from_file(key) == 0) return true;
  }
  *err = "no key was accepted for user " + user +
         " (tried ssh-agent and ~/.ssh/id_{ed25519,ecdsa,rsa}): give one with -i";
  return false;
}

}  // namespace

std::string SshLabel(const SshTarget& target) {
  return fmt::format("ssh {}:{}", target.host, target.port);
}

std::string SshSessionError(LIBSSH2_SESSION* session) {
  char* message = nullptr;
  libssh2_session_last_error(session, &message, nullptr, 0);
  return message != nullptr && *message != '\0' ? message : "unknown libssh2 error";
}

bool OpenSshConnection(const SshTarget& target, SshConnection* c, std::string* err) {
  c->sock = Connect(target, err);
  if (c->sock < 0) return false;
  ConfigureLiveness(c->sock, target);
  c->ssh = libssh2_session_init();
  if (c->ssh == nullptr) {
    close(c->sock);
    c->sock = -1;
    *err = "cannot initialize an SSH session";
    return false;
  }
  libssh2_session_set_blocking(c->ssh, 0);
  // Prefer the cheap modern key exchange OpenSSH's client uses; libssh2 would otherwise settle on
  // a Diffie-Hellman group exchange whose big modular arithmetic costs the server ~10x more CPU.
  PreferMethods(c->ssh, LIBSSH2_METHOD_KEX,
                "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,"
                "ecdh-sha2-nistp384,diffie-hellman-group14-sha256,"
                "diffie-hellman-group-exchange-sha256");
  // The host key types known_hosts has for the host first, as OpenSSH asks: a host with keys of
  // several types then shows the one on record.
  std::string known_hosts = KnownHostsPath();
  KnownHosts known;
  known.ReadFile(known_hosts);
  PreferMethods(c->ssh, LIBSSH2_METHOD_HOSTKEY,
                known.HostKeyMethods(
                    target.host, target.port,
                    "ssh-ed25519,ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256,ssh-rsa"));
  int timeout_ms = target.connect_timeout_s * 1000;
  int rc = AwaitSsh(c, [&] { return libssh2_session_handshake(c->ssh, c->sock); }, timeout_ms);
  if (rc != 0) {
    *err = rc == LIBSSH2_ERROR_TIMEOUT
               ? "no SSH handshake within " + std::to_string(target.connect_timeout_s) +
                     " s (--ssh-connect-timeout)"
               : "SSH handshake failed: " + SshSessionError(c->ssh);
    CloseSshConnection(c);
    return false;
  }
  if (!CheckHostKey(target, known, known_hosts, c, err) || !Authenticate(target, c, err)) {
    CloseSshConnection(c);
    return false;
  }
  return true;
}

void CloseSshConnection(SshConnection* c) {
  if (c->ssh != nullptr) {
    // Best effort and short: the peer may be gone.
    int rc = AwaitSsh(c, [&] { return libssh2_session_disconnect(c->ssh, "etrun is done"); }, 200);
    // A peer that does not answer (a cut link) would keep libssh2 waiting for room to send:
    // with the socket shut, what is left fails at once instead.
    if (rc != 0 && c->sock >= 0) shutdown(c->sock, SHUT_RDWR);
    // Freeing closes the channels still open, which may have to wait for the socket (EAGAIN):
    // without retrying, the session and its channels would be left allocated.
    rc = AwaitSsh(c, [&] { return libssh2_session_free(c->ssh); }, 200);
    if (rc == LIBSSH2_ERROR_TIMEOUT && c->sock >= 0) {
      shutdown(c->sock, SHUT_RDWR);
      AwaitSsh(c, [&] { return libssh2_session_free(c->ssh); }, 200);
    }
    c->ssh = nullptr;
  }
  if (c->sock >= 0) close(c->sock);
  c->sock = -1;
}

}  // namespace etrun::launcher
