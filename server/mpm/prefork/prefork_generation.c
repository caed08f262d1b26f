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
 * The maintenance cycle's work on a generation: the per-bucket state kept
 * from one (re)start to the next (pf_generation_start(), from the bucket
 * set's build); the first part of the cycle's one observation, each
 * bucket's accept queues (TCP_INFO), to which prefork.c adds the
 * children's states and steering's idle counts; the decision from that
 * observation alone (pf_maintenance_decide()); and the act on the
 * generation's own state, pacing respawns, with its log lines.  It calls
 * neither the children's table nor steering: forking and retiring are
 * prefork.c's and the children table's, which walk the cycle through
 * here; the generation lives in prefork.c's retained data, and nothing
 * keeps a copy.
 */

#include "apr.h"
#include "apr_pools.h"

#include <stdio.h>
#include <string.h>

#include "httpd.h"
#include "http_log.h"
#include "mpm_common.h"

#include "pfb_log.h"
#include "prefork_children.h"
#include "prefork_generation.h"
#include "guard/prefork_sockguard.h"

APLOG_USE_MODULE(mpm_prefork);

void pf_generation_start(pf_generation_t *gen, int *target, int num_slots,
                         apr_pool_t *p)
{
    pf_observation_t *obs = &gen->obs;
    apr_size_t n = (apr_size_t)gen->num_buckets, sockets = 0;
    int b;

    for (b = 0; b < gen->num_buckets; b++) {
        sockets += (apr_size_t)gen->bucket[b].num_listeners;
    }
    gen->target = target;
    gen->respawn = apr_pcalloc(p, n * sizeof(*gen->respawn));
    gen->respawn_logged = 0;
    gen->live = apr_pcalloc(p, n * sizeof(int));
    memset(obs, 0, sizeof(*obs));
    obs->state = apr_pcalloc(p, n * sizeof(*obs->state));
    obs->idle = apr_pcalloc(p, n * sizeof(int));
    obs->busy = apr_pcalloc(p, n * sizeof(int));
    obs->starting = apr_pcalloc(p, n * sizeof(int));
    obs->stopping = apr_pcalloc(p, n * sizeof(int));
    obs->old_generation = apr_pcalloc(p, n * sizeof(int));
    obs->idle_head = apr_pcalloc(p, n * sizeof(int));
    obs->idle_next = apr_pcalloc(p, (apr_size_t)num_slots * sizeof(int));
    obs->newest_lived = apr_pcalloc(p, n * sizeof(apr_time_t));
    obs->queued = apr_pcalloc(p, n * sizeof(int));
    obs->backlog = apr_pcalloc(p, n * sizeof(int));
    obs->socket_backlog = apr_pcalloc(p, sockets * sizeof(int));
    obs->waiting = apr_pcalloc(p, n * sizeof(int));
    obs->accepted = apr_pcalloc(p, n * sizeof(apr_uint64_t));
    obs->steer_idle = apr_pcalloc(p, n * sizeof(apr_int64_t));
    obs->steer_kept = apr_pcalloc(p, n * sizeof(apr_uint64_t));
    obs->steer_moved = apr_pcalloc(p, n * sizeof(apr_uint64_t));
    obs->counted = apr_pcalloc(p, n * sizeof(*obs->counted));
    obs->action = apr_pcalloc(p, n * sizeof(*obs->action));
    obs->scratch = apr_pcalloc(p, n * sizeof(*obs->scratch));
}

/* Connections in @a bucket's accept queues, and the queues' limits
 * (TCP_INFO, one read per socket); with @a limits, each socket's limit,
 * in the bucket's order. */
static int bucket_queue(const pf_bucket_t *bucket, int *backlog, int *limits)
{
    ap_listen_rec *lr;
    int depth, limit, queued = 0, i = 0;

    *backlog = 0;
    for (lr = bucket->listeners; lr; lr = lr->next, i++) {
        if (pf_os_listener_queue(lr->sd, &depth, &limit) != APR_SUCCESS) {
            depth = limit = 0;
        }
        queued += depth;
        *backlog += limit;
        if (limits != NULL) {
            limits[i] = limit;
        }
    }
    return queued;
}

void pf_generation_observe_queues(pf_generation_t *gen)
{
    pf_observation_t *obs = &gen->obs;
    int b, k = 0;

    obs->when = apr_time_now();
    for (b = 0; b < gen->num_buckets; b++) {
        obs->queued[b] = bucket_queue(&gen->bucket[b], &obs->backlog[b],
                                      &obs->socket_backlog[k]);
        k += gen->bucket[b].num_listeners;
    }
}

int pf_generation_queued(const pf_generation_t *gen)
{
    int b, backlog, total = 0;

    /* Read only: the cycle's figures stay as the cycle took them. */
    for (b = 0; b < gen->num_buckets; b++) {
        total += bucket_queue(&gen->bucket[b], &backlog, NULL);
    }
    return total;
}

void pf_generation_note_exit(pf_generation_t *gen,
                             const struct pf_child_exit_s *how, int b,
                             ap_generation_t number, server_rec *s)
{
    const pf_child_t *child = &how->child;
    apr_time_t now = apr_time_now();
    pf_exit_kind_e kind;
    char what[48];

    if (gen->respawn == NULL || b < 0 || b >= gen->num_buckets
        || child->generation != number) {
        return;
    }
    kind = pf_respawn_classify_exit(now - child->started, child->stopping,
                                    how->why == APR_PROC_EXIT
                                        && how->status == 0,
                                    ap_max_requests_per_child > 0);
    if (!pf_respawn_note_exit(&gen->respawn[b], kind, child->started, now)
        || gen->respawn_logged) {
        return;
    }
    snprintf(what, sizeof(what), how->why == APR_PROC_EXIT
                                     ? "exit status %d"
                                     : "killed by signal %d", how->status);
    ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                 PFBLOGNO(00066) "children of bucket %d (%s) keep leaving "
                 "within a second of starting (the last: pid %"
                 APR_PID_T_FMT " slot %d, %s, not asked to stop); forking "
                 "their replacements at maintenance only, waiting from 1 s "
                 "doubling up to %d s between forks into a bucket, until a "
                 "new child lives a second",
                 b, gen->bucket[b].address, child->pid, how->slot, what,
                 (int)(PF_RESPAWN_MAX_DELAY_US / APR_USEC_PER_SEC));
    gen->respawn_logged = 1;
}

