#include "launcher/ssh_rank.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <libssh2.h>

#include "launcher/exit_status.h"

namespace etrun::launcher {

namespace {

// Runs on the remote host under `sh -c`: $1 is the grace period, the rest the command. (No `--`
// after kill's signal: dash's builtin kill rejects it.)
constexpr char kWrapper[] =
    "g=$1; shift; exec 3<&0 </dev/null; "
    "setsid \"$@\" & p=$!; "
    "setsid sh -c 'cat >/dev/null; kill -TERM -\"$1\" 2>/dev/null; sleep \"$2\"; "
    "kill -KILL -\"$1\" 2>/dev/null' etrun-watch \"$p\" \"$g\" <&3 >/dev/null 2>&1 & w=$!; "
    "exec 3<&-; wait \"$p\"; s=$?; kill -KILL -\"$w\" 2>/dev/null; exit $s";

constexpr int kSshFailure = 255;
volatile sig_atomic_t g_stop = 0;

void OnStop(int) { g_stop = 1; }

int Fail(const SshTarget& t, const std::string& what) {
  fprintf(stderr, "etrun: error: ssh %s:%d: %s\n", t.host.c_str(), t.port, what.c_str());
  return kSshFailure;
}

std::string SessionError(LIBSSH2_SESSION* session) {
  char* message = nullptr;
  libssh2_session_last_error(session, &message, nullptr, 0);
  return message != nullptr ? message : "unknown libssh2 error";
}

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

// Connects with a timeout. Returns the socket, or -1 with *err set.
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
  int fd = -1;
  *err = "no address";
  for (struct addrinfo* a = result; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      int n = poll(&p, 1, t.connect_timeout_s * 1000);
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0 && so_error == 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
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
    fd = -1;
  }
  freeaddrinfo(result);
  return -1;
}

std::string HomeDir() {
  const char* home = getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  struct passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_dir : "/";
}

std::string UserName() {
  struct passwd* pw = getpwuid(getuid());
  if (pw != nullptr) return pw->pw_name;
  const char* user = getenv("USER");
  return user != nullptr ? user : "root";
}

// Checks the server's key against ~/.ssh/known_hosts. Returns false and sets *err to refuse.
bool CheckHostKey(LIBSSH2_SESSION* session, const SshTarget& t, std::string* err) {
  size_t key_len = 0;
  int key_type = 0;
  const char* key = libssh2_session_hostkey(session, &key_len, &key_type);
  if (key == nullptr) {
    *err = "the server sent no host key";
    return false;
  }
  LIBSSH2_KNOWNHOSTS* known = libssh2_knownhost_init(session);
  std::string path = HomeDir() + "/.ssh/known_hosts";
  libssh2_knownhost_readfile(known, path.c_str(), LIBSSH2_KNOWNHOST_FILE_OPENSSH);
  int type_mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW;
  switch (key_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA: type_mask |= LIBSSH2_KNOWNHOST_KEY_SSHRSA; break;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: type_mask |= LIBSSH2_KNOWNHOST_KEY_ECDSA_256; break;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: type_mask |= LIBSSH2_KNOWNHOST_KEY_ECDSA_384; break;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: type_mask |= LIBSSH2_KNOWNHOST_KEY_ECDSA_521; break;
    case LIBSSH2_HOSTKEY_TYPE_ED25519: type_mask |= LIBSSH2_KNOWNHOST_KEY_ED25519; break;
    default: type_mask |= LIBSSH2_KNOWNHOST_KEY_UNKNOWN; break;
  }
  struct libssh2_knownhost* match = nullptr;
  int check = libssh2_knownhost_checkp(known, t.host.c_str(), t.port, key, key_len, type_mask, &match);
  libssh2_knownhost_free(known);
  if (check == LIBSSH2_KNOWNHOST_CHECK_MATCH) return true;
  if (check == LIBSSH2_KNOWNHOST_CHECK_MISMATCH) {
    *err = "the host key differs from the one in " + path +
           ": refusing to connect (if the host was reinstalled, remove its old key with "
           "ssh-keygen -R)";
    return false;
  }
  if (t.strict_host_keys) {
    *err = "the host is not in " + path +
           " and --ssh-strict-host-keys is set: add it (e.g. ssh-keyscan) or drop the flag";
    return false;
  }
  // horovodrun runs ssh with StrictHostKeyChecking=no: accept, but say so.
  fprintf(stderr, "etrun: warning: ssh %s:%d: host not in %s; accepting its key\n", t.host.c_str(),
          t.port, path.c_str());
  return true;
}

bool Authenticate(LIBSSH2_SESSION* session, const SshTarget& t, std::string* err) {
  std::string user = UserName();
  if (!t.identity_file.empty()) {
    if (libssh2_userauth_publickey_fromfile(session, user.c_str(), nullptr,
                                            t.identity_file.c_str(), nullptr) == 0) {
      return true;
    }
    *err = "key " + t.identity_file + " was refused for user " + user + ": " + SessionError(session);
    return false;
  }
  if (LIBSSH2_AGENT* agent = libssh2_agent_init(session)) {
    if (libssh2_agent_connect(agent) == 0 && libssh2_agent_list_identities(agent) == 0) {
      struct libssh2_agent_publickey* identity = nullptr;
      while (libssh2_agent_get_identity(agent, &identity, identity) == 0) {
        if (libssh2_agent_userauth(agent, user.c_str(), identity) == 0) {
          libssh2_agent_disconnect(agent);
          libssh2_agent_free(agent);
          return true;
        }
      }
      libssh2_agent_disconnect(agent);
    }
    libssh2_agent_free(agent);
  }
  for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
    std::string key = HomeDir() + "/.ssh/" + name;
    if (access(key.c_str(), R_OK) != 0) continue;
    if (libssh2_userauth_publickey_fromfile(session, user.c_str(), nullptr, key.c_str(), nullptr) == 0) {
      return true;
    }
  }
  *err = "no key was accepted for user " + user +
         " (tried ssh-agent and ~/.ssh/id_{ed25519,ecdsa,rsa}): give one with -i";
  return false;
}

