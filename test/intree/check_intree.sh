#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# The in-tree build, proven against httpd's own release tarballs
# (make check-intree runs the first three):
#
#   check_intree.sh bad-input          tools/intree.sh refuses what is not a
#                                      pristine httpd 2.4 tree, changing nothing
#   check_intree.sh compile VERSION    the MPM and mod_bucket_status compiled in
#                                      that release's tree with this project's
#                                      warning flags as errors, then the apxs
#                                      build against its headers and apxs
#   check_intree.sh parts VERSION...   prints the make targets of the stage
#                                      whose tarballs are there; for those
#                                      that are not, one line on stderr says
#                                      the stage did not run (with CI=true,
#                                      that fails)
#   check_intree.sh build VERSION [--shared]
#                                      the patch applied to a fresh tree (and
#                                      the same tree as a copy), httpd built
#                                      and installed from it, the apxs build
#                                      against that httpd, and the integration
#                                      subset run against that httpd
#
# The tarballs are httpd-VERSION.tar.xz in $HTTPD_SRC_DIR (default:
# ../shared/httpd-src beside this checkout).  A public clone has none:
# `parts` then leaves those checks out and says so, and the stage counts as
# not run; under CI (CI=true) that fails, as does any check asked for
# directly whose tarball is missing.
# Work goes to $INTREE_DIR (default build/intree).  $WARN_CFLAGS are the
# warning flags for the compile check (make passes the project's own).
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
INTREE=$TOP/tools/intree.sh
HTTPD_SRC_DIR=${HTTPD_SRC_DIR:-$TOP/../shared/httpd-src}
INTREE_DIR=${INTREE_DIR:-$TOP/build/intree}
WARN_CFLAGS=${WARN_CFLAGS:--Wall -Wextra -Werror}
PYTHON=${PYTHON:-python3}
# Only the modules the harness loads (and the project's); httpd's default
# set ("most") only adds build time.
CONFIGURE_ARGS=(--enable-modules=none
                "--enable-mods-shared=authz_core mime dir status log_config unixd bucket_status")

# The integration subset run against a built httpd: serving, 4 buckets,
# graceful restarts under load, killed children, stop, the status module's
# JSON and Prometheus output, idle and hash steering's programs (built in
# the tree with clang, bpftool and libbpf) attached, a real CPU quota.
SUBSET=(
    test_mpm_basic.PreforkBasics.test_serves_requests
    test_buckets.ListenerBuckets.test_listen_buckets_4_opens_4_sockets_per_listen
    test_buckets.ListenerBuckets.test_children_spread_and_every_bucket_serves
    test_mpm_basic.PreforkBasics.test_graceful_restart_under_load_loses_nothing
    test_buckets.ListenerBuckets.test_graceful_restart_renews_bucket_sockets_and_loses_nothing
    test_mpm_basic.PreforkBasics.test_sigkilled_child_is_replaced
    test_buckets.ListenerBuckets.test_last_child_of_a_bucket_is_replaced_at_once
    test_mpm_basic.PreforkBasics.test_k_stop_leaves_no_process
    test_status.BucketStatus.test_json_counts_add_up_to_the_access_log
    test_status.BucketStatus.test_prometheus_output_passes_strict_check
    test_steering.IdleSteering.test_idle_steering_avoids_a_blocked_bucket
    test_steering.OwnSocketsOnly.test_hash_gives_an_outsider_nothing
    test_cgroup.CgroupQuota.test_one_cpu_quota_gives_one_bucket_with_ratio_1
)

say() { printf '==> intree: %s\n' "$*"; }
fail() { printf 'FAIL: intree: %s\n' "$*" >&2; exit 1; }

tarball_of() {
    local tarball=$HTTPD_SRC_DIR/httpd-$1.tar.xz
    if [ ! -f "$tarball" ]; then
        fail "$tarball is missing: the in-tree checks need httpd's release tarballs (set HTTPD_SRC_DIR to their directory)"
    fi
    echo "$tarball"
}

