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
 * The MPM's decisions as pure functions of plain data: the bucket count
 * and what a restart keeps (for the bucket set), each bucket's share of
 * StartServers and of the spare-server limits, what one maintenance cycle
 * forks and retires (for the generation).  No system call, no httpd
 * global, no allocation, no log line: the callers gather the inputs, act
 * on the outputs and log from the reason codes.  So the unit tests drive
 * it with plain values, and build/libpfpolicy.so gives the scale model
 * (test/load/sim/) this very code through ctypes.
 */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefork_policy.h"
#include "prefork_buckets.h"


/* ------------------------------------------------------------------ */
/* Bucket count                                                        */

/*
 * Whether a steering mode sends a connection to another bucket when its
 * own has no idle child (idle, local), so that the buckets share the spare
 * pool; hash and cpu do not.
 */
static int pf_steering_shares_pool(int steering)
{
    return steering == PFB_STEER_IDLE || steering == PFB_STEER_LOCAL;
}

/*
 * The most buckets that MinSpareServers keeps warm, with an idle child of
 * its own share in every bucket.  Under hash and cpu steering a connection
 * goes to its bucket whatever that bucket has, so each bucket needs its own
 * idle child: the limit is MinSpareServers.  Under idle and local steering
 * a connection goes to another bucket with an idle child, so the pool is shared
 * and there is no limit (0).
 */
static int pf_warm_bucket_limit(int min_spare_servers, int steering)
{
    if (pf_steering_shares_pool(steering)) {
        return 0;
    }
    return min_spare_servers > 1 ? min_spare_servers : 1;
}

/* One bucket holding every Listen: httpd's own arrangement. */
static void plan_single(int reason, pf_bucket_plan_t *plan)
{
    plan->mode = PFB_MODE_SINGLE;
    plan->reason = reason;
    plan->buckets_per_listen = 1;
    plan->num_buckets = 1;
}

void pf_plan_buckets(const pf_plan_in_t *in, pf_bucket_plan_t *plan,
                     pf_warm_t *warm)
{
    pf_warm_t unused;
    int per_listen, listeners = in->num_listeners > 0 ? in->num_listeners : 1;
    int by_ratio = in->explicit_buckets <= 0;

    if (warm == NULL) {
        warm = &unused;
    }
    memset(warm, 0, sizeof(*warm));
    if (in->explicit_buckets <= 0 && in->ratio <= 0) {
        plan_single(PFB_WHY_OFF, plan);
        return;
    }
    if (!by_ratio) {
        per_listen = in->explicit_buckets;
        plan->reason = PFB_WHY_EXPLICIT;
    }
    else {
        per_listen = (in->usable_cpus > 0 ? in->usable_cpus : 1) / in->ratio;
        if (per_listen < 1) {
            per_listen = 1;
        }
        plan->reason = PFB_WHY_RATIO;
    }
    plan->mode = PFB_MODE_REUSEPORT;
    warm->asked = (long long)per_listen * listeners > PF_MAX_SERVER_LIMIT
                      ? PF_MAX_SERVER_LIMIT
                      : per_listen * listeners;
    if (!in->reuseport_ok) {
        plan->mode = PFB_MODE_PER_LISTEN;
        plan->reason = PFB_WHY_NO_REUSEPORT;
        per_listen = 1;
    }
    else if (by_ratio && pf_steering_shares_pool(in->steering)
             && !in->steering_usable) {
        plan_single(PFB_WHY_NO_IDLE_STEERING, plan);
        return;
    }
    else {
        warm->limit = pf_warm_bucket_limit(in->min_spare_servers,
                                           in->steering_usable
                                               ? in->steering
                                               : PFB_STEER_HASH);
    }
    if (warm->limit > 0 && warm->asked > warm->limit) {
        if (by_ratio) {
            /* More buckets than idle children to go round: a connection
             * hashed to a bucket with none waits for a fork while others
             * sit idle.  Fewer buckets, each with its idle child. */
            per_listen = warm->limit / listeners;
            if (per_listen < 1) {
                per_listen = 1;
            }
            warm->capped = 1;
        }
        else {
            warm->starved = 1;
        }
    }
    if ((long long)per_listen * listeners > in->max_workers) {
        per_listen = in->max_workers / listeners;
        if (per_listen < 1) {
            /* Not even one child per Listen: fall back to the stock
             * arrangement, where every child polls every Listen. */
            plan_single(PFB_WHY_CAPPED, plan);
            warm->starved = 0;
            return;
        }
        plan->reason = PFB_WHY_CAPPED;
    }
    if (by_ratio && per_listen == 1 && plan->mode == PFB_MODE_REUSEPORT) {
        plan_single(PFB_WHY_ONE_PER_LISTEN, plan);
        return;
    }
    plan->buckets_per_listen = per_listen;
    plan->num_buckets = per_listen * listeners;
    if (warm->starved && warm->limit > 0
        && plan->num_buckets <= warm->limit) {
        warm->starved = 0;
    }
}

