#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# The README's two Quick start commands, for a fresh Debian 12 machine as root:
#   bash tools/run.sh demo   install what is missing, build, run a server
#                            with the package's configuration on
#                            127.0.0.1:8080 under a short load, then one
#                            with README's bucket lines under the same
#                            load, and print the two reports side by side
#   bash tools/run.sh test   install what is missing, build, run every test
# Installing: apt-get install of the PACKAGES below that are missing (and
# their dependencies), with a policy-rc.d that keeps their services from
# starting while apt runs; the services those packages enable for the next
# boot (nginx's, prometheus's, apache2's where it was not installed...) are
# disabled again, so that every service is as it was (keep_services_as_found);
# /etc/apache2's enabled modules are kept as they were
# (apt_keeping_apache_modules).
set -euo pipefail

cd "$(dirname "$0")/.."
TOP=$(pwd)
DEMO_ROOT="$TOP/build/demo"
DEMO_PORT="${DEMO_PORT:-8080}"
PACKAGES="apache2 apache2-dev apache2-utils libapr1-dev libaprutil1-dev check \
autoconf pkg-config gcc libc6-dev linux-libc-dev libseccomp-dev make python3 curl wrk iproute2 procps valgrind strace \
nginx-light gnuplot-nox prometheus libapache2-mod-php \
build-essential debhelper dpkg-dev lintian prometheus-apache-exporter munin-plugins-core libwww-perl \
libtool libtool-bin libpcre2-dev libpcre3-dev libexpat1-dev zlib1g-dev patch xz-utils shellcheck \
libxml2-utils xsltproc python3-yaml python3-markdown clang libbpf-dev bpftool openssl autopkgtest \
chromium gdb"
# Installed on their own, after the rest: their postinst changes the
# system's apache2 configuration, which apt_keeping_apache_modules undoes.
APACHE_MODULE_PACKAGES="libapache2-mod-php"

say() { printf '==> %s\n' "$*"; }

install_missing() {
    local missing=() pkg
    for pkg in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" \
            || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        say "packages: all present"
        return
    fi
    say "installing with apt-get (and what they depend on): ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "run as root (apt-get install and binding as www-data need it)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Other users of the machine may hold dpkg's lock: wait for it.
    apt-get -o DPkg::Lock::Timeout=600 update -q
    # Don't let the packages start their services: apache2 and nginx would
    # both want port 80, and the project runs its own servers anyway.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [ ! -e "$policy" ]; then
        say "writing $policy while apt-get runs (no installed service starts; removed after)"
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    local status=0 rest=() modules=() services
    services=$(mktemp)
    enabled_services > "$services"
    for pkg in "${missing[@]}"; do
        case " $APACHE_MODULE_PACKAGES " in
        *" $pkg "*) modules+=("$pkg") ;;
        *) rest+=("$pkg") ;;
        esac
    done
    if [ "${#rest[@]}" -gt 0 ]; then
        # libssl3 as well, installed or not: apt brings Debian's current
        # apache2, whose mod_ssl logs AH01882 on every start against an
        # older libssl3 left on the machine by its image.
        apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
            "${rest[@]}" libssl3 || status=$?
    fi
    if [ "$status" -eq 0 ] && [ "${#modules[@]}" -gt 0 ]; then
        apt_keeping_apache_modules install -y -q --no-install-recommends \
            "${modules[@]}" || status=$?
    fi
    if [ "$added_policy" = 1 ]; then
        rm -f "$policy"
        say "removed $policy"
    fi
    keep_services_as_found "$services"
    rm -f "$services"
    if [ "$status" -ne 0 ]; then
        exit "$status"
    fi
}

