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

std::string BootstrapCommand(const AgentRef& agent, const AgentOptions& options,
                             const std::vector<std::string>& env) {
  std::string run = "exec \"$f\" " + AgentArgs(options);
  std::string exports;
  for (const std::string& kv : env) exports += "export " + ShellQuote(kv) + "; ";
  std::string need(kNeedLine + 1);  // without the \036, written by printf below
  std::string cache = "\"${XDG_CACHE_HOME:-$HOME/.cache}/etrun/agent\"";
  // o P: P and every directory above it belong to this user or root and nobody else may write
  // them (a sticky directory above excepted). s P: P resolves to such a file whose SHA-256 is $i;
  // $f is then the file. Nothing is run before s says so.
  return exports + "set -f; umask 077; u=$(id -u); i=" + agent.sha256 + "; "
         "o() { d=$1; w=; while :; do set -- $(ls -ldn -- \"$d\" 2>&-); "
         "[ \"$3\" = \"$u\" ] || [ \"$3\" = 0 ] || return 1; "
         "case $1 in ?????w*|????????w*) [ -n \"$w\" ] || return 1; "
         "case $1 in *t|*T) ;; *) return 1;; esac;; esac; "
         "[ \"$d\" = / ] && return 0; d=$(dirname -- \"$d\"); w=1; done; }; "
         "s() { f=$(readlink -f -- \"$1\" 2>&-) && [ -f \"$f\" ] && o \"$f\" && "
         "[ \"$(sha256sum -- \"$f\" 2>&- | cut -c1-64)\" = \"$i\" ]; }; "
         "for p in " + ShellQuote(agent.beside) + " " + cache + "/$i "
         "\"$(command -v etrun-agent 2>&-)\"; do [ -n \"$p\" ] && s \"$p\" && " + run + "; done; "
         "c=" + cache + "; [ -d \"$c\" ] || mkdir -p -- \"$c\" 2>&-; "
         "if ! [ -d \"$c\" ]; then echo \"etrun: error: cannot create $c to keep etrun's agent "
         "in: make it creatable, or set XDG_CACHE_HOME to a writable folder of your own\" >&2; exit 255; fi; "
         "if ! c=$(readlink -f -- \"$c\" 2>&-) || ! o \"$c\"; then "
         "echo \"etrun: error: cannot keep etrun's agent in $c: it is not a private folder of this "
         "user (another user owns it or a folder above it, or others may write them): set "
         "XDG_CACHE_HOME to a folder of your own, or remove $c\" >&2; exit 255; fi; "
         "if ! t=$(mktemp -- \"$c/.$i.$$.XXXXXXXX\" 2>&-); then "
         "echo \"etrun: error: cannot write etrun's agent into $c: make it writable, or set "
         "XDG_CACHE_HOME to a writable folder of your own\" >&2; exit 255; fi; "
         "printf '\\036" + need + "\\n'; head -c " + std::to_string(agent.size) + " >\"$t\"; "
         "if [ \"$(sha256sum <\"$t\" 2>&- | cut -c1-64)\" = \"$i\" ] && chmod 700 -- \"$t\"; then "
         "ln -- \"$t\" \"$c/$i\" 2>&- || s \"$c/$i\" || mv -f -- \"$t\" \"$c/$i\"; rm -f -- \"$t\"; "
         "s \"$c/$i\" && " + run + "; fi; rm -f -- \"$t\"; "
         "echo \"etrun: error: could not receive etrun's agent into $c: check the space left there\" >&2; exit 255";
}

}  // namespace etrun::launcher::agent
