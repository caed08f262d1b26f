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
 * @file  prefork_maintenance.h
 * @brief The parent's pure decisions about forking: idle-server
 *        maintenance per bucket (each bucket's share of StartServers and
 *        the spare-server limits, what one cycle forks and retires), and
 *        how a child's end is read and how fast a bucket whose children
 *        die at start gets another.
 *
 * The generation (prefork_generation.c) hands one cycle's observation to
 * pf_maintenance_decide() and acts on its answer; prefork.c sets the
 * limits (pf_maintenance_limits_init()), starts each bucket with its
 * share of StartServers and asks whether a child's exit needs a fork at
 * once (pf_maintenance_respawn_now()); the bucket set's plan (the count,
 * each bucket's target after a restart) takes the same shares and the
 * same rule of which steering shares the spare pool.  Those are static
 * inline here, so that there is one definition and no call between the
 * folders.
 *
 * prefork.c reaps a process and asks what its end means
 * (pf_respawn_classify_end(): replaced, said, or the server stops); the
 * generation keeps one pf_respawn_t per bucket, notes each exit of its
 * children in it (pf_respawn_classify_exit(), pf_respawn_note_exit()) and
 * ends an episode when new children live; prefork.c asks it before each
 * fork (pf_respawn_may_fork()).
 *
 * Time arithmetic and counting over plain values, which the unit tests
 * drive step by step: no system call, no clock read (the caller passes
 * the time), no allocation, no log line.  The scale model (bench/sim/)
 * loads prefork_maintenance.c itself, built into build/libpfpolicy.so,
 * through ctypes: it must stay plain C over these types, with nothing of
 * httpd's.
 */

#ifndef PREFORK_MAINTENANCE_H
#define PREFORK_MAINTENANCE_H

#include "apr.h"

#include "prefork_buckets.h"

/** Most children the server forks in one maintenance cycle: the ramp of
 *  1, 2, 4 ... stops here.  A bucket with no child gets one whatever the
 *  ramp, so it never limits how many buckets there can be. */
#define PF_MAX_SPAWN_RATE 32

/**
 * Whether a steering mode sends a connection to another bucket when its
 * own has no idle child (idle, local), so that the buckets share the spare
 * pool; hash and cpu do not.
 * @param steering A pfb_steer_e
 */
static APR_INLINE int pf_maintenance_shared_pool(int steering)
{
    return steering == PFB_STEER_IDLE || steering == PFB_STEER_LOCAL;
}

/**
 * Bucket @a b's share of a server-wide @a total split over
 * @a num_buckets: the quotient, plus one for the first
 * (total % num_buckets) buckets, so the shares add up to the total.
 */
static APR_INLINE int pf_maintenance_share(int total, int num_buckets, int b)
{
    if (num_buckets < 1 || total < 0) {
        return 0;
    }
    return total / num_buckets + (b < total % num_buckets ? 1 : 0);
}

/** Children bucket @a b starts with: its share of StartServers, at
 *  least 1. */
static APR_INLINE int pf_maintenance_bucket_start(int start_servers,
                                                  int num_buckets, int b)
{
    int share = pf_maintenance_share(start_servers, num_buckets, b);

    return share < 1 ? 1 : share;
}

/** What the parent saw in one bucket this cycle. */
typedef struct {
    int children;   /**< current-generation children not told to stop */
    int idle;       /**< of those, ready to accept or starting up */
    int queued;     /**< connections waiting in the bucket's accept queue */
} pf_bucket_state_t;

/** What the parent should do in one bucket this cycle. */
typedef struct {
    int spawn;      /**< children to fork into the bucket */
    int kill;       /**< idle children to retire (1 for a surplus, more
                         when the bucket also gives slots to starved ones) */
} pf_bucket_action_t;

typedef struct {
    int num_buckets;
    int min_spare_servers;  /**< MinSpareServers, server-wide */
    int max_spare_servers;  /**< MaxSpareServers, server-wide */
    int max_workers;        /**< MaxRequestWorkers */
    int max_spawn_rate;     /**< per cycle, server-wide (PF_MAX_SPAWN_RATE) */
    int shared_pool;        /**< 1: Min/MaxSpareServers bound the idle
                                 children of all buckets together (idle and
                                 local steering route around a bucket with
                                 no idle child); 0: each bucket keeps its
                                 share (hash, cpu) */
} pf_limits_t;

/** The limits for @a num_buckets buckets from the server-wide directives,
 *  with the spawn ramp's cap (PF_MAX_SPAWN_RATE), under @a steering (the
 *  pfb_steer_e in force). */
void pf_maintenance_limits_init(pf_limits_t *lim, int num_buckets,
                                int min_spare_servers, int max_spare_servers,
                                int max_workers, int steering);

