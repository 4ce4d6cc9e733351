#!/usr/bin/env bash
# The sanitizer builds' report check (ctest runs it around the tests, see CMakeLists.txt):
#   sanitizer_logs.sh clear DIR   empties DIR before the tests;
#   sanitizer_logs.sh check DIR   fails, printing every report, if any process wrote one.
# Sanitizers write to DIR/<kind>.<pid> (log_path) instead of stderr, so a report from a process
# whose exit code nobody checks still fails the run.
set -euo pipefail
mode=$1 dir=$2
case "$mode" in
  clear)
    rm -rf "$dir"
    mkdir -p "$dir"
    ;;
  check)
    shopt -s nullglob
    reports=("$dir"/*)
    if [ ${#reports[@]} -eq 0 ]; then exit 0; fi
    for f in "${reports[@]}"; do
      echo "==== $f" >&2
      head -c 20000 "$f" >&2
    done
    echo "etrun: error: ${#reports[@]} sanitizer report(s) in $dir: fix the bug each one names" >&2
    exit 1
    ;;
  *)
    echo "usage: $0 clear|check DIR" >&2
    exit 2
    ;;
esac
