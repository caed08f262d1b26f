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
 * @file  prefork_respawn.h
 * @brief How the parent reads a child's end, and how fast it replaces
 *        children that keep dying at start, as pure functions.
 *
 * prefork.c reaps a process and asks what its end means
 * (pf_respawn_classify_end(): replaced, said, or the server stops); the
 * generation keeps one pf_respawn_t per bucket, notes each exit of its
 * children in it (pf_respawn_classify_exit(), pf_respawn_note_exit()) and
 * ends an episode when new children live; prefork.c asks it before each
 * fork (pf_respawn_may_fork()).  A room of its own because both of them
 * read it and neither owns it, and because it is time arithmetic over
 * plain values that the unit tests drive step by step: no system call, no
 * clock read (the caller passes the time), no log line.
 */

#ifndef PREFORK_RESPAWN_H
#define PREFORK_RESPAWN_H

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

#endif /* PREFORK_RESPAWN_H */
