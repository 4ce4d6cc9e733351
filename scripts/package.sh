#!/usr/bin/env bash
# Builds build/ (Release) if needed and packages it twice, printing each file on a line of its own:
#   build/etrun_<version>_<arch>.deb  a Debian package (CPack). Install it with
#     sudo apt-get install ./build/etrun_*.deb    (it depends on libc6 alone)
#   build/etrun-<version>-py3-none-manylinux_2_NN_<arch>.whl  a wheel for any venv or conda env
#     on a glibc of 2.NN or newer: pip install build/etrun-*.whl  (docs/install.md)
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

# The wheel holds the installed tree, stripped. Its etrun-smoke is etrun-smoke-tcp, the TCP backend
# alone: with NCCL, etrun-smoke links CUDA's libraries, which a wheel cannot count on.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
tree=$(mktemp -d "${TMPDIR:-/tmp}/etrun-wheel.XXXXXX")
trap 'rm -rf "$tree"' EXIT
cmake --install "$build" --prefix "$tree" --strip >/dev/null
cmake --build "$build" -j2 --target etrun-smoke-tcp >/dev/null
install -m 755 -s "$build/etrun-smoke-tcp" "$tree/bin/etrun-smoke"
rm -f "$build"/etrun-"$version"-*.whl
/usr/bin/python3 scripts/wheel.py "$tree" "$version" "$build"
