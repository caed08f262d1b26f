#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# The suite's many-core profiles on a machine that has no network and no
# Debian packages: 16cpu, php, rps, and the anchors, pool, workloads and
# linger profiles, run with Debian 12's apache2, its modules (mod_ssl
# too), mod_php, nginx and wrk from an offline kit
# (../shared/tools/make-offline-kit.sh) and this tree's built modules and
# anchors.
#
# Here (Debian 12, after make bench-build):
#   bash bench/run_16cpu.sh pack /tmp/pfb16
#       -> /tmp/pfb16/kit (the kit, plus mod_php and its extensions, and
#          the TLS scenarios' test certificate), /tmp/pfb16/pfb (this tree
#          with build/, and build-before/: the MPM of the commit before the
#          lingering-close change, for the linger profile; BEFORE_REV picks
#          another), /tmp/pfb16.tar.gz
# There (as root; python3, taskset, ip and timeout from the host):
#   tar xzf pfb16.tar.gz && cd pfb16/pfb
#   bash bench/run_16cpu.sh run ../kit headline   # <= 8 minutes: the
#                                                     # 16-CPU headline
#   bash bench/run_16cpu.sh run ../kit            # 16cpu, php, rps
#   bash bench/run_16cpu.sh run ../kit 16cpu --pairs 5
#   bash bench/run_16cpu.sh run ../kit default    # the shipped .conf
#   bash bench/run_16cpu.sh run ../kit anchors    # server on 3/4 of
#   bash bench/run_16cpu.sh run ../kit pool       # the CPUs, the
#   bash bench/run_16cpu.sh run ../kit workloads  # generator on the
#   bash bench/run_16cpu.sh run ../kit linger     # rest (not pool)
#   bash bench/run_16cpu.sh run ../kit crossnode  # (root: a netns)
#
# `run` starts no server itself: suite.py starts and stops every server
# and deletes the namespace it makes, also when it gets SIGTERM, which the
# trap below passes on.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
PHP_API=20220829            # Debian 12's PHP 8.2 extension directory

usage() {
    echo "usage: $0 pack OUTDIR | run KITDIR [headline|16cpu|php|rps|default|anchors|pool|workloads|linger|crossnode|all] [suite args]" >&2
    exit 2
}

pack() {
    local out=$1 kit_script php_so
    kit_script=${KIT_SCRIPT:-$TOP/../shared/tools/make-offline-kit.sh}
    if [ ! -f "$TOP/build/mod_pfb_test_handler.so" ] || [ ! -d "$TOP/build/anchors" ]; then
        echo "run make bench-build first" >&2
        exit 1
    fi
    if [ ! -f "$TOP/build/upstream/httpd-2.4.62-onelistener/mod_mpm_prefork.so" ]; then
        echo "run make upstream-modules first (the headline's patched 2.4.62)" >&2
        exit 1
    fi
    [ -f "$kit_script" ] || { echo "no $kit_script (set KIT_SCRIPT)" >&2; exit 1; }
    php_so=$(find /usr/lib/apache2/modules -name 'libphp*.so' 2>/dev/null | sort | tail -n 1)
    rm -rf "$out"
    mkdir -p "$out"
    # The kit leaves out modules that link libxml2, mod_php among them:
    # name it so that its libraries are copied, then copy it.
    bash "$kit_script" "$out/kit" ${php_so:+"$php_so"}
    if [ -n "$php_so" ]; then
        cp -L "$php_so" "$out/kit/modules/"
        mkdir -p "$out/kit/php/conf.d" "$out/kit/php/ext"
        cp -L /etc/php/8.2/apache2/php.ini "$out/kit/php/"
        cp -L /etc/php/8.2/apache2/conf.d/*.ini "$out/kit/php/conf.d/"
        cp -L /usr/lib/php/$PHP_API/*.so "$out/kit/php/ext/"
    else
        echo "no mod_php here: the php profile will report itself unavailable" >&2
    fi
    mkdir -p "$out/pfb/build/anchors"
    (cd "$TOP" && git ls-files -z -c -o --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$out/pfb"
    cp -L "$TOP"/build/*.so "$out/pfb/build/"
    cp -L "$TOP"/build/anchors/anchor_* "$out/pfb/build/anchors/"
    # httpd 2.4.62's prefork with and without the upstream patch (make
    # upstream-modules), for the headline's and the rig's stock-src*.
    local up
    for up in "$TOP"/build/upstream/httpd-2.4.62*/mod_mpm_prefork.so; do
        [ -f "$up" ] || continue
        mkdir -p "$out/pfb/build/upstream/$(basename "$(dirname "$up")")"
        cp -L "$up" "$out/pfb/build/upstream/$(basename "$(dirname "$up")")/"
    done
    # The kit has no .git: the commit it was packed at, for every result's
    # record (hoststate.commit()).
    (cd "$TOP" && git rev-parse HEAD | tr -d '\n' \
        && { git diff --quiet HEAD || printf -- '-dirty'; } && echo) > "$out/pfb/COMMIT"
    python3 "$TOP/bench/suite.py" --make-cert "$out/kit/tls"
    pack_before "$out/pfb/build-before"
    tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
    du -sh "$out.tar.gz"
}

# The MPM as it was before the lingering-close change (or at BEFORE_REV),
# built in a scratch copy, for the linger profile's pfb-1-before.
pack_before() {
    local dest=$1 rev scratch
    rev=${BEFORE_REV:-$(cd "$TOP" && git log --follow --diff-filter=A --format=%H -- server/mpm/prefork/conn/prefork_linger.c | tail -n 1)^}
    scratch=$(mktemp -d)
    (cd "$TOP" && git archive "$rev") | tar -xf - -C "$scratch"
    (cd "$scratch" && autoconf >/dev/null && ./configure >/dev/null && make -s build/mod_mpm_prefork.so)
    mkdir -p "$dest"
    cp -L "$scratch/build/mod_mpm_prefork.so" "$dest/"
    (cd "$TOP" && git rev-parse "$rev") > "$dest/REVISION"
    rm -rf "$scratch"
}

