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
 * target and the per-bucket state maintenance keeps for the generation
 * (pf_generation_start()).  Everything else reads it; nothing keeps a
 * copy.  A maintenance cycle's one look at the buckets' queues
 * (pf_generation_observe_queues()), the children and steering, which
 * prefork.c assembles, goes into it too, and the cycle decides from that
 * look alone (pf_generation_decide()); the acts on the generation's own
 * state (respawn pacing) and their log lines are here as well; the
 * retirements are the children's table's (pf_children_retire()).
 */

#ifndef PREFORK_GENERATION_H
#define PREFORK_GENERATION_H

#include "apr_network_io.h"
#include "apr_proc_mutex.h"
#include "apr_time.h"
#include "httpd.h"
#include "ap_listen.h"
#include "scoreboard.h"

#include "prefork_maintenance.h"

/** How the server (re)starts: how a generation is made. */
typedef enum {
    PF_START_FIRST = 0,         /**< the first start */
    PF_RESTART_GRACEFUL = 1,    /**< SIGUSR1, apachectl graceful */
    PF_RESTART_FULL = 2         /**< SIGHUP, apachectl restart */
} pf_start_e;

/** The bucket count in force: the mode, the buckets per Listen and why
 *  (the bucket set plans it). */
typedef struct {
    int mode;               /**< pfb_mode_e */
    int reason;             /**< pfb_reason_e */
    int buckets_per_listen; /**< SO_REUSEPORT sockets per Listen */
    int num_buckets;        /**< buckets in all */
} pf_bucket_plan_t;

/** A bucket's identity, which stays with it across restarts: its Listen's
 *  address and its shard.  In single mode the one bucket holds every
 *  Listen and its listener is NULL. */
typedef struct {
    const char *listener;
    int shard;
} pf_identity_t;

/** One bucket of the current generation. */
typedef struct {
    ap_listen_rec *listeners;   /**< its sockets, a private list */
    int num_listeners;
    apr_proc_mutex_t *mutex;    /**< only when a child polls several */
    const char *address;        /**< first listener, for logs */
} pf_bucket_t;

/**
 * What one maintenance cycle saw, read once at its start (the observe
 * step, prefork.c's observe()): everything the cycle decides on, acts on
 * and publishes.  Nothing is read again in the cycle; the acts keep it
 * true as they go (a child told to stop, a child forked), so the publish
 * step writes what it holds.  Arrays have an entry per bucket unless said
 * otherwise.
 */
typedef struct {
    apr_time_t when;            /**< when it was read */
    int occupied;               /**< slots holding a child, all generations */
    /** Current-generation children not told to stop (.children), of
     *  those the idle and starting ones (.idle) and the connections
     *  queued (.queued): what the decision reads. */
    pf_bucket_state_t *state;
    int *idle;                  /**< ready to accept */
    int *busy;                  /**< serving a connection */
    int *starting;              /**< forked, not yet accepting */
    int *stopping;              /**< told to stop, or of an older
                                     generation */
    int *old_generation;        /**< of older generations */
    /** Per bucket, the first slot of its idle children that do not
     *  linger, highest slot first, and per slot the next one of the same
     *  bucket (-1: none): whom a retirement picks from. */
    int *idle_head;
    int *idle_next;
    /** When the newest current child of the bucket that has lived a
     *  second was forked (0: none): whether deaths at start are over. */
    apr_time_t *newest_lived;
    int *queued;                /**< connections in its accept queues */
    int *backlog;               /**< the queues' limits */
    /** Per socket, the buckets' sockets in order: its queue's limit. */
    int *socket_backlog;
    /** What children wrote, in slots the table says are theirs: live
     *  children marked waiting in accept() in the numbering in force... */
    int *waiting;
    /** ...and the live children's accept counters, summed (saturating). */
    apr_uint64_t *accepted;
    /** Steering's figures, read beside the children's states: whether it
     *  keeps any (idle and local steering), and per bucket its idle count
     *  and the connections it kept and moved. */
    int steer_figures;
    apr_int64_t *steer_idle;
    apr_uint64_t *steer_kept;
    apr_uint64_t *steer_moved;
    /** The decision's input: .state with the older generations' children
     *  counted as idle ones on their way
     *  (pf_maintenance_count_old_generation())... */
    pf_bucket_state_t *counted;
    /** ...and its output: per bucket, what to do, and the order of
     *  priority. */
    pf_bucket_action_t *action;
    pf_rank_t *scratch;
} pf_observation_t;

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
    /** The limits every maintenance cycle of the generation decides
     *  within, derived once, when steering has attached (the directives
     *  and the steering in force, which changes only at an attach). */
    pf_limits_t limits;
    pf_observation_t obs;       /**< the maintenance cycle's */
    /** Per bucket, scratch for counts between cycles. */
    int *live;
} pf_generation_t;

struct pf_children_s;           /* prefork_children.h */
struct pf_steer_s;              /* prefork_steering.h */
struct pf_child_exit_s;         /* prefork_children.h */

/**
 * At a (re)start, once the generation's buckets are made: each bucket's
 * @a target (pf_plan_generation()), respawn pacing started afresh (a
 * restart is the admin's), and room, from @a p, for what a maintenance
 * cycle observes with @a num_slots slots (ServerLimit).
 */
void pf_generation_start(pf_generation_t *gen, int *target, int num_slots,
                         apr_pool_t *p);

/**
 * The observe step of a maintenance cycle begins here, into gen->obs:
 * each bucket socket's accept queue and its limit (TCP_INFO, once per
 * socket), and the time of the look.  prefork.c then adds the children
 * (pf_children_observe()) and, right after them, steering's figures
 * (pf_steer_observe()).
 */
void pf_generation_observe_queues(pf_generation_t *gen);

/** Connections waiting in every accept queue of the generation now. */
int pf_generation_queued(const pf_generation_t *gen);

/**
 * A child of generation @a number left bucket @a b (-1: none) as @a how
 * says: a child of the generation in force counts in its bucket's respawn
 * pacing (pf_respawn_note_exit()), and the first bucket to become paced
 * says so in the log, once until pf_generation_end_pacing() closes the
 * episode.
 */
void pf_generation_note_exit(pf_generation_t *gen,
                             const struct pf_child_exit_s *how, int b,
                             ap_generation_t number, server_rec *s);

/**
 * A cycle's decision, from gen->obs alone: each bucket's spawns and
 * retirements into obs->action, in priority order in obs->scratch
 * (pf_maintenance_decide() within gen->limits, with the older
 * generations' children counted as idle ones on their way), the server's
 * ramp
 * @a spawn_rate carried from cycle to cycle.  Says at debug level when
 * idle children are retired to free slots for starved buckets.
 */
void pf_generation_decide(pf_generation_t *gen, int *spawn_rate,
                          pf_decision_summary_t *summary, server_rec *s);


/**
 * What the decision ran into, said once: MaxRequestWorkers reached (once
 * until it is not, @a reported keeping that between cycles; not while
 * children of a restart or a retirement hold slots), and a fast ramp.
 */
void pf_generation_log_limits(const pf_generation_t *gen,
                              const pf_decision_summary_t *summary,
                              int *reported, server_rec *s);

/**
 * A cycle's act on the pacing, from gen->obs: a paced bucket whose newest
 * children live a second, or where nothing died at start for a whole
 * delay, is paced no more; once no bucket is, the episode's closing line.
 */
void pf_generation_end_pacing(pf_generation_t *gen, server_rec *s);

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
