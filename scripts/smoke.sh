#!/usr/bin/env bash
# Runs etrun's allreduce smoke test on this machine before a long job: build/etrun-smoke under
# build/etrun, one rank per local GPU (NCCL) when nvidia-smi lists GPUs, else 2 CPU ranks over
# TCP. `-np N` first picks the number of ranks; every other argument goes to etrun-smoke
# (e.g. -b 8 -e 64M -f 2 -n 20 -w 5 --backend tcp; see build/etrun-smoke --help).
# Exit code: etrun's, i.e. 0 when every rank checked every result, non-zero otherwise.
# ETRUN_BUILD_DIR names another build directory (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ETRUN_BUILD_DIR:-build}
np=""
if [ "${1:-}" = "-np" ]; then
  if [ $# -lt 2 ] || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
    echo "smoke.sh: error: -np: expected a positive number of ranks, got '${2:-}'" >&2
    exit 2
  fi
  np=$2
  shift 2
fi
for binary in etrun etrun-smoke; do
  if [ ! -x "$build/$binary" ]; then
    echo "smoke.sh: error: $build/$binary is missing: build first" \
      "(cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2)" >&2
    exit 2
  fi
done
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ -z "$np" ]; then
  if [ "$gpus" -gt 0 ]; then np=$gpus; else np=2; fi
fi
echo "smoke.sh: $np ranks on this machine ($gpus GPUs seen by nvidia-smi)" >&2
exec "$build/etrun" -np "$np" "$build/etrun-smoke" "$@"
