# shellcheck shell=bash
# Sourced by the rendezvous benchmarks: a temp folder in $out and a server in $server_pid (set it
# once started, clear it once stopped), both cleaned up however the script exits.
out=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
