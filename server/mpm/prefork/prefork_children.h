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
 * @file  prefork_children.h
 * @brief The parent's own record of its children: what httpd's
 *        ap_reclaim_child_processes() and friends (server/mpm_unix.c) do
 *        from the scoreboard, done from memory no child can write.
 *
 * The scoreboard's parent fields are in shared memory, so a child running
 * hostile code could hide from the reaper there (pid 0) or point the
 * parent's signals at another process.  The parent finds, signals, reaps
 * and counts its children from this table only, and copies it into the
 * scoreboard for mod_status (pf_children_publish).
 */

#ifndef PREFORK_CHILDREN_H
#define PREFORK_CHILDREN_H

#include "apr_pools.h"
#include "httpd.h"
#include "scoreboard.h"

/** What the parent knows of the child in one scoreboard slot. */
typedef struct {
    pid_t pid;                  /**< 0: the slot is free */
    ap_generation_t generation;
    int bucket;                 /**< bucket now, -1 if its identity is gone */
    int told_to_stop;           /**< sent AP_SIG_GRACEFUL */
    apr_time_t started;         /**< forked at, by the parent's clock */
    int ready;                  /**< reported ready after child_init, the
                                     kernel vouching for its pid */
} pf_child_t;

typedef struct {
    pf_child_t *slot;           /**< num_slots entries */
    int num_slots;              /**< ServerLimit, fixed */
    int used;                   /**< highest slot ever used + 1 */
} pf_children_t;

/** Called for each child reaped, before its slot is freed. */
typedef void pf_child_gone_fn(int slot);

/** The table for @a num_slots slots (ServerLimit), from @a p. */
pf_children_t *pf_children_create(apr_pool_t *p, int num_slots);

/** The first free slot below @a limit (MaxRequestWorkers), or -1. */
int pf_children_free_slot(const pf_children_t *c, int limit);

/** The slot of our child @a pid, or -1. */
int pf_children_find(const pf_children_t *c, pid_t pid);

/** Notes the child forked into @a slot. */
void pf_children_started(pf_children_t *c, int slot, pid_t pid,
                         ap_generation_t generation, int bucket);

/** Notes that child @a pid reported ready.  @return its slot, or -1 when
 *  it is none of ours */
int pf_children_mark_ready(pf_children_t *c, pid_t pid);

/** Sends AP_SIG_GRACEFUL to the slot's child, once.  @return 1 if sent */
int pf_children_tell_to_stop(pf_children_t *c, int slot);

/** Frees a slot whose child has gone. */
void pf_children_forget(pf_children_t *c, int slot);

/** Children alive. */
int pf_children_live(const pf_children_t *c);

/** The highest slot holding a child + 1. */
int pf_children_in_use(const pf_children_t *c);

/** Children in @a bucket: of generation @a gen and not told to stop
 *  (*current), and of older generations (*old). */
void pf_children_count_bucket(const pf_children_t *c, int bucket,
                              ap_generation_t gen, int *current, int *old);

/** Reaps the children that have exited, without waiting; @a gone runs for
 *  each. */
void pf_children_reap(pf_children_t *c, pf_child_gone_fn *gone);

/**
 * Stops every child: SIGTERM when @a terminate (else they were told
 * already), SIGTERM again at 3, 5 and 7 seconds, SIGKILL at 9, and gives
 * up at 10 with an error line, as httpd does; but those times count from
 * the last child that exited, so a pool that leaves slowly yet steadily
 * (a loaded host) is not taken for a stuck one, up to a minute in all.
 */
void pf_children_reclaim(pf_children_t *c, int terminate,
                         pf_child_gone_fn *gone);

/** Writes the scoreboard's parent fields (pid, generation, quiescing) from
 *  the table: for mod_status, never read back. */
void pf_children_publish(const pf_children_t *c);

#endif /* PREFORK_CHILDREN_H */
