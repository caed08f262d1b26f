/* Licensed under the Apache License, Version 2.0; see LICENSE. */

#ifndef PREFORK_UNIT_TESTS_H
#define PREFORK_UNIT_TESTS_H

#include <check.h>

Suite *parse_suite(void);
Suite *plan_suite(void);
Suite *generation_suite(void);
Suite *maintenance_suite(void);
Suite *report_suite(void);
Suite *steer_suite(void);
Suite *steer_kernel_suite(void);
Suite *cgroup_suite(void);
Suite *accept_suite(void);
Suite *linger_suite(void);
Suite *respawn_suite(void);
Suite *guard_suite(void);
Suite *guard_kernel_suite(void);
Suite *sockopts_suite(void);
Suite *seccomp_suite(void);
Suite *seccomp_kernel_suite(void);
Suite *ready_suite(void);
Suite *topology_suite(void);
Suite *children_suite(void);
Suite *segment_suite(void);

#endif /* PREFORK_UNIT_TESTS_H */
