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

/* A generation's per-bucket state and a cycle's observation of it; see
 * prefork_generation.h. */

#include "apr.h"
#include "apr_pools.h"

#include <string.h>

#include "prefork_children.h"
#include "prefork_generation.h"
#include "prefork_os.h"
#include "prefork_steering.h"

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

void pf_generation_observe(pf_generation_t *gen, const pf_children_t *c,
                           const pf_steer_t *steer, ap_generation_t number,
                           worker_score **servers)
{
    pf_observation_t *obs = &gen->obs;
    int b, k = 0;

    obs->when = apr_time_now();
    for (b = 0; b < gen->num_buckets; b++) {
        obs->queued[b] = bucket_queue(&gen->bucket[b], &obs->backlog[b],
                                      &obs->socket_backlog[k]);
        k += gen->bucket[b].num_listeners;
    }
    pf_children_observe(c, gen, number, servers, obs);
    /* Right after the children's states: both figures of one instant.
     * Read apart, a connection steered in between makes them differ for
     * a whole cycle. */
    pf_steer_observe(steer, gen, obs);
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
