#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Builds the Debian packages (debian/) into build/deb/:
#   bash tools/build-deb.sh        -> build/deb/*.deb, *.changes, *.buildinfo
# dpkg-buildpackage writes its results next to the source tree, so it runs
# on a copy in build/deb/src (the tracked and untracked-but-not-ignored
# files): nothing lands outside the repository and this tree's own build
# stays as it was.  Extra arguments go to dpkg-buildpackage.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/deb
rm -rf "$out"
mkdir -p "$out/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Build outputs stay out even where a commit tracked some by mistake.
    git ls-files -z --cached --others --exclude-standard \
        | while IFS= read -r -d '' f; do
            case "$f" in build/* | build-*/*) continue ;; esac
            [ -e "$f" ] && printf '%s\0' "$f"
        done \
        | tar --null -T - -cf - | tar -xf - -C "$out/src"
else
    tar --exclude=./build --exclude=./build-asan --exclude=./build-noreuseport --exclude=./build-nobpf \
        --exclude=./Makefile --exclude=./config.status --exclude=./config.log \
        --exclude=./configure --exclude=./autom4te.cache -cf - . \
        | tar -xf - -C "$out/src"
fi
cd "$out/src"
echo "==> dpkg-buildpackage -us -uc -b $* (in $out/src)"
dpkg-buildpackage -us -uc -b "$@"
cd ..
echo "==> built:"
ls -1 ./*.deb
