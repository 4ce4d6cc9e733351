#include "launcher/agent/agent_bootstrap.h"

#include "launcher/agent/wire.h"
#include "launcher/process/shell_words.h"

namespace etrun::launcher::agent {

std::vector<std::string> AgentEnvironment(const std::vector<std::string>& environment) {
  std::vector<std::string> passed;
  for (const std::string& kv : environment) {
    std::string name = kv.substr(0, kv.find('='));
    if (name == "ASAN_OPTIONS" || name == "LSAN_OPTIONS" || name == "UBSAN_OPTIONS" || name == "TSAN_OPTIONS") {
      passed.push_back(kv);
    }
  }
  return passed;
}

std::string BootstrapCommand(const std::string& path, const std::string& id, size_t size,
                             const AgentOptions& options, const std::vector<std::string>& env) {
  std::string run = std::string(kAgentMode) + " " + AgentArgs(options);
  std::string exports;
  for (const std::string& kv : env) exports += "export " + ShellQuote(kv) + "; ";
  std::string need(kNeedLine + 1);  // without the \036, written by printf below
  // $c: the cache directory; $t: the file being received. Each candidate must say it is this
  // build before it is run.
  std::string s = exports + "i=" + ShellQuote(id) + "; c=\"${XDG_CACHE_HOME:-$HOME/.cache}/etrun/agent/$i\"; "
                  "for p in " + ShellQuote(path) + " \"$c/etrun\" \"$(command -v etrun 2>/dev/null)\"; do "
                  "[ -n \"$p\" ] && [ -x \"$p\" ] && [ \"$(\"$p\" " + kAgentIdMode + " 2>/dev/null)\" = \"$i\" ] && "
                  "exec \"$p\" " + run + "; done; "
                  "t=\"$c/etrun.$$\"; "
                  "if mkdir -p \"$c\" 2>/dev/null && : >\"$t\" 2>/dev/null; then "
                  "printf '\\036" + need + "\\n'; head -c " + std::to_string(size) + " >\"$t\"; "
                  "if [ \"$(wc -c <\"$t\")\" -eq " + std::to_string(size) + " ] && chmod 755 \"$t\" && "
                  "mv -f \"$t\" \"$c/etrun\"; then exec \"$c/etrun\" " + run + "; fi; "
                  "rm -f \"$t\"; echo \"etrun: error: could not receive etrun's agent into $c\" >&2; exit 255; fi; "
                  "echo \"etrun: error: no etrun of this build on the host and cannot write $c: "
                  "put it at " + path + " there, or make the cache writable\" >&2; exit 255";
  return s;
}

}  // namespace etrun::launcher::agent
