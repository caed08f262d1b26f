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
 * @file  prefork_holders.h
 * @brief Who else holds a bucket socket: the parent's look through
 *        /proc/PID/fd for processes that are neither itself nor a live
 *        child and hold one.
 *
 * A child can leave a copy of its bucket socket with a process that
 * outlives it (a setsid() grandchild, a process it passed the socket to):
 * the parent's repairs in place lose to such a holder, which can set an
 * option again a millisecond later, accept connections, or keep the port
 * after the server stops.  Found, the socket is replaced (the holder keeps
 * a socket that no longer listens).
 *
 * A look reads every process's descriptor table, which costs CPU in
 * proportion to the processes and descriptors of the host: the looks are
 * spaced so that they take at most PF_HOLDERS_BUDGET of one CPU
 * (pf_holders_next_look()), every maintenance cycle on a host with a few
 * hundred processes, less often on one with tens of thousands.  A
 * process is taken for a holder only when two looks in a row find it
 * holding the socket: a child's process between fork() and exec() holds
 * it for that moment, legitimately (the descriptor is close-on-exec), and
 * the second look, at the next cycle, checks just the suspects.
 *
 * prefork_sockguard.c looks before each maintenance cycle's check, and
 * replaces the sockets it is told of.
 */

#ifndef PREFORK_HOLDERS_H
#define PREFORK_HOLDERS_H

#include "apr_file_info.h"
#include "apr_pools.h"
#include "apr_time.h"

/** The share of one CPU the looks may take, in parts per million. */
#define PF_HOLDERS_BUDGET_PPM 5000

/** A process that holds a socket looked for. */
typedef struct {
    pid_t pid;
    apr_ino_t inode;            /**< the socket it holds */
} pf_holder_t;

/** Whether @a pid is the parent or a live child (not a holder). */
typedef int pf_holders_ours_fn(void *baton, pid_t pid);

typedef struct pf_holders_s pf_holders_t;

/** Made once per server, in @a pool. */
pf_holders_t *pf_holders_create(apr_pool_t *pool);

/**
 * Looks for the holders of @a inodes (sorted ascending, @a n of them):
 * the whole of /proc when a look is due, otherwise only the processes
 * the last look suspected.
 * @param found Set to the holders that two looks in a row found (room for
 *        @a room)
 * @return how many it set
 */
int pf_holders_look(pf_holders_t *h, const apr_ino_t *inodes, int n,
                    pf_holders_ours_fn *ours, void *baton, apr_time_t now,
                    pf_holder_t *found, int room);

/**
 * When the next whole look may start: a look that took @a cost_usec of
 * CPU is followed by enough time for the looks to take at most
 * PF_HOLDERS_BUDGET_PPM of one CPU, and never sooner than the next cycle.
 * Pure.
 */
apr_time_t pf_holders_next_look(apr_time_t started, apr_int64_t cost_usec,
                                apr_time_t cycle);

/** The name of process @a pid (its comm), for the log; "?" if gone. */
const char *pf_holders_name(pid_t pid, char *buf, apr_size_t len);

#endif /* PREFORK_HOLDERS_H */