# The project's sources, for an apxs build of its own, apart from this
# checkout's build.
copy_project() {
    local into=$1
    mkdir -p "$into"
    cp -R "$TOP/configure.ac" "$TOP/Makefile.in" "$TOP/include" "$TOP/server" \
        "$TOP/modules" "$TOP/test" "$into/"
}

# ./configure --with-apxs=APXS && make, as README tells a builder (with
# this checkout's configure when it is up to date, else autoconf's), plus
# the test-only modules: the integration subset loads the test handler.
apxs_build() {
    local apxs=$1 dir=$2
    copy_project "$dir"
    if [ -f "$TOP/configure" ] && [ "$TOP/configure" -nt "$TOP/configure.ac" ]; then
        cp "$TOP/configure" "$dir/"
    else
        (cd "$dir" && autoconf) || fail "autoconf failed in $dir"
    fi
    (cd "$dir" && ./configure -q --with-apxs="$apxs" \
        && make -s all build/mod_pfb_test_handler.so build/mod_pfb_hostile.so) \
        || fail "the apxs build against $apxs failed"
}

# ---- bad input ---------------------------------------------------------------
# A fingerprint of everything under a path: names, types, sizes, modes,
# modification times.
fingerprint() {
    if [ -e "$1" ]; then
        find "$1" -printf '%P|%y|%s|%m|%T@\n' | LC_ALL=C sort | sha256sum
    else
        echo absent
    fi
}

# refused WHAT EXPECTED-TEXT WATCHED-PATH INTREE-ARGS...: intree.sh must
# fail, say EXPECTED-TEXT, and leave WATCHED-PATH as it was.
refused() {
    local what=$1 expected=$2 watched=$3 before after out status=0
    shift 3
    before=$(fingerprint "$watched")
    out=$("$INTREE" "$@" 2>&1 >/dev/null) || status=$?
    after=$(fingerprint "$watched")
    [ "$status" -ne 0 ] || fail "$what: intree.sh $* succeeded"
    case "$out" in
        *"$expected"*) ;;
        *) fail "$what: expected '$expected' in: $out" ;;
    esac
    [ "$before" = "$after" ] || fail "$what: $watched was changed"
    printf '    refused: %-40s %s\n' "$what" "$(printf '%s' "$out" | tail -n 1 | cut -c1-110)"
}