# The services enabled for the next boot, one a line: systemd's unit links
# in /etc/systemd/system/*.wants/ ("systemd UNIT") and sysvinit's start
# links in /etc/rc[2-5].d/ ("sysv NAME").
enabled_services() {
    find /etc/systemd/system -mindepth 2 -maxdepth 2 -path '*.wants/*' \
        -printf 'systemd %f\n' 2>/dev/null
    find /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d -maxdepth 1 \
        -name 'S[0-9][0-9]*' -printf '%f\n' 2>/dev/null \
        | sed 's/^S[0-9][0-9]/sysv /'
}

# Disables what the packages just installed enabled: a service that was
# not enabled before apt-get is not enabled after it.  A unit whose
# package's postinst enabled it gets "systemctl disable" (which works
# without systemd running, and says so to update-rc.d for its init
# script); a sysvinit script alone gets "update-rc.d NAME disable".
keep_services_as_found() {
    local before=$1 kind name
    comm -13 <(sort -u "$before") <(enabled_services | sort -u) \
        | while read -r kind name; do
            case "$kind" in
            systemd)
                say "systemctl disable $name (enabled by its package; it was not before)"
                systemctl disable "$name" >/dev/null 2>&1 || true
                ;;
            sysv)
                if [ -e "/lib/systemd/system/$name.service" ] \
                        && command -v systemctl >/dev/null; then
                    systemctl disable "$name.service" >/dev/null 2>&1 || true
                fi
                say "update-rc.d $name disable (enabled by its package; it was not before)"
                update-rc.d "$name" disable >/dev/null 2>&1 || true
                ;;
            esac
        done
}

enabled_apache_modules() {
    find /etc/apache2/mods-enabled -name '*.load' -printf '%f\n' 2>/dev/null \
        | sed 's/\.load$//' | sort
}

# apt-get with hooks that leave the modules enabled in the system's
# /etc/apache2 as they were.  Debian's mod_php switches the system apache2
# to prefork and enables itself; the project's servers use their own
# configurations, and other users of this machine's apache2 must not find
# it changed.  The hooks run before and after each dpkg run while apt holds
# dpkg's lock, so whoever copies /etc/apache2 under that lock (the package
# test does) never sees the package's change.
apt_keeping_apache_modules() {
    local state status=0
    state=$(mktemp)
    apt-get -o DPkg::Lock::Timeout=600 \
        -o "DPkg::Pre-Invoke::=bash $TOP/tools/run.sh apache-modules-save $state" \
        -o "DPkg::Post-Invoke::=bash $TOP/tools/run.sh apache-modules-restore $state" \
        "$@" || status=$?
    rm -f "$state"
    return "$status"
}

apache_modules_restore() {
    local before after mod
    before=$(cat "$1")
    after=$(enabled_apache_modules)
    # As maintainer scripts do (-m), and forgetting the package's own
    # record (-p), so that a2enmod's state is as before too.
    for mod in $(comm -13 <(echo "$before") <(echo "$after")); do
        say "a2dismod $mod (enabled by the package)"
        a2dismod -q -f -p "$mod" >/dev/null || true
    done
    for mod in $(comm -23 <(echo "$before") <(echo "$after")); do
        say "a2enmod $mod (disabled by the package)"
        a2enmod -q -m "$mod" >/dev/null || true
    done
}

build() {
    say "building"
    if [ ! -x configure ] || [ configure.ac -nt configure ]; then
        autoconf
    fi
    if [ ! -f Makefile ] || [ Makefile.in -nt Makefile ] \
        || [ configure -nt Makefile ]; then
        ./configure -q
    fi
    make -s
}

stop_demo() {
    if [ -f "$DEMO_ROOT/run/httpd.pid" ]; then
        /usr/sbin/apache2 -f "$DEMO_ROOT/httpd.conf" -k stop 2>/dev/null || true
        for _ in $(seq 50); do
            [ -f "$DEMO_ROOT/run/httpd.pid" ] || break
            sleep 0.1
        done
    fi
}

