#!/usr/bin/env bash
# Installs everything etrun needs from Debian packages and builds it (Release) into build/.
# Usage: scripts/setup.sh   (as root, or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_packages
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2
echo "etrun: built build/etrun" >&2
