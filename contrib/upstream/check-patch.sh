#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# The upstream patch for httpd's prefork, proven against httpd's own trees
# (make check-upstream-patch):
#
#   check-patch.sh check      prefork-one-listener.sh's patch applies with
#                             patch -p1 to trunk and to 2.4.62; the patched
#                             2.4.62 builds (prefork compiled in), starts,
#                             serves, and its children hold no epoll
#                             registration of their one listener, where the
#                             unpatched 2.4.62's do
#   check-patch.sh modules    httpd's prefork of 2.4.62 as it is and as
#                             patched, each built with apxs into a
#                             mod_mpm_prefork.so for this host's apache2
#                             (build/upstream/), for the load suite's
#                             configurations stock-src and
#                             stock-src-onelistener
#
# The trees are httpd-VERSION.tar.xz in $HTTPD_SRC_DIR (default:
# ../shared/httpd-src beside this checkout).  Where one is missing (a
# public clone) a line says what did not run, and it does not count as
# passed; under CI (CI=true) that fails.  Work goes to build/upstream/.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
PATCHER=$TOP/contrib/upstream/prefork-one-listener.sh
HTTPD_SRC_DIR=${HTTPD_SRC_DIR:-$TOP/../shared/httpd-src}
WORK=${UPSTREAM_DIR:-$TOP/build/upstream}
APXS=${APXS:-$(command -v apxs || command -v apxs2 || echo apxs)}
# The smallest httpd that serves a file: the modules the check loads.
CONFIGURE_ARGS=(--with-mpm=prefork --enable-modules=none
                "--enable-mods-shared=authz_core mime dir log_config unixd")

say() { printf '==> upstream: %s\n' "$*"; }
fail() { printf 'FAIL: upstream: %s\n' "$*" >&2; exit 1; }

# The tarballs there are, one VERSION per line; a line on stderr for the
# ones that are not (failing under CI=true).
present() {
    local version missing=()
    for version in "$@"; do
        if [ -f "$HTTPD_SRC_DIR/httpd-$version.tar.xz" ]; then
            echo "$version"
        else
            missing+=("$version")
        fi
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        printf 'upstream patch: NOT RUN for httpd %s: no httpd-VERSION.tar.xz in %s (set HTTPD_SRC_DIR)\n' \
            "${missing[*]}" "$HTTPD_SRC_DIR" >&2
        if [ "${CI:-}" = true ]; then
            fail "CI=true: the upstream patch check must run; the tarballs are missing"
        fi
    fi
}

# A fresh tree of VERSION in DIR; prints its path.
fresh_tree() {
    local version=$1 dir=$2
    rm -rf "$dir"
    mkdir -p "$dir"
    tar xf "$HTTPD_SRC_DIR/httpd-$version.tar.xz" -C "$dir"
    echo "$dir/httpd-$version"
}

# Writes the patch for a tree and applies it; the patch is left beside.
apply_patch() {
    local tree=$1 patch=$2
    "$PATCHER" "$tree" > "$patch" || fail "$tree: the patch could not be written"
    (cd "$tree" && patch -p1 --dry-run -s < "$patch" >/dev/null) \
        || fail "$tree: the patch does not apply with patch -p1"
    (cd "$tree" && patch -p1 -s < "$patch") || fail "$tree: patch -p1 failed"
    grep -q 'if (num_listensocks > 1) {' "$tree/server/mpm/prefork/prefork.c" \
        || fail "$tree: the patched prefork.c lacks its condition"
}

