/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Runs every unit suite.  CK_RUN_SUITE / CK_RUN_CASE select tests and
 * CK_FORK=no keeps them in one process for gdb.  Exits non-zero on any
 * failure; with UNIT_TAP=FILE also writes TAP there.
 */

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unit.h"

int main(void)
{
    SRunner *runner;
    int failed;
    const char *tap = getenv("UNIT_TAP");

    runner = srunner_create(config_suite());
    srunner_add_suite(runner, plan_suite());
    srunner_add_suite(runner, maintenance_suite());
    srunner_add_suite(runner, respawn_suite());
    srunner_add_suite(runner, pick_suite());
    srunner_add_suite(runner, cpus_suite());
    srunner_add_suite(runner, os_suite());
    srunner_add_suite(runner, children_suite());
    srunner_add_suite(runner, ready_suite());
    srunner_add_suite(runner, segment_suite());
    srunner_add_suite(runner, linger_suite());
    srunner_add_suite(runner, guard_suite());
    srunner_add_suite(runner, sockopts_suite());
    srunner_add_suite(runner, seccomp_suite());
    srunner_add_suite(runner, steering_rules_suite());
    srunner_add_suite(runner, topology_suite());
    srunner_add_suite(runner, bucket_report_suite());
    if (geteuid() == 0) {
        srunner_add_suite(runner, steering_kernel_suite());
        srunner_add_suite(runner, steering_map_suite());
        srunner_add_suite(runner, guard_kernel_suite());
        srunner_add_suite(runner, seccomp_kernel_suite());
    }
    else {
        /* bpf(2) and the programs' attachment need root (CAP_BPF and
         * CAP_NET_ADMIN), and so does a seccomp filter without
         * no_new_privs; these tests are left out, not passed. */
        printf("steering-kernel, steering-map, guard-kernel and "
               "seccomp-kernel suites NOT RUN: need root (euid %d)\n",
               (int)geteuid());
    }
    if (tap != NULL && *tap != '\0') {
        srunner_set_tap(runner, tap);
    }
    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
