#!/usr/bin/env bash
# The rendezvous store's own work, counted rather than timed: the instructions its threads run
# in user space per request (valgrind's callgrind), for one `global` scope of N simulated Gloo
# workers through `etrun_rendezvous_bench serve` (rendezvous_load.cc). The kernel's share is not
# counted: that is what scripts/bench/rendezvous.sh's floor ratios are for. Unlike CPU time on a
# shared VM, the count is the same from run to run within a fraction of a percent, so a change to
# the server's code shows at once. The store is slower under callgrind; its clients are not run
# under it.
#   scripts/bench/rendezvous_instructions.sh [N ...]      default: 64 256
#   BENCH=path/to/etrun_rendezvous_bench (default: $BUILD/etrun_rendezvous_bench, BUILD=build)
# Needs valgrind (Debian's package). Prints one line per N: requests, instructions, per request.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
bench=${BENCH:-$BUILD/etrun_rendezvous_bench}
if [[ ! -x $bench ]]; then
  echo "rendezvous_instructions.sh: error: $bench not found; build it: cmake --build $BUILD --target etrun_rendezvous_bench" >&2
  exit 1
fi
command -v valgrind > /dev/null || {
  echo "rendezvous_instructions.sh: error: valgrind not on PATH (apt-get install valgrind)" >&2
  exit 1
}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(64 256)
for n in "${sizes[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "rendezvous_instructions.sh: error: N must be a positive number, got '$n'" >&2; exit 2; }
done
source scripts/bench/server_temp.sh  # $out, $server_pid, and their cleanup at exit

echo "== user-space instructions of the store's threads per request (callgrind), 2 server threads"
for n in "${sizes[@]}"; do
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n" "$bench" serve --port "$port" --server-threads 2 \
    > "$out/serve.$n.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do
    ss -ltn "sport = :$port" | grep -q LISTEN && break
    sleep 0.1
  done
  ss -ltn "sport = :$port" | grep -q LISTEN || { echo "rendezvous_instructions.sh: error: the store did not listen on $port under valgrind; its log:" >&2; cat "$out/serve.$n.log" >&2; exit 1; }
  result=$("$bench" scope "$n" --connect "$port" --scope-name "g$n" --threads 2 | grep '^RESULT')
  kill -INT "$server_pid"
  wait "$server_pid" || true
  server_pid=
  requests=$(sed -n 's/.* requests=\([0-9]*\).*/\1/p' <<<"$result")
  instructions=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out/cg.$n")
  if [[ -z $requests || -z $instructions || $requests == 0 ]]; then
    echo "rendezvous_instructions.sh: error: N=$n: no request count or no callgrind summary" >&2
    exit 1
  fi
  printf '  N=%s: %s requests, %s instructions in user space (start-up included), %s per request\n' \
    "$n" "$requests" "$instructions" $((instructions / requests))
done
