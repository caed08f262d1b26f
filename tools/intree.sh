#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Builds httpd 2.4 from its source with this project's MPM (static prefork,
# or every MPM shared) and its status module, and installs it:
#
#   tools/intree.sh HTTPD_TREE_OR_TARBALL [--shared] [--prefix DIR]
#                   [--workdir DIR] [-- CONFIGURE_ARGS...]
#   tools/intree.sh --patch HTTPD_TREE_OR_TARBALL > prefork-buckets-2.4.62.patch
#   tools/intree.sh --patched TREE ...        build a tree the patch was applied to
#   tools/intree.sh --copy-only TREE_OR_TARBALL   copy the files in, build nothing
#   tools/intree.sh --compile-only TREE_OR_TARBALL ...  copy the files in,
#                   configure, compile only the MPM and the status module, and
#                   install what apxs builds need (headers, build files, apxs)
#
# Each command it runs is echoed to stderr with a leading "+"; README
# ("Building inside an httpd source tree") lists them for doing it by hand.
# Anything that is not an httpd 2.4 tree, or a tree that already holds this
# project's files, is refused before anything is changed.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)

# What goes into the tree: the whole of server/mpm/prefork/ with its
# capability folders (its config3.m4 builds every prefork*.c there and in
# the folders), the headers of include/ that the MPM and
# the status module share, and the status module: the C files of
# modules/generators/, registered in config5.m4.  A new file in any of
# them is taken without a change here.
project_names() {
    local f
    for f in "$@"; do
        [ -f "$f" ] && basename "$f"
    done | tr '\n' ' '
}
HEADER_FILES=$(project_names "$TOP"/include/*.h)
# The MPM's files, as paths under server/mpm/prefork/ (its folders too).
MPM_FILES=$(cd "$TOP/server/mpm/prefork" && find . -type f -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ')
STATUS_FILES=$(project_names "$TOP"/modules/generators/*.c "$TOP"/modules/generators/*.h)
# The oldest release whose API the code compiles against, and the oldest
# one tested.
MIN_PATCHLEVEL=35
TESTED_PATCHLEVEL=37

usage() {
    sed -n '4,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit "${1:-2}"
}

die() {
    printf 'intree.sh: %s\n' "$*" >&2
    exit 1
}

run() {
    printf '+ %s\n' "$*" >&2
    "$@"
}

# ---- arguments --------------------------------------------------------------
MODE=build
SHARED=0
PREFIX=/usr/local/apache2
WORKDIR=.
SOURCE=
CONFIGURE_EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --patch) MODE="patch" ;;
        --patched) MODE=patched ;;
        --compile-only) MODE=compile ;;
        --copy-only) MODE=copy ;;
        --shared) SHARED=1 ;;
        --prefix) [ $# -ge 2 ] || usage; PREFIX=$2; shift ;;
        --prefix=*) PREFIX=${1#--prefix=} ;;
        --workdir) [ $# -ge 2 ] || usage; WORKDIR=$2; shift ;;
        --workdir=*) WORKDIR=${1#--workdir=} ;;
        -h|--help) usage 0 ;;
        --) shift; CONFIGURE_EXTRA=("$@"); break ;;
        -*) printf 'intree.sh: unknown option %s\n' "$1" >&2; usage ;;
        *) [ -z "$SOURCE" ] || usage; SOURCE=$1 ;;
    esac
    shift
done
[ -n "$SOURCE" ] || usage
case "$PREFIX" in
    /*) ;;
    *) PREFIX="$(pwd)/$PREFIX" ;;
esac

# ---- checks on the tree (nothing is changed before they pass) --------------
release_number() {
    sed -n "s/^#define $1[[:space:]]*\([0-9][0-9]*\).*/\1/p" \
        "$2/include/ap_release.h"
}

