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

/*
 * Idle-server maintenance, per bucket, as one pure decision: from what the
 * parent saw in each bucket this cycle (children, idle ones, queued
 * connections), the children to fork into each and the idle ones to retire,
 * within server-wide limits, so that many buckets keep the pool that one
 * shared queue would need rather than a pool per bucket.  The spare-server
 * limits are shared among the buckets (hash and cpu steering) or bound them
 * all together (idle and local steering, which route around a bucket with
 * no idle child); one ramp serves the whole server; at MaxRequestWorkers
 * idle children of buckets above their share make room for starved
 * ones.  Then, below, how a child's end is read and how fast its bucket
 * gets another (respawn pacing): the other half of the parent's decision
 * to fork.  No system call, no httpd global, no allocation, no log line:
 * the callers (prefork.c, prefork_generation.c) gather the cycle's
 * observation and the time, act on the answers and log.  A room of its
 * own because the scale model (bench/sim/bucketsim.py) loads this very
 * code, built into build/libpfpolicy.so, through ctypes, and the unit
 * tests and the model check the maintenance decision against one table
 * of cases (test/unit/maintenance_cases.txt).
 */

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "prefork_maintenance.h"

/* Bucket b's MinSpareServers: its share, but at least 1, so every bucket
 * always has an idle child to accept its connections. */
static int pf_bucket_min_spare(int min_spare_servers, int num_buckets, int b)
{
    int share = pf_maintenance_share(min_spare_servers, num_buckets, b);

    return share < 1 ? 1 : share;
}

/* Bucket b's MaxSpareServers: its share, but at least its min + 1. */
static int pf_bucket_max_spare(int min_spare_servers, int max_spare_servers,
                               int num_buckets, int b)
{
    int min = pf_bucket_min_spare(min_spare_servers, num_buckets, b);
    int share = pf_maintenance_share(max_spare_servers, num_buckets, b);

    return share < min + 1 ? min + 1 : share;
}

void pf_maintenance_limits_init(pf_limits_t *lim, int num_buckets,
                                int min_spare_servers, int max_spare_servers,
                                int max_workers, int steering)
{
    lim->num_buckets = num_buckets;
    lim->min_spare_servers = min_spare_servers;
    lim->max_spare_servers = max_spare_servers;
    lim->max_workers = max_workers;
    lim->max_spawn_rate = PF_MAX_SPAWN_RATE;
    lim->shared_pool = num_buckets > 1 && pf_maintenance_shared_pool(steering);
}

/* Bucket b's own minimum of idle children in this cycle: none in a shared
 * pool, where steering routes around it, else its share of
 * MinSpareServers. */
static int own_min_spare(const pf_limits_t *lim, int b)
{
    if (lim->shared_pool) {
        return 0;
    }
    return pf_bucket_min_spare(lim->min_spare_servers, lim->num_buckets, b);
}

/* The bucket that most needs one more idle child in a shared pool: the
 * fewest idle children counting this cycle's spawns, then the fewest
 * children, then the lowest number. */
static int neediest_bucket(const pf_limits_t *lim,
                           const pf_bucket_state_t *state,
                           const pf_bucket_action_t *action)
{
    int b, best = 0;
    long long idle, best_idle = 0, children, best_children = 0;

    for (b = 0; b < lim->num_buckets; b++) {
        idle = (long long)state[b].idle + action[b].spawn;
        children = (long long)state[b].children + action[b].spawn;
        if (b == 0 || idle < best_idle
            || (idle == best_idle && children < best_children)) {
            best = b;
            best_idle = idle;
            best_children = children;
        }
    }
    return best;
}

static int compare_rank(const void *a, const void *b)
{
    const pf_rank_t *ra = a;
    const pf_rank_t *rb = b;

    if (ra->priority != rb->priority) {
        return ra->priority > rb->priority ? -1 : 1;
    }
    /* Equal priority: lower bucket first, so the order is stable. */
    return ra->bucket - rb->bucket;
}

/* How badly a bucket needs children: a bucket with none outranks any queue,
 * a queued connection outranks any idle deficit. */
static long long bucket_priority(const pf_bucket_state_t *st, int deficit)
{
    long long priority = deficit > 0 ? deficit : 0;

    if (st->queued > 0) {
        priority += (long long)st->queued << 20;
    }
    if (st->children == 0) {
        priority += 1LL << 52;
    }
    return priority;
}

/* The bucket most able to give up an idle child, or -1: one holding more
 * than its share of MaxRequestWorkers, with an idle child, nothing queued
 * and at least two children. */
