/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * prefork_maintenance.c, idle-server maintenance per bucket: each
 * bucket's share of StartServers and of the spare-server limits; an older
 * generation's children counted as idle ones on their way; what one cycle
 * forks and retires (the ramp, surplus idle children, buckets with no
 * child or a queue first, MaxRequestWorkers and the idle children it
 * moves to starved buckets, the shared pool of idle and local steering);
 * whether an exit needs a fork at once; and the table of cases the scale
 * model checks too (test/unit/maintenance_cases.txt).
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/prefork_maintenance.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "prefork_buckets.h"

/* ------------------------------------------------------------------ */
/* Shares                                                              */

START_TEST(shares_add_up_to_the_total)
{
    int totals[] = { 0, 1, 5, 10, 64, 999 };
    int counts[] = { 1, 2, 3, 4, 7, 64, 1000 };
    unsigned t, c;

    for (t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
        for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            int b, sum = 0, lo = 1 << 30, hi = 0;

            for (b = 0; b < counts[c]; b++) {
                int share = pf_maintenance_share(totals[t], counts[c], b);

                sum += share;
                lo = share < lo ? share : lo;
                hi = share > hi ? share : hi;
            }
            ck_assert_int_eq(sum, totals[t]);
            ck_assert_int_le(hi - lo, 1);
        }
    }
}
END_TEST