typedef struct {
    int spawned;            /**< sum of spawn over buckets */
    int killed;             /**< sum of kill over buckets */
    int wanted;             /**< children wanted before the global cap */
    int at_max_workers;     /**< 1 if MaxRequestWorkers stopped a spawn */
    int fast_ramp;          /**< the ramp (children a cycle) when it has
                                 reached 8 or more, else 0 */
    int rebalanced;         /**< idle children retired to free a slot */
} pf_decision_summary_t;

/** Scratch space for pf_maintenance_decide(): one per bucket. */
typedef struct {
    long long priority;
    int bucket;
    int want;
} pf_rank_t;

/**
 * One cycle of idle-server maintenance, per bucket, with server-wide
 * limits so that buckets keep the pool one shared queue would need.
 *
 * Each bucket wants enough children to bring its idle count up to its
 * share of MinSpareServers (at least 1, so a bucket always has a child to
 * accept), and, when none of its children is idle, one for each connection
 * waiting in its accept queue; but queues add children only up to the
 * server-wide shortage (connections queued beyond every idle child of the
 * server), so momentary queues in some buckets beside idle children in
 * others do not grow the pool.  Buckets draw in priority order (no child
 * at all, then the deepest queues, then the largest idle deficit) on one
 * server-wide ramp, which doubles every cycle the server still wants more
 * and falls back to 1 when it does not; a bucket with no child always gets
 * one.  MaxRequestWorkers caps the sum.
 *
 * Killing: a bucket with more idle children than its share of
 * MaxSpareServers and nothing to spawn retires one of them; and while the
 * server spawns nothing and holds more idle children than MaxSpareServers
 * (the per-bucket shares add up to more with many buckets), one more goes
 * from the bucket with the most idle children above its minimum.
 *
 * With a shared pool (lim->shared_pool: idle and local steering, which
 * send a connection past a bucket with no idle child), a bucket has no
 * share: MinSpareServers and MaxSpareServers bound the idle children of all
 * buckets together, as httpd's prefork bounds its one pool.  The children
 * the server is short go, one at a time, to the bucket with the fewest idle
 * children (then the fewest children); the one idle child retired a cycle
 * above MaxSpareServers comes from the bucket with the most.  Every bucket
 * still keeps one child, so with more buckets than MaxSpareServers the
 * idle children of a quiet server number one per bucket.
 *
 * At MaxRequestWorkers, a bucket with connections queued, no idle child
 * and fewer children than its share of MaxRequestWorkers cannot get a
 * child: its connections would wait while other buckets sit idle.  For
 * each such bucket (most starved first) one idle child of a bucket holding
 * more than its share is retired, so the slot comes free for the next
 * cycle.  A donor also has nothing queued and at least two children, so no
 * bucket is ever left without one.
 *
 * @param lim Limits in force
 * @param state One entry per bucket
 * @param occupied_slots Scoreboard slots in use, all generations included
 * @param spawn_rate The server's ramp, carried between cycles (start at 1)
 * @param action One entry per bucket, written
 * @param scratch One entry per bucket, overwritten
 * @param summary Written
 */
void pf_maintenance_decide(const pf_limits_t *lim,
                           const pf_bucket_state_t *state, int occupied_slots,
                           int *spawn_rate, pf_bucket_action_t *action,
                           pf_rank_t *scratch,
                           pf_decision_summary_t *summary);

/**
 * Counts an older generation's children in the buckets that carry their
 * identity: each will be replaced in its bucket when it leaves, so for
 * maintenance it is a child on its way, neither a gap to fill (which would
 * fork a second child for the same work) nor a busy child.  It counts as
 * idle.
 * @param old_children Per bucket, old-generation children of its identity
 */
void pf_maintenance_count_old_generation(pf_bucket_state_t *state,
                                         const int *old_children,
                                         int num_buckets);

/**
 * Whether a child that just exited left its bucket with no child to
 * accept, so that the parent must fork one now rather than at the next
 * cycle.
 */
int pf_maintenance_respawn_now(int children_left_in_bucket,
                               int shutting_down, int occupied_slots,
                               int max_workers);

/* ------------------------------------------------------------------ */
/* A child's end and respawn pacing                                    */


/** A child that leaves younger than this, not told to stop, died at
 *  start (microseconds). */
#define PF_RESPAWN_YOUNG_US 1000000LL
/** Deaths at start in a row that a bucket's replacements forgive (an
 *  admin's kill, the OOM killer) before they wait for maintenance; also
 *  the most out-of-cycle replacements a bucket gets in a second. */
#define PF_RESPAWN_FORGIVEN 3
/** The longest wait between forks into a bucket whose children keep
 *  dying at start (microseconds). */
#define PF_RESPAWN_MAX_DELAY_US 32000000LL

