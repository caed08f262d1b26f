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
 * The writer of the shared segment (include/prefork_buckets.h): it
 * creates the segment once and writes what readers see, each record's
 * identity, the bucket table, each bucket's figures of a cycle with a
 * rate sample, and the header with its magic, version and sizes.  It
 * takes plain data (the generation, the cycle's observation, the
 * parent's sums of what exited children accepted) and reads nothing
 * back: even the index of each record's next rate sample is kept in the
 * parent's memory.  The bucket set, its only caller, says what and when.
 * The slot records are the children table's to write, but for the move
 * of an exited child's count into its record's total (pf_segment_retire).
 */

#include "apr.h"
#include "apr_atomic.h"
#include "apr_shm.h"
#include "apr_strings.h"

#include <string.h>

#include "prefork_segment.h"

apr_status_t pf_segment_create(pf_segment_t **out, apr_pool_t *pool,
                               int num_records, int num_slots,
                               apr_time_t started)
{
    pf_segment_t *seg = apr_pcalloc(pool, sizeof(*seg));
    pfb_layout_t layout;
    apr_status_t rv;
    char *base;

    pfb_layout(num_records, num_slots, &layout);
    rv = apr_shm_create(&seg->shm, layout.size, NULL, pool);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    base = apr_shm_baseaddr_get(seg->shm);
    seg->header = (pfb_shm_t *)base;
    seg->table = (apr_int32_t *)(base + layout.table);
    seg->records = (pfb_bucket_t *)(base + layout.records);
    seg->slots = (pfb_slot_t *)(base + layout.slots);
    seg->sample_next = apr_pcalloc(pool, sizeof(apr_uint32_t)
                                             * (apr_size_t)num_records);
    seg->started = started;
    seg->view.shm = seg->header;
    seg->view.size = layout.size;
    seg->view.num_records = num_records;
    seg->view.num_slots = num_slots;
    *out = seg;
    return APR_SUCCESS;
}

void pf_segment_write_identity(pf_segment_t *seg, int record,
                               const char *listener, int shard, int position,
                               apr_uint64_t retired, int fresh)
{
    pfb_bucket_fields_t *f;

    if (record < 0 || record >= seg->view.num_records) {
        return;
    }
    f = &seg->records[record].f;
    if (fresh) {
        memset(&seg->records[record], 0, sizeof(pfb_bucket_t));
        seg->sample_next[record] = 0;
    }
    f->position = position;
    f->shard = shard;
    f->retired = retired;
    apr_cpystrn(f->listener, listener ? listener : "", sizeof(f->listener));
}

void pf_segment_retire(pf_segment_t *seg, int slot, int record,
                       apr_uint64_t retired)
{
    pfb_bucket_fields_t *f;
    pfb_slot_fields_t *s;

    if (record < 0 || record >= seg->view.num_records || slot < 0
        || slot >= seg->view.num_slots) {
        return;
    }
    f = &seg->records[record].f;
    s = &seg->slots[slot].f;
    /* The count leaves the slot and joins the total between two steps of
     * the sequence (each a full barrier), so that a reader never keeps a
     * sum that has it in neither place or in both. */
    apr_atomic_inc32(&f->retire_seq);
    f->retired = retired;
    s->record = -1;
    apr_atomic_set64(&s->accepted, 0);
    apr_atomic_inc32(&f->retire_seq);
}

/* Bucket @a b's figures of the cycle, and a rate sample. */
static void write_figures(pf_segment_t *seg, int b, int record,
                          apr_uint64_t accepted, const pf_observation_t *obs,
                          apr_time_t now)
{
    pfb_bucket_fields_t *f = &seg->records[record].f;
    apr_uint32_t next = seg->sample_next[record];

    f->accepted = accepted;
    f->children = (apr_uint32_t)obs->state[b].children;
    f->idle = (apr_uint32_t)obs->idle[b];
    f->busy = (apr_uint32_t)obs->busy[b];
    f->starting = (apr_uint32_t)obs->starting[b];
    f->stopping = (apr_uint32_t)obs->stopping[b];
    f->queue_depth = (apr_uint32_t)obs->queued[b];
    f->backlog = (apr_uint32_t)obs->backlog[b];
    if (obs->steer_figures) {
        f->steer_kept = obs->steer_kept[b];
        f->steer_moved = obs->steer_moved[b];
        f->steer_idle = obs->steer_idle[b];
    }
    /* The ring's index comes from the parent's own memory: what a child
     * scribbled on the record lasts a cycle. */
    f->accepted_sample[next] = accepted;
    f->sample_time[next] = now;
    next = (next + 1) % PFB_RATE_SAMPLES;
    seg->sample_next[record] = next;
    f->sample_next = next;
}

void pf_segment_write(pf_segment_t *seg, const pfb_shm_t *h,
                      const pf_generation_t *gen,
                      const apr_uint64_t *retired,
                      const pf_observation_t *obs)
{
    apr_time_t now = apr_time_now();
    pfb_shm_t header = *h;
    int b, r;

    for (b = 0; b < gen->num_buckets && b < seg->view.num_records; b++) {
        r = gen->record[b];
        if (r < 0 || r >= seg->view.num_records) {
            continue;
        }
        seg->table[b] = r;
        if (obs != NULL) {
            /* Those of children gone, plus the live children's counters:
             * summed in the parent's own memory. */
            write_figures(seg, b, r,
                          pfb_add_saturated(retired[r], obs->accepted[b]),
                          obs, now);
        }
    }
    header.magic = PFB_SHM_MAGIC;
    header.version = PFB_SHM_VERSION;
    header.size = (apr_uint32_t)seg->view.size;
    header.header_size = (apr_uint32_t)PFB_SHM_HEADER_SIZE;
    header.bucket_size = (apr_uint32_t)sizeof(pfb_bucket_t);
    header.slot_size = (apr_uint32_t)sizeof(pfb_slot_t);
    header.num_records = (apr_uint32_t)seg->view.num_records;
    header.num_slots = (apr_uint32_t)seg->view.num_slots;
    header.num_buckets = (apr_uint32_t)gen->num_buckets;
    header.started = seg->started;
    header.updated = now;
    *seg->header = header;
}