build_tree() {
    local tree=$1 prefix=$2 log=$3 apr apu
    apr=$(command -v apr-1-config) || fail "apr-1-config missing (libapr1-dev)"
    apu=$(command -v apu-1-config) || fail "apu-1-config missing (libaprutil1-dev)"
    (
        cd "$tree"
        ./buildconf --with-apr="$apr" --with-apr-util="$apu"
        ./configure --prefix="$prefix" --with-apr="$apr" --with-apr-util="$apu" \
            "${CONFIGURE_ARGS[@]}"
        make -j"$(nproc)"
        make install
    ) > "$log" 2>&1 || { tail -n 30 "$log" >&2; fail "$tree: build failed (log: $log)"; }
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# How many children of the running httpd (pid file $1) hold an epoll
# registration of the listening socket: fdinfo of an eventpoll descriptor
# lists each registered descriptor as "tfd: N", and N is the listener's
# descriptor number in the child.
children_polling_listener() {
    local parent=$1 port=$2 child fd inode listener count=0
    listener=$(awk -v port="$(printf '%04X' "$port")" \
        '$4 == "0A" && $2 ~ (":" port "$") {print $10}' /proc/net/tcp | head -n 1)
    [ -n "$listener" ] || fail "no listening socket on port $port"
    for child in $(pgrep -P "$parent"); do
        for fd in /proc/"$child"/fd/*; do
            inode=$(readlink "$fd" 2>/dev/null || true)
            [ "$inode" = "socket:[$listener]" ] || continue
            fd=${fd##*/}
            if grep -qs "^tfd: *$fd " /proc/"$child"/fdinfo/*; then
                count=$((count + 1))
            fi
        done
    done
    echo "$count"
}

# Starts an installed httpd on a free loopback port, checks it serves a
# file, counts its children's registrations of the listener, stops it.
# Prints that count.
serve_and_count() {
    local prefix=$1 port conf pid count body
    port=$(free_port)
    conf=$prefix/conf/check.conf
    cat > "$conf" <<EOF
ServerRoot "$prefix"
Listen 127.0.0.1:$port
ServerName localhost
PidFile "$prefix/logs/check.pid"
ErrorLog "$prefix/logs/check_error_log"
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule mime_module modules/mod_mime.so
LoadModule dir_module modules/mod_dir.so
LoadModule unixd_module modules/mod_unixd.so
User daemon
Group daemon
StartServers 4
MinSpareServers 4
MaxSpareServers 8
DocumentRoot "$prefix/htdocs"
<Directory "$prefix/htdocs">
    Require all granted
</Directory>
EOF
    echo "upstream patch check" > "$prefix/htdocs/check.html"
    "$prefix/bin/httpd" -f "$conf" -k start || fail "$prefix: httpd did not start"
    for _ in $(seq 100); do
        body=$(curl -s --max-time 5 "http://127.0.0.1:$port/check.html" || true)
        [ "$body" = "upstream patch check" ] && break
        sleep 0.1
    done
    pid=$(cat "$prefix/logs/check.pid")
    # Every child started (StartServers 4) before counting.
    for _ in $(seq 100); do
        [ "$(pgrep -c -P "$pid")" -ge 4 ] && break
        sleep 0.1
    done
    count=$(children_polling_listener "$pid" "$port")
    "$prefix/bin/httpd" -f "$conf" -k stop || true
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ "$body" = "upstream patch check" ] || fail "$prefix: httpd did not serve check.html"
    echo "$count"
}

check() {
    local version versions tree count unpatched
    # Not inside the loop's word list: there a failure would not stop us.
    versions=$(present trunk 2.4.62) || exit 1
    mkdir -p "$WORK"
    for version in $versions; do
        say "$version: write the patch from the pristine tree, apply it with patch -p1"
        tree=$(fresh_tree "$version" "$WORK/check-$version")
        apply_patch "$tree" "$WORK/prefork-one-listener-$version.patch"
        if [ "$version" = 2.4.62 ]; then
            say "$version: build the patched tree (prefork compiled in), start, serve"
            build_tree "$tree" "$WORK/check-$version/inst" "$WORK/check-$version/build.log"
            "$WORK/check-$version/inst/bin/httpd" -l | grep -q 'prefork.c' \
                || fail "$version: prefork is not compiled into the patched httpd"
            count=$(serve_and_count "$WORK/check-$version/inst")
            [ "$count" -eq 0 ] \
                || fail "$version: $count children of the patched httpd still register the listener with epoll"
            say "$version: the patched httpd served; 0 of its children register the listener with epoll"
            say "$version: the same check on the unpatched tree (control)"
            tree=$(fresh_tree "$version" "$WORK/control-$version")
            build_tree "$tree" "$WORK/control-$version/inst" "$WORK/control-$version/build.log"
            unpatched=$(serve_and_count "$WORK/control-$version/inst")
            [ "$unpatched" -ge 4 ] \
                || fail "$version: only $unpatched children of the unpatched httpd register the listener: the check sees nothing"
            say "$version: unpatched, $unpatched children register it"
            rm -rf "$WORK/control-$version"
        fi
    done
}

modules() {
    local version=2.4.62 tree found
    found=$(present "$version") || exit 1
    [ -n "$found" ] || return 0
    tree=$(fresh_tree "$version" "$WORK/src-$version")
    build_module "$tree" "$WORK/httpd-$version"
    apply_patch "$tree" "$WORK/prefork-one-listener-$version.patch"
    build_module "$tree" "$WORK/httpd-$version-onelistener"
    rm -rf "$WORK/src-$version"
}

# apxs -c of a tree's prefork.c against this host's httpd headers.
build_module() {
    local tree=$1 out=$2 dir=$1/server/mpm/prefork
    say "apxs: $dir/prefork.c -> $out/mod_mpm_prefork.so"
    (cd "$dir" && rm -rf .libs ./*.lo ./*.la ./*.slo \
        && "$APXS" -c -o mod_mpm_prefork.la prefork.c) > "$WORK/apxs.log" 2>&1 \
        || { tail -n 20 "$WORK/apxs.log" >&2; fail "apxs build of $dir failed"; }
    mkdir -p "$out"
    cp "$dir/.libs/mod_mpm_prefork.so" "$out/"
}

case "${1:-}" in
    check) check ;;
    modules) modules ;;
    *) echo "usage: $0 check | modules" >&2; exit 2 ;;
esac