# Prints the release ("2.4.62") of an httpd 2.4 tree, or fails saying why
# the directory is not one (calling it $2 if given).
check_httpd_tree() {
    local tree=$1 name=${2:-$1} major minor patch
    [ -d "$tree" ] || die "$name: no such directory"
    if [ ! -f "$tree/include/ap_release.h" ]; then
        die "$name is not an httpd source tree (no include/ap_release.h)"
    fi
    major=$(release_number AP_SERVER_MAJORVERSION_NUMBER "$tree")
    minor=$(release_number AP_SERVER_MINORVERSION_NUMBER "$tree")
    patch=$(release_number AP_SERVER_PATCHLEVEL_NUMBER "$tree")
    if [ -z "$major" ] || [ -z "$minor" ] || [ -z "$patch" ]; then
        die "$name/include/ap_release.h names no release: not an httpd source tree"
    fi
    if [ "$major.$minor" != "2.4" ]; then
        die "$name is httpd $major.$minor.$patch; this MPM is for httpd 2.4"
    fi
    if [ "$patch" -lt "$MIN_PATCHLEVEL" ]; then
        die "$name is httpd 2.4.$patch; the MPM needs 2.4.$MIN_PATCHLEVEL or later (ap_update_global_status), and 2.4.$TESTED_PATCHLEVEL is the oldest tested"
    fi
    local need
    for need in buildconf configure.in server/mpm/prefork/config3.m4 \
                modules/generators/config5.m4; do
        [ -f "$tree/$need" ] || die "$name has no $need: not a complete httpd 2.4 source tree"
    done
    grep -q '^APACHE_MODPATH_FINISH' "$tree/modules/generators/config5.m4" \
        || die "$name/modules/generators/config5.m4 has no APACHE_MODPATH_FINISH line to register the status module before"
    if [ "$patch" -lt "$TESTED_PATCHLEVEL" ]; then
        printf 'intree.sh: warning: httpd 2.4.%s is untested; 2.4.%s is the oldest release tested\n' \
            "$patch" "$TESTED_PATCHLEVEL" >&2
    fi
    echo "2.4.$patch"
}

# The files of this project already in the tree, one per line.
project_files_in() {
    local tree=$1 f
    for f in $HEADER_FILES; do
        [ ! -e "$tree/include/$f" ] || echo "include/$f"
    done
    for f in $STATUS_FILES; do
        [ ! -e "$tree/modules/generators/$f" ] || echo "modules/generators/$f"
    done
    for f in $MPM_FILES; do
        case "$f" in
            *prefork_*.c) [ ! -e "$tree/server/mpm/prefork/$f" ] || echo "server/mpm/prefork/$f" ;;
        esac
    done
    if grep -q 'bucket_status' "$tree/modules/generators/config5.m4"; then
        echo "modules/generators/config5.m4 (registers bucket_status)"
    fi
}

check_pristine() {
    local tree=$1 found
    found=$(project_files_in "$tree")
    if [ -n "$found" ]; then
        die "$tree already holds this project's files ($(echo "$found" | tr '\n' ' ' | sed 's/ $//')): it was patched before. Build it with --patched, or start from a pristine tree"
    fi
}

check_patched() {
    local tree=$1 f
    for f in include/prefork_buckets.h modules/generators/mod_bucket_status.c \
             server/mpm/prefork/prefork_maintenance.c; do
        [ -f "$tree/$f" ] || die "$tree has no $f: it is not patched (run without --patched to copy the files in)"
    done
    grep -q 'bucket_status' "$tree/modules/generators/config5.m4" \
        || die "$tree/modules/generators/config5.m4 does not register bucket_status: apply the whole patch"
}

