#include "launcher/ssh/remote_shell.h"

#include "launcher/process/shell_words.h"

namespace etrun::launcher {

bool CheckRemoteShell(const std::string& remote_shell, std::string* err) {
  if (remote_shell.find("{host}") != std::string::npos) return true;
  *err = "--remote-shell '" + remote_shell + "' does not name the host: write {host} where it "
         "goes, e.g. --remote-shell 'kubectl exec -i {host} --'";
  return false;
}

std::string RemoteShellCommand(const std::string& remote_shell, const std::string& host) {
  if (host.starts_with('-')) {
    // Quoting keeps the name one word, but the command would still read it as an option (`ssh
    // -G` prints its configuration and runs `sh -s` nowhere), and no quoting stops that for
    // every command a template may name. Every place host names enter refuses such a name
    // (discovery::StartsLikeOption); this is the last line, if one gets here anyway.
    return "printf '%s\\n' " +
           ShellQuote("host names cannot begin with '-' (the remote shell would read '" + host +
                      "' as an option): " + remote_shell + " was not run") +
           " >&2; exit 2";
  }
  std::string line = remote_shell;
  for (size_t at = line.find("{host}"); at != std::string::npos; at = line.find("{host}", at)) {
    std::string quoted = ShellQuote(host);
    line.replace(at, 6, quoted);
    at += quoted.size();
  }
  // exec: etrun waits for the remote shell itself and sees it die (no shell in between).
  return "exec " + line + " sh -s";
}

}  // namespace etrun::launcher
