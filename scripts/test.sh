#!/usr/bin/env bash
# Runs etrun's whole test suite: installs missing packages, then
#   1. builds build/ (Release) and runs the unit tests (doctest) and the integration tests (real
#      processes, real Python) through ctest;
#   2. builds build-asan/ (AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer) and runs
#      the same ctest suite against the instrumented etrun;
#   3. builds etrun in build-tsan/ (ThreadSanitizer) and runs the integration tests that exercise
#      its threads again;
#   and a short libFuzzer pass, 6 s per fuzz target (scripts/fuzz.sh).
# Any sanitizer report, in any process (etrun, its `__ssh_rank` helpers, the test binary), fails
# the run (see scripts/sanitizer_logs.sh). ETRUN_SANITIZERS=0 skips stages 2 and 3 locally; CI
# (CI=true) always runs them and builds with -Werror. Prints how long each stage took.
# The sanitizer builds and the fuzz pass run beside a test stage at idle CPU priority
# (SCHED_IDLE: they get only the cores the tests leave unused, and yield them at once), since the
# tests spend most of their time waiting on processes, sockets and timeouts: build-asan/ is built
# while the release tests run; build-tsan/ and the fuzz pass (its clang build, then its runs) go
# while the ASan tests run. Their output goes to <dir>/build.log (the fuzz pass's to
# build-fuzz/pass.log), shown when they fail; the fuzz pass's summary is printed once it is done.
# Without the sanitizer stages, the fuzz pass is a stage of its own after the release tests.
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
background=()
finish() {
  local pid
  for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  report
}
trap finish EXIT

build() {  # build DIR TARGETS... -- CMAKE_ARGS...
  local dir=$1 targets=()
  shift
  while [ "$1" != "--" ]; do targets+=(--target "$1"); shift; done
  shift
  cmake -S . -B "$dir" -DETRUN_WERROR=$werror "$@" >/dev/null
  cmake --build "$dir" -j2 "${targets[@]}"
}
idle_self() {  # this (sub)shell, and all it starts, at idle CPU priority (else the lowest nice)
  chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null
}
declare -A beside_pid beside_log
beside() {  # beside NAME LOG COMMAND...: starts COMMAND in the background, output to LOG
  local name=$1 log=$2
  shift 2
  mkdir -p "$(dirname "$log")"
  echo "etrun: == $name (beside the tests, idle priority; log: $log)" >&2
  set -m  # its own process group, so that an early exit stops all of it (finish)
  ( idle_self
    start=$SECONDS
    trap 'echo $((SECONDS - start)) >"$log.seconds"' EXIT
    "$@" >"$log" 2>&1 ) &
  set +m
  beside_pid[$name]=$!
  beside_log[$name]=$log
  background+=($!)
}
build_beside() {  # build_beside NAME DIR TARGETS... -- CMAKE_ARGS...: starts `build` in the background
  local name=$1
  shift
  beside "$name" "$1/build.log" build "$@"
}
wait_beside() {  # wait_beside NAME: waits for what `beside` started; its log's end if it failed
  local name=$1 start=$SECONDS log=${beside_log[$1]}
  if ! wait "${beside_pid[$name]}"; then
    tail -n 60 "$log" >&2
    echo "etrun: error: the $name failed (whole log: $log)" >&2
    exit 1
  fi
  timings+=("$(printf '%-28s %4d s, %d s of it waited for' "$name" "$(cat "$log.seconds")" \
    $((SECONDS - start)))")
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
# the soak (the release stage runs it), PyTorch jobs and real Horovod, the discovery-script
# tests (shell scripts), the smoke program, MPI (mpirun does the work), the Slurm cluster on the
# test bed (no etrun in it), the wheel (made from the release build) and the 10,000-connection
# test. TSan, whose interest is etrun's
# threads (output writer, SSH hosts, discovery runner, rendezvous), runs the integration files
# that exercise them (not the hang watchdog's: it adds no thread); the test bed's multi-host, Slurm and fault tests run under ASan only, which
# keeps the whole suite within 45 minutes on 2 cores.
it=$PWD/tests/integration
skip_common="--ignore=$it/test_horovod_real.py --ignore=$it/test_horovod_real_slurm.py
  --ignore=$it/test_soak.py --ignore=$it/test_elastic_torch.py
  --ignore=$it/test_discovery_scripts.py --ignore=$it/test_smoke.py --ignore=$it/test_mpi.py
  --ignore=$it/test_gpu.py --ignore=$it/test_install.py --ignore=$it/test_package.py
  --ignore=$it/test_slurmbed.py --ignore=$it/test_wheel.py"
# ASan also leaves the Slurm node faults that wait on Slurm itself (a killed slurmd, a cut link:
# the release stage runs them; the node set DOWN and the growth tests take the same paths).
asan_pytest="$skip_common -k 'not 10000_idle and not slurmd_is_killed and not link_is_cut and not real_horovod'"
tsan_pytest="$skip_common -k 'not 10000_idle and not real_horovod' --ignore=$it/test_hang.py --ignore=$it/test_report.py --ignore=$it/test_limits.py
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
fuzz=(scripts/fuzz.sh "${ETRUN_FUZZ_SECONDS:-6}")
sanitizers=0
if [ "${ETRUN_SANITIZERS:-1}" != "0" ] || [ "${CI:-}" = "true" ]; then sanitizers=1; fi
if [ $sanitizers = 1 ]; then
  # GCC, as the release build. -O0 for ASan/UBSan: GCC's UBSan instrumentation makes optimized
  # builds of the Boost.Asio/Beast files several times slower to compile, and etrun spends its
  # time waiting, not computing.
  build_beside "asan+ubsan build" build-asan etrun etrun_tests -- \
    -DCMAKE_BUILD_TYPE=Debug -DETRUN_SANITIZE=address,undefined
fi
stage "release tests" run_ctest build

if [ $sanitizers = 1 ]; then
  wait_beside "asan+ubsan build"
  # TSan: the etrun binary only (its threads are what TSan is for; the unit tests run under
  # ASan/UBSan above). -O1, as TSan's per-access cost hurts unoptimized code most.
  build_beside "tsan build" build-tsan etrun -- \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 -DETRUN_SANITIZE=thread
  # The fuzz pass: libFuzzer's -timeout is wall time, 10 s for one input that takes
  # milliseconds, so even the idle priority's smallest share of a busy core does not reach it.
  beside "fuzz (build + run)" build-fuzz/pass.log "${fuzz[@]}"
  stage "asan+ubsan tests" run_ctest build-asan "$asan_pytest"
  wait_beside "fuzz (build + run)"
  grep '^fuzz_' build-fuzz/pass.log >&2 || true
  wait_beside "tsan build"
  stage "tsan tests" run_ctest build-tsan "$tsan_pytest" -E '^unit$'
else
  stage "fuzz (build + run)" "${fuzz[@]}"
  echo "etrun: ETRUN_SANITIZERS=0: skipping the ASan/UBSan and TSan stages" >&2
fi
