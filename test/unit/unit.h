/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * One suite per file tested, defined in test_<that file's name>.c.  The
 * runner adds the suites that need root (steering-kernel, steering-map,
 * guard-kernel, seccomp-kernel) only when it runs as root.
 */

#ifndef PREFORK_UNIT_TESTS_H
#define PREFORK_UNIT_TESTS_H

#include <check.h>

Suite *config_suite(void);
Suite *plan_suite(void);
Suite *maintenance_suite(void);
Suite *respawn_suite(void);
Suite *pick_suite(void);
Suite *cpus_suite(void);
Suite *os_suite(void);
Suite *children_suite(void);
Suite *ready_suite(void);
Suite *segment_suite(void);
Suite *linger_suite(void);
Suite *guard_suite(void);
Suite *guard_kernel_suite(void);
Suite *sockopts_suite(void);
Suite *seccomp_suite(void);
Suite *seccomp_kernel_suite(void);
Suite *steering_rules_suite(void);
Suite *steering_kernel_suite(void);
Suite *steering_map_suite(void);
Suite *topology_suite(void);
Suite *bucket_report_suite(void);

#endif /* PREFORK_UNIT_TESTS_H */
