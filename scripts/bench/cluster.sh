#!/usr/bin/env bash
# Launch, elastic stalls and partition recovery across the cluster test bed's hosts (see
# scripts/bench/cluster.py). Needs root (network namespaces, sshd), hyperfine; Open MPI optional.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 scripts/bench/cluster.py "${ETRUN:-build/etrun}" "$@"