check_bad_input() {
    local dir=$INTREE_DIR/bad-input tarball
    tarball=$(tarball_of 2.4.62)
    rm -rf "$dir"
    mkdir -p "$dir/work" "$dir/empty" "$dir/httpd-2.2.34/include" \
        "$dir/httpd-2.4.20/include" "$dir/half-2.4.62/include" "$dir/junk"
    printf '#define AP_SERVER_MAJORVERSION_NUMBER 2\n#define AP_SERVER_MINORVERSION_NUMBER %s\n#define AP_SERVER_PATCHLEVEL_NUMBER %s\n' \
        2 34 > "$dir/httpd-2.2.34/include/ap_release.h"
    printf '#define AP_SERVER_MAJORVERSION_NUMBER 2\n#define AP_SERVER_MINORVERSION_NUMBER %s\n#define AP_SERVER_PATCHLEVEL_NUMBER %s\n' \
        4 20 > "$dir/httpd-2.4.20/include/ap_release.h"
    printf '#define AP_SERVER_MAJORVERSION_NUMBER 2\n#define AP_SERVER_MINORVERSION_NUMBER %s\n#define AP_SERVER_PATCHLEVEL_NUMBER %s\n' \
        4 62 > "$dir/half-2.4.62/include/ap_release.h"
    echo "not httpd" > "$dir/junk/README"
    tar cJf "$dir/junk.tar.xz" -C "$dir" junk
    cp "$TOP/README.md" "$dir/not-a-tarball.tar.xz"

    say "bad input: every case refused with a message, nothing changed"
    refused "no such path" "no such file or directory" "$dir" "$dir/nothing-here"
    refused "an empty directory" "not an httpd source tree" "$dir/empty" "$dir/empty"
    refused "httpd 2.2" "this MPM is for httpd 2.4" "$dir/httpd-2.2.34" "$dir/httpd-2.2.34"
    refused "httpd 2.4.20" "needs 2.4.35 or later" "$dir/httpd-2.4.20" "$dir/httpd-2.4.20"
    refused "a tree with only ap_release.h" "not a complete httpd 2.4 source tree" \
        "$dir/half-2.4.62" "$dir/half-2.4.62"
    refused "a file that is no tarball" "neither a directory nor a tar archive" \
        "$dir/work" "$dir/not-a-tarball.tar.xz" --workdir "$dir/work"
    refused "a tarball of something else" "not an httpd source tree" \
        "$dir/work" "$dir/junk.tar.xz" --workdir "$dir/work"
    refused "--patch of something else" "not an httpd source tree" \
        "$dir/junk" --patch "$dir/junk"
    refused "unknown option" "unknown option --frobnicate" "$dir/empty" \
        --frobnicate "$dir/empty"

    # A real tree: pristine, then patched.
    "$INTREE" --copy-only "$tarball" --workdir "$dir/work" 2>/dev/null \
        || fail "--copy-only on a pristine tree failed"
    local tree=$dir/work/httpd-2.4.62
    refused "a patched tree" "already holds this project's files" "$tree" "$tree"
    refused "--patch of a patched tree" "already holds this project's files" \
        "$tree" --patch "$tree"
    refused "--compile-only of a patched tree" "already holds this project's files" \
        "$tree" --compile-only "$tree"
    refused "a tarball over an unpacked tree" "exists already" "$dir/work" \
        "$tarball" --workdir "$dir/work"
    rm -rf "$tree"
    tar xf "$tarball" -C "$dir/work"
    refused "--patched on a pristine tree" "it is not patched" "$tree" --patched "$tree"
    # One file of the project is enough to call a tree patched.
    cp "$TOP/include/prefork_buckets.h" "$tree/include/"
    refused "a tree with one of the files" "include/prefork_buckets.h" "$tree" "$tree"
    rm -rf "$dir"
    say "bad input: all refused"
}

# ---- compile against a release ---------------------------------------------------
check_compile() {
    local version=$1 dir tarball started
    tarball=$(tarball_of "$version")
    dir=$INTREE_DIR/$version-compile
    rm -rf "$dir"
    mkdir -p "$dir"
    started=$SECONDS
    say "$version: copy into a fresh tree, configure, compile the MPM and mod_bucket_status with $WARN_CFLAGS"
    INTREE_CFLAGS="$WARN_CFLAGS" "$INTREE" --compile-only "$tarball" \
        --workdir "$dir" --prefix "$dir/dev" > "$dir/intree.log" 2>&1 \
        || { tail -n 40 "$dir/intree.log" >&2; fail "$version: in-tree compile failed (log: $dir/intree.log)"; }
    local intree_s=$((SECONDS - started))
    started=$SECONDS
    say "$version: ./configure --with-apxs=$dir/dev/bin/apxs && make"
    apxs_build "$dir/dev/bin/apxs" "$dir/apxs"
    say "$version: compiled in-tree in ${intree_s} s, apxs build in $((SECONDS - started)) s"
}