/** What a process's exit means to the parent. */
typedef enum {
    PF_END_LEFT = 0,            /**< a child of ours left: replaced as
                                     usual */
    PF_END_KILLED,              /**< a child of ours killed from outside
                                     (SIGKILL or SIGTERM it was not sent):
                                     replaced, and said */
    PF_END_FATAL_STARTED,       /**< a child of ours that had reported
                                     ready exited with APEXIT_CHILDFATAL:
                                     a module or a script asked, not a
                                     reason to stop serving: replaced, and
                                     said */
    PF_END_FATAL,               /**< APEXIT_CHILDFATAL from a process that
                                     never started: more would fail the
                                     same way, so the server stops, as
                                     httpd's does */
    PF_END_LOST                 /**< none of our children: a piped logger,
                                     a module's process, or one long lost */
} pf_child_end_e;

/**
 * Classifies a process's exit from what the parent knows: whether it was
 * one of its children (@a ours), whether that child had reported ready
 * and been told to stop, whether it exited with APEXIT_CHILDFATAL
 * (@a fatal_exit) or was killed by SIGKILL or SIGTERM (@a killed).
 */
pf_child_end_e pf_respawn_classify_end(int ours, int ready, int told_to_stop,
                                       int fatal_exit, int killed);

/** How a child left, for respawning. */
typedef enum {
    PF_EXIT_LIVED = 0,          /**< lived PF_RESPAWN_YOUNG_US or more */
    PF_EXIT_STOPPED,            /**< told to stop (a restart, a surplus) */
    PF_EXIT_RECYCLED,           /**< young, but exited cleanly where
                                     MaxConnectionsPerChild retires
                                     children: recycling under load */
    PF_EXIT_EARLY               /**< died at start: killed, crashed, or an
                                     exit nothing asked for */
} pf_exit_kind_e;

/**
 * Classifies a child's exit from what the parent knows itself: how long
 * the child lived by the parent's clock, whether the parent told it to
 * stop, and how it ended.  The exit status is the child's to choose, so a
 * clean exit only counts as recycling where MaxConnectionsPerChild makes
 * recycling possible.
 * @param lifetime_us From fork to reap
 * @param exited_cleanly Exited with status 0 (not killed by a signal)
 * @param recycling MaxConnectionsPerChild is above 0
 */
pf_exit_kind_e pf_respawn_classify_exit(long long lifetime_us,
                                        int told_to_stop, int exited_cleanly,
                                        int recycling);

/** One bucket's respawn pacing.  All zero: a bucket whose children
 *  live. */
typedef struct {
    int early_deaths;           /**< deaths at start in a row */
    long long hold_until;       /**< no fork into the bucket before */
    long long since;            /**< when those deaths began */
    int out_of_cycle;           /**< out-of-cycle forks in the window */
    long long window_start;     /**< that window's start */
} pf_respawn_t;

/** Whether the bucket's children keep dying at start: it is paced, its
 *  replacements wait for maintenance with back-off. */
int pf_respawn_paced(const pf_respawn_t *r);

/**
 * Notes a child's exit in its bucket's pacing.  A death at start adds to
 * the bucket's deaths in a row and, past the forgiven ones, holds its next
 * fork back by pf_respawn_delay(); a child that lived ends them (see
 * pf_respawn_note_alive); stopped and recycled children change nothing.
 * @param child_started When the child was forked
 * @return 1 when this exit starts an episode (the bucket becomes paced)
 */
int pf_respawn_note_exit(pf_respawn_t *r, pf_exit_kind_e kind,
                         long long child_started, long long now);

/**
 * A child of the bucket, forked at @a child_started, is alive at @a now.
 * Once it has lived PF_RESPAWN_YOUNG_US the deaths in a row are over, but
 * only for a child forked since they began: one that lived through them
 * (a hostile child killing its siblings, say) proves nothing about the
 * new ones.
 * @return 1 if this ends an episode
 */
int pf_respawn_note_alive(pf_respawn_t *r, long long child_started,
                          long long now);

/**
 * The bucket has a live child and is paced: once a whole delay has passed
 * since it was free to fork again with no death at start (it needed no
 * child, or the ones it got lived), the deaths in a row are over.
 * @return 1 if this ends an episode
 */
int pf_respawn_note_quiet(pf_respawn_t *r, long long now);

/**
 * Whether a child may be forked into the bucket now.  Never while the
 * bucket is held back.  Out of cycle (a replacement in the parent's
 * wake-up on an exit, rather than at maintenance): never while the bucket
 * is paced, and at most PF_RESPAWN_FORGIVEN in any second, so that
 * children that keep leaving at once cannot make the parent fork in a
 * loop whatever their exit status says.
 */
int pf_respawn_may_fork(const pf_respawn_t *r, int out_of_cycle,
                        long long now);

/** Notes a fork into the bucket: counts it in the out-of-cycle window,
 *  and while the bucket is paced holds the next fork back by the current
 *  delay, so a paced bucket gets one child per delay. */
void pf_respawn_note_fork(pf_respawn_t *r, int out_of_cycle, long long now);

#endif /* PREFORK_MAINTENANCE_H */
