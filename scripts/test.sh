#!/usr/bin/env bash
# Runs etrun's whole test suite: installs missing packages, builds if needed, then runs the unit
# tests (doctest) and the integration tests (real processes, real Python) through ctest, after a
# short libFuzzer pass over the HTTP request path and the pickle/Wire readers (scripts/fuzz.sh).
# Non-zero exit on any failure. CI (CI=true) builds with -Werror.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_packages
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DETRUN_WERROR=$werror >/dev/null
cmake --build build -j2
scripts/fuzz.sh "${ETRUN_FUZZ_SECONDS:-10}"
cd build
ctest --output-on-failure --timeout 1200
