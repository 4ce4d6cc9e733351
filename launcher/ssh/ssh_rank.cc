#include "launcher/ssh/ssh_rank.h"

#include "launcher/child.h"
#include "launcher/ssh/remote_shell.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace etrun::launcher {

namespace {

// Runs on the remote host under `sh -c`: $1 is the grace period, the rest the command. (No `--`
// after kill's signal: dash's builtin kill rejects it.)
constexpr char kWrapper[] =
    "g=$1; shift; exec 3<&0 </dev/null; "
    "setsid \"$@\" & p=$!; "
    "setsid sh -c 'cat >/dev/null; kill -TERM -\"$1\" 2>/dev/null; sleep \"$2\"; "
    "kill -KILL -\"$1\" 2>/dev/null' etrun-watch \"$p\" \"$g\" <&3 >/dev/null 2>&1 & w=$!; "
    "exec 3<&-; ";

// The end of kWrapper: waits for the command, stops the watcher; the status is in $s.
constexpr char kWrapperWait[] = "wait \"$p\"; s=$?; kill -KILL -\"$w\" \"$w\" 2>/dev/null; ";

// The end of kWrapper with records (remote_shell.h): an alive record on stderr every second while
// the wrapper runs; a SIGTERM to the wrapper (Slurm signalling the step's processes: scancel
// --signal=TERM, preemption) is said with a term record and passed to the command, and the
// wrapper waits on, so its exit record still comes. The heartbeat ignores
// SIGTERM so a draining rank is not taken for a lost host. Each helper is killed by its group and
// its pid: one that has not yet called setsid has no group yet.
constexpr char kWrapperWaitRecorded[] =
    "setsid sh -c 'trap \"\" TERM; while kill -0 \"$1\" 2>/dev/null && "
    "printf \"\\036etrun-alive\\n\" >&2; do sleep 1; done' etrun-alive \"$$\" >/dev/null & h=$!; "
    "trap 'printf \"\\036etrun-term\\n\" >&2; kill -TERM -\"$p\" 2>/dev/null' TERM; "
    "while :; do wait \"$p\"; s=$?; kill -0 \"$p\" 2>/dev/null || break; done; "
    "kill -KILL -\"$w\" \"$w\" -\"$h\" \"$h\" 2>/dev/null; ";

// Prints the name of the interface whose route (in /proc/net/route's format, from a little-endian
// machine) best matches the IPv4 address `a`: the longest mask, then the lowest metric; "lo" for
// 127/8; nothing when no route matches. POSIX awk (mawk) has no bit operations: with a contiguous
// mask byte m, x & m is x - x % (256 - m).
constexpr char kRouteAwk[] =
    "function h(s,  i, n) { n = 0; for (i = 1; i <= length(s); i++) "
    "n = n * 16 + index(\"0123456789ABCDEF\", toupper(substr(s, i, 1))) - 1; return n }\n"
    "BEGIN { if (split(a, q, \".\") != 4) exit; if (q[1] == 127) { print \"lo\"; exit } }\n"
    "NR > 1 && h($4) % 2 == 1 { ok = 1; w = 0\n"
    "  for (k = 0; k < 4; k++) { d = h(substr($2, 7 - 2 * k, 2)); m = h(substr($8, 7 - 2 * k, 2))\n"
    "    x = q[k + 1] + 0; if (x - x % (256 - m) != d) ok = 0; w += m }\n"
    "  if (ok && (b == \"\" || w > bw || (w == bw && $7 + 0 < bm))) { b = $1; bw = w; bm = $7 + 0 } }\n"
    "END { if (b != \"\") print b }";

// The wrapper's first part for rank.network (RemoteCommand); "" when there is nothing to do.
std::string HostNetworkScript(const RemoteRank& rank, bool ssh_connection) {
  const HostNetwork& net = rank.network;
  std::string s;
  std::string host = ShellQuote(rank.host);
  if (!net.require_interface.empty()) {
    std::string nic = ShellQuote(net.require_interface);
    // /proc/net/dev is the reading process's network namespace's (/sys/class/net may be another's).
    s += "awk -F: -v n=" + nic + " '{ gsub(/ /, \"\", $1) } $1 == n { f = 1 } END { exit !f }' "
         "/proc/net/dev || { echo \"etrun: error: host \"" + host +
         "\" has no interface \"" + nic + "\" (--network-interface): name one every host has, "
         "or leave the flag out to let etrun find each host's\" >&2; exit " +
         std::to_string(kHostNetworkFailure) + "; }; ";
  }
  if (!net.resolve) return s;
  s += "a=" + ShellQuote(net.launcher_address) + "; ";
  if (ssh_connection) {  // the launcher address this connection came from, if IPv4
    s += "c=${SSH_CONNECTION%% *}; case $c in *.*.*.*) a=$c;; esac; ";
  }
  s += "i=$(awk -v a=\"$a\" " + ShellQuote(kRouteAwk) + " /proc/net/route 2>/dev/null); "
       "[ -n \"$i\" ] || { echo \"etrun: error: host \"" + host + "\" has no route to the "
       "launcher at $a: name the launcher's interface the hosts reach with --network-interface\" >&2; "
       "exit " + std::to_string(kHostNetworkFailure) + "; }; ";
  for (const std::string& v : net.address_vars) s += "export " + v + "=\"$a\"; ";
  for (const std::string& v : net.interface_vars) s += "export " + v + "=\"$i\"; ";
  return s + "unset a c i; ";
}

constexpr int kSshFailure = 255;
int g_sock = -1;

// SIGTERM/SIGINT/SIGHUP: ask for the remote command to be stopped (send is async-signal-safe).
void OnStop(int) {
  int saved = errno;
  send(g_sock, "T", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  errno = saved;
}

int Fail(const char* label, const std::string& what) {
  fprintf(stderr, "etrun: error: ssh %s: %s\n", label, what.c_str());
  return kSshFailure;
}

}  // namespace

std::string RemoteCommand(const RemoteRank& rank, bool ssh_connection) {
  std::string cmd = "cd " + ShellQuote(rank.cwd) + " >/dev/null 2>&1; exec env";
  for (const std::string& kv : rank.env) cmd += " " + ShellQuote(kv);
  char grace[32];
  snprintf(grace, sizeof(grace), "%g", rank.grace_s);
  std::string wrapper = HostNetworkScript(rank, ssh_connection) + kWrapper;
  if (rank.exit_record) {
    wrapper += kWrapperWaitRecorded;
    wrapper += "printf '" + std::string(kExitRecordShell) + "%d\\n' \"$s\" >&2; ";
  } else {
    wrapper += kWrapperWait;
  }
  wrapper += "exit $s";
  cmd += " sh -c " + ShellQuote(wrapper) + " etrun-rank " + ShellQuote(grace);
  for (const std::string& a : rank.argv) cmd += " " + ShellQuote(a);
  return cmd;
}

const char* RouteAwkProgram() { return kRouteAwk; }

std::vector<std::string> SshRankArgs(const std::string& socket_name, const std::string& label,
                                     const std::string& remote_command) {
  return {kSshRankMode, socket_name, label, remote_command};
}

int RunSshRank(const std::string& name, const std::string& label_text,
               const std::string& remote_command) {
  const char* label = label_text.c_str();
  std::string request = "R" + remote_command;
  signal(SIGPIPE, SIG_IGN);

  g_sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (name.size() + 1 >= sizeof(addr.sun_path)) return Fail(label, "bad helper socket name");
  memcpy(addr.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + name.size());
  if (g_sock < 0 || connect(g_sock, reinterpret_cast<struct sockaddr*>(&addr), len) != 0) {
    return Fail(label, std::string("cannot reach etrun's SSH connection: ") + strerror(errno));
  }
  int buffer = static_cast<int>(request.size()) + 4096;
  setsockopt(g_sock, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  // The request carries our stdout and stderr: the remote output goes straight into them.
  int fds[2] = {STDOUT_FILENO, STDERR_FILENO};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  struct iovec iov = {request.data(), request.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  while (sendmsg(g_sock, &msg, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    return Fail(label, errno == EMSGSIZE
                           ? "the remote command is too long (" + std::to_string(request.size()) +
                                 " bytes): export fewer or shorter variables"
                           : std::string("cannot hand over the command: ") + strerror(errno));
  }
  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);

  // The reply: "X<exit code>\n<error line or nothing>".
  char reply[4096];
  ssize_t n;
  while ((n = recv(g_sock, reply, sizeof(reply) - 1, 0)) < 0 && errno == EINTR) {
  }
  if (n <= 0 || reply[0] != 'X') {
    return Fail(label, "etrun's SSH connection ended without the rank's exit status");
  }
  reply[n] = '\0';
  char* line = strchr(reply, '\n');
  if (line != nullptr && line[1] != '\0') fprintf(stderr, "%s\n", line + 1);
  return atoi(reply + 1);
}

}  // namespace etrun::launcher
