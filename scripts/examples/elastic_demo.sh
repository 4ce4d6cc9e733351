#!/usr/bin/env bash
# Elastic demo: trains scripts/examples/torch_elastic.py under etrun while the discovery script
# adds a host after 10 s and removes it after 20 s; ranks restart with each new world and resume
# from the checkpoint. Takes well under a minute.
# Runs from the source tree (build/etrun) or installed (share/etrun/examples, etrun on PATH);
# ETRUN names another etrun.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
etrun=${ETRUN:-}
if [ -z "$etrun" ]; then
  if [ -x "$here/../../build/etrun" ]; then etrun=$here/../../build/etrun; else etrun=etrun; fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ETRUN_DEMO_START=$(date +%s)
"$etrun" -np 2 --min-np 1 --max-np 4 --elastic-mode restart \
  --host-discovery-script "$here/discover_demo.sh" \
  /usr/bin/python3 "$here/torch_elastic.py" --steps 120 --step-seconds 0.2 \
  --checkpoint "$work/checkpoint.pt"
