#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Renders /bucket-status with headless Chromium into build/bucket-status.png
# so reviewers can look at the page.  Starts the Quick start demo server if
# it is not running.  Needs Debian's chromium package; not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
url="http://127.0.0.1:${DEMO_PORT:-8080}/bucket-status"
command -v chromium >/dev/null || {
    echo "chromium not installed: apt-get install chromium" >&2
    exit 1
}
curl -sf -o /dev/null "$url" || bash tools/run.sh demo >/dev/null
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$profile" --window-size=1200,720 \
    --screenshot="$PWD/build/bucket-status.png" "$url" 2>/dev/null
echo "wrote build/bucket-status.png from $url"
