#!/usr/bin/env bash
# Builds build/ (Release) if needed and makes a Debian package of it with CPack:
# build/etrun_<version>_<arch>.deb, printed on the last line. Install it with
#   sudo apt-get install ./build/etrun_*.deb     (or dpkg -i; it depends on the libraries it links)
# ETRUN_BUILD_DIR names another build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ETRUN_BUILD_DIR:-build}
if [ ! -x "$build/etrun" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target etrun etrun-smoke >/dev/null
cmake --build "$build" -j2 >/dev/null  # the man page and everything installed
(cd "$build" && cpack -G DEB >/dev/null)
ls -t "$build"/etrun_*.deb | head -n 1