void pf_plan_per_listen_fallback(int num_listeners, pf_bucket_plan_t *plan)
{
    plan->mode = PFB_MODE_PER_LISTEN;
    plan->reason = PFB_WHY_DUP_FAILED;
    plan->buckets_per_listen = 1;
    plan->num_buckets = num_listeners > 0 ? num_listeners : 1;
}

int pf_generation_room(const pf_generation_in_t *in)
{
    long long per_listen = in->wanted.buckets_per_listen;
    long long room;

    if (in->previous && in->previous->buckets_per_listen > per_listen) {
        per_listen = in->previous->buckets_per_listen;
    }
    room = per_listen * (in->num_listeners > 0 ? in->num_listeners : 1);
    return room < 1 ? 1 : (room > PF_MAX_SERVER_LIMIT ? PF_MAX_SERVER_LIMIT
                                                      : (int)room);
}

/* The plan a graceful restart runs: the mode and per-Listen count in
 * force, over the Listens of the new configuration. */
static void keep_previous_plan(const pf_generation_in_t *in,
                               pf_generation_out_t *out)
{
    const pf_bucket_plan_t *prev = in->previous;
    pf_bucket_plan_t *plan = &out->plan;
    int nl = in->num_listeners;

    *plan = *prev;
    if (prev->mode != in->wanted.mode
        || prev->buckets_per_listen != in->wanted.buckets_per_listen) {
        plan->reason = PFB_WHY_KEPT;
        out->change_deferred = 1;
    }
    else {
        plan->reason = in->wanted.reason;
    }
    if (plan->mode == PFB_MODE_SINGLE) {
        plan->num_buckets = 1;
        return;
    }
    if ((long long)plan->buckets_per_listen * nl > in->max_workers) {
        /* Listens were added: every bucket still needs a child. */
        plan->buckets_per_listen = in->max_workers / nl;
        plan->reason = PFB_WHY_CAPPED;
        if (plan->buckets_per_listen < 1) {
            plan->mode = PFB_MODE_SINGLE;
            plan->buckets_per_listen = 1;
            plan->num_buckets = 1;
            return;
        }
    }
    plan->num_buckets = plan->buckets_per_listen * nl;
}

static int same_identity(const pf_identity_t *a, const pf_identity_t *b)
{
    if (a->shard != b->shard) {
        return 0;
    }
    if (a->listener == NULL || b->listener == NULL) {
        return a->listener == b->listener;
    }
    return strcmp(a->listener, b->listener) == 0;
}

