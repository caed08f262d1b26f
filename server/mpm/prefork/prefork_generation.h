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
 * @file  prefork_generation.h
 * @brief A generation: what a start or restart made of the configuration,
 *        kept in one place until the next one.
 *
 * The parent keeps one pf_generation_t in its retained data.  The bucket
 * set builds it at each (re)start (pf_bucketset_build()): the buckets,
 * the plan in force, the numbering of bucket identities, each bucket's
 * target and the per-bucket state maintenance keeps for the generation.
 * Everything else reads it; nothing keeps a copy.
 */

#ifndef PREFORK_GENERATION_H
#define PREFORK_GENERATION_H

#include "apr_network_io.h"
#include "apr_proc_mutex.h"
#include "httpd.h"
#include "ap_listen.h"

#include "prefork_policy.h"

/** One bucket of the current generation. */
typedef struct {
    ap_listen_rec *listeners;   /**< its sockets, a private list */
    int num_listeners;
    apr_proc_mutex_t *mutex;    /**< only when a child polls several */
    const char *address;        /**< first listener, for logs */
} pf_bucket_t;

/** Per-bucket figures of one maintenance cycle. */
typedef struct {
    pf_bucket_state_t *state;
    pf_bucket_action_t *action;
    pf_rank_t *scratch;
    int *idle, *busy, *starting, *stopping, *queued;
    int *old_generation;        /**< children of older generations */
    int *live;                  /**< scratch: live children per bucket */
    int occupied;
} pf_snapshot_t;

typedef struct {
    /** This generation's buckets, from its configuration pool. */
    pf_bucket_t *bucket;
    int num_buckets;
    pf_bucket_plan_t plan;      /**< mode, buckets per Listen, and why */

    /** The numbering, kept across restarts, in memory that outlives
     *  them: per bucket number the record of its identity, and per record
     *  the bucket number it has now (-1: the identity is out of use). */
    int *record;
    int *position;
    int num_records;
    /** The generation whose build made the numbering: a child forked in
     *  it or later counts in the bucket its identity has now. */
    int layout;

    /** Per bucket: children it should have once the old generation has
     *  gone (pf_plan_generation()). */
    int *target;
    /** Per bucket: how fast children may be forked into it
     *  (pf_respawn_may_fork), started afresh with the generation... */
    pf_respawn_t *respawn;
    /** ...and whether the one line about buckets whose children die at
     *  start has been logged for the present episode. */
    int respawn_logged;
    pf_snapshot_t snapshot;     /**< the maintenance cycle's figures */
} pf_generation_t;

/** The bucket number now of the identity @a record, or -1. */
static APR_INLINE int pf_generation_bucket_of(const pf_generation_t *gen,
                                              int record)
{
    int b;

    if (record < 0 || record >= gen->num_records) {
        return -1;
    }
    b = gen->position[record];
    return b >= 0 && b < gen->num_buckets ? b : -1;
}

#endif /* PREFORK_GENERATION_H */
