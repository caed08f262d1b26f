/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The segment's writer (prefork_segment.c), read back through the
 * header's bounded accessors as the status module reads it: the header
 * says what the segment is and what the parent's state says of the
 * server; the table and each current bucket's record come from the
 * generation and the cycle's observation, with what the identity's
 * children accepted summed in the parent's memory (saturating); a child's
 * scribbles over any of it last until the next write, and the rate
 * samples' ring follows the parent's own index, not the one in the
 * segment; a record given to a new identity starts afresh; an exited
 * child's count moves into its record's total where readers can tell.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/buckets/prefork_segment.c"

#include <string.h>

#include "apr_atomic.h"
#include "apr_general.h"
#include "apr_pools.h"

#include "unit.h"

#define RECORDS 5
#define SLOTS 3
#define BUCKETS 2

static apr_pool_t *pool;

static void setup(void)
{
    apr_initialize();
    apr_pool_create(&pool, NULL);
}

static void teardown(void)
{
    apr_pool_destroy(pool);
    apr_terminate();
}

typedef struct {
    pf_generation_t gen;
    int record[RECORDS], position[RECORDS];
    pf_bucket_state_t state[BUCKETS];
    int idle[BUCKETS], busy[BUCKETS], starting[BUCKETS], stopping[BUCKETS];
    int queued[BUCKETS], backlog[BUCKETS];
    apr_uint64_t accepted[BUCKETS];
    apr_uint64_t retired[RECORDS];
} cycle_t;

/* Two buckets: bucket 0 is identity 3, bucket 1 identity 0. */
static void make_cycle(cycle_t *c)
{
    pf_observation_t *obs = &c->gen.obs;
    int b;

    memset(c, 0, sizeof(*c));
    c->record[0] = 3;
    c->record[1] = 0;
    c->gen.record = c->record;
    c->gen.position = c->position;
    c->gen.num_records = RECORDS;
    c->gen.num_buckets = BUCKETS;
    obs->state = c->state;
    obs->idle = c->idle;
    obs->busy = c->busy;
    obs->starting = c->starting;
    obs->stopping = c->stopping;
    obs->queued = c->queued;
    obs->backlog = c->backlog;
    obs->accepted = c->accepted;
    for (b = 0; b < BUCKETS; b++) {
        c->state[b].children = 4 + b;
        c->idle[b] = 3;
        c->busy[b] = 1 + b;
        c->queued[b] = 7;
        c->backlog[b] = 511;
    }
    c->accepted[0] = 40;
    c->accepted[1] = ~(apr_uint64_t)0 - 1;
    c->retired[3] = 2;
    c->retired[0] = 5;
}

