/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * prefork_respawn.c, how the parent reads a child's end and paces the
 * replacements of children that die at start: an exit classified from
 * the parent's own knowledge (lifetime, told to stop, recycling) and what
 * an end means (APEXIT_CHILDFATAL before and after ready, an outside
 * kill, a process not ours); the back-off's delays; a bucket's pacing
 * step by step (an admin's kills replaced at once, deaths at start paced,
 * episodes ended only by new children that live or a quiet bucket); and
 * the forks a killer or fast recycling can get.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/prefork_respawn.c"

#include <string.h>

#include "unit.h"

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
