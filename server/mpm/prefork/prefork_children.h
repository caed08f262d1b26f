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
 * @brief The parent's one record of its children, and the one writer of
 *        what readers see of them: what httpd's
 *        ap_reclaim_child_processes() and friends (server/mpm_unix.c) do
 *        from the scoreboard, done from memory no child can write.
 *
 * The scoreboard's parent fields and the bucket segment's slot records
 * are shared memory, so a child running hostile code could hide from the
 * reaper there (pid 0) or point the parent's signals at another process.
 * The parent finds, signals, reaps and counts its children from this
 * table only.  What readers see of a slot (process_score for mod_status,
 * pfb_slot_t for mod_bucket_status) is written from the table by one
 * function of this file, when a child is forked into the slot, told to
 * stop or reaped, and at every maintenance cycle: whatever a child wrote
 * there lasts a cycle at most, and nothing is read back.
 *
 * The parent also waits for its children here: SIGCHLD wakes it through
 * a pipe, so that an exit is never missed between a check and a sleep,
 * and children report ready once after child_init on a channel the
 * kernel vouches for (its socket calls are in prefork_children.c too),
 * read whenever the parent waits.
 *
 * httpd's types and APR only, no call into httpd: the unit tests drive it
 * with real processes.
 */

#ifndef PREFORK_CHILDREN_H
#define PREFORK_CHILDREN_H

#include "apr_pools.h"
#include "apr_thread_proc.h"
#include "apr_time.h"
#include "httpd.h"
#include "scoreboard.h"

#include "prefork_buckets.h"
#include "prefork_generation.h"
#include "guard/prefork_sockguard.h"

/** Everything the parent knows of the child in one slot. */
typedef struct {
    pid_t pid;                  /**< 0: the slot is free */
    ap_generation_t generation;
    /** The bucket identity it was forked for, fixed for its life: its
     *  record in the bucket set and the segment.  Its bucket now is that
     *  identity's, none once the identity is out of use. */
    int record;
    int stopping;               /**< told to finish and exit */
    apr_time_t started;         /**< forked at, by the parent's clock */
    int ready;                  /**< reported ready after child_init, the
                                     kernel vouching for its pid */
    /** What the parent saw of the child's accept counter at the last
     *  cycle, and since when it has not moved (from the fork): how long
     *  the child has gone without a connection. */
    apr_uint64_t accepted_seen;
    apr_time_t quiet_since;
    /** Since when the child's lingering mark has been set, as the cycles
     *  saw it (0: not set at the last cycle). */
    apr_time_t lingering_since;
} pf_child_t;

/** How long a child's word that it lingers is taken: httpd's bound on a
 *  lingering close (a read of at most 30 s, and 2 s of quiet), after which
 *  a child still saying so is idle like any other. */
#define PF_LINGERING_HINT_BOUND apr_time_from_sec(32)

/**
 * Whether a child's lingering mark still counts: set (@a marked) and set
 * at every cycle since @a since, no longer than PF_LINGERING_HINT_BOUND
 * before @a now.  A child could set it in every slot; past the bound it is
 * a hint no more.  Pure.
 */
int pf_children_lingering_counts(int marked, apr_time_t since,
                                 apr_time_t now);

typedef struct pf_children_s {
    pf_child_t *slot;           /**< num_slots entries */
    int num_slots;              /**< ServerLimit, fixed */
    int used;                   /**< highest slot ever used + 1 */
    /* Where the slots are published: the scoreboard's parent records and
     * the segment's slot records, num_slots each; NULL between
     * generations (the scoreboard goes with the configuration pool). */
    process_score *scoreboard;
    pfb_slot_t *segment;
    /* For the server's life: the pipe SIGCHLD wakes the parent through,
     * and the channel children report ready on ([0] the parent's ends);
     * -1 where not open. */
    int wake_pipe[2];
    int ready[2];
} pf_children_t;

/** How a process left, as the wait for it said. */
typedef struct pf_child_exit_s {
    apr_proc_t proc;            /**< its pid */
    apr_exit_why_e why;
    int status;
    int waited;                 /**< 0: it was gone before the wait (no
                                     status to report) */
    /** The slot it held, free now, or -1: none of our children (a piped
     *  logger, a module's process...) */
    int slot;
    pf_child_t child;           /**< what the slot held */
} pf_child_exit_t;