START_TEST(spare_shares_keep_one_idle_per_bucket)
{
    int b;

    /* MinSpareServers 5 over 4 buckets: 2, 1, 1, 1. */
    ck_assert_int_eq(pf_bucket_min_spare(5, 4, 0), 2);
    ck_assert_int_eq(pf_bucket_min_spare(5, 4, 3), 1);
    /* MaxSpareServers 10 over 4 buckets: 3, 3, 2, 2. */
    ck_assert_int_eq(pf_bucket_max_spare(5, 10, 4, 0), 3);
    ck_assert_int_eq(pf_bucket_max_spare(5, 10, 4, 3), 2);
    /* 64 buckets: every bucket keeps one idle child and may hold two. */
    for (b = 0; b < 64; b++) {
        ck_assert_int_eq(pf_bucket_min_spare(5, 64, b), 1);
        ck_assert_int_eq(pf_bucket_max_spare(5, 10, 64, b), 2);
        ck_assert_int_ge(pf_maintenance_bucket_start(5, 64, b), 1);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* An older generation's children                                      */

START_TEST(old_generation_counts_as_idle_children)
{
    pf_bucket_state_t state[3] = { { 2, 1, 0 }, { 0, 0, 4 }, { 1, 0, 0 } };
    int old[3] = { 3, 2, 0 };

    pf_maintenance_count_old_generation(state, old, 3);
    ck_assert_int_eq(state[0].children, 5);
    ck_assert_int_eq(state[0].idle, 4);
    ck_assert_int_eq(state[1].children, 2);
    ck_assert_int_eq(state[1].idle, 2);
    ck_assert_int_eq(state[1].queued, 4);
    ck_assert_int_eq(state[2].children, 1);
    ck_assert_int_eq(state[2].idle, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Maintenance                                                         */

#define MAX_TEST_BUCKETS 1000

static pf_bucket_state_t state[MAX_TEST_BUCKETS];
static pf_bucket_action_t action[MAX_TEST_BUCKETS];
static pf_rank_t scratch[MAX_TEST_BUCKETS];
static int rate[MAX_TEST_BUCKETS];
static pf_decision_summary_t summary;

static pf_limits_t limits_under(int nb, int min, int max, int workers,
                                int steering)
{
    pf_limits_t lim;

    pf_maintenance_limits_init(&lim, nb, min, max, workers, steering);
    return lim;
}

static pf_limits_t limits(int nb, int min, int max, int workers)
{
    return limits_under(nb, min, max, workers, PFB_STEER_HASH);
}

/* The pfb_steer_e a case names after its limits ("idle"), or hash. */
static int case_steering(const char *text)
{
    while (*text == ' ') {
        text++;
    }
    if (strncmp(text, "idle", 4) == 0) {
        return PFB_STEER_IDLE;
    }
    if (strncmp(text, "local", 5) == 0) {
        return PFB_STEER_LOCAL;
    }
    if (strncmp(text, "cpu", 3) == 0) {
        return PFB_STEER_CPU;
    }
    return PFB_STEER_HASH;
}

static void reset(int nb)
{
    int b;

    memset(state, 0, sizeof(state));
    memset(action, 0, sizeof(action));
    for (b = 0; b < nb; b++) {
        rate[b] = 1;
    }
}

static void set_bucket(int b, int children, int idle, int queued)
{
    state[b].children = children;
    state[b].idle = idle;
    state[b].queued = queued;
}

static int occupied(int nb)
{
    int b, sum = 0;

    for (b = 0; b < nb; b++) {
        sum += state[b].children;
    }
    return sum;
}

START_TEST(steady_state_does_nothing)
{
    pf_limits_t lim = limits(4, 5, 10, 150);

    reset(4);
    /* min shares 2,1,1,1; max shares 3,3,2,2 */
    set_bucket(0, 3, 2, 0);
    set_bucket(1, 2, 1, 0);
    set_bucket(2, 4, 2, 0);
    set_bucket(3, 1, 1, 0);
    pf_maintenance_decide(&lim, state, occupied(4), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(summary.spawned, 0);
    ck_assert_int_eq(summary.killed, 0);
    ck_assert_int_eq(rate[0], 1);
}
END_TEST

START_TEST(deficit_spawns_with_doubling_ramp)
{
    pf_limits_t lim = limits(1, 20, 40, 150);
    int cycle, expected = 1;

    reset(1);
    set_bucket(0, 1, 0, 0);
    for (cycle = 0; cycle < 4; cycle++) {
        pf_maintenance_decide(&lim, state, occupied(1), rate, action,
                              scratch, &summary);
        ck_assert_int_eq(action[0].spawn, expected);
        /* Pretend they are all still busy: the deficit stays. */
        state[0].children += action[0].spawn;
        expected *= 2;
    }
    ck_assert_int_eq(rate[0], 16);
}
END_TEST

START_TEST(ramp_stops_at_max_spawn_rate)
{
    pf_limits_t lim = limits(1, 1000, 2000, 100000);
    int cycle;

    reset(1);
    set_bucket(0, 1, 0, 0);
    for (cycle = 0; cycle < 12; cycle++) {
        pf_maintenance_decide(&lim, state, occupied(1), rate, action,
                              scratch, &summary);
        ck_assert_int_le(action[0].spawn, PF_MAX_SPAWN_RATE);
    }
    ck_assert_int_eq(rate[0], PF_MAX_SPAWN_RATE);
    ck_assert_int_eq(action[0].spawn, PF_MAX_SPAWN_RATE);
}
END_TEST

START_TEST(ramp_falls_back_when_satisfied)
{
    pf_limits_t lim = limits(1, 2, 10, 150);

    reset(1);
    rate[0] = 16;
    set_bucket(0, 5, 3, 0);
    pf_maintenance_decide(&lim, state, occupied(1), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(rate[0], 1);
}
END_TEST

START_TEST(surplus_idle_retires_one_per_cycle)
{
    pf_limits_t lim = limits(2, 2, 4, 150);

    reset(2);
    set_bucket(0, 10, 9, 0);    /* max share 2: one goes */
    set_bucket(1, 2, 2, 0);     /* within its max share of 2 ... */
    pf_maintenance_decide(&lim, state, occupied(2), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(action[0].kill, 1);
    /* ... but the server holds 10 idle children over MaxSpareServers 4,
     * so the server-wide trim takes one down to its minimum of 1. */
    ck_assert_int_eq(action[1].kill, 1);
    ck_assert_int_eq(summary.killed, 2);
}
END_TEST

START_TEST(stranded_bucket_gets_a_child_first)
{
    /* One free slot: the bucket with no child wins over a deficit. */
    pf_limits_t lim = limits(3, 6, 12, 10);

    reset(3);
    rate[0] = 8;
    set_bucket(0, 5, 0, 0);
    set_bucket(1, 4, 0, 0);
    set_bucket(2, 0, 0, 0);
    pf_maintenance_decide(&lim, state, 9, rate, action, scratch, &summary);
    ck_assert_int_eq(action[2].spawn, 1);
    ck_assert_int_eq(action[0].spawn + action[1].spawn, 0);
    ck_assert_int_eq(summary.at_max_workers, 1);
}
END_TEST

START_TEST(queued_bucket_goes_before_idle_deficit)
{
    pf_limits_t lim = limits(2, 4, 8, 12);

    reset(2);
    set_bucket(0, 5, 0, 0);     /* deficit 2, nothing queued */
    set_bucket(1, 5, 0, 7);     /* deficit 2 and 7 queued */
    rate[0] = rate[1] = 8;
    pf_maintenance_decide(&lim, state, 10, rate, action, scratch, &summary);
    ck_assert_int_eq(action[1].spawn, 2);
    ck_assert_int_eq(action[0].spawn, 0);
}
END_TEST

START_TEST(queue_with_no_idle_child_drives_spawning)
{
    pf_limits_t lim = limits(1, 1, 2, 150);

    reset(1);
    rate[0] = 4;
    set_bucket(0, 3, 0, 10);    /* every child busy, 10 connections wait */
    pf_maintenance_decide(&lim, state, occupied(1), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(action[0].spawn, 4);
    ck_assert_int_eq(action[0].kill, 0);
    ck_assert_int_eq(rate[0], 8);
}
END_TEST

START_TEST(momentary_queue_beside_idle_children_is_not_load)
{
    /* Regression: reacting to a queue seen at one instant while children
     * were idle grew the pool to MaxRequestWorkers under light load. */
    pf_limits_t lim = limits(1, 1, 4, 150);

    reset(1);
    set_bucket(0, 3, 2, 5);
    pf_maintenance_decide(&lim, state, occupied(1), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(action[0].spawn, 0);
    ck_assert_int_eq(rate[0], 1);
}
END_TEST

START_TEST(spawns_never_exceed_max_request_workers)
{
    pf_limits_t lim = limits(8, 64, 128, 20);
    int b;

    reset(8);
    for (b = 0; b < 8; b++) {
        set_bucket(b, 2, 0, 3);
        rate[b] = 32;
    }
    pf_maintenance_decide(&lim, state, 16, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.spawned, 4);
    ck_assert_int_eq(summary.at_max_workers, 1);
    pf_maintenance_decide(&lim, state, 25, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.spawned, 0);
}
END_TEST

START_TEST(many_buckets_have_no_builtin_limit)
{
    /* 1000 buckets, none with a child: all of them get one this cycle. */
    pf_limits_t lim = limits(1000, 5, 10, 5000);
    int b;

    reset(1000);
    pf_maintenance_decide(&lim, state, 0, rate, action, scratch, &summary);
    for (b = 0; b < 1000; b++) {
        ck_assert_int_ge(action[b].spawn, 1);
    }
    ck_assert_int_eq(summary.spawned, 1000);
}
END_TEST

START_TEST(at_the_limit_an_idle_child_makes_room_for_a_starved_bucket)
{
    /* 8 workers, all alive (a share of 2 each): bucket 0 has one child,
     * busy, and 3 connections queued; bucket 3 holds 3 children, two of
     * them idle, and nothing queued. */
    pf_limits_t lim = limits(4, 1, 8, 8);

    reset(4);
    set_bucket(0, 1, 0, 3);
    set_bucket(1, 2, 0, 0);
    set_bucket(2, 2, 1, 0);
    set_bucket(3, 3, 2, 0);
    pf_maintenance_decide(&lim, state, 8, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.at_max_workers, 1);
    ck_assert_int_eq(summary.rebalanced, 1);
    ck_assert_int_eq(action[3].kill, 1);
    ck_assert_int_eq(action[0].kill + action[1].kill + action[2].kill, 0);
    ck_assert_int_eq(summary.spawned, 0);
}
END_TEST

START_TEST(rebalancing_never_takes_a_bucket_last_child)
{
    pf_limits_t lim = limits(3, 1, 8, 4);

    reset(3);
    set_bucket(0, 2, 0, 5);     /* starved */
    set_bucket(1, 1, 1, 0);     /* its only child: not a donor */
    set_bucket(2, 1, 1, 0);
    pf_maintenance_decide(&lim, state, 4, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.rebalanced, 0);
    ck_assert_int_eq(action[1].kill + action[2].kill, 0);
}
END_TEST

START_TEST(no_churn_when_every_bucket_holds_its_share)
{
    /* Evenly hashed load at the cap: a momentary queue in one bucket must
     * not pull children from the others (the scale model showed p99
     * tripling when it did).  MaxSpareServers 16 keeps surplus kills out. */
    pf_limits_t lim = limits(4, 1, 16, 16);

    reset(4);
    set_bucket(0, 4, 0, 2);
    set_bucket(1, 4, 3, 0);
    set_bucket(2, 4, 2, 0);
    set_bucket(3, 4, 1, 0);
    pf_maintenance_decide(&lim, state, 16, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.rebalanced, 0);
    ck_assert_int_eq(action[1].kill + action[2].kill + action[3].kill, 0);
}
END_TEST

START_TEST(no_rebalancing_below_the_limit)
{
    pf_limits_t lim = limits(2, 1, 8, 100);

    reset(2);
    set_bucket(0, 2, 0, 3);
    set_bucket(1, 5, 5, 0);
    pf_maintenance_decide(&lim, state, 7, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.rebalanced, 0);
    ck_assert_int_gt(action[0].spawn, 0);
}
END_TEST

START_TEST(respawn_now_only_for_an_empty_bucket)
{
    ck_assert_int_eq(pf_maintenance_respawn_now(0, 0, 3, 10), 1);
    ck_assert_int_eq(pf_maintenance_respawn_now(1, 0, 3, 10), 0);
    ck_assert_int_eq(pf_maintenance_respawn_now(0, 1, 3, 10), 0);
    ck_assert_int_eq(pf_maintenance_respawn_now(0, 0, 10, 10), 0);
}
END_TEST

/* Reads the next whole number from *text; returns -1 when there is none. */
static int next_int(char **text, int *value)
{
    char *end;
    long v = strtol(*text, &end, 10);

    if (end == *text) {
        return -1;
    }
    *value = (int)v;
    *text = end;
    return 0;
}

/* The shared table: the scale model checks the same rows through ctypes,
 * so the model and the MPM cannot come to disagree unnoticed. */
START_TEST(shared_cases_hold)
{
    const char *path = getenv("PFB_MAINTENANCE_CASES");
    char line[1024], *field[7], *p;
    int rows = 0, nb, mn, mx, workers, steering, occ, b, f, want, v;
    FILE *cases;

    cases = fopen(path ? path : "test/unit/maintenance_cases.txt", "r");
    ck_assert_msg(cases != NULL, "test/unit/maintenance_cases.txt missing");
    while (fgets(line, sizeof(line), cases)) {
        if (line[0] == '#' || line[0] == '\n') {
            continue;
        }
        for (f = 0, p = line; f < 7 && p; f++) {
            field[f] = p;
            p = strchr(p, '|');
            if (p) {
                *p++ = '\0';
            }
        }
        ck_assert_msg(f == 7, "malformed case: %s", field[0]);
        p = field[1];
        ck_assert(next_int(&p, &nb) == 0 && next_int(&p, &mn) == 0
                  && next_int(&p, &mx) == 0 && next_int(&p, &workers) == 0);
        steering = case_steering(p);
        ck_assert_int_le(nb, MAX_TEST_BUCKETS);
        p = field[2];
        ck_assert(next_int(&p, &occ) == 0);
        reset(nb);
        p = field[3];
        ck_assert(next_int(&p, &rate[0]) == 0);
        for (b = 0, p = field[4]; b < nb; b++) {
            ck_assert(next_int(&p, &state[b].children) == 0
                      && next_int(&p, &state[b].idle) == 0
                      && next_int(&p, &state[b].queued) == 0);
        }
        {
            pf_limits_t lim = limits_under(nb, mn, mx, workers, steering);

            pf_maintenance_decide(&lim, state, occ, rate, action, scratch,
                                  &summary);
        }
        for (b = 0, p = field[5]; b < nb; b++) {
            ck_assert(next_int(&p, &want) == 0);
            ck_assert_msg(action[b].spawn == want, "%s: bucket %d spawns %d",
                          field[0], b, action[b].spawn);
            ck_assert(next_int(&p, &want) == 0);
            ck_assert_msg(action[b].kill == want, "%s: bucket %d kills %d",
                          field[0], b, action[b].kill);
        }
        p = field[6];
        ck_assert(next_int(&p, &v) == 0);
        ck_assert_msg(rate[0] == v, "%s: ramp %d", field[0], rate[0]);
        rows++;
    }
    fclose(cases);
    ck_assert_int_ge(rows, 10);
}
END_TEST

Suite *maintenance_suite(void)
{
    Suite *s = suite_create("maintenance");
    TCase *share = tcase_create("Shares");
    TCase *restarts = tcase_create("restarts");
    TCase *spawn = tcase_create("Spawn");
    TCase *kill = tcase_create("Kill");
    TCase *limit = tcase_create("Limits");

    tcase_add_test(share, shares_add_up_to_the_total);
    tcase_add_test(share, spare_shares_keep_one_idle_per_bucket);
    tcase_add_test(restarts, old_generation_counts_as_idle_children);

    tcase_add_test(spawn, steady_state_does_nothing);
    tcase_add_test(spawn, deficit_spawns_with_doubling_ramp);
    tcase_add_test(spawn, ramp_stops_at_max_spawn_rate);
    tcase_add_test(spawn, ramp_falls_back_when_satisfied);
    tcase_add_test(spawn, queue_with_no_idle_child_drives_spawning);
    tcase_add_test(spawn, momentary_queue_beside_idle_children_is_not_load);
    tcase_add_test(kill, surplus_idle_retires_one_per_cycle);
    tcase_add_test(limit, stranded_bucket_gets_a_child_first);
    tcase_add_test(limit, queued_bucket_goes_before_idle_deficit);
    tcase_add_test(limit, spawns_never_exceed_max_request_workers);
    tcase_add_test(limit, many_buckets_have_no_builtin_limit);
    tcase_add_test(limit, respawn_now_only_for_an_empty_bucket);
    tcase_add_test(limit,
                   at_the_limit_an_idle_child_makes_room_for_a_starved_bucket);
    tcase_add_test(limit, rebalancing_never_takes_a_bucket_last_child);
    tcase_add_test(limit, no_rebalancing_below_the_limit);
    tcase_add_test(limit, no_churn_when_every_bucket_holds_its_share);
    tcase_add_test(limit, shared_cases_hold);

    tcase_set_timeout(share, 10);
    tcase_set_timeout(spawn, 10);
    tcase_set_timeout(kill, 10);
    tcase_set_timeout(limit, 10);
    suite_add_tcase(s, share);
    suite_add_tcase(s, restarts);
    suite_add_tcase(s, spawn);
    suite_add_tcase(s, kill);
    suite_add_tcase(s, limit);
    return s;
}
