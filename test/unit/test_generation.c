/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * What a start or restart keeps (pf_plan_generation): the plan in force,
 * each bucket's identity, which old bucket it continues (and so whose
 * socket, counters and children it keeps), its target, and which old
 * sockets close.  Listens added, removed and reordered across graceful
 * and full restarts.
 */

#include <string.h>

#include "unit.h"
#include "prefork_policy.h"
#include "prefork_buckets.h"

#define MAX_ROW 8
/* Room for pf_plan_generation()'s output arrays. */
#define ROOM 32

typedef struct {
    const char *label;
    int how;
    int has_previous;
    pf_bucket_plan_t previous;
    pf_bucket_plan_t wanted;
    const char *listeners[MAX_ROW];     /* new configuration, NULL-ended */
    pf_identity_t old[MAX_ROW];         /* the generation so far */
    int num_old;
    int old_children[MAX_ROW];
    int max_workers, start_servers;
    /* Expected: */
    pf_bucket_plan_t plan;
    int change_deferred;
    const char *bucket_listener[MAX_ROW];
    int bucket_shard[MAX_ROW];
    int from_old[MAX_ROW];
    int target[MAX_ROW];
    int old_survives[MAX_ROW];
} generation_row_t;

#define A "10.0.0.1:80"
#define B "10.0.0.1:443"
#define C "[::1]:8080"

#define REUSE(n, per, why) { PFB_MODE_REUSEPORT, why, per, n }
#define SINGLE(why) { PFB_MODE_SINGLE, why, 1, 1 }

static const generation_row_t rows[] = {
    { "first start: every bucket new",
      PF_START_FIRST, 0, { 0, 0, 0, 0 }, REUSE(4, 2, PFB_WHY_EXPLICIT),
      { A, B }, { { NULL, 0 } }, 0, { 0 }, 16, 8,
      REUSE(4, 2, PFB_WHY_EXPLICIT), 0,
      { A, A, B, B }, { 0, 1, 0, 1 }, { -1, -1, -1, -1 }, { 2, 2, 2, 2 },
      { 0 } },
    { "graceful, same configuration: every bucket continues",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 2, PFB_WHY_EXPLICIT),
      { A, B }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 1, 5, 0, 2 }, 16, 8,
      REUSE(4, 2, PFB_WHY_EXPLICIT), 0,
      { A, A, B, B }, { 0, 1, 0, 1 }, { 0, 1, 2, 3 }, { 2, 5, 2, 2 },
      { 1, 1, 1, 1 } },
    { "graceful, a Listen added in front: the others keep theirs",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(6, 2, PFB_WHY_EXPLICIT),
      { C, A, B }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 3, 3, 3, 3 }, 16, 6,
      REUSE(6, 2, PFB_WHY_EXPLICIT), 0,
      { C, C, A, A, B, B }, { 0, 1, 0, 1, 0, 1 },
      { -1, -1, 0, 1, 2, 3 }, { 1, 1, 3, 3, 3, 3 }, { 1, 1, 1, 1 } },
    { "graceful, a Listen removed: its sockets close",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(2, 2, PFB_WHY_EXPLICIT),
      { B }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 2, 2, 2, 2 }, 16, 4,
      REUSE(2, 2, PFB_WHY_EXPLICIT), 0,
      { B, B }, { 0, 1 }, { 2, 3 }, { 2, 2 }, { 0, 0, 1, 1 } },
    { "graceful, Listens reordered: identities, not positions",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 2, PFB_WHY_EXPLICIT),
      { B, A }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 1, 2, 3, 4 }, 16, 4,
      REUSE(4, 2, PFB_WHY_EXPLICIT), 0,
      { B, B, A, A }, { 0, 1, 0, 1 }, { 2, 3, 0, 1 }, { 3, 4, 1, 2 },
      { 1, 1, 1, 1 } },
    { "graceful keeps the count in force; the new one waits",
      PF_RESTART_GRACEFUL, 1, REUSE(2, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 4, PFB_WHY_EXPLICIT),
      { A }, { { A, 0 }, { A, 1 } }, 2, { 1, 1 }, 16, 2,
      REUSE(2, 2, PFB_WHY_KEPT), 1,
      { A, A }, { 0, 1 }, { 0, 1 }, { 1, 1 }, { 1, 1 } },
    { "graceful keeps single mode although buckets are asked for",
      PF_RESTART_GRACEFUL, 1, SINGLE(PFB_WHY_OFF),
      REUSE(2, 2, PFB_WHY_RATIO),
      { A, B }, { { NULL, 0 } }, 1, { 3 }, 16, 5,
      SINGLE(PFB_WHY_KEPT), 1,
      { NULL }, { 0 }, { 0 }, { 5 }, { 1 } },
    { "full restart takes the new count, keeping shards that remain",
      PF_RESTART_FULL, 1, REUSE(2, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 4, PFB_WHY_EXPLICIT),
      { A }, { { A, 0 }, { A, 1 } }, 2, { 0, 0 }, 16, 4,
      REUSE(4, 4, PFB_WHY_EXPLICIT), 0,
      { A, A, A, A }, { 0, 1, 2, 3 }, { 0, 1, -1, -1 }, { 1, 1, 1, 1 },
      { 1, 1 } },
    { "full restart from buckets to single",
      PF_RESTART_FULL, 1, REUSE(2, 2, PFB_WHY_EXPLICIT), SINGLE(PFB_WHY_OFF),
      { A }, { { A, 0 }, { A, 1 } }, 2, { 0, 0 }, 16, 5,
      SINGLE(PFB_WHY_OFF), 0,
      { NULL }, { 0 }, { -1 }, { 5 }, { 0, 0 } },
    { "graceful, Listens added past MaxRequestWorkers: capped",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 4, PFB_WHY_EXPLICIT),
      REUSE(8, 4, PFB_WHY_EXPLICIT),
      { A, B, C }, { { A, 0 }, { A, 1 }, { A, 2 }, { A, 3 } }, 4,
      { 1, 1, 1, 1 }, 6, 3,
      REUSE(6, 2, PFB_WHY_CAPPED), 0,
      { A, A, B, B, C, C }, { 0, 1, 0, 1, 0, 1 },
      { 0, 1, -1, -1, -1, -1 }, { 1, 1, 1, 1, 1, 1 }, { 1, 1, 0, 0 } },
};