# What the build needs from the system, named by Debian package.
check_build_tools() {
    local tool pkg missing=()
    for tool in autoconf:autoconf libtoolize:libtool libtool:libtool-bin make:make \
                apr-1-config:libapr1-dev apu-1-config:libaprutil1-dev; do
        pkg=${tool#*:}
        tool=${tool%%:*}
        command -v "$tool" >/dev/null 2>&1 || missing+=("$pkg ($tool)")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        die "missing: ${missing[*]}; also needed: libpcre2-dev (2.4.37: libpcre3-dev), libexpat1-dev, zlib1g-dev"
    fi
    # ListenBucketSteering's BPF programs need these too; without them the
    # MPM is built without the programs (idle and cpu then refuse to start).
    missing=()
    for tool in clang:clang bpftool:bpftool; do
        pkg=${tool#*:}
        tool=${tool%%:*}
        command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] \
            || missing+=("$pkg")
    done
    pkg-config --exists 'libbpf >= 1.0' 2>/dev/null || missing+=("libbpf-dev")
    if [ "${#missing[@]}" -gt 0 ]; then
        printf 'intree.sh: warning: without %s the MPM is built without ListenBucketSteering'"'"'s BPF programs (hash only)\n' \
            "${missing[*]}" >&2
    fi
}

# ---- the tree: a directory, or a tarball unpacked ---------------------------
# Paths removed when the script exits; a tree stays once it is used.
CLEANUP=()
remove_cleanup() {
    if [ "${#CLEANUP[@]}" -gt 0 ]; then
        rm -rf "${CLEANUP[@]}"
    fi
}
trap remove_cleanup EXIT

# Unpacks a tarball and sets TREE to the tree in $2.  It is unpacked in a
# scratch directory and checked there, so that a tarball of something else
# leaves nothing behind, and it never goes over a directory that is there.
unpack() {
    local tarball=$1 into=$2 scratch entries
    tar tf "$tarball" >/dev/null 2>&1 \
        || die "$tarball is neither a directory nor a tar archive"
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/intree-unpack-XXXXXX")
    CLEANUP+=("$scratch")
    printf '+ tar xf %s -C %s\n' "$tarball" "$into" >&2
    tar xf "$tarball" -C "$scratch" || die "$tarball could not be unpacked"
    entries=$(ls -A "$scratch")
    if [ "$(printf '%s\n' "$entries" | wc -l)" -ne 1 ] || [ ! -d "$scratch/$entries" ]; then
        die "$tarball is not an httpd source tarball (not one top-level directory)"
    fi
    check_httpd_tree "$scratch/$entries" "$tarball ($entries/)" >/dev/null
    if [ -e "$into/$entries" ]; then
        die "$into/$entries exists already: remove it, or pass that tree instead of the tarball"
    fi
    mkdir -p "$into"
    mv "$scratch/$entries" "$into/$entries"
    rmdir "$scratch"
    TREE=$into/$entries
    CLEANUP+=("$TREE")
}

# ---- copying the project in ---------------------------------------------------
# The lines registered in modules/generators/config5.m4.
config5_block() {
    local objects f
    objects=
    for f in $STATUS_FILES; do
        case "$f" in
            *.c) objects="$objects ${f%.c}.lo" ;;
        esac
    done
    cat <<EOF
dnl mod_bucket_status: the prefork MPM's listener buckets (prefork-buckets)
APACHE_MODULE(bucket_status, listener bucket status of the prefork MPM,${objects}, , yes, [
  APR_ADDTO(MOD_BUCKET_STATUS_LDADD, [-lm])
])
EOF
}

copy_project_into() {
    local tree=$1 f
    printf '+ cp -r %s/server/mpm/prefork/* %s/server/mpm/prefork/\n' "$TOP" "$tree" >&2
    for f in $MPM_FILES; do
        mkdir -p "$(dirname "$tree/server/mpm/prefork/$f")"
        cp "$TOP/server/mpm/prefork/$f" "$tree/server/mpm/prefork/$f"
    done
    for f in $HEADER_FILES; do
        run cp "$TOP/include/$f" "$tree/include/"
    done
    for f in $STATUS_FILES; do
        run cp "$TOP/modules/generators/$f" "$tree/modules/generators/"
    done
    printf '+ (insert into %s before APACHE_MODPATH_FINISH:)\n%s\n' \
        "$tree/modules/generators/config5.m4" "$(config5_block)" >&2
    awk -v block="$(config5_block)" \
        '/^APACHE_MODPATH_FINISH/ && !done { print block; done = 1 } { print }' \
        "$tree/modules/generators/config5.m4" > "$tree/modules/generators/config5.m4.new"
    mv "$tree/modules/generators/config5.m4.new" "$tree/modules/generators/config5.m4"
}

# ---- the patch ------------------------------------------------------------------
# One file's diff: old may be missing (a new file).
diff_file() {
    local old=$1 new=$2 path=$3 status=0
    if [ -f "$old" ]; then
        diff -u --label "a/$path" --label "b/$path" "$old" "$new" || status=$?
    else
        diff -u --label /dev/null --label "b/$path" /dev/null "$new" || status=$?
    fi
    # diff exits 1 when the files differ, 2 on trouble.
    [ "$status" -le 1 ] || die "diff failed on $path"
}

write_patch() {
    local tree=$1 release=$2 work f described
    work=$(mktemp -d)
    CLEANUP+=("$work")
    mkdir -p "$work/b/server/mpm/prefork" "$work/b/include" "$work/b/modules/generators"
    cp "$tree/modules/generators/config5.m4" "$work/b/modules/generators/"
    copy_project_into "$work/b" 2>/dev/null
    described=$(git -C "$TOP" describe --always --dirty 2>/dev/null || echo "unknown")
    cat <<EOF
SO_REUSEPORT listener buckets for httpd $release's prefork MPM, and the
mod_bucket_status module (prefork-buckets $described).

Apply in a pristine httpd-$release tree, then build as README
("Building inside an httpd source tree") says:

    patch -p1 < prefork-buckets-$release.patch
    ./buildconf --with-apr=/usr/bin/apr-1-config --with-apr-util=/usr/bin/apu-1-config
    ./configure --with-mpm=prefork --with-apr=/usr/bin/apr-1-config --with-apr-util=/usr/bin/apu-1-config
    make && make install

EOF
    for f in $MPM_FILES; do
        f=server/mpm/prefork/$f
        diff_file "$tree/$f" "$work/b/$f" "$f"
    done
    for f in $HEADER_FILES; do
        diff_file "$tree/include/$f" "$work/b/include/$f" "include/$f"
    done
    for f in $STATUS_FILES config5.m4; do
        diff_file "$tree/modules/generators/$f" "$work/b/modules/generators/$f" \
            "modules/generators/$f"
    done
}

