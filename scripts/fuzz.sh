#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS (default 10; CI uses that) from its seed corpus in tests/fuzz/corpus/. Non-zero exit on
# a crash, leak or sanitizer report; the reproducer lands in build-fuzz/artifacts/.
# Longer run: scripts/fuzz.sh 600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETRUN_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j2 --target fuzz_http_request fuzz_pickle
mkdir -p build-fuzz/artifacts
for target in http_request pickle; do
  corpus=build-fuzz/corpus/$target
  mkdir -p "$corpus"
  seeds=tests/fuzz/corpus/${target%_request}
  echo "fuzz_$target: ${seconds}s" >&2
  build-fuzz/fuzz_$target -max_total_time="$seconds" -max_len=8192 -print_final_stats=0 \
    -artifact_prefix=build-fuzz/artifacts/ "$corpus" "$seeds" 2>build-fuzz/fuzz_$target.log || {
    tail -40 build-fuzz/fuzz_$target.log >&2
    echo "etrun: error: fuzz_$target found a failure; reproducer in build-fuzz/artifacts/" >&2
    exit 1
  }
  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" build-fuzz/fuzz_$target.log | tail -1 >&2 || true
done
