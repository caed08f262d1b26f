#!/usr/bin/env bash
# The quiet stretch: the four configurations once each, in a shuffled
# order, 15 s of strace -c then 15 s of CPU time per server.
set -euo pipefail
cd "$(dirname "$0")"
BEFORE=${BEFORE:-/tmp/i35-base/build/mod_mpm_prefork.so}
AFTER=${AFTER:-../../../build/mod_mpm_prefork.so}
for run in "after 64" "before 4" "after 4" "before 64"; do
    read -r label buckets <<< "$run"
    so=$BEFORE
    if [ "$label" = after ]; then
        so=$(readlink -f "$AFTER")
    fi
    python3 measure.py "$so" "$label" "$buckets" 15 quiet
done
