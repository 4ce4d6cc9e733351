#!/usr/bin/env bash
# Elastic reactions, 2 -> 3 -> 2 (see scripts/bench/elastic.py), at horovodrun's 1 s discovery
# interval and at 0.1 s. Target for etrun's own steps: <= 10 ms each.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 scripts/bench/elastic.py "${ETRUN:-build/etrun}" 1 0.1
