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
 * @file  prefork_bucketset.h
 * @brief The listener buckets: what server/listen.c is to httpd's
 *        listeners, this is to the MPM's buckets.
 *
 * The bucket set owns, for the life of the server:
 * - the bucket identities (a Listen's address and a shard) and the
 *   SO_REUSEPORT duplicate sockets kept for them, so that a restart never
 *   closes a socket with queued connections and a bucket keeps its
 *   counters wherever its Listen moves in the configuration;
 * - the shared segment of include/prefork_buckets.h (prefork_segment.h
 *   writes it; its slot records are the children table's to write,
 *   prefork_children.h);
 * - what the generation's buckets are (prefork_generation.h), which it
 *   builds at every (re)start.
 *
 * ListenBucketSteering (prefork_steering.h) reads the generation's
 * sockets; the bucket set calls nothing of it: what steering found of
 * the host comes with each build (pf_steer_host_t), the steering in
 * force with each publish, and a child gone tells prefork.c which
 * bucket's idle count steering takes back.
 *
 * prefork.c keeps the httpd-shaped parts (hooks, directives, the child and
 * parent loops, signals) and calls:
 *
 *   parent, each generation:  pf_bucketset_build  pf_bucketset_log_plan
 *   parent, each cycle:       pf_bucketset_publish
 *   parent, per child:        pf_bucketset_child_gone
 *   child:                    pf_bucketset_child_init
 *   stop:                     pf_bucketset_close
 *
 * The sockets it opens are noted with the socket guard
 * (guard/prefork_sockguard.h), which prefork.c makes and calls itself for
 * the cycle's checks, a restart's retirement and a graceful stop.
 *
 * The decisions (how many buckets, what a restart keeps) are pure
 * functions in prefork_plan.c; this file carries them out.  Everything
 * the parent uses to size, index or signal is in its own memory: the
 * segment is written for readers and never trusted back.
 */

#ifndef PREFORK_BUCKETSET_H
#define PREFORK_BUCKETSET_H

#include "apr_pools.h"
#include "apr_proc_mutex.h"
#include "httpd.h"
#include "ap_listen.h"

#include "prefork_buckets.h"
#include "prefork_children.h"
#include "prefork_config.h"
#include "prefork_generation.h"
#include "prefork_segment.h"
#include "steering/prefork_steering.h"
#include "guard/prefork_sockguard.h"

typedef struct pf_bucketset_s pf_bucketset_t;

/** What a generation is built from: the restart and the directives. */
typedef struct {
    int how;                    /**< pf_start_e */
    /** The directives in force, as check_config corrected them: read
     *  where they are used, never copied (they stay at this address, and
     *  change only at the next pass over the configuration, before the
     *  next build). */
    const pf_config_t *conf;
    int generation;             /**< the generation being built */
    /** What the children table said just before the build
     *  (pf_children_census()), as data: per identity record, the live
     *  children forked for it, whose identities the build keeps
     *  (PF_BUCKETSET_RECORDS(num_slots) entries)... */
    const int *held;
    /** ...per bucket of the generation in force, its live children not
     *  told to stop (its num_buckets entries)... */
    const int *in_bucket;
    /** ...and the table's slots in use, for the segment's header.  NULL
     *  arrays: no child yet. */
    int slots_used;
    /** What steering found of the host just before the build
     *  (pf_steer_prepare()): the usable CPUs the count is made from,
     *  whether the steering asked for can run, and the steering in
     *  force. */
    const pf_steer_host_t *host;
} pf_bucketset_config_t;

/** The bucket identities a set with room for @a num_slots scoreboard
 *  slots numbers: every bucket of a generation needs a child (the plan
 *  caps them at MaxRequestWorkers, at most ServerLimit), and an identity
 *  no longer in use keeps its record while children forked for it run (at
 *  most ServerLimit): twice ServerLimit, plus the single bucket. */
#define PF_BUCKETSET_RECORDS(num_slots) (2 * (num_slots) + 1)

/**
 * Makes the bucket set, once per server, in @a pool (which outlives
 * generations), with room for @a num_slots scoreboard slots (ServerLimit,
 * fixed until the server stops), to build @a gen at every (re)start: it
 * gives @a gen its numbering of identities, for the server's life.
 * @a guard is the socket guard (made for PF_BUCKETSET_RECORDS(num_slots) identities),
 * which checks, replaces and stops the sockets the set opens.
 */
pf_bucketset_t *pf_bucketset_create(apr_pool_t *pool, int num_slots,
                                    apr_time_t started, pf_generation_t *gen,
                                    pf_sockguard_t *guard);

/**
 * Builds a generation's buckets from ap_listeners: probes SO_REUSEPORT
 * (once per server) and the usable CPUs, plans the count with
 * pf_plan_buckets(), decides with pf_plan_generation() what the start or
 * restart keeps, opens the duplicates it needs (falling back to one bucket
 * per Listen if the kernel refuses one), closes those no bucket wants,
 * creates the accept mutex where a child polls several sockets, writes
 * the layout into the segment (created at the first call), and fills the
 * generation: its buckets and plan, the numbering, each bucket's target,
 * and fresh per-bucket state for maintenance (arrays from @a pconf).  It
 * logs only errors; pf_bucketset_log_plan() says what it decided.
 */
apr_status_t pf_bucketset_build(pf_bucketset_t *bs,
                                const pf_bucketset_config_t *cfg,
                                apr_pool_t *pconf, server_rec *s);

/**
 * Logs what the last build decided: the count and why, the fallbacks taken
 * and whether the buckets stay warm.  The error log must be open: httpd's
 * core points stderr at it in its open_logs hook, and a daemon's stderr
 * before that is /dev/null.  With @a startup (the first pass over the
 * configuration, whose lines go to the console) only the warning about an
 * explicit count that starves buckets is logged.
 */
void pf_bucketset_log_plan(const pf_bucketset_t *bs, int startup,
                           server_rec *s);

/** The segment readers see, whose slot records the children table
 *  publishes (NULL before the first build). */
pf_segment_t *pf_bucketset_segment(const pf_bucketset_t *bs);

/**
 * The publish step: writes every parent-owned field of the segment (the
 * header, the bucket table, each bucket's record with the figures of
 * @a obs and what its identity's children accepted) from the parent's
 * own state.  Writes only: it attaches, maps and corrects nothing.  With
 * @a obs NULL the records keep the figures they have: the header, the
 * bucket table and the identities are written.
 */
void pf_bucketset_publish(pf_bucketset_t *bs, const pf_observation_t *obs,
                          ap_generation_t number, int slots_used,
                          int steer_active);

/**
 * Parent, when the child of @a slot has been reaped (before its record
 * goes): adds what it accepted, as its slot says, to its identity's
 * total.
 * @return the bucket whose idle count steering takes back
 *         (pf_steer_child_gone()): the child's, when its slot says it was
 *         waiting in accept() and it was forked in the bucket numbering in
 *         force; else -1
 */
int pf_bucketset_child_gone(pf_bucketset_t *bs, int slot,
                            const pf_child_t *child);

/**
 * Child, right after fork: closes every listening socket but its own
 * bucket's, moves its own bucket's
 * sockets to the descriptor numbers the system-call filter will refuse
 * setsockopt() on (pf_seccomp_move_high()).  With @a bucket -1 (a
 * process a module forks from the parent, mod_cgid's daemon) it closes
 * every bucket socket.
 * @param fds Set to the descriptors of its own bucket's sockets (room for
 *        @a room; NULL with 0)
 * @return how many it set
 */
int pf_bucketset_child_init(pf_bucketset_t *bs, int bucket, int *fds,
                            int room);

/** Stop: every bucket socket stops listening and closes, core's listeners
 *  included, so that a copy another process keeps holds no port. */
void pf_bucketset_close(pf_bucketset_t *bs);

#endif /* PREFORK_BUCKETSET_H */
