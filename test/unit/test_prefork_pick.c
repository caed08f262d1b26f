/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * conn/prefork_pick.c, which ready listener a child holding its bucket's
 * accept mutex takes: the first after the one it served last, in the
 * bucket's order, whatever the pollset's order; positions out of range
 * ignored; every listener served in turn when all stay ready, and one that
 * stays ready served within a round whatever else is ready.
 */

/* The file under test, compiled here rather than linked on its own, as
 * every file the unit tests test is (Makefile.in, UNIT_TESTED_SRC). */
#include "../../server/mpm/prefork/conn/prefork_pick.c"

#include "unit.h"

/* ------------------------------------------------------------------ */
/* The accept path's pick                                              */

#define MAX_READY 8

/* One pick: the ready positions in the pollset's order, the listeners in
 * the bucket and the last served, and the ready index expected. */
typedef struct {
    const char *what;
    int num_listeners;
    int last_served;
    int num_ready;
    int ready[MAX_READY];
    int expected;
} pick_case_t;

static const pick_case_t pick_cases[] = {
    {"first pick takes position 0", 4, -1, 4, {0, 1, 2, 3}, 0},
    {"after 0 comes 1", 4, 0, 4, {0, 1, 2, 3}, 1},
    {"after the last, round to the first", 4, 3, 4, {0, 1, 2, 3}, 0},
    {"pollset order does not matter", 4, 1, 4, {3, 0, 2, 1}, 2},
    {"skips listeners that are not ready", 4, 0, 2, {3, 0}, 0},
    {"the last served again when alone", 4, 2, 1, {2}, 0},
    {"wraps past the end to a lower one", 4, 3, 2, {1, 2}, 0},
    {"a last served out of range starts over", 4, 9, 2, {2, 1}, 1},
    {"positions out of range are ignored", 4, -1, 3, {7, -2, 3}, 2},
    {"nothing valid ready", 4, 0, 2, {4, 5}, -1},
    {"nothing ready", 4, 0, 0, {0}, -1},
    {"no listeners", 0, -1, 1, {0}, -1},
};

START_TEST(pick_follows_table)
{
    const pick_case_t *c = &pick_cases[_i];

    ck_assert_msg(pf_pick_ready_listener(c->ready, c->num_ready,
                                         c->num_listeners, c->last_served)
                  == c->expected, "%s", c->what);
}
END_TEST

/* A busy server: every listener stays ready, and the pollset reports them
 * in the same order each time.  Each child's picks go round all of them,
 * so no listener waits while the first in the pollset's order is busy. */
START_TEST(picks_go_round_when_all_stay_ready)
{
    int ready[MAX_READY] = {2, 0, 3, 1};
    int served[MAX_READY] = {0};
    int last = -1, pick, i;

    for (i = 0; i < 40; i++) {
        pick = pf_pick_ready_listener(ready, 4, 4, last);
        ck_assert_int_ge(pick, 0);
        last = ready[pick];
        served[last]++;
    }
    for (i = 0; i < 4; i++) {
        ck_assert_msg(served[i] == 10, "listener %d served %d of 40", i,
                      served[i]);
    }
}
END_TEST

/* Whatever else becomes ready meanwhile, a listener that stays ready is
 * served within one round of picks (as many picks as listeners). */
START_TEST(a_listener_that_stays_ready_waits_at_most_one_round)
{
    int ready[MAX_READY];
    int n = 5, watched = 3, last = -1, since = 0, pick, step, k, m;
    unsigned int seed = 12345;

    for (step = 0; step < 2000; step++) {
        m = 0;
        ready[m++] = watched;
        for (k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            if (k != watched && (seed >> 16) % 2) {
                ready[m++] = k;
            }
        }
        /* Any order: rotate by a pseudo-random amount. */
        seed = seed * 1103515245u + 12345u;
        for (k = (int)((seed >> 16) % (unsigned)m); k > 0; k--) {
            int first = ready[0], j;

            for (j = 1; j < m; j++) {
                ready[j - 1] = ready[j];
            }
            ready[m - 1] = first;
        }
        pick = pf_pick_ready_listener(ready, m, n, last);
        ck_assert_int_ge(pick, 0);
        last = ready[pick];
        since = last == watched ? 0 : since + 1;
        ck_assert_msg(since < n, "listener %d waited %d picks", watched,
                      since);
    }
}
END_TEST

Suite *pick_suite(void)
{
    Suite *s = suite_create("pick");
    TCase *pick = tcase_create("pick");

    tcase_add_loop_test(pick, pick_follows_table, 0,
                        (int)(sizeof(pick_cases) / sizeof(pick_cases[0])));
    tcase_add_test(pick, picks_go_round_when_all_stay_ready);
    tcase_add_test(pick, a_listener_that_stays_ready_waits_at_most_one_round);
    suite_add_tcase(s, pick);
    return s;
}