# ---- build, install and test a release ------------------------------------------------
check_build() {
    local version=$1 kind=static shared_arg=() dir tarball started
    if [ "${2:-}" = "--shared" ]; then
        kind=shared
        shared_arg=(--shared)
    fi
    tarball=$(tarball_of "$version")
    dir=$INTREE_DIR/$version-$kind
    rm -rf "$dir"
    mkdir -p "$dir/patched" "$dir/copied"
    started=$SECONDS

    say "$version $kind: the patch, applied to a fresh tree"
    "$INTREE" --patch "$tarball" > "$dir/prefork-buckets-$version.patch" \
        || fail "$version: --patch failed"
    tar xf "$tarball" -C "$dir/patched"
    (cd "$dir/patched/httpd-$version" && patch -p1 -s < "$dir/prefork-buckets-$version.patch") \
        || fail "$version: the patch does not apply with patch -p1"
    "$INTREE" --copy-only "$tarball" --workdir "$dir/copied" 2>/dev/null \
        || fail "$version: --copy-only failed"
    diff -r "$dir/patched/httpd-$version" "$dir/copied/httpd-$version" \
        || fail "$version: the patched tree and the copied tree differ"
    rm -rf "$dir/copied"

    say "$version $kind: tools/intree.sh --patched ${shared_arg[*]} -- ${CONFIGURE_ARGS[*]}"
    "$INTREE" --patched "$dir/patched/httpd-$version" "${shared_arg[@]}" \
        --prefix "$dir/inst" -- "${CONFIGURE_ARGS[@]}" > "$dir/intree.log" 2>&1 \
        || { tail -n 40 "$dir/intree.log" >&2; fail "$version: build failed (log: $dir/intree.log)"; }
    local build_s=$((SECONDS - started))
    "$dir/inst/bin/httpd" -V | grep -q "Server MPM: *prefork" \
        || fail "$version: the installed httpd does not run prefork"
    if [ "$kind" = static ]; then
        "$dir/inst/bin/httpd" -l | grep -q "prefork.c" \
            || fail "$version: prefork is not compiled into httpd"
    fi

    started=$SECONDS
    say "$version $kind: ./configure --with-apxs=$dir/inst/bin/apxs && make"
    apxs_build "$dir/inst/bin/apxs" "$dir/apxs"
    local apxs_s=$((SECONDS - started))

    started=$SECONDS
    local mpm=static
    [ "$kind" = static ] || mpm=$dir/inst/modules/mod_mpm_prefork.so
    say "$version $kind: the integration subset against $dir/inst/bin/httpd"
    HTTPD="$dir/inst/bin/httpd" HTTPD_MODULES_DIR="$dir/inst/modules" \
        MPM_SO="$mpm" STATUS_SO="$dir/inst/modules/mod_bucket_status.so" \
        TEST_HANDLER_SO="$dir/apxs/build/mod_pfb_test_handler.so" \
        "$PYTHON" "$TOP/test/integration/run.py" "${SUBSET[@]}" \
        || fail "$version $kind: the integration subset failed"
    say "$version $kind: patched and built in ${build_s} s, apxs build in ${apxs_s} s, integration subset in $((SECONDS - started)) s"
}

# The make targets whose tarballs are present, on stdout; the versions
# missing, in one line on stderr.  bad-input unpacks 2.4.62.
list_parts() {
    local version missing=() parts=()
    for version in "$@"; do
        if [ -f "$HTTPD_SRC_DIR/httpd-$version.tar.xz" ]; then
            [ "$version" != 2.4.62 ] || parts+=(check-intree-input)
            parts+=("check-intree-$version")
        else
            missing+=("$version")
        fi
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        printf 'check-intree: NOT RUN for httpd %s: no httpd-VERSION.tar.xz in %s (set HTTPD_SRC_DIR to the release tarballs; docs/building.md)\n' \
            "${missing[*]}" "$HTTPD_SRC_DIR" >&2
        if [ "${CI:-}" = true ]; then
            fail "CI=true: the in-tree stage must run; the tarballs are missing"
        fi
    fi
    echo "${parts[*]}"
}

case "${1:-}" in
    parts) shift; list_parts "$@" ;;
    bad-input) check_bad_input ;;
    compile) [ $# -eq 2 ] || fail "usage: $0 compile VERSION"; check_compile "$2" ;;
    build) [ $# -ge 2 ] || fail "usage: $0 build VERSION [--shared]"; check_build "$2" "${3:-}" ;;
    *) echo "usage: $0 parts VERSION... | bad-input | compile VERSION | build VERSION [--shared]" >&2; exit 2 ;;
esac