static int count_listeners(const generation_row_t *row)
{
    int n = 0;

    while (n < MAX_ROW && row->listeners[n]) {
        n++;
    }
    return n;
}

static int same_text(const char *a, const char *b)
{
    return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

START_TEST(plan_generation_follows_table)
{
    const generation_row_t *row = &rows[_i];
    pf_generation_in_t in;
    pf_generation_out_t out;
    pf_identity_t bucket[ROOM];
    int listener[ROOM], from_old[ROOM], target[ROOM];
    int old_survives[ROOM];
    int nb, b;

    memset(&in, 0, sizeof(in));
    in.how = row->how;
    in.wanted = row->wanted;
    in.previous = row->has_previous ? &row->previous : NULL;
    in.num_listeners = count_listeners(row);
    in.listeners = row->listeners;
    in.max_workers = row->max_workers;
    in.start_servers = row->start_servers;
    in.num_old = row->num_old;
    in.old = row->old;
    in.old_children = row->old_children;
    ck_assert_int_le(pf_generation_room(&in), ROOM);
    out.bucket = bucket;
    out.listener = listener;
    out.from_old = from_old;
    out.target = target;
    out.old_survives = old_survives;

    nb = pf_plan_generation(&in, &out);
    ck_assert_msg(nb == row->plan.num_buckets, "%s: %d buckets", row->label,
                  nb);
    ck_assert_msg(out.plan.mode == row->plan.mode
                      && out.plan.buckets_per_listen
                             == row->plan.buckets_per_listen
                      && out.plan.num_buckets == row->plan.num_buckets,
                  "%s: plan %d/%d/%d", row->label, out.plan.mode,
                  out.plan.buckets_per_listen, out.plan.num_buckets);
    ck_assert_msg(out.plan.reason == row->plan.reason, "%s: reason %s",
                  row->label, pfb_reason_name(out.plan.reason));
    ck_assert_msg(out.change_deferred == row->change_deferred,
                  "%s: change deferred %d", row->label, out.change_deferred);
    for (b = 0; b < nb; b++) {
        ck_assert_msg(same_text(bucket[b].listener, row->bucket_listener[b])
                          && bucket[b].shard == row->bucket_shard[b],
                      "%s: bucket %d is %s#%d", row->label, b,
                      bucket[b].listener ? bucket[b].listener : "(all)",
                      bucket[b].shard);
        ck_assert_msg(from_old[b] == row->from_old[b],
                      "%s: bucket %d continues %d", row->label, b,
                      from_old[b]);
        ck_assert_msg(target[b] == row->target[b], "%s: bucket %d target %d",
                      row->label, b, target[b]);
    }
    for (b = 0; b < row->num_old; b++) {
        ck_assert_msg(old_survives[b] == row->old_survives[b],
                      "%s: old bucket %d survives %d", row->label, b,
                      old_survives[b]);
    }
}
END_TEST

START_TEST(plan_generation_refuses_bad_input)
{
    pf_generation_in_t in;
    pf_generation_out_t out;
    pf_identity_t bucket[4];
    int ints[4][4];
    const char *none[] = { NULL };

    memset(&in, 0, sizeof(in));
    out.bucket = bucket;
    out.listener = ints[0];
    out.from_old = ints[1];
    out.target = ints[2];
    out.old_survives = ints[3];
    in.wanted.mode = PFB_MODE_SINGLE;
    in.wanted.buckets_per_listen = in.wanted.num_buckets = 1;
    in.listeners = none;
    in.num_listeners = 0;
    ck_assert_int_eq(pf_plan_generation(&in, &out), -1);
    in.num_listeners = 1;
    in.num_old = 2;                     /* old buckets, but no identities */
    ck_assert_int_eq(pf_plan_generation(&in, &out), -1);
}
END_TEST

START_TEST(per_listen_fallback_is_one_bucket_per_listen)
{
    pf_bucket_plan_t plan;

    pf_plan_per_listen_fallback(3, &plan);
    ck_assert_int_eq(plan.mode, PFB_MODE_PER_LISTEN);
    ck_assert_int_eq(plan.reason, PFB_WHY_DUP_FAILED);
    ck_assert_int_eq(plan.buckets_per_listen, 1);
    ck_assert_int_eq(plan.num_buckets, 3);
}
END_TEST

START_TEST(old_generation_counts_as_idle_children)
{
    pf_bucket_state_t state[3] = { { 2, 1, 0 }, { 0, 0, 4 }, { 1, 0, 0 } };
    int old[3] = { 3, 2, 0 };

    pf_count_old_generation(state, old, 3);
    ck_assert_int_eq(state[0].children, 5);
    ck_assert_int_eq(state[0].idle, 4);
    ck_assert_int_eq(state[1].children, 2);
    ck_assert_int_eq(state[1].idle, 2);
    ck_assert_int_eq(state[1].queued, 4);
    ck_assert_int_eq(state[2].children, 1);
    ck_assert_int_eq(state[2].idle, 0);
}
END_TEST

Suite *generation_suite(void)
{
    Suite *s = suite_create("generation");
    TCase *tc = tcase_create("restarts");

    tcase_add_loop_test(tc, plan_generation_follows_table, 0,
                        (int)(sizeof(rows) / sizeof(rows[0])));
    tcase_add_test(tc, plan_generation_refuses_bad_input);
    tcase_add_test(tc, per_listen_fallback_is_one_bucket_per_listen);
    tcase_add_test(tc, old_generation_counts_as_idle_children);
    suite_add_tcase(s, tc);
    return s;
}
