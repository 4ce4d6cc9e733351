#!/usr/bin/env bash
# Two trainings sharing one pool of 8 slots (docs/pool.md's walkthrough, IBM WMLA's scenario):
#   1. training 1 alone gets all 8;  2. training 2 arrives: 4/4;
#   3. training 2's priority 10000: 5/3;  4. training 1 ends: training 2 grows to 8.
# The trainings are Horovod-protocol stand-ins (tests/integration/elastic_standin.py: Horovod's
# rendezvous, notifications and commit/reset cycle, 1.5 s start-up like `import horovod.torch`),
# so it runs from a source checkout on any machine, CPU only. Writes the pool's events and the
# stacked chart of who held which slots to $OUT (default: a new temporary directory).
# usage: scripts/examples/pool_demo.sh [ETRUN]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
etrun=${1:-$here/../../build/etrun}
standin=$here/../../tests/integration/elastic_standin.py
[ -x "$etrun" ] || { echo "pool_demo: error: no etrun at $etrun: build it (scripts/setup.sh) or pass its path" >&2; exit 2; }
[ -f "$standin" ] || { echo "pool_demo: error: $standin is missing: run this from a source checkout" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
pool=demo-$$
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# wait_for TEXT FILE: until FILE has a line containing TEXT (at most 60 s).
wait_for() {
  for _ in $(seq 600); do grep -q -- "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  echo "pool_demo: error: no '$1' in $2 after 60 s" >&2; exit 1
}
# training NAME: an elastic job of 1..8 ranks on the pool; it stops when its steps file appears.
training() {
  "$etrun" --pool "$pool" --job-name "$1" -np 1 --min-np 1 --max-np 8 \
    /usr/bin/python3 "$standin" --steps 1000000 --step-seconds 0.2 --startup-seconds 1.5 \
    --steps-file "$out/$1.steps" > "$out/$1.log" 2>&1 &
  pids+=($!)
}
stage() { echo; echo "== $1"; "$etrun" pool status "$pool"; }

"$etrun" pool start "$pool" -H localhost:8 --gpus none --events-file "$out/pool.jsonl" 2> "$out/pool.log" &
pids+=($!)
wait_for "is up" "$out/pool.log"

training train1
wait_for "size 8" "$out/train1.log"
stage "1. training 1 alone: all 8 slots"

training train2
wait_for "size 4" "$out/train2.log"
wait_for "size 4" "$out/train1.log"
stage "2. training 2 arrives, equal priorities: 4/4"

"$etrun" pool priority --pool "$pool" train2 10000
wait_for "size 5" "$out/train2.log"
wait_for "size 3" "$out/train1.log"
stage "3. training 2's priority 10000: 10000/15000 of 8 -> 5, and 3 for training 1"

echo 1 > "$out/train1.steps"  # training 1 finishes at its next commit
wait ${pids[1]}
wait_for "size 8" "$out/train2.log"
stage "4. training 1 ended: training 2 grows to all 8"

echo 1 > "$out/train2.steps"
wait ${pids[2]}
"$etrun" pool stop "$pool" > /dev/null
wait ${pids[0]}
pids=()
echo
"$etrun" report "$out/pool.jsonl" -o "$out/pool.svg"
echo
echo "pool log: $out/pool.log; trainings: $out/train1.log, $out/train2.log; chart: $out/pool.svg"
