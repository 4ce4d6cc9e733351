#!/usr/bin/env bash
# Launch overhead: `etrun -np 8 /bin/true` against `mpirun -np 8 /bin/true` and against a bash
# loop that spawns 8 /bin/true (the fork/exec floor), with hyperfine. Prints the ratios.
# Targets: etrun within 2x of the floor and at least 4x faster than mpirun.
set -euo pipefail
cd "$(dirname "$0")/../.."
ETRUN=${ETRUN:-build/etrun}
RUNS=${RUNS:-100}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$out/launch.json" \
  -n floor "bash -c 'for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait'" \
  -n etrun "$ETRUN -np 8 /bin/true" \
  -n mpirun "mpirun --oversubscribe -np 8 /bin/true"
python3 - "$out/launch.json" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
floor, etrun, mpirun = r["floor"], r["etrun"], r["mpirun"]
print(f"floor {floor*1e3:.1f} ms, etrun {etrun*1e3:.1f} ms, mpirun {mpirun*1e3:.1f} ms")
print(f"etrun/floor = {etrun/floor:.2f}x (target <= 2), mpirun/etrun = {mpirun/etrun:.1f}x (target >= 4)")
ok = etrun / floor <= 2 and mpirun / etrun >= 4
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
