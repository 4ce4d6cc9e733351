#include "launcher/agent/rank_command.h"

#include "launcher/process/shell_words.h"

namespace etrun::launcher::agent {

namespace {

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

}  // namespace

std::string RankCommand(const RemoteRank& rank, bool ssh_connection) {
  std::string cmd = "cd " + ShellQuote(rank.cwd) + " >/dev/null 2>&1; exec env";
  for (const std::string& kv : rank.env) cmd += " " + ShellQuote(kv);
  std::string inner = HostNetworkScript(rank, ssh_connection) + "exec \"$@\"";
  cmd += " sh -c " + ShellQuote(inner) + " etrun-rank";
  for (const std::string& a : rank.argv) cmd += " " + ShellQuote(a);
  return cmd;
}

const char* RouteAwkProgram() { return kRouteAwk; }

}  // namespace etrun::launcher::agent
