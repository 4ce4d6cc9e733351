#!/bin/sh
# Discovery script for etrun --host-discovery-script inside a Slurm allocation (sbatch or salloc):
# prints every node of the job with one slot per GPU.
#
# Usage:    slurm.sh                      (no arguments; run where the job's environment is set)
# Input:    SLURM_JOB_NODELIST (or the older SLURM_NODELIST), expanded with
#           `scontrol show hostnames`; slots per node, first that is set:
#             ETRUN_SLURM_SLOTS      a number you choose, for every node
#             SLURM_GPUS_ON_NODE     GPUs allocated on this node ("4")
#             SLURM_GPUS_PER_NODE    --gpus-per-node ("4", "a100:4", "a100:2,v100:2" -> 4)
#             SLURM_NTASKS_PER_NODE  --ntasks-per-node ("8")
#             SLURM_TASKS_PER_NODE   tasks of each node, in node order ("4(x2),2" -> 4, 4, 2)
#             otherwise 1
#           The GPU counts are those of the node the script runs on; Slurm gives every node of
#           a --gpus-per-node job the same count.
# Output:   one "node:slots" line per node, in Slurm's node order (the order decides ranks).
# Errors:   one line on stderr and exit 1 outside an allocation, when scontrol is missing or
#           fails, or when a count above is not a whole number.
# Example (in an sbatch script with #SBATCH --nodes=4 --gpus-per-node=4):
#   etrun -np 16 --min-np 8 --host-discovery-script scripts/discovery/slurm.sh python3 train.py
# The node list of a running job is fixed, so with this script the job only loses nodes through
# failures (etrun blacklists a node whose rank fails); it never grows past its allocation.
set -eu

me=slurm.sh
fail() {
  echo "$me: $*" >&2
  exit 1
}

nodelist=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}
[ -n "$nodelist" ] ||
  fail "not inside a Slurm allocation (SLURM_JOB_NODELIST is not set): run etrun from an sbatch script or an salloc shell"
command -v scontrol >/dev/null 2>&1 ||
  fail "scontrol not found on PATH: run on a Slurm node, or add Slurm's bin directory to PATH"

# Whole number or fail, naming the variable.
count() {
  case $2 in
    '' | *[!0-9]*) fail "$1=\"$2\" is not a whole number of slots" ;;
  esac
  echo "$2"
}

# Sum of "[type:]N" items separated by commas; "(...)" suffixes (index lists) are dropped.
gpu_count() {
  total=0
  old_ifs=$IFS
  IFS=,
  for item in $2; do
    n=${item%%(*}
    n=${n##*:}
    case $n in
      '' | *[!0-9]*) fail "$1=\"$2\" is not like 4, a100:4 or a100:2,v100:2" ;;
    esac
    total=$((total + n))
  done
  IFS=$old_ifs
  echo "$total"
}

per_node=""  # one count per node, in node order; empty: $slots for every node
if [ -n "${ETRUN_SLURM_SLOTS:-}" ]; then
  slots=$(count ETRUN_SLURM_SLOTS "$ETRUN_SLURM_SLOTS")
elif [ -n "${SLURM_GPUS_ON_NODE:-}" ]; then
  slots=$(count SLURM_GPUS_ON_NODE "$SLURM_GPUS_ON_NODE")
elif [ -n "${SLURM_GPUS_PER_NODE:-}" ]; then
  slots=$(gpu_count SLURM_GPUS_PER_NODE "$SLURM_GPUS_PER_NODE")
elif [ -n "${SLURM_NTASKS_PER_NODE:-}" ]; then
  slots=$(count SLURM_NTASKS_PER_NODE "$SLURM_NTASKS_PER_NODE")
elif [ -n "${SLURM_TASKS_PER_NODE:-}" ]; then
  # "4(x2),2" -> "4 4 2"
  per_node=$(echo "$SLURM_TASKS_PER_NODE" | LC_ALL=C awk -v me="$me" '{
    n = split($0, part, ",")
    for (i = 1; i <= n; i++) {
      if (part[i] ~ /^[0-9]+$/) { printf "%s ", part[i]; continue }
      if (part[i] !~ /^[0-9]+\(x[0-9]+\)$/) {
        printf "%s: SLURM_TASKS_PER_NODE=\"%s\" is not like 4(x2),2\n", me, $0 > "/dev/stderr"
        exit 1
      }
      split(part[i], kv, /\(x|\)/)
      for (j = 0; j < kv[2]; j++) printf "%s ", kv[1]
    }
  }') || exit 1
  slots=1
else
  slots=1
fi

# scontrol's messages go to a file so that they end up in our one error line, not in etrun's
# output at every poll.
errors=$(mktemp "${TMPDIR:-/tmp}/etrun-slurm.XXXXXX")
trap 'rm -f "$errors"' EXIT
if ! hosts=$(scontrol show hostnames "$nodelist" 2>"$errors"); then
  fail "scontrol show hostnames $nodelist failed: $(tr '\n' ' ' <"$errors" | sed 's/ *$//')"
fi

echo "$hosts" | tr -d '\r' | LC_ALL=C awk -v per_node="$per_node" -v slots="$slots" '
BEGIN { n = split(per_node, count, " ") }
{
  gsub(/^[ \t]+|[ \t]+$/, "")
  if ($0 == "") next
  ++node
  print $0 ":" (node <= n ? count[node] : slots)
}'
