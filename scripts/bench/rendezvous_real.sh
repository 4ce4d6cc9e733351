#!/usr/bin/env bash
# Real Horovod 0.28.1's hvd.init() under etrun and under horovodrun, in the same run (see
# scripts/bench/rendezvous_real.py): N = 2, 4, 8, 16 ranks of PyTorch workers on this machine,
# 3 runs of each launcher, alternating; measured from the last rank's arrival at hvd.init() to the
# last rank's return. Real Horovod from scripts/horovod.sh (built once, about 4 minutes).
# Targets (issue 29): at 16 ranks etrun >= 20x faster than horovodrun, at 8 ranks >= 10x.
# Options: --ranks 2,4,8,16 --runs 3 --timeout 180 --json FILE. A few minutes (horovodrun alone
# takes ~25 s a run at 16 ranks on 2 cores). Exit status: 0 when every run worked and both
# targets pass, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 scripts/bench/rendezvous_real.py "${ETRUN:-build/etrun}" "$@"