static int find_donor(const pf_limits_t *lim, const pf_bucket_state_t *state,
                      const pf_bucket_action_t *action)
{
    int b, best = -1;

    for (b = 0; b < lim->num_buckets; b++) {
        const pf_bucket_state_t *st = &state[b];
        int keeps = st->children - action[b].kill;
        int share = pf_maintenance_share(lim->max_workers, lim->num_buckets,
                                         b);

        if (st->queued > 0 || st->idle - action[b].kill < 1 || keeps < 2
            || keeps <= share || action[b].spawn > 0) {
            continue;
        }
        if (best < 0 || st->idle > state[best].idle) {
            best = b;
        }
    }
    return best;
}

/* Moves slots only from buckets above their share of MaxRequestWorkers to
 * starved buckets below it.  Without that restoring force, following
 * momentary queues under evenly hashed load walks children at random
 * between buckets, leaving some persistently short (the scale model in
 * bench/sim showed p99 tripled at 16 buckets). */
static void rebalance_at_limit(const pf_limits_t *lim,
                               const pf_bucket_state_t *state,
                               pf_bucket_action_t *action,
                               const pf_rank_t *ranked,
                               pf_decision_summary_t *summary)
{
    int i;

    /* ranked is in priority order: the most starved buckets come first. */
    for (i = 0; i < lim->num_buckets; i++) {
        int b = ranked[i].bucket;
        int donor;

        if (state[b].queued <= 0 || state[b].idle > 0 || action[b].spawn > 0
            || state[b].children >= pf_maintenance_share(lim->max_workers,
                                                         lim->num_buckets,
                                                         b)) {
            continue;
        }
        donor = find_donor(lim, state, action);
        if (donor < 0) {
            return;
        }
        action[donor].kill++;
        summary->killed++;
        summary->rebalanced++;
    }
}

/* The bucket most able to give up an idle child to the server-wide trim,
 * or -1: the most idle children above its own minimum, at least two
 * children, and none retiring already this cycle. */
static int find_trim_bucket(const pf_limits_t *lim,
                            const pf_bucket_state_t *state,
                            const pf_bucket_action_t *action)
{
    int b, best = -1, best_surplus = 0;

    for (b = 0; b < lim->num_buckets; b++) {
        int surplus = state[b].idle - own_min_spare(lim, b);

        if (surplus > best_surplus && state[b].children >= 2
            && action[b].kill == 0 && action[b].spawn == 0) {
            best = b;
            best_surplus = surplus;
        }
    }
    return best;
}

