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
 * @file  prefork_steering.h
 * @brief The face of steering/: ListenBucketSteering, which bucket of a
 *        Listen the kernel gives a new connection, through a program
 *        attached to the Listen's SO_REUSEPORT group; and the CPUs this
 *        process may use, which the bucket count is made from too.
 *        Nothing outside steering/ includes another of its headers (the
 *        unit tests aside).
 *
 * The bucket set (prefork_bucketset.c) owns the sockets; this unit reads
 * them from the generation (prefork_generation.h: a bucket of a Listen
 * with buckets to steer has one socket, bucket l * per_listen + k is
 * shard k of Listen l, and its layout changes whenever bucket numbers
 * come to name other sockets), and owns everything else steering needs for
 * the server's life: the socket map, the idle counts, the programs, the
 * CPU layout, and the one log line of each event.  It is called by:
 *
 *   prefork.c, before a build:  pf_steer_prepare (what the plan needs
 *                               of the host and of steering, handed to
 *                               the bucket set as data)
 *   prefork.c, each generation: pf_steer_attach
 *   each cycle:                 pf_steer_observe (the observe step),
 *                               pf_steer_cycle (an act: re-asserts the
 *                               programs and the socket map, corrects
 *                               idle counts from the observation)
 *   the guard:                  through pf_steer_guard_calls (whether
 *                               the programs guard the groups, refill
 *                               when a socket listens again, handover)
 *   a child reaped:             pf_steer_child_gone
 *   the child:                  pf_steer_child_init,
 *                               pf_steer_accept_begin/_end
 *
 * prefork.c alone calls it: the bucket set neither calls nor includes
 * anything of it but pf_steer_host_t, what it is handed.
 *
 * What a program decides is in prefork_steering_rules.h, which the
 * programs (prefork_steering.bpf.c) and the tests compile alike; the
 * kernel objects are made in prefork_steering_kernel.c.  A new mode is a
 * program there, its rule, and a row of this unit's table of modes: the
 * bucket set does not change.
 *
 * Children write the idle counts through their mapping, and may have
 * attached or detached programs on the socket they hold: the parent reads
 * counts back only through saturating arithmetic and bounds checks, and
 * puts its own programs and map entries back every cycle.
 */

#ifndef PREFORK_STEERING_H
#define PREFORK_STEERING_H

#include "apr_network_io.h"
#include "apr_pools.h"
#include "apr_time.h"
#include "httpd.h"

#include "prefork_generation.h"
#include "guard/prefork_sockguard.h"
#include "prefork_steering_rules.h"

typedef struct pf_steer_s pf_steer_t;

/** Makes the unit, once per server, in @a pool (which outlives
 *  generations). */
pf_steer_t *pf_steer_create(apr_pool_t *pool);

/**
 * Parent (root), while it plans the buckets, before any is opened: whether
 * idle or local steering can run here, by making idle's maps and loading
 * its program once, then closing them.  The plan relies on it
 * (pf_plan_buckets); hash needs no program and cpu falls back to hash, so
 * they are not probed.
 * @param why Set to what failed, when it did
 * @return APR_SUCCESS, or the refusal's status
 */
apr_status_t pf_steer_probe(int mode, char *why, apr_size_t why_len);

/**
 * Parent (root), before it forks a generation: reads the affinity mask,
 * fills the socket map from @a gen's buckets, loads the program of @a wanted
 * (pfb_steer_e) for every Listen and attaches it, replacing the previous
 * generation's atomically.  On any refusal it falls back to hash, with
 * one WARNING for the server's life.
 * @return the pfb_steer_e in force
 */
int pf_steer_attach(pf_steer_t *st, const pf_generation_t *gen,
                    int wanted, int cpu_affinity, apr_pool_t *p,
                    server_rec *s);

/**
 * Parent, once per maintenance cycle: attaches the generation's programs
 * again (or detaches any, where none is kept), puts every bucket's socket
 * back in the socket map where it is missing, and corrects drift in the
 * idle counts from @a obs.  Cheap: one system call per Listen, two per
 * bucket.
 */
