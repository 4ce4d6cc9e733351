#!/usr/bin/env bash
# Launch through Slurm on the cluster test bed (see scripts/bench/slurm.py): one srun step and
# agent per host, as etrun starts ranks inside an allocation, against Slurm's one step for the
# job, bare steps per host and etrun over SSH; K = 2, 4, 8 hosts, 1 and 4 ranks per host by
# default (the scale table: --hosts 8,16 --ranks 1,4,8,16 --runs 3). Needs root (network
# namespaces, sshd, useradd) and Debian's slurm-wlm and munge
# (`source scripts/deps.sh && ensure_packages`).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 scripts/bench/slurm.py "${ETRUN:-build/etrun}" "$@"
