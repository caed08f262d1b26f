#!/usr/bin/env bash
# The quiet stretch: the four configurations once each, in a shuffled
# order, 15 s of strace -c then 15 s of CPU time per server.
set -euo pipefail
cd "$(dirname "$0")"
BEFORE=${BEFORE:-/tmp/i35-base/build/mod_mpm_prefork.so}
AFTER=${AFTER:-../../../build/mod_mpm_prefork.so}
for run in "after 64" "before 4" "after 4" "before 64"; do
    set -- $run
    so=$BEFORE; [ "$1" = after ] && so=$(readlink -f "$AFTER")
    python3 measure.py "$so" "$1" "$2" 15 quiet
done
