#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Builds the Debian source package and binary packages (debian/) into
# build/deb/:
#   bash tools/build-deb.sh   -> build/deb/*.orig.tar.xz, *.debian.tar.xz,
#                                *.dsc, *.deb, *.changes, *.buildinfo
# dpkg-buildpackage writes its results next to the source tree, so it runs
# on a copy in build/deb/src (the tracked and untracked-but-not-ignored
# files): nothing lands outside the repository and this tree's own build
# stays as it was.  The source format is 3.0 (quilt), whose upstream
# tarball is made here from the same files, less debian/, so a clean clone
# builds.  Extra arguments go to dpkg-buildpackage.
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
source=$(dpkg-parsechangelog -l debian/changelog -S Source)
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
upstream=${version%-*}
stamp=$(dpkg-parsechangelog -l debian/changelog -S Timestamp)
orig="$out/${source}_${upstream}.orig.tar.xz"
echo "==> $orig (the tree less debian/)"
tar -C "$out" --exclude=src/debian --sort=name --owner=0 --group=0 \
    --numeric-owner --mtime="@$stamp" --transform "s|^src|$source-$upstream|" \
    -cJf "$orig" src
cd "$out/src"
echo "==> dpkg-buildpackage -us -uc $* (in $out/src)"
dpkg-buildpackage -us -uc "$@"
cd ..
echo "==> built:"
ls -1 ./*.dsc ./*.deb
