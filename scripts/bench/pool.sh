#!/usr/bin/env bash
# The shared pool: allocation time for 50 jobs on 256 slots (scripts/bench/pool_allocation.cc;
# target < 1 ms), then slot moves between two training jobs (scripts/bench/pool_moves.py;
# target <= 2 s plus one commit interval) with a commit every 0.5 s and every 0.2 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${ETRUN_BUILD_DIR:-build}
cmake --build "$build" -j2 --target etrun_pool_bench etrun >/dev/null
"$build/etrun_pool_bench"
status=0
for step in ${ETRUN_POOL_STEP_SECONDS:-0.5 0.2}; do
  /usr/bin/python3 scripts/bench/pool_moves.py "$build/etrun" "$step" || status=1
done
exit $status