# ---- building ---------------------------------------------------------------------
configure_tree() {
    local tree=$1 apr_config apu_config args
    apr_config=$(command -v apr-1-config)
    apu_config=$(command -v apu-1-config)
    args=(--prefix="$PREFIX" --with-mpm=prefork
          --with-apr="$apr_config" --with-apr-util="$apu_config")
    if [ "$SHARED" = 1 ]; then
        args+=(--enable-mpms-shared=all)
    fi
    run cd "$tree"
    run ./buildconf --with-apr="$apr_config" --with-apr-util="$apu_config" >&2
    run ./configure "${args[@]}" "${CONFIGURE_EXTRA[@]}" >&2
}

build_and_install() {
    local jobs
    jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
    run make -j"$jobs" >&2
    run make install >&2
    echo "intree.sh: installed httpd with the prefork MPM ($([ "$SHARED" = 1 ] && echo shared || echo static)) in $PREFIX: $PREFIX/bin/httpd -V, $PREFIX/bin/apxs" >&2
}

# Compiles only this project's part of the tree (with $INTREE_CFLAGS added,
# e.g. the project's warning flags), and installs what an apxs build needs:
# the headers, build files and apxs, as a -dev package holds them.
compile_and_install_dev() {
    local jobs status_target
    jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
    run make -j"$jobs" -C server/mpm/prefork all shared-build \
        EXTRA_CFLAGS="${INTREE_CFLAGS:-}" >&2
    # modules.mk names it libmod_bucket_status.la (static) or
    # mod_bucket_status.la (shared); the directory's other modules are
    # httpd's own, not built here.
    status_target=$(grep -o '^[a-z_]*bucket_status\.la' modules/generators/modules.mk | head -n 1)
    [ -n "$status_target" ] || die "configure did not enable mod_bucket_status (see modules/generators/modules.mk)"
    run make -j"$jobs" -C modules/generators "$status_target" \
        EXTRA_CFLAGS="${INTREE_CFLAGS:-}" >&2
    run make install-include install-build >&2
    run mkdir -p "$PREFIX/bin"
    run install -m 755 support/apxs "$PREFIX/bin/apxs"
    echo "intree.sh: compiled the MPM and mod_bucket_status; headers and apxs in $PREFIX" >&2
}

# ---- main -------------------------------------------------------------------------
TREE=
if [ -f "$SOURCE" ]; then
    if [ "$MODE" = patch ]; then
        PATCH_SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/intree-patch-XXXXXX")
        CLEANUP+=("$PATCH_SCRATCH")
        unpack "$SOURCE" "$PATCH_SCRATCH"
    else
        unpack "$SOURCE" "$WORKDIR"
    fi
elif [ -d "$SOURCE" ]; then
    TREE=$SOURCE
else
    die "$SOURCE: no such file or directory"
fi
TREE=$(cd "$TREE" && pwd)

RELEASE=$(check_httpd_tree "$TREE")
case "$MODE" in
    patch)
        check_pristine "$TREE"
        write_patch "$TREE" "$RELEASE"
        exit 0
        ;;
    patched)
        check_patched "$TREE"
        ;;
    *)
        check_pristine "$TREE"
        ;;
esac
if [ "$MODE" != copy ]; then
    check_build_tools
fi
# From here on the tree is changed; an unpacked tarball is kept.
CLEANUP=()

echo "intree.sh: httpd $RELEASE in $TREE" >&2
if [ "$MODE" != patched ]; then
    copy_project_into "$TREE"
fi
if [ "$MODE" = copy ]; then
    echo "intree.sh: copied into $TREE; build it with: tools/intree.sh --patched $TREE" >&2
    exit 0
fi
configure_tree "$TREE"
if [ "$MODE" = compile ]; then
    compile_and_install_dev
else
    build_and_install
fi
