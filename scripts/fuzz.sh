#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and runs each from its
# seed corpus in tests/fuzz/corpus/<name>/ (what it finds is kept in build-fuzz/corpus/<name>/):
#   scripts/fuzz.sh [SECONDS]   each target for SECONDS (default 10; scripts/test.sh's CI pass)
#   scripts/fuzz.sh --runs N    each target for N executions (the long run: --runs 1000000)
# Prints one summary line per target (executions, time, coverage, corpus). Non-zero exit on a
# crash, leak, timeout, sanitizer report or failed invariant; the reproducer lands in
# build-fuzz/artifacts/ (replay: build-fuzz/fuzz_<name> build-fuzz/artifacts/<file>).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time="${1:-10}")
if [ "${1:-}" = "--runs" ]; then
  if ! [[ "${2:-}" =~ ^[1-9][0-9]*$ ]]; then
    echo "etrun: error: --runs needs a positive number of executions, e.g. scripts/fuzz.sh --runs 1000000" >&2
    exit 2
  fi
  limit=(-runs="$2")
elif ! [[ "${1:-10}" =~ ^[1-9][0-9]*$ ]]; then
  echo "etrun: error: usage: scripts/fuzz.sh [SECONDS] | --runs N" >&2
  exit 2
fi
# target name -> seed corpus folder
targets=(http_request:http pickle:pickle wire:wire discovery_output:discovery_output
  host_slots:host_slots control_auth:control_auth)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETRUN_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null
names=("${targets[@]%%:*}")
cmake --build build-fuzz -j2 --target "${names[@]/#/fuzz_}"
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  name=${t%%:*} seeds=tests/fuzz/corpus/${t#*:}
  corpus=build-fuzz/corpus/$name log=build-fuzz/fuzz_$name.log
  mkdir -p "$corpus"
  start=$(date +%s%N)
  build-fuzz/fuzz_$name "${limit[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/ "$corpus" "$seeds" >"$log" 2>&1 || {
    tail -40 "$log" >&2
    echo "etrun: error: fuzz_$name found a failure; reproducer in build-fuzz/artifacts/" >&2
    exit 1
  }
  ms=$((($(date +%s%N) - start) / 1000000))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  last=$(grep -E "^#[0-9]+" "$log" | tail -1)
  cov=$(sed -E -n 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -E -n 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -E -n 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$last")
  printf 'fuzz_%s: %s runs in %d.%d s, coverage %s edges / %s features, corpus %s inputs\n' \
    "$name" "${runs:-?}" $((ms / 1000)) $((ms % 1000 / 100)) "${cov:-?}" "${ft:-?}" "${corp:-?}" >&2
done