void pf_generation_end_pacing(pf_generation_t *gen, server_rec *s)
{
    const pf_observation_t *obs = &gen->obs;
    int b, paced = 0;

    for (b = 0; b < gen->num_buckets; b++) {
        if (obs->newest_lived[b] > 0) {
            pf_respawn_note_alive(&gen->respawn[b], obs->newest_lived[b],
                                  obs->when);
        }
        if (obs->state[b].children > 0) {
            pf_respawn_note_quiet(&gen->respawn[b], obs->when);
        }
        paced += pf_respawn_paced(&gen->respawn[b]);
    }
    if (paced == 0 && gen->respawn_logged) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00067) "children live past their first "
                     "second again in every bucket; replacing them at "
                     "once again");
        gen->respawn_logged = 0;
    }
}

void pf_generation_decide(pf_generation_t *gen, int *spawn_rate,
                          pf_decision_summary_t *summary, server_rec *s)
{
    pf_observation_t *obs = &gen->obs;
    const pf_limits_t *lim = &gen->limits;

    memcpy(obs->counted, obs->state,
           sizeof(*obs->counted) * (apr_size_t)gen->num_buckets);
    pf_maintenance_count_old_generation(obs->counted, obs->old_generation,
                                        gen->num_buckets);
    pf_maintenance_decide(lim, obs->counted, obs->occupied, spawn_rate,
                          obs->action, obs->scratch, summary);
    if (summary->rebalanced > 0) {
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                     PFBLOGNO(00039) "at MaxRequestWorkers (%d): retiring "
                     "%d idle child(ren) so that buckets with queued "
                     "connections and no idle child get one",
                     lim->max_workers, summary->rebalanced);
    }
}

void pf_generation_log_limits(const pf_generation_t *gen,
                              const pf_decision_summary_t *summary,
                              int *reported, server_rec *s)
{
    const pf_limits_t *lim = &gen->limits;
    int b, leaving = 0;

    for (b = 0; b < gen->num_buckets; b++) {
        leaving += gen->obs.stopping[b];
    }
    if (summary->at_max_workers && leaving > 0) {
        /* A graceful restart or retirements in progress hold slots for a
         * moment: not a reason to raise MaxRequestWorkers. */
        return;
    }
    if (!summary->at_max_workers) {
        *reported = 0;
    }
    else if (!*reported) {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, s,
                     PFBLOGNO(00010) "server reached MaxRequestWorkers "
                     "setting (%d) with %d children wanted; consider "
                     "raising the MaxRequestWorkers setting",
                     lim->max_workers, summary->wanted);
        *reported = 1;
    }
    if (summary->fast_ramp > 0) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00011) "server seems busy (spawning %d "
                     "children a second), you may need to increase "
                     "StartServers, or Min/MaxSpareServers",
                     summary->fast_ramp);
    }
}
