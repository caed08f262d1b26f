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
 * The bucket set's decisions as pure functions of plain data: how many
 * buckets to run (from the usable CPUs, ListenCoresBucketsRatio or
 * ListenBuckets, SO_REUSEPORT and the steering that will run, within what
 * the spare pool keeps warm and MaxRequestWorkers), and what a start or
 * restart keeps (each new bucket matched to an old one by identity, never
 * by position, its socket kept, and its target of children).  No system
 * call, no httpd global, no allocation, no log line: prefork_bucketset.c
 * gathers the inputs, acts on the outputs and logs from the reason codes.
 * A file apart from the bucket set because the unit tests drive these
 * decisions with plain values, which they cannot do through the bucket
 * set's sockets.
 */

#include <string.h>

#include "prefork_buckets.h"
#include "prefork_config.h"
#include "prefork_maintenance.h"
#include "prefork_plan.h"

/* ------------------------------------------------------------------ */
/* Bucket count                                                        */

/*
 * The most buckets that MinSpareServers keeps warm, with an idle child of
 * its own share in every bucket.  Under hash and cpu steering a connection
 * goes to its bucket whatever that bucket has, so each bucket needs its own
 * idle child: the limit is MinSpareServers.  Under idle and local steering
 * a connection goes to another bucket with an idle child, so the pool is
 * shared and there is no limit (0).
 */
static int pf_warm_bucket_limit(int min_spare_servers, int steering)
{
    if (pf_maintenance_shared_pool(steering)) {
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
                     pf_plan_warm_t *warm)
{
    pf_plan_warm_t unused;
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
    else if (by_ratio && pf_maintenance_shared_pool(in->steering)
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

int pf_plan_room(const pf_plan_generation_in_t *in)
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
static void keep_previous_plan(const pf_plan_generation_in_t *in,
                               pf_plan_generation_out_t *out)
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

int pf_plan_generation(const pf_plan_generation_in_t *in,
                       pf_plan_generation_out_t *out)
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
    if (nb < 1 || nb > pf_plan_room(in)) {
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
        start = pf_maintenance_bucket_start(in->start_servers, nb, b);
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
