# bash completion for etrun: verbs as the first word, flags from `etrun --help`, job names from
# `etrun list` for status/scale/dump, pool sub-verbs and pool names, files for report and for flags that
# take a path.
_etrun() {
  local cur prev words cword
  _init_completion 2>/dev/null || {
    cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  }
  local etrun=${words[0]}
  if [ "$cword" -eq 1 ] && [[ "$cur" != -* ]]; then
    COMPREPLY=($(compgen -W "status list scale dump report pool" -- "$cur"))
    return
  fi
  case "${words[1]}" in
    status|scale|dump)
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$("$etrun" "${words[1]}" --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$("$etrun" list 2>/dev/null | awk 'NR > 1 {print $1}')" -- "$cur"))
      fi
      return ;;
    list) return ;;
    pool)
      if [ "$cword" -eq 2 ]; then
        COMPREPLY=($(compgen -W "start status priority stop token" -- "$cur"))
      elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$("$etrun" pool "${words[2]}" --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)" -- "$cur"))
      elif [ "$prev" = --hostfile ] || [ "$prev" = --host-discovery-script ] || [ "$prev" = --events-file ]; then
        COMPREPLY=($(compgen -f -- "$cur"))
      else
        local dir=${XDG_RUNTIME_DIR:-}
        if [ -z "$dir" ] || [ ! -w "$dir" ]; then dir=/tmp/etrun-$(id -u); else dir=$dir/etrun; fi
        local pools=$(ls "$dir/pools" 2>/dev/null | sed -n 's/\.json$//p' | grep -v '\.book$')
        COMPREPLY=($(compgen -W "$pools" -- "$cur"))
      fi
      return ;;
    report)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  case "$prev" in
    --hostfile|-hostfile|--host-discovery-script|--output-filename|--events-file|-i|--ssh-identity-file|--config-file)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$("$etrun" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[a-z][a-z-]*' | tr -d ' ,' | sort -u)" -- "$cur"))
  else
    COMPREPLY=($(compgen -c -- "$cur"))
  fi
}
complete -F _etrun etrun
