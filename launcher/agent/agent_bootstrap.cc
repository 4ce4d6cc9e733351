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
  // them (a sticky directory above excepted): two `ls`, P's and the folders' above it at once,
  // one line each (m counts them). A mode's 10th character is the sticky bit's, whatever follows
  // it (SELinux's '.', an ACL's '+', whose group bits are the ACL's mask: who else may write).
  // h F: F's SHA-256 is $i (openssl's where there is one, with the CPU's SHA instructions; else
  // sha256sum). s P: P resolves to a file o accepts and h confirms; $f is then the file. Nothing
  // is run before s says so. Every external program here costs a fork and exec per host (16 hosts
  // on 2 cores: 30 ms each before these were cut from 14 to 5).
  return exports + "set -f; umask 077; u=$(id -u); i=" + agent.sha256 + "; "
         "k=$(command -v openssl 2>&-); n=$(printf '\\nx'); n=${n%x}; "
         "o() { d=$1; set -- $(ls -ldn -- \"$d\" 2>&-); "
         "[ -n \"$3\" ] && { [ \"$3\" = \"$u\" ] || [ \"$3\" = 0 ]; } || return 1; "
         "case $1 in ?????w*|????????w*) return 1;; esac; "
         "set --; while [ \"$d\" != / ]; do d=${d%/*}; d=${d:-/}; set -- \"$@\" \"$d\"; done; "
         "[ $# = 0 ] && return 0; m=$#; y=$(ls -ldn -- \"$@\" 2>&-) || return 1; "
         "while [ -n \"$y\" ]; do l=${y%%\"$n\"*}; case $y in *\"$n\"*) y=${y#*\"$n\"};; *) y=;; esac; "
         "m=$((m-1)); set -- $l; "
         "[ -n \"$3\" ] && { [ \"$3\" = \"$u\" ] || [ \"$3\" = 0 ]; } || return 1; "
         "case $1 in ?????w*|????????w*) case $1 in ?????????[tT]*) ;; *) return 1;; esac;; esac; done; "
         "[ $m = 0 ]; }; "
         "h() { [ ${#i} = 64 ] || return 1; if [ -n \"$k\" ]; then x=$(openssl dgst -sha256 -r <\"$1\" 2>&-); "
         "[ \"${x%% *}\" = \"$i\" ] && return 0; fi; x=$(sha256sum <\"$1\" 2>&-); [ \"${x%% *}\" = \"$i\" ]; }; "
         "s() { f=$(readlink -f -- \"$1\" 2>&-) && [ -f \"$f\" ] && o \"$f\" && h \"$f\"; }; "
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
         "if h \"$t\" && chmod 700 -- \"$t\"; then "
         "ln -- \"$t\" \"$c/$i\" 2>&- || s \"$c/$i\" || mv -f -- \"$t\" \"$c/$i\"; rm -f -- \"$t\"; "
         "s \"$c/$i\" && " + run + "; fi; rm -f -- \"$t\"; "
         "echo \"etrun: error: could not receive etrun's agent into $c: check the space left there\" >&2; exit 255";
}

}  // namespace etrun::launcher::agent