/** Called for each child reaped, once its slot is free. */
typedef void pf_child_gone_fn(void *baton, const pf_child_exit_t *how);

/** Called when a reclaim sends a signal to the @a live children left
 *  (SIGTERM or SIGKILL), and with @a sig 0 when it gives up on them. */
typedef void pf_reclaim_step_fn(void *baton, int live, int sig);

/** The table for @a num_slots slots (ServerLimit), from @a p. */
pf_children_t *pf_children_create(apr_pool_t *p, int num_slots);

/**
 * Where the slots are published from now on, until @a p is cleared (the
 * scoreboard's parent records @a parents, the segment's slot records
 * @a segment), and publishes every slot there.  With @a fresh (a
 * scoreboard made anew) the slots in use shrink to those that still hold
 * a child.
 */
void pf_children_publish_to(pf_children_t *c, process_score *parents,
                            pfb_slot_t *segment, int fresh, apr_pool_t *p);

/** The first free slot below @a limit (MaxRequestWorkers), or -1. */
int pf_children_free_slot(const pf_children_t *c, int limit);

/** Before a fork into free @a slot: the counters its child will write
 *  start from zero. */
void pf_children_forking(pf_children_t *c, int slot);

/** Notes the child forked into @a slot for the bucket identity
 *  @a record. */
void pf_children_started(pf_children_t *c, int slot, pid_t pid,
                         ap_generation_t generation, int record);

/** Sends AP_SIG_GRACEFUL to the slot's child, once.  @return 1 if sent */
int pf_children_tell_to_stop(pf_children_t *c, int slot);

/** Children alive. */
int pf_children_live(const pf_children_t *c);

/**
 * A cycle's act: tells the idle children the decision picks
 * (gen->obs.action) to finish and exit, in each bucket those that have
 * gone longest without a connection first (pf_children_coldest_idle():
 * the pool that serves is the one that stays warm), and of equals the
 * highest slots (the pool shrinks back towards low slot numbers); never a
 * child that still lingers on closed connections.  gen->obs follows, for
 * the publish.
 */
void pf_children_retire(pf_children_t *c, pf_generation_t *gen);

/**
 * What the socket guard asks of this table, as calls (the guard names
 * nothing of this room): whether a pid is a live child of ours (of any
 * generation), which holds the sockets by right; SIGCONT to every live
 * child, since a sibling may have had them stopped (SIGSTOP through a
 * shared socket's owner and signal), which nothing else would undo; and
 * telling the children of a bucket whose socket is being replaced to stop
 * (AP_SIG_GRACEFUL), since the old socket must not keep a child.
 */
void pf_children_guard_calls(pf_children_t *c, pf_guard_children_t *out);

/** Children forked for the bucket identity @a record: of generation
 *  @a gen and not told to stop (*current), and of older generations
 *  (*old). */
void pf_children_count_record(const pf_children_t *c, int record,
                              ap_generation_t gen, int *current, int *old);

/**
 * What the table says of the bucket identities before a build, into the
 * caller's arrays: per identity record (0 to @a num_records - 1), the
 * live children forked for it, of any generation (@a held); per bucket of
 * @a gen, the live ones not told to stop (@a in_bucket, gen->num_buckets
 * entries).  A record out of range counts nowhere.
 */
void pf_children_census(const pf_children_t *c, const pf_generation_t *gen,
                        int num_records, int *held, int *in_bucket);

/** Children of generation @a number not told to stop, per bucket of
 *  @a gen, into @a live.  @return the slots holding a child */
int pf_children_count_live(const pf_children_t *c, const pf_generation_t *gen,
                           ap_generation_t number, int *live);

/**
 * A maintenance cycle's look at the children (prefork.c's observe()),
 * into @a obs, per bucket of @a gen: the current generation's children
 * (@a number) by state, as each wrote it in the scoreboard @a servers
 * (only ever compared with constants), and which of them are idle (the
 * idle list leaves out those whose lingering mark is set: not for
 * retirement); those told to stop and those of older generations; the
 * newest that has lived a second; and what each child wrote in its
 * segment slot, read once: its accept counter, summed (saturating) and
 * compared with the one the child's record holds from the cycle before
 * (the record notes when it last moved), its waiting mark, counted where
 * it was forked in the numbering in force, and its lingering mark.
 * obs->queued is read already.
 */
