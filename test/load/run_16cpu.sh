#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Issue 14's measurements on a many-core machine that has no network and
# no Debian packages: the suite's 16cpu, php and rps profiles, run with
# Debian 12's apache2, its modules, mod_php, nginx and wrk from an offline
# kit (../shared/tools/make-offline-kit.sh) and this tree's built modules.
#
# Here (Debian 12, after make):
#   bash test/load/run_16cpu.sh pack /tmp/pfb16
#       -> /tmp/pfb16/kit (the kit, plus mod_php and its extensions),
#          /tmp/pfb16/pfb (this tree with build/), /tmp/pfb16.tar.gz
# There (as root; python3, taskset, ip and timeout from the host):
#   tar xzf pfb16.tar.gz && cd pfb16/pfb
#   bash test/load/run_16cpu.sh run ../kit            # 16cpu, php, rps
#   bash test/load/run_16cpu.sh run ../kit 16cpu --pairs 5
#   bash test/load/run_16cpu.sh run ../kit default    # the shipped .conf
#
# `run` starts no server itself: suite.py starts and stops every server
# and deletes the namespace it makes, also when it gets SIGTERM, which the
# trap below passes on.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
PHP_API=20220829            # Debian 12's PHP 8.2 extension directory

usage() {
    echo "usage: $0 pack OUTDIR | run KITDIR [16cpu|php|rps|default|all] [suite args]" >&2
    exit 2
}

pack() {
    local out=$1 kit_script php_so
    kit_script=${KIT_SCRIPT:-$TOP/../shared/tools/make-offline-kit.sh}
    [ -f "$TOP/build/mod_mpm_prefork.so" ] || { echo "run make first" >&2; exit 1; }
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
    mkdir -p "$out/pfb/build"
    (cd "$TOP" && git ls-files -z -c -o --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$out/pfb"
    cp -L "$TOP"/build/*.so "$out/pfb/build/"
    tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
    du -sh "$out.tar.gz"
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
    echo "+ python3 test/load/suite.py $*"
    python3 "$TOP/test/load/suite.py" "$@" &
    suite_pid=$!
    wait "$suite_pid"
    suite_pid=
}

run() {
    local kit what stamp ncpus
    kit=$(cd "$1" && pwd)
    what=${2:-all}
    case $what in
    16cpu | php | rps | default | all) ;;
    *) usage ;;
    esac
    shift $(($# >= 2 ? 2 : 1))
    export LD_LIBRARY_PATH=$kit/lib PATH=$kit/bin:$PATH
    export HTTPD=$kit/bin/apache2 HTTPD_MODULES_DIR=$kit/modules
    if [ -d "$kit/php" ]; then
        # mod_php reads php.ini from PHPRC and the extensions' ini files
        # from PHP_INI_SCAN_DIR; the extensions load from the kit.
        printf 'extension_dir=%s\n' "$kit/php/ext" > "$kit/php/conf.d/00-kit.ini"
        export PHPRC=$kit/php PHP_INI_SCAN_DIR=$kit/php/conf.d
    fi
    # Debian's nginx creates its temp directories under these at start.
    mkdir -p /var/lib/nginx /var/log/nginx
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
        # The package's configuration against stock prefork (issue 20).
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
    echo "results: $TOP/bench-results/*-$stamp/report.md"
}

case "${1:-}" in
pack) [ $# -eq 2 ] || usage; pack "$2" ;;
run) [ $# -ge 2 ] || usage; shift; run "$@" ;;
*) usage ;;
esac