void pf_maintenance_decide(const pf_limits_t *lim,
                           const pf_bucket_state_t *state, int occupied_slots,
                           int *spawn_rate, pf_bucket_action_t *action,
                           pf_rank_t *scratch,
                           pf_decision_summary_t *summary)
{
    int nb = lim->num_buckets;
    int budget = lim->max_workers - occupied_slots;
    int total_idle = 0, total_queued = 0, shortage, allowance, wanted;
    int b, i, trim;

    memset(summary, 0, sizeof(*summary));
    if (budget < 0) {
        budget = 0;
    }
    if (*spawn_rate < 1) {
        *spawn_rate = 1;
    }
    for (b = 0; b < nb; b++) {
        total_idle += state[b].idle;
        total_queued += state[b].queued;
    }
    /* Connections waiting beyond what every idle child of the server could
     * take: the most that queues may add to the pool this cycle.  A bucket
     * whose queue sits beside idle children elsewhere gets its share of
     * spares below, not a child per connection, so the pool follows what
     * one shared queue would need rather than the sum of every bucket's
     * momentary peak. */
    shortage = total_queued - total_idle;
    if (shortage < 0) {
        shortage = 0;
    }

    for (b = 0; b < nb; b++) {
        const pf_bucket_state_t *st = &state[b];
        int min = own_min_spare(lim, b);
        /* In a shared pool only the server-wide trim below retires. */
        int max = lim->shared_pool
                      ? INT_MAX
                      : pf_bucket_max_spare(lim->min_spare_servers,
                                            lim->max_spare_servers, nb, b);
        int deficit = min - st->idle;
        /* A queue only calls for children when none of the bucket's is
         * idle: an idle child takes a waiting connection within
         * microseconds, and a queue seen at one instant beside idle
         * children is not load. */
        int waiting_for_a_child = st->idle == 0 ? st->queued : 0;
        int want = deficit > 0 ? deficit : 0;

        action[b].spawn = 0;
        action[b].kill = 0;
        if (waiting_for_a_child > want) {
            want = waiting_for_a_child;
        }
        if (want == 0 && st->idle > max && st->children > 1) {
            action[b].kill = 1;
            summary->killed++;
        }
        summary->wanted += want;
        scratch[b].bucket = b;
        scratch[b].priority = bucket_priority(st, deficit);
        scratch[b].want = want;
    }

    qsort(scratch, (size_t)nb, sizeof(*scratch), compare_rank);

    /* One ramp for the whole server, as with a single bucket: buckets draw
     * on it in priority order, so more buckets do not fork faster. */
    allowance = *spawn_rate;
    wanted = 0;
    for (i = 0; i < nb; i++) {
        const pf_bucket_state_t *st = &state[scratch[i].bucket];
        int min = own_min_spare(lim, scratch[i].bucket);
        int deficit = min > st->idle ? min - st->idle : 0;
        int want = deficit;
        int extra = scratch[i].want - deficit;

        if (extra > shortage) {
            extra = shortage;
        }
        if (extra > 0) {
            want += extra;
            shortage -= extra;
        }
        wanted += want;
        if (want > allowance) {
            want = allowance;
        }
        if (want == 0 && st->children == 0) {
            /* A bucket with no child gets one, whatever the ramp. */
            want = 1;
        }
        if (want > budget) {
            want = budget;
            summary->at_max_workers = 1;
        }
        action[scratch[i].bucket].spawn = want;
        allowance -= want < allowance ? want : allowance;
        budget -= want;
        summary->spawned += want;
    }

    /* A shared pool short of MinSpareServers idle children, counting
     * what queues and empty buckets got above: the rest of the ramp, one
     * child at a time to the neediest bucket. */
    if (lim->shared_pool) {
        int short_of = lim->min_spare_servers - total_idle - summary->spawned;

        if (short_of > 0) {
            wanted += short_of;
            summary->wanted += short_of;
        }
        while (short_of > 0 && allowance > 0) {
            if (budget <= 0) {
                summary->at_max_workers = 1;
                break;
            }
            action[neediest_bucket(lim, state, action)].spawn++;
            summary->spawned++;
            short_of--;
            allowance--;
            budget--;
        }
    }

    if (summary->at_max_workers) {
        rebalance_at_limit(lim, state, action, scratch, summary);
    }

    /* Every bucket's share of MaxSpareServers is at least its minimum + 1,
     * so with many buckets the shares add up to more than
     * MaxSpareServers; and a shared pool has no shares at all.  While the
     * server as a whole holds more idle children than MaxSpareServers and
     * spawns nothing, one more idle child goes per cycle, from the bucket
     * with the most above its own minimum. */
    if (summary->spawned == 0
        && total_idle - summary->killed > lim->max_spare_servers
        && (trim = find_trim_bucket(lim, state, action)) >= 0) {
        action[trim].kill++;
        summary->killed++;
    }

    /* The ramp: while the server still wanted children it doubles what it
     * may fork next cycle, up to the cap; once satisfied it starts at 1. */
    if (wanted > 0 && summary->spawned > 0) {
        if (*spawn_rate >= 8) {
            summary->fast_ramp = *spawn_rate;
        }
        *spawn_rate *= 2;
        if (*spawn_rate > lim->max_spawn_rate) {
            *spawn_rate = lim->max_spawn_rate;
        }
    }
    else if (wanted == 0) {
        *spawn_rate = 1;
    }
}

void pf_maintenance_count_old_generation(pf_bucket_state_t *state,
                                         const int *old_children,
                                         int num_buckets)
{
    int b;

    for (b = 0; b < num_buckets; b++) {
        state[b].children += old_children[b];
        state[b].idle += old_children[b];
    }
}

int pf_maintenance_respawn_now(int children_left_in_bucket,
                               int shutting_down, int occupied_slots,
                               int max_workers)
{
    return !shutting_down && children_left_in_bucket == 0
           && occupied_slots < max_workers;
}

/* ------------------------------------------------------------------ */
/*
 * How a child's end is read and how fast its bucket gets another: what a
 * process's exit means to the parent (ours or not, started or not, told
 * to stop or killed from outside, APEXIT_CHILDFATAL), how a child left
 * (lived, stopped, recycled, died at start), and each bucket's pacing
 * once its children keep dying at start: PF_RESPAWN_FORGIVEN deaths in a
 * row forgiven, then a back-off from 1 s doubling up to
 * PF_RESPAWN_MAX_DELAY_US, and at most PF_RESPAWN_FORGIVEN out-of-cycle
 * forks a second whatever the exits say.  The parent's own
 * knowledge only (its clock, its record of the child): an exit status is
 * the child's to choose, so it never alone decides a pace.  Pure: the
 * callers (prefork.c, prefork_generation.c) pass the time, act and log.
 */