START_TEST(what_the_writer_writes_the_accessors_read)
{
    pf_segment_t *seg;
    const pfb_bucket_t *rec;
    cycle_t c;
    pfb_shm_t h;

    make_cycle(&c);
    ck_assert_int_eq(pf_segment_create(&seg, pool, RECORDS, SLOTS, 12345),
                     APR_SUCCESS);
    ck_assert_ptr_nonnull(seg->slots);
    ck_assert_ptr_eq(pfb_segment_slot(&seg->view, 2), &seg->slots[2]);
    pf_segment_write_identity(seg, 3, "127.0.0.1:80", 1, 0, 2, 1);
    pf_segment_write_identity(seg, 0, "127.0.0.1:80", 0, 1, 5, 1);
    memset(&h, 0, sizeof(h));
    h.mode = PFB_MODE_REUSEPORT;
    h.generation = 6;
    h.slots_used = 2;
    h.size = 1;                 /* the writer's own to set */
    pf_segment_write(seg, &h, &c.gen, c.retired, &c.gen.obs);

    ck_assert(pfb_segment_usable(&seg->view));
    ck_assert_int_eq(seg->header->started, 12345);
    ck_assert_int_eq(seg->header->generation, 6);
    ck_assert_int_eq(seg->header->mode, PFB_MODE_REUSEPORT);
    ck_assert_int_eq(pfb_segment_num_buckets(&seg->view), BUCKETS);
    ck_assert_int_eq(pfb_segment_slots_used(&seg->view), 2);
    rec = pfb_segment_bucket(&seg->view, 0);
    ck_assert_ptr_eq(rec, pfb_segment_record(&seg->view, 3));
    ck_assert_str_eq(rec->f.listener, "127.0.0.1:80");
    ck_assert_int_eq(rec->f.shard, 1);
    ck_assert_int_eq(rec->f.position, 0);
    ck_assert_uint_eq(rec->f.retired, 2);
    ck_assert_uint_eq(rec->f.accepted, 42);
    ck_assert_uint_eq(rec->f.children, 4);
    ck_assert_uint_eq(rec->f.queue_depth, 7);
    ck_assert_uint_eq(rec->f.backlog, 511);
    ck_assert_uint_eq(rec->f.accepted_sample[0], 42);
    ck_assert_uint_eq(rec->f.sample_next, 1);
    rec = pfb_segment_bucket(&seg->view, 1);
    ck_assert(rec->f.accepted == ~(apr_uint64_t)0);
    ck_assert_uint_eq(rec->f.busy, 2);

    /* A child scribbles over the header, the table and a record. */
    seg->header->num_buckets = RECORDS;
    seg->header->magic = 0;
    seg->table[0] = 4;
    seg->records[3].f.sample_next = PFB_RATE_SAMPLES - 1;
    seg->records[3].f.accepted = 1;
    c.accepted[0] = 50;
    pf_segment_write(seg, &h, &c.gen, c.retired, &c.gen.obs);
    ck_assert(pfb_segment_usable(&seg->view));
    ck_assert_int_eq(pfb_segment_num_buckets(&seg->view), BUCKETS);
    rec = pfb_segment_bucket(&seg->view, 0);
    ck_assert_ptr_eq(rec, pfb_segment_record(&seg->view, 3));
    ck_assert_uint_eq(rec->f.accepted, 52);
    ck_assert_uint_eq(rec->f.accepted_sample[1], 52);
    ck_assert_uint_eq(rec->f.sample_next, 2);

    /* The layout alone: the table and the header, the figures kept. */
    c.record[0] = 0;
    c.record[1] = 3;
    pf_segment_write(seg, &h, &c.gen, c.retired, NULL);
    ck_assert_ptr_eq(pfb_segment_bucket(&seg->view, 0),
                     pfb_segment_record(&seg->view, 0));
    ck_assert_uint_eq(pfb_segment_record(&seg->view, 3)->f.accepted, 52);

    /* Record 3 given to a new identity: nothing of the old one is left. */
    pf_segment_write_identity(seg, 3, "[::1]:8080", 0, -1, 0, 1);
    rec = pfb_segment_record(&seg->view, 3);
    ck_assert_str_eq(rec->f.listener, "[::1]:8080");
    ck_assert_uint_eq(rec->f.accepted, 0);
    ck_assert_uint_eq(rec->f.accepted_sample[0], 0);
    ck_assert_int_eq(rec->f.position, -1);
    ck_assert_uint_eq(seg->sample_next[3], 0);
    /* Out of range: nothing written. */
    pf_segment_write_identity(seg, RECORDS, "x", 0, 0, 0, 1);
    pf_segment_write_identity(seg, -1, "x", 0, 0, 0, 1);
}
END_TEST

/* An exited child's count moves from its slot into its record's total
 * between two steps of the record's sequence: a reader that saw the
 * sequence odd, or changed, reads again. */
START_TEST(a_retire_moves_the_count_between_two_steps_readers_see)
{
    pf_segment_t *seg;
    const pfb_bucket_t *rec;
    apr_uint32_t seen;

    ck_assert_int_eq(pf_segment_create(&seg, pool, RECORDS, SLOTS, 1),
                     APR_SUCCESS);
    pf_segment_write_identity(seg, 2, "127.0.0.1:80", 0, 0, 10, 1);
    seg->slots[1].f.record = 2;
    seg->slots[1].f.pid = 0;            /* reaped, not yet retired */
    apr_atomic_set64(&seg->slots[1].f.accepted, 7);
    rec = pfb_segment_record(&seg->view, 2);
    seen = pfb_retire_seq_begin(rec);
    ck_assert(!pfb_retire_seq_changed(rec, seen));
    pf_segment_retire(seg, 1, 2, 17);
    ck_assert(pfb_retire_seq_changed(rec, seen));
    ck_assert_uint_eq(rec->f.retired, 17);
    ck_assert_int_eq(seg->slots[1].f.record, -1);
    ck_assert_uint_eq(seg->slots[1].f.accepted, 0);
    /* Even again: a reader that starts now reads once. */
    seen = pfb_retire_seq_begin(rec);
    ck_assert_uint_eq(seen & 1u, 0);
    ck_assert(!pfb_retire_seq_changed(rec, seen));
    /* Caught in the middle (odd), a reader always reads again. */
    seg->records[2].f.retire_seq++;
    seen = pfb_retire_seq_begin(rec);
    ck_assert(pfb_retire_seq_changed(rec, seen));
    /* Out of range: nothing written. */
    pf_segment_retire(seg, SLOTS, 2, 99);
    pf_segment_retire(seg, 1, RECORDS, 99);
    pf_segment_retire(seg, -1, -1, 99);
    ck_assert_uint_eq(rec->f.retired, 17);
}
END_TEST

Suite *segment_suite(void)
{
    Suite *s = suite_create("segment");
    TCase *tc = tcase_create("writer");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, what_the_writer_writes_the_accessors_read);
    tcase_add_test(tc, a_retire_moves_the_count_between_two_steps_readers_see);
    suite_add_tcase(s, tc);
    return s;
}
