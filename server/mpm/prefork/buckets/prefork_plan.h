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
 * @file  prefork_plan.h
 * @brief The bucket set's plan: how many buckets to run, and what a
 *        start or restart keeps of the buckets so far.  Private to
 *        buckets/ (prefork_bucketset.c) and its unit tests.
 *
 * Pure functions of plain data: nothing here calls the system, touches
 * httpd globals or allocates, so the unit tests drive it with plain
 * values, and the bucket set gathers the inputs, acts on the outputs
 * (sockets, the generation) and logs from the reason codes.  What the
 * plan makes, the plan in force and the buckets' identities, is held in
 * the generation (prefork_generation.h), which the rest of the MPM
 * reads; a bucket's share of StartServers and whether steering shares the
 * spare pool are maintenance's (prefork_maintenance.h).
 */

#ifndef PREFORK_PLAN_H
#define PREFORK_PLAN_H

#include "prefork_generation.h"

/* ------------------------------------------------------------------ */
/* Bucket count                                                        */

/** What the bucket count is made from. */
typedef struct {
    int usable_cpus;        /**< from pf_usable_cpus() */
    int ratio;              /**< ListenCoresBucketsRatio, 0 = off */
    /** ListenBuckets, or PF_BUCKETS_UNSET; above 0 it wins over the
     *  ratio, and 0 follows the ratio when one is set. */
    int explicit_buckets;
    int reuseport_ok;       /**< the kernel accepted SO_REUSEPORT */
    int num_listeners;      /**< Listen statements (>= 1) */
    int max_workers;        /**< MaxRequestWorkers */
    int min_spare_servers;  /**< MinSpareServers */
    int steering;           /**< ListenBucketSteering (pfb_steer_e) */
    /** The kernel and the build can run @a steering (hash always can);
     *  where not, the children are steered by hash. */
    int steering_usable;
} pf_plan_in_t;

/** Whether the buckets stay warm: every bucket with an idle child of its
 *  own share of MinSpareServers. */
typedef struct {
    /** Most buckets the spare pool keeps warm under the steering asked
     *  for (pf_warm_bucket_limit()); 0: no limit. */
    int limit;
    /** Buckets the directive asked for, before any cap. */
    int asked;
    /** 1: ListenCoresBucketsRatio's count was cut down to the limit. */
    int capped;
    /** 1: ListenBuckets names more buckets than the limit; they are kept,
     *  and some will have no idle child. */
    int starved;
} pf_plan_warm_t;

/**
 * Decides how many buckets to run.
 *
 * Neither directive given, or ListenBuckets 0 (and no ratio): httpd's
 * arrangement, one bucket holding every Listen.  With one Listen its
 * children block in accept(); with several they poll them under the accept
 * mutex.  Otherwise each Listen gets buckets_per_listen SO_REUSEPORT
 * sockets, one per bucket, so no child ever polls more than one socket:
 * ListenBuckets N gives N per Listen, and ListenCoresBucketsRatio R gives
 * usable_cpus / R (at least 1).  Without SO_REUSEPORT each Listen is one
 * bucket.
 *
 * The ratio's count is cut down to what the spare pool keeps warm
 * (pf_warm_bucket_limit() under the steering that will run, at least one
 * bucket per Listen; warm->capped); an explicit count is kept, and
 * warm->starved says when it is above that.  Then the total is cut down so
 * that every bucket can have a child within MaxRequestWorkers; if even one
 * bucket per Listen does not fit, every Listen goes into one bucket.
 *
 * The ratio never gives a bucket per Listen: where its count comes to one
 * socket per Listen, every Listen goes into one bucket, as in httpd
 * (PFB_WHY_ONE_PER_LISTEN); a bucket per Listen, each with a spare pool of
 * its own, lost on tails to httpd's shared poll (docs/differences.md).
 * Nor does the ratio with idle or local steering fall back to hash: those
 * share the spare pool among the buckets (pf_maintenance_shared_pool())
 * and hash does not, so where they cannot run, every Listen goes into one
 * bucket (PFB_WHY_NO_IDLE_STEERING).  An explicit ListenBuckets is kept
 * in both cases.
 *
 * @param warm Written; may be NULL
 */
void pf_plan_buckets(const pf_plan_in_t *in, pf_bucket_plan_t *plan,
                     pf_plan_warm_t *warm);

/**
 * The plan when duplicating a Listen's socket failed (another user's
 * socket on the port, an exotic listener): one bucket per Listen, still
 * one socket per bucket and no accept mutex.
 */
void pf_plan_per_listen_fallback(int num_listeners, pf_bucket_plan_t *plan);

/* ------------------------------------------------------------------ */
/* Generations: what a start or restart keeps                          */

typedef struct {
    int how;                        /**< pf_start_e */
    /** pf_plan_buckets() for the new configuration. */
    pf_bucket_plan_t wanted;
    /** The plan in force so far; NULL at the first start. */
    const pf_bucket_plan_t *previous;
    int num_listeners;              /**< Listens in the new configuration */
    const char *const *listeners;   /**< their addresses, in order */
    int max_workers;                /**< MaxRequestWorkers, new */
    int start_servers;              /**< StartServers, new */
    int num_old;                    /**< buckets of the generation so far */
    const pf_identity_t *old;       /**< their identities */
    /** Children of each old bucket still running (0 after a full
     *  restart, which stops them all first). */
    const int *old_children;
} pf_plan_generation_in_t;

typedef struct {
    pf_bucket_plan_t plan;          /**< in force for the new generation */
    /** 1: the configuration asks for another bucket count or mode, and
     *  the graceful restart kept the old one (plan.reason is
     *  PFB_WHY_KEPT); it takes effect at the next full restart. */
    int change_deferred;
    /* Per new bucket, pf_plan_room() entries each (caller's): */
    pf_identity_t *bucket;          /**< its identity */
    int *listener;                  /**< its Listen (index), -1 in single */
    int *from_old;                  /**< old bucket of the same identity,
                                         whose socket it keeps, or -1 */
    int *target;                    /**< children it should have once the
                                         old generation has gone */
    /* Per old bucket, num_old entries (caller's): */
    int *old_survives;              /**< 1 if a new bucket has its
                                         identity: its socket stays open */
} pf_plan_generation_out_t;

/** Entries the per-bucket arrays of pf_plan_generation_out_t need. */
int pf_plan_room(const pf_plan_generation_in_t *in);

/**
 * Decides what a start or restart keeps and what it replaces.
 *
 * The first start and a full restart take the configuration's plan.  A
 * graceful restart keeps the mode and the buckets per Listen in force, so
 * that no socket with queued connections is closed and no child is moved;
 * if the configuration asks for another count, the change waits for the
 * next full restart (change_deferred, reason PFB_WHY_KEPT).  Listens added
 * by a graceful restart get as many buckets as the others (cut down to fit
 * MaxRequestWorkers, reason PFB_WHY_CAPPED).
 *
 * Buckets are named by identity, never by position: a bucket whose
 * identity existed before keeps its socket, its counters and its old
 * children, wherever Listens were added, removed or reordered.  Each new
 * bucket's target is its share of StartServers, or as many children as
 * its identity had before when that is more (a graceful restart must not
 * shrink the pool under load); old children are replaced one for one up
 * to it as they leave.  Old buckets whose identity is gone are not
 * replaced, and their sockets close.
 *
 * @return the number of new buckets, or -1 on bad input
 */
int pf_plan_generation(const pf_plan_generation_in_t *in,
                       pf_plan_generation_out_t *out);

#endif /* PREFORK_PLAN_H */
