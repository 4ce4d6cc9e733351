#!/usr/bin/env bash
# Elastic demo: trains scripts/examples/torch_elastic.py under etrun while the discovery script
# adds a host after 10 s and removes it after 20 s; ranks restart with each new world and resume
# from the checkpoint. Takes well under a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ETRUN_DEMO_START=$(date +%s)
build/etrun -np 2 --min-np 1 --max-np 4 --elastic-mode restart \
  --host-discovery-script scripts/examples/discover_demo.sh \
  /usr/bin/python3 scripts/examples/torch_elastic.py --steps 120 --step-seconds 0.2 \
  --checkpoint "$work/checkpoint.pt"
