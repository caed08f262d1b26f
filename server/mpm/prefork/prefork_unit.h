/* Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements.  See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License.  You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/**
 * @file  prefork_unit.h
 * @brief What the unit tests reach that the module keeps to one file.
 *
 * A function that only its own file and the unit tests call is static in
 * the module (PF_UNIT_STATIC); where the file is compiled with
 * PF_UNIT_TEST (make check-unit, and build/libpfpolicy.so, which the scale
 * model calls through ctypes) it has external linkage, and its prototype
 * is here.  A few exist only there, for the tests and the model.  Their
 * comments are at their definitions.
 */

#ifndef PREFORK_UNIT_H
#define PREFORK_UNIT_H

#ifndef PF_UNIT_TEST

#define PF_UNIT_STATIC static

#else /* PF_UNIT_TEST */

#define PF_UNIT_STATIC

#include <stddef.h>
#include <stdint.h>

#include "apr_network_io.h"

#include "prefork_children.h"
#include "prefork_config.h"
#include "guard/prefork_guard.h"
#include "conn/prefork_linger.h"
#include "guard/prefork_sockopts.h"
#include "steering/prefork_steering_rules.h"

/* prefork_policy.c */
int pf_share(int total, int num_buckets, int b);
int pf_bucket_min_spare(int min_spare_servers, int num_buckets, int b);
int pf_bucket_max_spare(int min_spare_servers, int max_spare_servers,
                        int num_buckets, int b);
int pf_steering_shares_pool(int steering);
int pf_warm_bucket_limit(int min_spare_servers, int steering);
long long pf_respawn_delay(int early_deaths);

/* prefork_children.c */
int pf_children_find(const pf_children_t *c, pid_t pid);
int pf_children_mark_ready(pf_children_t *c, pid_t pid);
void pf_children_forget(pf_children_t *c, int slot, pf_child_t *was);

/* prefork_config.c */
pf_parse_e pf_parse_bounded_int(const char *arg, long long min, long long max,
                                int *out);
char *pf_format_parse_error(char *buf, size_t len, const char *directive,
                            const char *arg, long long min, long long max,
                            pf_parse_e why);
int pf_steer_parse_mode(const char *arg, int *mode);
const char *pf_steer_mode_missing(int mode);

/* prefork_cpus.c */
int pf_parse_cpu_max(const char *text);
int pf_parse_cfs_quota(const char *quota_text, const char *period_text);
int pf_parse_cpu_list(const char *text);
int pf_cgroup_self_path(const char *proc_cgroup, const char *controller,
                        char *path, size_t len);
int pf_parse_mountinfo_cgroup(const char *line, const char *controller,
                              char *root, size_t root_len, char *mnt,
                              size_t mnt_len);
int pf_cgroup_dir(const char *mnt, const char *root, const char *path,
                  char *dir, size_t len);
int pf_usable_cpus(int online, int affinity, int quota);
void pf_cgroup_cpus(const char *top, int *quota, int *cpuset);

/* prefork_guard.c */
int pf_guard_check_socket(apr_socket_t *sd, const pf_guard_want_t *want,
                          int *failed);
int pf_guard_backlog(apr_socket_t *sd);
int pf_guard_local_port(apr_socket_t *sd);
void pf_guard_socket(pf_guard_book_t *book, apr_socket_t *sd,
                     apr_sockaddr_t *bind_addr, const pf_guard_want_t *want,
                     pf_guard_found_t *found);

/* prefork_seccomp.c */
struct sock_filter;
int pf_seccomp_build(uint32_t native, const int *bucket_fds, int num_fds,
                     struct sock_filter *out, int room);

/* prefork_sockopts.c */
int pf_sockopts_count(void);
const char *pf_sockopts_name(int i);
int pf_sockopts_find(const char *name);
const char *pf_sockopts_left_out(const char *name);
void pf_sockopts_read(int fd, pf_sockopts_t *now);
pf_sockopt_set_t pf_sockopts_compare(const pf_sockopts_t *want,
                                     const pf_sockopts_t *now);

/* prefork_linger.c */
apr_int64_t pf_linger_expiry(const pf_linger_times_t *t);
apr_int64_t pf_linger_now(void);
int pf_linger_pending(void);

/* prefork_topology.c */
int pf_topo_parse_list(const char *text, unsigned char *member, int room,
                       int *lowest);

/* prefork_steering_rules.c */
int pf_steer_idle_pick(const int64_t *idle, int per_listen, uint32_t hash,
                       uint32_t random, int *moved);
int pf_steer_local_pick(const int64_t *idle, int per_listen,
                        const pf_steer_cpu_entry_t *entry, uint32_t hash,
                        uint32_t random, int *moved);
int64_t pf_steer_sat_add(int64_t a, int64_t b);
int64_t pf_steer_sat_sub(int64_t a, int64_t b);

#endif /* PF_UNIT_TEST */

#endif /* PREFORK_UNIT_H */
