#!/usr/bin/env bash
# Runs etrun's whole test suite: installs missing packages, then
#   1. builds build/ (Release) and runs a short libFuzzer pass, 6 s per fuzz target
#      (scripts/fuzz.sh), the unit tests (doctest) and the integration tests (real processes, real
#      Python) through ctest;
#   2. builds build-asan/ (AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer) and runs
#      the same ctest suite against the instrumented etrun;
#   3. builds etrun in build-tsan/ (ThreadSanitizer) and runs the integration tests that exercise
#      its threads again.
# Any sanitizer report, in any process (etrun, its `__ssh_rank` helpers, the test binary), fails
# the run (see scripts/sanitizer_logs.sh). ETRUN_SANITIZERS=0 skips stages 2 and 3 locally; CI
# (CI=true) always runs them and builds with -Werror. Prints how long each stage took.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_packages "${ETRUN_PACKAGES[@]}" "${ETRUN_TEST_PACKAGES[@]}"
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi

timings=()
stage() {  # stage NAME COMMAND...: runs and times one stage
  local name=$1 start=$SECONDS
  shift
  echo "etrun: == $name" >&2
  "$@"
  timings+=("$(printf '%-28s %4d s' "$name" $((SECONDS - start)))")
}
report() {
  echo "etrun: stage times:" >&2
  printf '  %s\n' "${timings[@]}" >&2
}
trap report EXIT

build() {  # build DIR TARGETS... -- CMAKE_ARGS...
  local dir=$1 targets=()
  shift
  while [ "$1" != "--" ]; do targets+=(--target "$1"); shift; done
  shift
  cmake -S . -B "$dir" -DETRUN_WERROR=$werror "$@" >/dev/null
  cmake --build "$dir" -j2 "${targets[@]}"
}
run_ctest() {  # run_ctest DIR [PYTEST_ADDOPTS [CTEST_ARGS...]]
  local dir=$1 addopts=${2:-}
  shift $(($# < 2 ? $# : 2))
  (cd "$dir" && PYTEST_ADDOPTS="$addopts" ctest --output-on-failure --timeout 1200 "$@")
  # ctest shows a passing test's output only in its log: print why tests were skipped (e.g. the
  # cluster test bed's one line where the machine allows no network namespaces).
  grep -h '^SKIPPED' "$dir/Testing/Temporary/LastTest.log" >&2 || true
}
# The sanitizer stages skip what instrumenting etrun adds little to and what costs the most time:
# the soak (the release stage runs it), PyTorch jobs, the discovery-script
# tests (shell scripts), the smoke program, MPI (mpirun does the work), the Slurm cluster on the
# test bed (no etrun in it) and the 10,000-connection test. TSan, whose interest is etrun's
# threads (output writer, SSH hosts, discovery runner, rendezvous), runs the integration files
# that exercise them; the test bed's multi-host, Slurm and fault tests run under ASan only, which
# keeps CI within 30 minutes on 2 cores.
it=$PWD/tests/integration
skip_common="--ignore=$it/test_horovod_real.py --ignore=$it/test_horovod_real_slurm.py
  --ignore=$it/test_soak.py --ignore=$it/test_elastic_torch.py
  --ignore=$it/test_discovery_scripts.py --ignore=$it/test_smoke.py --ignore=$it/test_mpi.py
  --ignore=$it/test_gpu.py --ignore=$it/test_install.py --ignore=$it/test_package.py
  --ignore=$it/test_slurmbed.py"
# ASan also leaves the Slurm node faults that wait on Slurm itself (a killed slurmd, a cut link:
# the release stage runs them; the node set DOWN and the growth tests take the same paths).
asan_pytest="$skip_common -k 'not 10000_idle and not slurmd_is_killed and not link_is_cut'"
tsan_pytest="$skip_common -k 'not 10000_idle' --ignore=$it/test_report.py --ignore=$it/test_limits.py
  --ignore=$it/test_multihost.py --ignore=$it/test_testbed.py --ignore=$it/test_standins.py
  --ignore=$it/test_bad_inputs.py --ignore=$it/test_slurm.py --ignore=$it/test_slurm_preempt.py
  --ignore=$it/test_pool_slurm.py
  --ignore=$it/test_ssh_netns.py --ignore=$it/test_elastic_protocol.py"

# Real Horovod for the release stage's real-worker tests: built once per machine and torch
# (scripts/horovod.sh caches it outside the checkout); where it cannot be had, those tests are
# skipped with the script's one line.
horovod() {
  local site
  if site=$(scripts/horovod.sh); then
    export ETRUN_HOROVOD_PATH=$site
  else
    export ETRUN_HOROVOD_UNAVAILABLE="real Horovod unavailable (scripts/horovod.sh said why above)"
  fi
}
stage "real horovod (build or reuse)" horovod
stage "release build" build build all -- -DCMAKE_BUILD_TYPE=Release
stage "fuzz (build + run)" scripts/fuzz.sh "${ETRUN_FUZZ_SECONDS:-6}"
stage "release tests" run_ctest build

if [ "${ETRUN_SANITIZERS:-1}" != "0" ] || [ "${CI:-}" = "true" ]; then
  # GCC, as the release build. -O0 for ASan/UBSan: GCC's UBSan instrumentation makes optimized
  # builds of the Boost.Asio/Beast files several times slower to compile, and etrun spends its
  # time waiting, not computing. -O1 for TSan, whose per-access cost hurts unoptimized code most.
  stage "asan+ubsan build" build build-asan etrun etrun_tests -- \
    -DCMAKE_BUILD_TYPE=Debug -DETRUN_SANITIZE=address,undefined
  stage "asan+ubsan tests" run_ctest build-asan "$asan_pytest"
  # TSan: the etrun binary only (its threads are what TSan is for; the unit tests run under
  # ASan/UBSan above), which keeps the whole suite within CI's 20 minutes on 2 cores.
  stage "tsan build" build build-tsan etrun -- \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 -DETRUN_SANITIZE=thread
  stage "tsan tests" run_ctest build-tsan "$tsan_pytest" -E '^unit$'
else
  echo "etrun: ETRUN_SANITIZERS=0: skipping the ASan/UBSan and TSan stages" >&2
fi
