#!/bin/bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Prints the MPM to enable when mpm_prefork_buckets goes away (the Debian
# package's prerm, make uninstall): the one the admin had before it.
#
#   tools/previous-mpm.sh        -> mpm_event, mpm_worker or mpm_prefork
#
# The record is the one Debian's a2dismod keeps: switching to this MPM
# starts with "a2dismod mpm_event" (README, README.Debian), which leaves
# /var/lib/apache2/module/disabled_by_admin/mpm_event, and "a2enmod
# mpm_prefork_buckets" leaves enabled_by_admin/mpm_prefork_buckets.  The
# answer is the MPM disabled last by the admin no later than this one was
# enabled, whose .load is still there; mpm_prefork where an enabled module
# depends on it by name (php8.2.load: "# Depends: mpm_prefork"), or where
# nothing was recorded (a2dismod -m, or the MPM's files copied by hand):
# the same process model as this MPM.
#
# APACHE_CONFDIR (default /etc/apache2) and APACHE2_MODULE_STATE (default
# /var/lib/apache2/module) say where to look.
set -eu

conf=${APACHE_CONFDIR:-/etc/apache2}
state=${APACHE2_MODULE_STATE:-/var/lib/apache2/module}
enabled_at=$state/enabled_by_admin/mpm_prefork_buckets

for load in "$conf"/mods-enabled/*.load; do
    [ -e "$load" ] || continue
    if sed -n 's/^#[[:space:]]*Depends:[[:space:]]*//p' "$load" \
            | tr -s ' \t' '\n' | grep -qx mpm_prefork; then
        echo mpm_prefork
        exit 0
    fi
done

best=
for marker in "$state"/disabled_by_admin/mpm_*; do
    [ -e "$marker" ] || continue
    mpm=${marker##*/}
    case "$mpm" in
    mpm_prefork_buckets) continue ;;
    esac
    [ -e "$conf/mods-available/$mpm.load" ] || continue
    # Disabled after this MPM was enabled: not the one it replaced.
    if [ -e "$enabled_at" ] && [ "$marker" -nt "$enabled_at" ]; then
        continue
    fi
    if [ -z "$best" ] || [ "$marker" -nt "$state/disabled_by_admin/$best" ]; then
        best=$mpm
    fi
done
echo "${best:-mpm_prefork}"
