#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Fails when git tracks build output: a file .gitignore ignores, or an
# object, library or module anywhere.  Outside a git checkout (a release
# tarball, a Debian source package) nothing is tracked, so nothing to check.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "tracked outputs: not a git checkout, nothing tracked"
    exit 0
fi
ignored=$(git ls-files --cached --ignored --exclude-standard)
built=$(git ls-files | grep -E '\.(o|so|a|lo|la|gcda|gcno|pyc)$' || true)
bad=$(printf '%s\n%s\n' "$ignored" "$built" | sed '/^$/d' | sort -u)
if [ -n "$bad" ]; then
    echo "tracked outputs: git tracks build output; git rm --cached these:"
    printf '%s\n' "$bad" | while IFS= read -r path; do
        echo "    $path"
    done
    exit 1
fi
echo "tracked outputs: none"
