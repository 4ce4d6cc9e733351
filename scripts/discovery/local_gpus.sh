#!/bin/sh
# Discovery script for etrun --host-discovery-script on one machine: one slot per GPU that the
# NVIDIA driver lists, so a job shrinks when a GPU falls off the bus and grows back when it
# returns.
#
# Usage:    local_gpus.sh                 (no arguments)
# Input:    `nvidia-smi -L` (its "GPU <n>: ..." lines are counted; MIG lines are not).
#           CUDA_VISIBLE_DEVICES, when set, caps the count at the number of devices it makes
#           visible.
#           ETRUN_NO_GPU_SLOTS  slots when nvidia-smi is not on PATH at all (a CPU-only or
#                               development machine): a whole number, or "cpus" for one slot
#                               per CPU (`nproc`). Default 1: a GPU job started by mistake on a
#                               machine without GPUs gets one rank, not one per CPU.
# Output:   "localhost:<n>".
# Errors:   one line on stderr and exit 1 when nvidia-smi is installed but fails (driver not
#           loaded, "No devices were found") or lists no GPU, or when CUDA_VISIBLE_DEVICES hides
#           them all ("", "-1", "NoDevFiles"). etrun fails the job if that was its first run, and otherwise keeps the
#           last good host list.
# Example:
#   etrun -np 1 --min-np 1 --max-np 8 \
#       --host-discovery-script scripts/discovery/local_gpus.sh python3 train.py
set -eu

me=local_gpus.sh
fail() {
  echo "$me: $*" >&2
  exit 1
}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  slots=${ETRUN_NO_GPU_SLOTS:-1}
  if [ "$slots" = cpus ]; then
    slots=$(nproc)
  fi
  case $slots in
    '' | *[!0-9]*) fail "ETRUN_NO_GPU_SLOTS=\"$slots\" must be a whole number or cpus" ;;
  esac
  echo "localhost:$slots"
  exit 0
fi

# nvidia-smi prints its complaints on stdout ("No devices were found", "NVIDIA-SMI has failed
# because it couldn't communicate with the NVIDIA driver..."), so keep both for the message.
if ! listing=$(nvidia-smi -L 2>&1); then
  fail "nvidia-smi -L failed: $(printf '%s' "$listing" | tr '\r\n' '  ' | sed 's/ *$//')"
fi
gpus=$(printf '%s\n' "$listing" | tr -d '\r' | grep -c '^GPU ' || true)
[ "$gpus" -gt 0 ] ||
  fail "nvidia-smi -L lists no GPU: check the driver and the GPUs with nvidia-smi"

if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  # CUDA uses the devices listed before the first entry that is not an index or a GPU-/MIG-
  # UUID ("-1", "NoDevFiles", an empty string: none at all).
  visible=$(printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr -d ' \r' | LC_ALL=C awk -F , '{
    for (i = 1; i <= NF && $i ~ /^([0-9]+|GPU-.+|MIG-.+)$/; i++) n++
    print n + 0
  }')
  [ "$visible" -gt 0 ] ||
    fail "CUDA_VISIBLE_DEVICES=\"$CUDA_VISIBLE_DEVICES\" hides every GPU: unset it or name the GPUs to use"
  if [ "$visible" -lt "$gpus" ]; then
    gpus=$visible
  fi
fi
echo "localhost:$gpus"
