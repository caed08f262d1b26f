/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * prefork_maintenance.c, idle-server maintenance per bucket: each
 * bucket's share of StartServers and of the spare-server limits; an older
 * generation's children counted as idle ones on their way; what one cycle
 * forks and retires (the ramp, surplus idle children, buckets with no
 * child or a queue first, MaxRequestWorkers and the idle children it
 * moves to starved buckets, the shared pool of idle and local steering);
 * whether an exit needs a fork at once; and the table of cases the scale
 * model checks too (test/unit/maintenance_cases.txt).  Then how the
 * parent reads a child's end and paces the replacements of children that
 * die at start: an exit classified from the parent's own knowledge
 * (lifetime, told to stop, recycling) and what an end means
 * (APEXIT_CHILDFATAL before and after ready, an outside kill, a process
 * not ours); the back-off's delays; a bucket's pacing step by step (an
 * admin's kills replaced at once, deaths at start paced, episodes ended
 * only by new children that live or a quiet bucket); and the forks a
 * killer or fast recycling can get.
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


/* ------------------------------------------------------------------ */
/* Respawn: how an exit is classified                                  */

#define MS 1000LL
#define SEC 1000000LL

static const struct {
    long long lifetime_us;
    int told_to_stop, clean, recycling;
    pf_exit_kind_e want;
} exit_cases[] = {
    /* Told to stop: whatever else. */
    { 10 * MS, 1, 0, 0, PF_EXIT_STOPPED },
    { 10 * SEC, 1, 1, 1, PF_EXIT_STOPPED },
    /* Lived a second: whatever it died of. */
    { SEC, 0, 0, 0, PF_EXIT_LIVED },
    { 3600 * SEC, 0, 1, 0, PF_EXIT_LIVED },
    /* Young, not told to stop. */
    { SEC - 1, 0, 0, 0, PF_EXIT_EARLY },        /* killed or crashed */
    { 0, 0, 0, 1, PF_EXIT_EARLY },              /* a signal, recycling */
    { 5 * MS, 0, 1, 0, PF_EXIT_EARLY },         /* exit(0) nobody asked */
    { 5 * MS, 0, 1, 1, PF_EXIT_RECYCLED },      /* MaxConnectionsPerChild */
    /* A clock that went back: young. */
    { -5 * SEC, 0, 0, 0, PF_EXIT_EARLY },
};

START_TEST(exits_are_classified_from_the_parents_knowledge)
{
    size_t i;

    for (i = 0; i < sizeof(exit_cases) / sizeof(exit_cases[0]); i++) {
        ck_assert_msg(pf_respawn_classify_exit(exit_cases[i].lifetime_us,
                                               exit_cases[i].told_to_stop,
                                               exit_cases[i].clean,
                                               exit_cases[i].recycling)
                          == exit_cases[i].want,
                      "case %zu", i);
    }
}
END_TEST

/* What an exit means: APEXIT_CHILDFATAL stops the server only from a
 * process that never reported ready; an outside kill of one of ours is
 * said; anything not ours is lost to the table. */
static const struct {
    int ours, ready, told_to_stop, fatal_exit, killed;
    pf_child_end_e want;
} end_cases[] = {
    { 1, 0, 0, 0, 0, PF_END_LEFT },
    { 1, 1, 1, 0, 0, PF_END_LEFT },
    { 1, 1, 1, 0, 1, PF_END_LEFT },     /* killed after it was told */
    { 1, 0, 0, 0, 1, PF_END_KILLED },
    { 1, 1, 0, 0, 1, PF_END_KILLED },
    { 1, 1, 0, 1, 0, PF_END_FATAL_STARTED },
    { 1, 1, 1, 1, 0, PF_END_FATAL_STARTED },
    { 1, 0, 0, 1, 0, PF_END_FATAL },    /* never started: stop */
    { 0, 0, 0, 1, 0, PF_END_FATAL },    /* httpd stops for any process */
    { 0, 1, 0, 1, 0, PF_END_FATAL },
    { 0, 0, 0, 0, 0, PF_END_LOST },
    { 0, 0, 0, 0, 1, PF_END_LOST },
};

START_TEST(ends_are_classified_from_the_parents_knowledge)
{
    size_t i;

    for (i = 0; i < sizeof(end_cases) / sizeof(end_cases[0]); i++) {
        ck_assert_msg(pf_respawn_classify_end(end_cases[i].ours,
                                              end_cases[i].ready,
                                              end_cases[i].told_to_stop,
                                              end_cases[i].fatal_exit,
                                              end_cases[i].killed)
                          == end_cases[i].want,
                      "case %zu", i);
    }
}
END_TEST