void pf_steer_cycle(pf_steer_t *st, const pf_generation_t *gen,
                    const pf_observation_t *obs, server_rec *s);

/**
 * What the socket guard asks of steering, as calls into this unit (the
 * guard names nothing of it): whether the programs guard the reuseport
 * groups and hand a closing socket's queue over, putting a socket that
 * listens again back in the socket map at once (the connections steered
 * to its bucket do not wait for the next cycle), and the handover of a
 * replaced socket where no steering program is attached.
 */
void pf_steer_guard_calls(pf_steer_t *st, pf_guard_steering_t *out);

/** The pfb_steer_e in force. */
int pf_steer_active(const pf_steer_t *st);

/** Copies, for the cycle's observation, steering's figures per bucket of
 *  @a gen (only idle and local keep them: obs->steer_figures says). */
void pf_steer_observe(const pf_steer_t *st, const pf_generation_t *gen,
                      pf_observation_t *obs);

/** Parent: a child that was counted as waiting in bucket @a bucket, in
 *  the current layout, was reaped: its count goes with it. */
void pf_steer_child_gone(pf_steer_t *st, int bucket);

/**
 * Child, right after fork: closes the maps' and programs' descriptors (it
 * keeps only its mapping of the idle counts) and pins itself to the
 * bucket's CPUs when BucketCPUAffinity is on.
 */
void pf_steer_child_init(pf_steer_t *st, int bucket, int cpu_affinity,
                         server_rec *s);

/** Child of @a bucket, about to wait in accept(): marks @a waiting (its
 *  slot's mark), then counts itself idle, under idle or local steering. */
void pf_steer_accept_begin(pf_steer_t *st, int bucket,
                           volatile apr_int32_t *waiting);

/** Child of @a bucket, back from accept(): takes its idle count back when
 *  it has no connection (the program took it when it sent one), and
 *  clears the mark. */
void pf_steer_accept_end(pf_steer_t *st, int bucket,
                         volatile apr_int32_t *waiting, int got_connection);

/* ------------------------------------------------------------------ */
/* The CPUs this process may use (prefork_cpus.c), which the bucket     */
/* count is made from as well                                           */

/** What pf_cpus_probe() found. */
typedef struct {
    int online;     /**< online CPUs */
    int affinity;   /**< CPUs in our affinity mask and our cgroup's
                         cpuset, whichever is fewer; 0 if unknown */
    int quota;      /**< cgroup CPU quota in CPUs (v2 cpu.max, v1
                         cpu.cfs_quota_us), 0 if none or unknown */
    int usable;     /**< what bucket sizing counts: the online CPUs, cut
                         down to the affinity mask and to the quota where
                         those are known */
} pf_cpu_info_t;

/** Counts the online CPUs, the affinity mask and the cgroup limits. */
void pf_cpus_probe(pf_cpu_info_t *info);

/* ------------------------------------------------------------------ */
/* Before a generation is built                                        */

/** What a generation's plan needs to know of the host and of steering,
 *  found just before each build. */
typedef struct {
    pf_cpu_info_t cpus;         /**< the CPUs this process may use */
    /** Whether the mode asked for can run here (APR_SUCCESS), or the
     *  refusal's status (pf_steer_probe())... */
    apr_status_t usable;
    char why[256];              /**< ...and what failed, in words */
    int active;                 /**< the pfb_steer_e in force now */
} pf_steer_host_t;

/**
 * Parent (root), before each build: the usable CPUs (pf_cpus_probe()),
 * whether ListenBucketSteering @a mode can run (pf_steer_probe()) and the
 * steering in force, into @a out, for the bucket set to plan from.
 */
void pf_steer_prepare(const pf_steer_t *st, int mode, pf_steer_host_t *out);

#endif /* PREFORK_STEERING_H */
