#!/usr/bin/env bash
# Chaos soak: an elastic etrun job of Horovod stand-in workers, then a short PyTorch job under
# `--elastic-mode restart`, while a seeded driver kills and pauses ranks, edits discovery and
# scales the job; then checks exit codes, exactly-once steps, every output line once, leaks and
# etrun's RSS, and prints a verdict (see scripts/soak/chaos.py for the details).
#
#   scripts/soak.sh [SECONDS] [--seed N] [--torch-seconds T] [--pool-seconds P] [--keep DIR]
#
# SECONDS (default 60) is the chaos time of the first phase; the PyTorch phase adds
# --torch-seconds (default 30; 0 skips it) plus start-up and the end of training, and the shared
# pool phase --pool-seconds (default 30; 0 skips it). A long run:
# scripts/soak.sh 1800. The seed is printed first; --seed N replays its sequence of actions.
# Exit code: 0 pass, 1 a check failed (evidence kept, path printed), 2 bad usage or no build.
# ETRUN_BUILD_DIR names another build directory (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ETRUN_BUILD_DIR:-build}
seconds=60
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then
  if ! [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]] || [ "$1" = 0 ]; then
    echo "soak.sh: error: SECONDS: expected a positive number of seconds, got '$1'" >&2
    exit 2
  fi
  seconds=$1
  shift
fi
exec /usr/bin/python3 scripts/soak/chaos.py --seconds "$seconds" --etrun "$build/etrun" "$@"