START_TEST(delay_doubles_from_one_second_to_its_cap)
{
    static const struct {
        int early;
        long long want;
    } cases[] = {
        { 0, 0 }, { 1, 0 }, { 2, 0 }, { PF_RESPAWN_FORGIVEN, 0 },
        { PF_RESPAWN_FORGIVEN + 1, SEC }, { PF_RESPAWN_FORGIVEN + 2, 2 * SEC },
        { PF_RESPAWN_FORGIVEN + 3, 4 * SEC },
        { PF_RESPAWN_FORGIVEN + 6, 32 * SEC },
        { PF_RESPAWN_FORGIVEN + 7, PF_RESPAWN_MAX_DELAY_US },
        { 1000000, PF_RESPAWN_MAX_DELAY_US }, { -3, 0 },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(pf_respawn_delay(cases[i].early) == cases[i].want,
                      "early %d: %lld", cases[i].early,
                      pf_respawn_delay(cases[i].early));
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* A bucket's pacing, step by step                                     */

/* One step: at time `at` (ms), an exit ('E' early, 'V' lived, 'S'
 * stopped, 'R' recycled) of a child forked at `born` (ms), or a fork ('F'
 * in cycle, 'I' out of cycle), or a child forked at `born` seen alive
 * ('L'), or a look at a bucket with a live child ('Q'); then what
 * pf_respawn_may_fork() must say in cycle and out of it. */
typedef struct {
    long long at;
    char op;
    long long born;
    int episode;                /* exits: starts one; 'L', 'Q': end one */
    int may_in_cycle, may_out_of_cycle;
} step_t;

static pf_exit_kind_e exit_kind(char op)
{
    switch (op) {
    case 'V':
        return PF_EXIT_LIVED;
    case 'S':
        return PF_EXIT_STOPPED;
    case 'R':
        return PF_EXIT_RECYCLED;
    default:
        return PF_EXIT_EARLY;
    }
}

static void run_steps(const step_t *steps, size_t n)
{
    pf_respawn_t r;
    size_t i;
    int got;

    memset(&r, 0, sizeof(r));
    for (i = 0; i < n; i++) {
        long long now = steps[i].at * MS, born = steps[i].born * MS;

        switch (steps[i].op) {
        case 'E':
        case 'V':
        case 'S':
        case 'R':
            got = pf_respawn_note_exit(&r, exit_kind(steps[i].op), born,
                                       now);
            ck_assert_msg(got == steps[i].episode, "step %zu", i);
            break;
        case 'F':
            pf_respawn_note_fork(&r, 0, now);
            break;
        case 'I':
            pf_respawn_note_fork(&r, 1, now);
            break;
        case 'L':
            got = pf_respawn_note_alive(&r, born, now);
            ck_assert_msg(got == steps[i].episode,
                          "step %zu: ended %d", i, got);
            break;
        case 'Q':
            got = pf_respawn_note_quiet(&r, now);
            ck_assert_msg(got == steps[i].episode,
                          "step %zu: ended %d", i, got);
            break;
        }
        ck_assert_msg(pf_respawn_may_fork(&r, 0, now)
                          == steps[i].may_in_cycle,
                      "step %zu (%c at %lld ms): in cycle", i, steps[i].op,
                      steps[i].at);
        ck_assert_msg(pf_respawn_may_fork(&r, 1, now)
                          == steps[i].may_out_of_cycle,
                      "step %zu (%c at %lld ms): out of cycle", i,
                      steps[i].op, steps[i].at);
    }
}

START_TEST(an_admins_three_kills_are_replaced_at_once)
{
    /* Three young children killed one after another (the "last child
     * replaced at once" scene): every replacement out of cycle. */
    static const step_t steps[] = {
        { 100, 'E', 50, 0, 1, 1 },  { 100, 'I', 0, 0, 1, 1 },
        { 300, 'E', 100, 0, 1, 1 }, { 300, 'I', 0, 0, 1, 1 },
        { 500, 'E', 300, 0, 1, 1 }, { 500, 'I', 0, 0, 1, 0 },
        /* The window has passed: out of cycle again. */
        { 1500, 'S', 500, 0, 1, 1 },
    };

    run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}
END_TEST

START_TEST(children_dying_at_start_are_paced_with_back_off)
{
    static const step_t steps[] = {
        { 0, 'V', -9000, 0, 1, 1 }, { 0, 'I', 0, 0, 1, 1 },
        { 5, 'E', 0, 0, 1, 1 },     { 5, 'I', 0, 0, 1, 1 },
        { 10, 'E', 5, 0, 1, 1 },    { 10, 'I', 0, 0, 1, 0 },
        { 15, 'E', 10, 0, 1, 0 },   /* three forgiven; window full */
        { 400, 'F', 0, 0, 1, 0 },   /* maintenance forks */
        { 405, 'E', 400, 1, 0, 0 }, /* the fourth: held 1 s */
        { 1404, 'S', -9000, 0, 0, 0 },
        { 1405, 'S', -9000, 0, 1, 0 }, /* maintenance may; at once never */
        { 1405, 'F', 0, 0, 0, 0 },  /* one fork per delay */
        { 1410, 'E', 1405, 0, 0, 0 }, /* held 2 s from the death */
        /* A child from before the episode lives on, or dies after a
         * long life: that ends nothing. */
        { 2000, 'L', -9000, 0, 0, 0 },
        { 2100, 'V', -9000, 0, 0, 0 },
        { 3409, 'S', -9000, 0, 0, 0 },
        { 3410, 'F', 0, 0, 0, 0 },
        { 3415, 'E', 3410, 0, 0, 0 }, /* 4 s */
        { 7415, 'S', -9000, 0, 1, 0 },
        { 7415, 'F', 0, 0, 0, 0 },
        /* Alive, not yet a second old: nothing.  A second old: the
         * episode is over, at once again. */
        { 8000, 'L', 7415, 0, 0, 0 },
        { 8500, 'L', 7415, 1, 1, 1 },
        { 8600, 'E', 8590, 0, 1, 1 },
    };

    run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}
END_TEST

START_TEST(a_child_older_than_the_deaths_ends_nothing)
{
    /* A hostile child that kills its siblings lives on in its own
     * bucket: it is no sign that new children live. */
    static const step_t steps[] = {
        { 1000, 'E', 990, 0, 1, 1 },
        { 1100, 'L', -60000, 0, 1, 1 },
        { 1200, 'E', 1150, 0, 1, 1 },
        { 2300, 'L', -60000, 0, 1, 1 },
        { 2400, 'E', 2350, 0, 1, 1 },
        { 3500, 'E', 3450, 1, 0, 0 },   /* the fourth: paced */
        { 4000, 'L', -60000, 0, 0, 0 },
        /* A child forked since the deaths began, a second old. */
        { 4600, 'L', 1000, 1, 1, 1 },
    };

    run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}
END_TEST

START_TEST(a_quiet_bucket_is_paced_no_more)
{
    /* The killer stops; its bucket, where it lives on, needs no new
     * child: a whole delay after the hold with no death ends it. */
    static const step_t steps[] = {
        { 0, 'E', -5, 0, 1, 1 },     { 10, 'E', 5, 0, 1, 1 },
        { 20, 'E', 15, 0, 1, 1 },    { 30, 'E', 25, 1, 0, 0 },
        { 1030, 'Q', 0, 0, 1, 0 },   /* free to fork; not yet quiet */
        { 1500, 'F', 0, 0, 0, 0 },   /* a fork: held 1 s more */
        { 1510, 'E', 1500, 0, 0, 0 }, /* killed: 2 s from here */
        { 4509, 'Q', 0, 0, 1, 0 },
        { 5510, 'Q', 0, 1, 1, 1 },   /* hold + delay, no death: over */
        { 5600, 'Q', 0, 0, 1, 1 },   /* not paced: nothing to end */
    };

    run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}
END_TEST

START_TEST(recycled_and_stopped_children_pace_nothing)
{
    static const step_t steps[] = {
        { 0, 'R', 0, 0, 1, 1 },  { 0, 'I', 0, 0, 1, 1 },
        { 1, 'R', 0, 0, 1, 1 },  { 1, 'I', 0, 0, 1, 1 },
        { 2, 'R', 1, 0, 1, 1 },  { 2, 'I', 0, 0, 1, 0 },
        /* Out of cycle, three a second whatever the exits say; in
         * cycle, the normal ramp. */
        { 3, 'R', 2, 0, 1, 0 },  { 3, 'F', 0, 0, 1, 0 },
        { 4, 'S', 3, 0, 1, 0 },  { 1002, 'S', 3, 0, 1, 1 },
    };

    run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}
END_TEST

/* The most forks a bucket gets while a sibling kills each of its
 * children 2 ms after its fork: the parent forks whenever the pacing
 * lets it, out of cycle on each death and in each once-a-second cycle. */
START_TEST(a_killer_gets_a_bounded_number_of_forks)
{
    pf_respawn_t r;
    long long now, next_cycle = SEC, death = -1, born = 0;
    long long per_second[64];
    int forks = 0, alive = 0, s;

    memset(&r, 0, sizeof(r));
    memset(per_second, 0, sizeof(per_second));
    /* The first child, killed after it lived. */
    pf_respawn_note_exit(&r, PF_EXIT_LIVED, -10 * SEC, 0);
    for (now = 0; now < 64 * SEC; now += MS) {
        int out_of_cycle = 0, in_cycle = 0;

        if (alive && now >= death) {
            alive = 0;
            pf_respawn_note_exit(&r, PF_EXIT_EARLY, born, now);
            out_of_cycle = 1;
        }
        else if (now == 0) {
            out_of_cycle = 1;
        }
        if (now >= next_cycle) {
            in_cycle = 1;
            next_cycle += SEC;
        }
        if (!alive && ((out_of_cycle && pf_respawn_may_fork(&r, 1, now))
                       || (in_cycle && pf_respawn_may_fork(&r, 0, now)))) {
            pf_respawn_note_fork(&r, out_of_cycle, now);
            alive = 1;
            born = now;
            death = now + 2 * MS;
            forks++;
            per_second[now / SEC]++;
        }
    }
    /* Three forgiven at once, then one a cycle while the back-off
     * grows: 1, 2, 4, 8, 16, then 32 s. */
    ck_assert_int_le(per_second[0], PF_RESPAWN_FORGIVEN + 1);
    for (s = 1; s < 64; s++) {
        ck_assert_msg(per_second[s] <= 1, "second %d: %lld forks", s,
                      per_second[s]);
    }
    ck_assert_int_le(forks, 12);
    ck_assert(pf_respawn_paced(&r));
}
END_TEST

/* Children recycled by MaxConnectionsPerChild 1 as fast as they can go:
 * never paced, at most PF_RESPAWN_FORGIVEN out of cycle in any second. */
START_TEST(recycling_gets_three_out_of_cycle_forks_a_second)
{
    pf_respawn_t r;
    long long now, window = 0;
    int in_window = 0;

    memset(&r, 0, sizeof(r));
    for (now = 0; now < 10 * SEC; now += MS) {
        pf_respawn_note_exit(&r, PF_EXIT_RECYCLED, now - MS, now);
        if (pf_respawn_may_fork(&r, 1, now)) {
            pf_respawn_note_fork(&r, 1, now);
            if (now - window >= SEC) {
                window = now;
                in_window = 0;
            }
            in_window++;
            ck_assert_int_le(in_window, PF_RESPAWN_FORGIVEN);
        }
        ck_assert(!pf_respawn_paced(&r));
        ck_assert(pf_respawn_may_fork(&r, 0, now));
    }
}
END_TEST

Suite *respawn_suite(void)
{
    Suite *s = suite_create("respawn");
    TCase *classify = tcase_create("classify");
    TCase *pacing = tcase_create("pacing");

    tcase_add_test(classify, exits_are_classified_from_the_parents_knowledge);
    tcase_add_test(classify, ends_are_classified_from_the_parents_knowledge);
    tcase_add_test(classify, delay_doubles_from_one_second_to_its_cap);
    tcase_add_test(pacing, an_admins_three_kills_are_replaced_at_once);
    tcase_add_test(pacing, children_dying_at_start_are_paced_with_back_off);
    tcase_add_test(pacing, a_child_older_than_the_deaths_ends_nothing);
    tcase_add_test(pacing, a_quiet_bucket_is_paced_no_more);
    tcase_add_test(pacing, recycled_and_stopped_children_pace_nothing);
    tcase_add_test(pacing, a_killer_gets_a_bounded_number_of_forks);
    tcase_add_test(pacing, recycling_gets_three_out_of_cycle_forks_a_second);
    suite_add_tcase(s, classify);
    suite_add_tcase(s, pacing);
    return s;
}
