#!/usr/bin/env bash
# Pool allocation time: 50 jobs on 256 slots (scripts/bench/pool_allocation.cc); target < 1 ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${ETRUN_BUILD_DIR:-build}
cmake --build "$build" -j2 --target etrun_pool_bench >/dev/null
exec "$build/etrun_pool_bench"