int SignalNumber(const std::string& name) {
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && name == abbrev) return sig;
  }
  return 0;
}

// Relays the channel until it closes. Returns the exit code to exit with.
int Pump(LIBSSH2_SESSION* session, LIBSSH2_CHANNEL* channel, int sock) {
  libssh2_session_set_blocking(session, 0);
  char buf[32768];
  bool eof_sent = false;
  while (true) {
    if (g_stop && !eof_sent) {
      while (libssh2_channel_send_eof(channel) == LIBSSH2_ERROR_EAGAIN) usleep(1000);
      eof_sent = true;
    }
    bool progress = false;
    for (int stream : {0, SSH_EXTENDED_DATA_STDERR}) {
      while (true) {
        ssize_t n = libssh2_channel_read_ex(channel, stream, buf, sizeof(buf));
        if (n <= 0) break;
        progress = true;
        int fd = stream == 0 ? STDOUT_FILENO : STDERR_FILENO;
        for (ssize_t done = 0; done < n;) {
          ssize_t w = write(fd, buf + done, static_cast<size_t>(n - done));
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) break;
          done += w;
        }
      }
    }
    if (libssh2_channel_eof(channel)) break;
    if (!progress) {
      struct pollfd p = {sock, POLLIN, 0};
      int dir = libssh2_session_block_directions(session);
      if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) p.events |= POLLOUT;
      int n = poll(&p, 1, 100);
      if (n > 0 && (p.revents & (POLLHUP | POLLERR)) && !(p.revents & POLLIN)) break;
    }
  }
  while (libssh2_channel_close(channel) == LIBSSH2_ERROR_EAGAIN) usleep(1000);
  char* signal_name = nullptr;
  size_t signal_len = 0;
  libssh2_channel_get_exit_signal(channel, &signal_name, &signal_len, nullptr, nullptr, nullptr, nullptr);
  if (signal_name != nullptr) {
    int sig = SignalNumber(std::string(signal_name, signal_len));
    return 128 + (sig != 0 ? sig : SIGTERM);
  }
  return libssh2_channel_get_exit_status(channel);
}

