#!/usr/bin/env bash
# Scale: a static job of trivial ranks at 8 hosts x 1..16 ranks and 16 x 16, through mpirun,
# etrun over SSH and etrun --remote-shell, with an empty and a slow login, on the cluster test
# bed (see scripts/bench/scale.py). Needs root (network namespaces, sshd, useradd); Open MPI
# optional. Options: --sizes 8x1,8x4 --login empty,slow --runs 3 (scale.py --help).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 scripts/bench/scale.py "${ETRUN:-build/etrun}" "$@"