pf_child_end_e pf_respawn_classify_end(int ours, int ready, int told_to_stop,
                                       int fatal_exit, int killed)
{
    if (ours && ready && fatal_exit) {
        return PF_END_FATAL_STARTED;
    }
    if (fatal_exit) {
        return PF_END_FATAL;
    }
    if (!ours) {
        return PF_END_LOST;
    }
    return killed && !told_to_stop ? PF_END_KILLED : PF_END_LEFT;
}

pf_exit_kind_e pf_respawn_classify_exit(long long lifetime_us,
                                        int told_to_stop, int exited_cleanly,
                                        int recycling)
{
    if (told_to_stop) {
        return PF_EXIT_STOPPED;
    }
    if (lifetime_us >= PF_RESPAWN_YOUNG_US) {
        return PF_EXIT_LIVED;
    }
    return exited_cleanly && recycling ? PF_EXIT_RECYCLED : PF_EXIT_EARLY;
}

int pf_respawn_paced(const pf_respawn_t *r)
{
    return r->early_deaths > PF_RESPAWN_FORGIVEN;
}

/*
 * The wait after the @a early_deaths-th death at start in a row: none up
 * to PF_RESPAWN_FORGIVEN, then 1 s, doubling each time, up to
 * PF_RESPAWN_MAX_DELAY_US.
 */
static long long pf_respawn_delay(int early_deaths)
{
    long long delay = PF_RESPAWN_YOUNG_US;
    int beyond = early_deaths - PF_RESPAWN_FORGIVEN;

    if (beyond <= 0) {
        return 0;
    }
    while (--beyond > 0 && delay < PF_RESPAWN_MAX_DELAY_US) {
        delay *= 2;
    }
    return delay < PF_RESPAWN_MAX_DELAY_US ? delay : PF_RESPAWN_MAX_DELAY_US;
}

int pf_respawn_note_exit(pf_respawn_t *r, pf_exit_kind_e kind,
                         long long child_started, long long now)
{
    long long until;

    switch (kind) {
    case PF_EXIT_LIVED:
        pf_respawn_note_alive(r, child_started, now);
        return 0;
    case PF_EXIT_EARLY:
        /* Counted up to where the delay stops growing, so the count
         * cannot overflow however long an episode lasts. */
        if (r->early_deaths == 0) {
            r->since = child_started;
        }
        if (pf_respawn_delay(r->early_deaths) < PF_RESPAWN_MAX_DELAY_US) {
            r->early_deaths++;
        }
        until = now + pf_respawn_delay(r->early_deaths);
        if (until > r->hold_until) {
            r->hold_until = until;
        }
        return r->early_deaths == PF_RESPAWN_FORGIVEN + 1;
    default:
        return 0;
    }
}

int pf_respawn_note_alive(pf_respawn_t *r, long long child_started,
                          long long now)
{
    int was_paced = pf_respawn_paced(r);

    if (r->early_deaths == 0 || now - child_started < PF_RESPAWN_YOUNG_US
        || child_started < r->since) {
        return 0;
    }
    r->early_deaths = 0;
    r->hold_until = 0;
    return was_paced;
}

int pf_respawn_note_quiet(pf_respawn_t *r, long long now)
{
    if (!pf_respawn_paced(r)
        || now < r->hold_until + pf_respawn_delay(r->early_deaths)) {
        return 0;
    }
    r->early_deaths = 0;
    r->hold_until = 0;
    return 1;
}

int pf_respawn_may_fork(const pf_respawn_t *r, int out_of_cycle,
                        long long now)
{
    if (now < r->hold_until) {
        return 0;
    }
    if (!out_of_cycle) {
        return 1;
    }
    if (pf_respawn_paced(r)) {
        return 0;
    }
    return now - r->window_start >= PF_RESPAWN_YOUNG_US
           || now < r->window_start
           || r->out_of_cycle < PF_RESPAWN_FORGIVEN;
}

void pf_respawn_note_fork(pf_respawn_t *r, int out_of_cycle, long long now)
{
    if (out_of_cycle) {
        if (now - r->window_start >= PF_RESPAWN_YOUNG_US
            || now < r->window_start) {
            r->window_start = now;
            r->out_of_cycle = 0;
        }
        r->out_of_cycle++;
    }
    if (pf_respawn_paced(r)) {
        r->hold_until = now + pf_respawn_delay(r->early_deaths);
    }
}