int pf_plan_generation(const pf_generation_in_t *in, pf_generation_out_t *out)
{
    int nb, b, j, l, k, start;

    if (in->num_listeners < 1 || in->listeners == NULL
        || (in->num_old > 0
            && (in->old == NULL || in->old_children == NULL))) {
        return -1;
    }
    out->change_deferred = 0;
    if (in->how == PF_RESTART_GRACEFUL && in->previous != NULL) {
        keep_previous_plan(in, out);
    }
    else {
        out->plan = in->wanted;
    }
    nb = out->plan.num_buckets;
    if (nb < 1 || nb > pf_generation_room(in)) {
        return -1;
    }

    for (b = 0; b < nb; b++) {
        if (out->plan.mode == PFB_MODE_SINGLE) {
            l = -1;
            k = 0;
        }
        else {
            l = b / out->plan.buckets_per_listen;
            k = b % out->plan.buckets_per_listen;
        }
        out->listener[b] = l;
        out->bucket[b].listener = l < 0 ? NULL : in->listeners[l];
        out->bucket[b].shard = k;
        out->from_old[b] = -1;
        for (j = 0; j < in->num_old; j++) {
            if (same_identity(&out->bucket[b], &in->old[j])) {
                out->from_old[b] = j;
                break;
            }
        }
        start = pf_bucket_start(in->start_servers, nb, b);
        j = out->from_old[b];
        out->target[b] = (j >= 0 && in->old_children[j] > start)
                             ? in->old_children[j]
                             : start;
    }
    for (j = 0; j < in->num_old; j++) {
        out->old_survives[j] = 0;
    }
    for (b = 0; b < nb; b++) {
        if (out->from_old[b] >= 0) {
            out->old_survives[out->from_old[b]] = 1;
        }
    }
    return nb;
}

/* Bucket b's share of a server-wide total split over num_buckets: the
 * quotient, plus one for the first (total % num_buckets) buckets, so the
 * shares add up to the total. */
static int pf_share(int total, int num_buckets, int b)
{
    if (num_buckets < 1 || total < 0) {
        return 0;
    }
    return total / num_buckets + (b < total % num_buckets ? 1 : 0);
}

/* Bucket b's MinSpareServers: its share, but at least 1, so every bucket
 * always has an idle child to accept its connections. */
static int pf_bucket_min_spare(int min_spare_servers, int num_buckets, int b)
{
    int share = pf_share(min_spare_servers, num_buckets, b);

    return share < 1 ? 1 : share;
}

/* Bucket b's MaxSpareServers: its share, but at least its min + 1. */
static int pf_bucket_max_spare(int min_spare_servers, int max_spare_servers,
                               int num_buckets, int b)
{
    int min = pf_bucket_min_spare(min_spare_servers, num_buckets, b);
    int share = pf_share(max_spare_servers, num_buckets, b);

    return share < min + 1 ? min + 1 : share;
}

int pf_bucket_start(int start_servers, int num_buckets, int b)
{
    int share = pf_share(start_servers, num_buckets, b);

    return share < 1 ? 1 : share;
}

void pf_limits_init(pf_limits_t *lim, int num_buckets, int min_spare_servers,
                    int max_spare_servers, int max_workers, int steering)
{
    lim->num_buckets = num_buckets;
    lim->min_spare_servers = min_spare_servers;
    lim->max_spare_servers = max_spare_servers;
    lim->max_workers = max_workers;
    lim->max_spawn_rate = PF_MAX_SPAWN_RATE;
    lim->shared_pool = num_buckets > 1 && pf_steering_shares_pool(steering);
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

        if (st->queued > 0 || st->idle - action[b].kill < 1 || keeps < 2
            || keeps <= pf_share(lim->max_workers, lim->num_buckets, b)
            || action[b].spawn > 0) {
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
 * test/load/sim showed p99 tripled at 16 buckets). */
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
            || state[b].children
                   >= pf_share(lim->max_workers, lim->num_buckets, b)) {
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

void pf_decide_maintenance(const pf_limits_t *lim,
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

void pf_count_old_generation(pf_bucket_state_t *state,
                             const int *old_children, int num_buckets)
{
    int b;

    for (b = 0; b < num_buckets; b++) {
        state[b].children += old_children[b];
        state[b].idle += old_children[b];
    }
}

int pf_bucket_needs_respawn_now(int children_left_in_bucket,
                                int shutting_down, int occupied_slots,
                                int max_workers)
{
    return !shutting_down && children_left_in_bucket == 0
           && occupied_slots < max_workers;
}