suite_pid=
forward_term() {
    if [ -n "$suite_pid" ]; then
        kill -TERM "$suite_pid" 2>/dev/null || true
        wait "$suite_pid" || true
    fi
    exit 143
}

suite() {
    echo "+ python3 bench/suite.py $*"
    python3 "$TOP/bench/suite.py" "$@" &
    suite_pid=$!
    wait "$suite_pid"
    suite_pid=
}

run() {
    local kit what stamp ncpus
    kit=$(cd "$1" && pwd)
    what=${2:-all}
    case $what in
    headline | 16cpu | php | rps | default | anchors | pool | workloads | linger | crossnode | all) ;;
    *) usage ;;
    esac
    shift $(($# >= 2 ? 2 : 1))
    # The kit's binaries find the kit's libraries through wrappers, so
    # that this host's own programs (python3 above all, whose libpython
    # may share a name with the one perf pulled into the kit) keep theirs.
    local wrap=$kit/wrap name
    mkdir -p "$wrap"
    for name in "$kit"/bin/*; do
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s "$@"\n' "$kit" "$name" \
            > "$wrap/$(basename "$name")"
        chmod 755 "$wrap/$(basename "$name")"
    done
    export PATH=$wrap:$PATH
    export HTTPD=$wrap/apache2 HTTPD_MODULES_DIR=$kit/modules
    if [ -d "$kit/php" ]; then
        # mod_php reads php.ini from PHPRC and the extensions' ini files
        # from PHP_INI_SCAN_DIR; the extensions load from the kit.
        printf 'extension_dir=%s\n' "$kit/php/ext" > "$kit/php/conf.d/00-kit.ini"
        export PHPRC=$kit/php PHP_INI_SCAN_DIR=$kit/php/conf.d
    fi
    # Debian's nginx creates its temp directories under these at start.
    mkdir -p /var/lib/nginx /var/log/nginx
    # The TLS scenarios' certificate, made when the kit was packed.
    [ -d "$kit/tls" ] && export PFB_BENCH_CERT_DIR=$kit/tls
    ncpus=$(nproc)
    [ "$ncpus" -ge 16 ] || echo "note: $ncpus CPUs; the 16cpu profile scales itself down" >&2
    stamp=$(date +%Y%m%d-%H%M%S)
    cd "$TOP"
    trap forward_term INT TERM
    if [ "$what" = 16cpu ] || [ "$what" = all ]; then
        suite --profile 16cpu --out "bench-results/16cpu-$stamp" "$@"
    fi
    if [ "$what" = php ] || [ "$what" = all ]; then
        suite --profile php --out "bench-results/php-$stamp" "$@"
    fi
    if [ "$what" = default ]; then
        # The package's configuration against stock prefork.
        suite --profile default --out "bench-results/default-$stamp" "$@"
    fi
    if [ "$what" = rps ] || [ "$what" = all ]; then
        # Server and generator apart: three quarters of the CPUs for the
        # server (RPS spreads flows over them), the rest for wrk.
        if [ "$ncpus" -ge 4 ]; then
            suite --profile rps --server-cpus "0-$((ncpus * 3 / 4 - 1))" \
                --client-cpus "$((ncpus * 3 / 4))-$((ncpus - 1))" \
                --out "bench-results/rps-$stamp" "$@"
        else
            suite --profile rps --out "bench-results/rps-$stamp" "$@"
        fi
    fi
    # The generator apart from the server: a quarter of the CPUs for it.
    local apart=()
    if [ "$ncpus" -ge 4 ]; then
        apart=(--server-cpus "0-$((ncpus * 3 / 4 - 1))"
               --client-cpus "$((ncpus * 3 / 4))-$((ncpus - 1))")
    fi
    if [ "$what" = headline ]; then
        # The 16-CPU headline, sized for 8 minutes: 6 configurations x 6
        # pairs of static close with 256 children, the generator apart.
        suite --profile headline "${apart[@]}" --out "bench-results/headline-$stamp" "$@"
    fi
    if [ "$what" = anchors ] || [ "$what" = all ]; then
        suite --profile anchors "${apart[@]}" --out "bench-results/anchors-$stamp" "$@"
    fi
    if [ "$what" = pool ] || [ "$what" = all ]; then
        suite --profile pool --out "bench-results/pool-$stamp" "$@"
    fi
    if [ "$what" = workloads ] || [ "$what" = all ]; then
        suite --profile workloads "${apart[@]}" --out "bench-results/workloads-$stamp" "$@"
    fi
    if [ "$what" = linger ] || [ "$what" = all ]; then
        suite --profile linger "${apart[@]}" --mpm-before "$TOP/build-before/mod_mpm_prefork.so" \
            --out "bench-results/linger-$stamp" "$@"
    fi
    if [ "$what" = crossnode ] || [ "$what" = all ]; then
        # The model's cost of serving away from the receiving CPU: RPS on
        # the server's CPUs, the generator in the namespace on the rest.
        suite --profile crossnode "${apart[@]}" --out "bench-results/crossnode-$stamp" "$@"
    fi
    echo "results: $TOP/bench-results/*-$stamp/report.md"
}

case "${1:-}" in
pack) [ $# -eq 2 ] || usage; pack "$2" ;;
run) [ $# -ge 2 ] || usage; shift; run "$@" ;;
*) usage ;;
esac
