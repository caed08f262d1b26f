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
 * @file  prefork_cpus.h
 * @brief The CPUs this process may use: online, in its affinity mask, in
 *        its cgroup's cpuset and within its cgroup's CPU quota, read from
 *        the kernel's files (cgroup v1 and v2, hybrid hosts, containers)
 *        by parsers that take their text; and the affinity mask itself,
 *        for steering by CPU and pinning children.  Where each CPU is
 *        (node, package, core) is prefork_topology.c's.
 *
 * libc and APR only: the unit tests read fake cgroup trees with the same
 * code that reads /sys/fs/cgroup.
 */

#ifndef PREFORK_CPUS_H
#define PREFORK_CPUS_H

#include "apr.h"
#include "apr_errno.h"

#include "prefork_steering.h"

/**
 * Lists the CPUs in this process's affinity mask, ascending.
 * @param cpus Room for @a room entries
 * @return how many were written, 0 if the mask cannot be read
 */
int pf_cpus_affinity(int *cpus, int room);

/** Pins the calling process to the given CPUs. */
apr_status_t pf_cpus_pin(const int *cpus, int num_cpus);

#endif /* PREFORK_CPUS_H */
