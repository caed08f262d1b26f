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
 * @file  prefork_topology.h
 * @brief The host's CPU topology as sysfs shows it (NUMA node, package,
 *        core, thread siblings), and the layout of a Listen's buckets
 *        over it for "local" steering.
 *
 * CPU numbers say nothing of where a CPU is: many two-socket hosts number
 * their CPUs alternately between the sockets, and SMT siblings are often
 * half the range apart.  The layout therefore groups CPUs by what sysfs
 * says: each NUMA node gets its own buckets (in proportion to its CPUs),
 * and a core's thread siblings always feed the same bucket.
 *
 * Reading (pf_topo_read) takes the directory under which "sys/" lies, so
 * the tests point it at fake trees; the layout (pf_topo_layout) is a pure
 * function of what was read.
 */

#ifndef PREFORK_TOPOLOGY_H
#define PREFORK_TOPOLOGY_H

#include "prefork_steering_rules.h"

/** Where one CPU is.  Unknown values are -1, except the node, which is
 *  the lowest node sysfs lists (0 on a host that shows none). */
typedef struct {
    int node;           /**< NUMA node */
    int package;        /**< physical_package_id */
    int core;           /**< core_id within the package */
    int core_key;       /**< the lowest of its thread siblings (itself if
                             the list is missing or garbage) */
} pf_topo_cpu_t;

/** Node numbers above this are garbage in a directory name. */
#define PF_TOPO_MAX_NODE 65535

/**
 * Reads the topology of CPUs 0 ... @a num_cpus - 1 from
 * @a root/sys/devices/system/{cpu,node}.  A missing node directory means
 * one node; a garbage file is ignored (the CPU is then its own core, or
 * on the lowest node).  Reads files, and nothing else.
 * @param root "" for the host's own
 * @param out Room for @a num_cpus entries
 * @return the number of nodes that list a CPU below num_cpus (0 for none:
 *         every CPU is on node 0), or -1 on bad arguments
 */
int pf_topo_read(const char *root, pf_topo_cpu_t *out, int num_cpus);

/**
 * The NUMA nodes of the usable CPUs.
 * @return how many different nodes @a cpus are on, or -1 on bad input
 */
int pf_topo_nodes(const pf_topo_cpu_t *topo, int entries, const int *cpus,
                  int num_cpus);

/**
 * The CPU table of "local" steering for one Listen of @a per_listen
 * shards.  The usable CPUs are grouped by node (nodes in ascending
 * order); with at least as many shards as nodes, each node gets a
 * contiguous run of shards in proportion to its usable CPUs, at least one,
 * and its cores (thread siblings together, in package and core order)
 * are split evenly and in order over them, as "cpu" splits CPUs.  With
 * fewer shards than nodes, whole nodes share a shard.  A CPU outside the
 * usable ones (it may still take interrupts) gets the entry of the first
 * usable CPU of its node, or else of the nearest usable CPU below it (the
 * lowest one for CPUs below all).
 * @param topo Where CPUs 0 ... entries - 1 are (pf_topo_read())
 * @param entries Length of topo and table: the kernel's possible CPUs
 * @param cpus The usable CPUs, ascending, no duplicates, below entries
 * @param table Output: every CPU's first_shard, span, node_first and
 *        node_span
 * @return 0, or -1 on bad input
 */
int pf_topo_layout(const pf_topo_cpu_t *topo, int entries, const int *cpus,
                   int num_cpus, int per_listen, pf_steer_cpu_entry_t *table);

/**
 * The usable CPUs that feed shard @a shard in @a table: where the
 * children of its buckets are pinned (BucketCPUAffinity on).
 * @param out Room for num_cpus entries
 * @return how many were written, or -1 on bad input
 */
int pf_topo_shard_cpus(const pf_steer_cpu_entry_t *table, int entries,
                       const int *cpus, int num_cpus, int shard, int *out);

#endif /* PREFORK_TOPOLOGY_H */
