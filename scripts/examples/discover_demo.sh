#!/bin/sh
# A discovery script for the elastic demo: the job grows and shrinks on a timer. A real script
# would ask a scheduler or cloud API; the contract is the same: print one host[:slots] per line.
#   0-10 s: localhost:2            (2 ranks)
#  10-20 s: + 127.0.0.1:1          (3 ranks: a host joins)
#  20 s on: localhost:2            (2 ranks: it leaves again)
start=${ETRUN_DEMO_START:?set ETRUN_DEMO_START to the demo start time in seconds}
elapsed=$(( $(date +%s) - start ))
echo localhost:2
if [ "$elapsed" -ge 10 ] && [ "$elapsed" -lt 20 ]; then
  echo 127.0.0.1:1
fi
