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
 * @file  prefork_segment.h
 * @brief The writer of the shared segment readers see
 *        (include/prefork_buckets.h): it takes plain data from the
 *        parent's own state and writes it, and reads nothing back.
 *
 * The parent creates the segment once, at the first start, and rewrites
 * every field it owns each maintenance cycle, so whatever a child wrote
 * over them lasts a cycle at most.  The slot records are the children
 * table's to write (prefork_children.h); the fields a child writes in
 * its own slot are read by the children table's observation, never here.
 * What the writer keeps of its own (where the parts start, each record's
 * next rate sample) is in the parent's memory.
 *
 * APR and libc only: the unit tests write a segment and read it through
 * the header's accessors.
 */

#ifndef PREFORK_SEGMENT_H
#define PREFORK_SEGMENT_H

#include "apr_pools.h"
#include "apr_shm.h"
#include "apr_time.h"

#include "prefork_buckets.h"
#include "prefork_generation.h"

/** The segment as the parent holds it. */
typedef struct {
    pfb_segment_t view;         /**< what readers get */
    pfb_slot_t *slots;          /**< the slot records, ServerLimit of them */
    /* Where the other parts start, and per record its rate samples' next
     * index, in the parent's memory. */
    pfb_shm_t *header;
    apr_int32_t *table;
    pfb_bucket_t *records;
    apr_uint32_t *sample_next;
    apr_time_t started;
    apr_shm_t *shm;
} pf_segment_t;

/**
 * Creates the segment for @a num_records bucket records and @a num_slots
 * slots, zero-filled (an anonymous shared mapping: pages never touched
 * cost nothing), in @a pool, which outlives generations.  @a started is
 * the server's first start.
 */
apr_status_t pf_segment_create(pf_segment_t **out, apr_pool_t *pool,
                               int num_records, int num_slots,
                               apr_time_t started);

/**
 * Writes record @a record's identity: its Listen's address ("host:port"),
 * its shard, its bucket number now (-1: out of use) and what the children
 * that exited accepted.  With @a fresh (a record given to a new identity)
 * its figures and rate samples start again.
 */
void pf_segment_write_identity(pf_segment_t *seg, int record,
                               const char *listener, int shard, int position,
                               apr_uint64_t retired, int fresh);

/**
 * Writes the bucket table of @a gen and, with @a obs, each bucket's
 * figures of the cycle and a rate sample of what its identity's children
 * accepted (@a retired, per record, plus the live children's counters
 * obs saw); then the header: @a h's fields that describe the server, with
 * the ones that describe the segment (its magic, version, sizes and
 * counts, the first start, the time of this write) set here.
 */
/**
 * An exited child's count moves from slot @a slot into record @a record's
 * total, which is now @a retired (the parent's own sum): the slot's record
 * and counter are cleared, all between two steps of the record's
 * retire_seq, so readers never see the count twice or not at all.
 */
void pf_segment_retire(pf_segment_t *seg, int slot, int record,
                       apr_uint64_t retired);

void pf_segment_write(pf_segment_t *seg, const pfb_shm_t *h,
                      const pf_generation_t *gen,
                      const apr_uint64_t *retired,
                      const pf_observation_t *obs);

#endif /* PREFORK_SEGMENT_H */