# One run of the demo: a server with the package's configuration plus
# $2 (bucket lines, or nothing), the same load, its report saved in $1.
demo_run() {
    local report=$1 lines=$2 url="http://127.0.0.1:$DEMO_PORT"
    stop_demo
    rm -rf "$DEMO_ROOT"
    mkdir -p "$DEMO_ROOT"/{logs,run,htdocs}
    chmod 755 "$TOP/build" "$DEMO_ROOT" "$DEMO_ROOT"/{logs,run,htdocs}
    echo "hello from the bucketed prefork MPM" > "$DEMO_ROOT/htdocs/index.html"
    sed -e "s|@ROOT@|$DEMO_ROOT|g" -e "s|@PORT@|$DEMO_PORT|g" \
        -e "s|@MPM@|$TOP/build/mod_mpm_prefork.so|g" \
        -e "s|@STATUS@|$TOP/build/mod_bucket_status.so|g" \
        -e "s|@SHIPPED_CONF@|$TOP/server/mpm/prefork/mpm_prefork_buckets.conf|g" \
        -e "s|@BUCKET_LINES@|$lines|" \
        tools/demo.conf.in > "$DEMO_ROOT/httpd.conf"
    say "starting apache2 with this MPM on 127.0.0.1:$DEMO_PORT"
    /usr/sbin/apache2 -f "$DEMO_ROOT/httpd.conf" -k start
    for _ in $(seq 100); do
        curl -sf -o /dev/null "$url/" && break
        sleep 0.1
    done
    say "GET $url/"
    curl -sS -i "$url/" | sed -n '1p;$p'
    say "listening sockets (one per bucket):"
    ss -ltn "sport = :$DEMO_PORT" | sed 1d
    say "load: ab -n 20000 -c 32 (keep-alive off; this run's figures, not a benchmark)"
    timeout 120 ab -q -n 20000 -c 32 "$url/index.html" \
        | grep -E "Complete requests|Failed requests|Requests per second"
    sleep 1.2   # one maintenance cycle, so the counters are published
    python3 tools/balance_report.py --save "$url/bucket-status" "$report"
}

demo() {
    local first="$TOP/build/demo-shipped.json" second="$TOP/build/demo-buckets.json"
    local lines='<IfDirective ListenBucketSteering>\
    ListenCoresBucketsRatio 1\
    ListenBucketSteering    idle\
</IfDirective>'
    mkdir -p "$TOP/build"
    say "1 of 2: the package's configuration (Debian's prefork pool, no bucket directive)"
    demo_run "$first" ""
    say "2 of 2: the same, with README's lines for many-CPU hosts:"
    printf '    ListenCoresBucketsRatio 1\n    ListenBucketSteering    idle\n'
    demo_run "$second" "$lines"
    say "the two runs side by side (accepted connections per bucket and child, since each start)"
    python3 tools/balance_report.py --compare \
        "package's configuration" "$first" \
        "ListenCoresBucketsRatio 1 + idle steering" "$second"
    echo
    echo "The ratio gives one bucket per usable CPU on each Listen: the kernel"
    echo "spreads new connections over the buckets' sockets, and idle steering"
    echo "moves a connection whose bucket has no idle child to one that has."
    echo "Where idle steering cannot run, the second run has one bucket too, and"
    echo "its error log says why (PFB00150): $DEMO_ROOT/logs/error_log"
    say "the second server is left running; page: http://127.0.0.1:$DEMO_PORT/bucket-status"
    say "stop it with:"
    echo "    /usr/sbin/apache2 -f $DEMO_ROOT/httpd.conf -k stop   (or: bash tools/run.sh stop)"
}

run_tests() {
    say "make check"
    make check
}

case "${1:-}" in
    demo) install_missing; build; demo ;;
    test) install_missing; build; run_tests ;;
    stop) stop_demo ;;
    # apt's hooks in apt_keeping_apache_modules:
    apache-modules-save) enabled_apache_modules > "$2" ;;
    apache-modules-restore) apache_modules_restore "$2" ;;
    *) echo "usage: $0 demo|test|stop" >&2; exit 2 ;;
esac