// Handshake, host key, authentication, then the command and its relay on `session`, connected
// on `sock`. Returns the rank's exit code, or kSshFailure after printing why; sets *handshaken
// once the SSH handshake is done. The caller frees the session on every path (LeakSanitizer
// checks the helper's exits too).
int RunSession(const SshTarget& t, const std::string& command, LIBSSH2_SESSION* session, int sock,
               bool* handshaken) {
  libssh2_session_set_timeout(session, t.connect_timeout_s * 1000L);
  // Prefer the cheap modern key exchange OpenSSH's client uses; libssh2 would otherwise settle on
  // a Diffie-Hellman group exchange whose big modular arithmetic costs the server ~10x more CPU.
  PreferMethods(session, LIBSSH2_METHOD_KEX,
                "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,"
                "ecdh-sha2-nistp384,diffie-hellman-group14-sha256,"
                "diffie-hellman-group-exchange-sha256");
  PreferMethods(session, LIBSSH2_METHOD_HOSTKEY,
                "ssh-ed25519,ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256,ssh-rsa");
  if (libssh2_session_handshake(session, sock) != 0) {
    return Fail(t, "SSH handshake failed: " + SessionError(session));
  }
  *handshaken = true;
  std::string err;
  if (!CheckHostKey(session, t, &err)) return Fail(t, err);
  if (!Authenticate(session, t, &err)) return Fail(t, err);
  libssh2_session_set_timeout(session, 0);
  LIBSSH2_CHANNEL* channel = libssh2_channel_open_session(session);
  if (channel == nullptr) return Fail(t, "cannot open a session channel: " + SessionError(session));
  int code = libssh2_channel_exec(channel, command.c_str()) != 0
                 ? Fail(t, "cannot run the command: " + SessionError(session))
                 : Pump(session, channel, sock);
  libssh2_channel_free(channel);
  return code;
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string RemoteCommand(const std::string& cwd, const std::vector<std::string>& env,
                          const std::vector<std::string>& argv, double grace_s) {
  std::string cmd = "cd " + ShellQuote(cwd) + " >/dev/null 2>&1; exec env";
  for (const std::string& kv : env) cmd += " " + ShellQuote(kv);
  char grace[32];
  snprintf(grace, sizeof(grace), "%g", grace_s);
  cmd += " sh -c " + ShellQuote(kWrapper) + " etrun-rank " + ShellQuote(grace);
  for (const std::string& a : argv) cmd += " " + ShellQuote(a);
  return cmd;
}

std::vector<std::string> SshRankArgs(const SshTarget& target, const std::string& remote_command) {
  return {kSshRankMode, target.host, std::to_string(target.port), target.identity_file,
          target.strict_host_keys ? "strict" : "accept", std::to_string(target.connect_timeout_s),
          remote_command};
}

int SshRankMain(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr, "etrun: error: %s is etrun's internal SSH helper mode\n", kSshRankMode);
    return 2;
  }
  SshTarget t;
  t.host = argv[2];
  t.port = atoi(argv[3]);
  t.identity_file = argv[4];
  t.strict_host_keys = std::string(argv[5]) == "strict";
  t.connect_timeout_s = atoi(argv[6]);
  std::string command = argv[7];
  signal(SIGTERM, OnStop);
  signal(SIGINT, OnStop);
  signal(SIGHUP, OnStop);
  signal(SIGPIPE, SIG_IGN);

  std::string err;
  int sock = Connect(t, &err);
  if (sock < 0) return Fail(t, err);
  if (libssh2_init(0) != 0) return Fail(t, "cannot initialize libssh2");
  LIBSSH2_SESSION* session = libssh2_session_init();
  if (session == nullptr) return Fail(t, "cannot create an SSH session");
  bool handshaken = false;
  int code = RunSession(t, command, session, sock, &handshaken);
  if (handshaken) libssh2_session_disconnect(session, "done");
  libssh2_session_free(session);
  close(sock);
  libssh2_exit();
  return code;
}

}  // namespace etrun::launcher