void pf_children_observe(pf_children_t *c, const pf_generation_t *gen,
                         ap_generation_t number, worker_score **servers,
                         pf_observation_t *obs);

/**
 * Of bucket @a b's idle children in @a obs not told to stop, the one that
 * has gone longest without a connection (its counter unmoved since the
 * earliest cycle; of equals, the highest slot), or -1: whom a retirement
 * picks, so that the children that serve stay and those that stay idle
 * go.  Pure.
 */
int pf_children_coldest_idle(const pf_children_t *c,
                             const pf_observation_t *obs, int b);

/** Tells to stop the children of generations other than @a number (every
 *  child with @a everyone) not told already.  @return how many */
int pf_children_stop(pf_children_t *c, ap_generation_t number, int everyone);

/** Reaps the children that have exited, without waiting; @a gone runs for
 *  each. */
void pf_children_reap(pf_children_t *c, pf_child_gone_fn *gone, void *baton);

/**
 * Stops every child: SIGTERM when @a terminate (else they were told
 * already), SIGTERM again at 3, 5 and 7 seconds, SIGKILL at 9, and gives
 * up at 10, as httpd does, with @a step called at each signal and at the
 * end; but those times count from the last child that exited, so a pool
 * that leaves slowly yet steadily (a loaded host) is not taken for a stuck
 * one, up to a minute in all.
 */
void pf_children_reclaim(pf_children_t *c, int terminate,
                         pf_child_gone_fn *gone, pf_reclaim_step_fn *step,
                         void *baton);

/** Publishes every slot in use again: once per maintenance cycle. */
void pf_children_publish(pf_children_t *c);

/**
 * Parent, at every (re)start: SIGCHLD wakes pf_children_wait() from now
 * on, until @a p is cleared (the pipe is made once, for the server's
 * life); and the channel children report ready on is opened, once, with
 * room for twice ServerLimit reports: at most ServerLimit children start
 * at once, and children that left before the parent read their reports
 * hold room until it does.
 * @param wanted Set to the room asked for
 * @param room Set to the room the kernel gave when the channel was opened
 *        now (fewer where the parent may not raise socket buffers past the
 *        system's maximum), -1 when it was open already
 * @return APR_SUCCESS, or why the channel could not be opened (a child's
 *         APEXIT_CHILDFATAL then stops the server, as in httpd)
 */
apr_status_t pf_children_open(pf_children_t *c, apr_pool_t *p, int *wanted,
                              int *room);

/**
 * ap_wait_or_timeout() without its lost wake-up: reaps one exited process
 * of ours if there is one (a child, a piped logger...), else waits up to
 * @a wait_ms for the next exit, or any signal.  Reads the ready reports
 * waiting meanwhile (before the exit's, so that a report sent just before
 * the child died counts), and frees a reaped child's slot.
 * @param how Set when a process was reaped
 * @return 1 when one was, else 0
 */
int pf_children_wait(pf_children_t *c, int wait_ms, pf_child_exit_t *how,
                     apr_pool_t *p);

/**
 * A process that is not the parent: closes the parent's ends of the
 * channels (a child has no use for its wake-up pipe, nor for its end of
 * the ready channel, where it could read other children's reports) and,
 * with @a all (a process that is no child), the children's end too.
 */
void pf_children_close_channels(pf_children_t *c, int all);

/**
 * Child, once, after child_init: from now on an APEXIT_CHILDFATAL is a
 * module or a script asking to stop the server, not a child that cannot
 * start.  The end is closed at once, so that nothing the child runs later
 * can report anything.
 * @return APR_SUCCESS (also with no channel), or why no report went
 *         within PF_READY_PATIENCE
 */
apr_status_t pf_children_report_ready(pf_children_t *c);

/** How long a child waits for room for its ready report before it gives
 *  up (pf_children_report_ready()). */
#define PF_READY_PATIENCE apr_time_from_sec(10)

#endif /* PREFORK_CHILDREN_H */
