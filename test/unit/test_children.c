/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The parent's one record of its children (prefork_children.c), with real
 * processes: a slot is found, filled at the fork and freed at the reap,
 * and counted by the identity it was forked for; the one publisher writes
 * the scoreboard's parent record and the segment's slot record from the
 * table, at the fork, the stop and the reap and again every cycle, so a
 * child's scribbles there last until the next publish, and the counters a
 * child writes start from zero at its fork and are its own after it; a
 * stop is one AP_SIG_GRACEFUL; the reap frees a slot only once its child
 * has exited, and says how it left; the reclaim escalates to SIGKILL for
 * a child that ignores SIGTERM and says so at each step.
 */

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "apr_atomic.h"
#include "apr_general.h"
#include "apr_pools.h"

#include "unit.h"
#include "prefork_children.h"

#define SLOTS 8

static apr_pool_t *pool;
static process_score parents[SLOTS];
static pfb_slot_t segment[SLOTS];

static void setup(void)
{
    apr_initialize();
    apr_pool_create(&pool, NULL);
    memset(parents, 0, sizeof(parents));
    memset(segment, 0, sizeof(segment));
}

static void teardown(void)
{
    apr_pool_destroy(pool);
    apr_terminate();
}

/* A process that waits for a signal and dies of it (SIGTERM ignored when
 * @a stubborn); returned once its handlers are in place. */
static pid_t start_waiter(int stubborn)
{
    int ready[2];
    char byte;
    pid_t pid;

    ck_assert_int_eq(pipe(ready), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Check's handler (which ends the whole test) does not belong
         * here. */
        signal(SIGTERM, stubborn ? SIG_IGN : SIG_DFL);
        if (write(ready[1], "", 1) != 1) {
            _exit(1);
        }
        for (;;) {
            pause();
        }
    }
    close(ready[1]);
    ck_assert_int_eq(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    return pid;
}

/* Waits until @a pid has exited, without reaping it. */
static void wait_until_exited(pid_t pid)
{
    siginfo_t info;

    memset(&info, 0, sizeof(info));
    ck_assert_int_eq(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT), 0);
}

typedef struct {
    int calls;
    int slot[SLOTS];
    pf_child_t child[SLOTS];
    pf_child_exit_t how[SLOTS];
    int steps;
    int step_signal[8];
} seen_t;

static void gone(void *baton, int slot, const pf_child_t *child,
                 const pf_child_exit_t *how)
{
    seen_t *seen = baton;

    ck_assert_int_lt(seen->calls, SLOTS);
    seen->slot[seen->calls] = slot;
    seen->child[seen->calls] = *child;
    seen->how[seen->calls] = *how;
    seen->calls++;
}

static void step(void *baton, int live, int sig)
{
    seen_t *seen = baton;

    ck_assert_int_gt(live, 0);
    ck_assert_int_lt(seen->steps, 8);
    seen->step_signal[seen->steps++] = sig;
}

START_TEST(slots_are_filled_at_the_fork_and_freed_at_the_reap)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    pf_child_t was;
    int current, old;

    ck_assert_int_eq(pf_children_free_slot(c, SLOTS), 0);
    pf_children_started(c, 0, 101, 3, 5);
    pf_children_started(c, 1, 102, 3, 5);
    pf_children_started(c, 4, 103, 2, 5);
    pf_children_started(c, 2, 104, 3, 7);
    ck_assert_int_eq(c->used, 5);
    ck_assert_int_eq(pf_children_live(c), 4);
    /* MaxRequestWorkers bounds the slots given out. */
    ck_assert_int_eq(pf_children_free_slot(c, SLOTS), 3);
    ck_assert_int_eq(pf_children_free_slot(c, 3), -1);
    ck_assert_int_eq(pf_children_find(c, 103), 4);
    ck_assert_int_eq(pf_children_find(c, 999), -1);
    ck_assert_int_eq(pf_children_mark_ready(c, 102), 1);
    ck_assert_int_eq(pf_children_mark_ready(c, 999), -1);
    ck_assert(c->slot[1].ready && !c->slot[0].ready);
    /* Counted by the identity they were forked for, whatever bucket
     * number it has now. */
    pf_children_count_record(c, 5, 3, &current, &old);
    ck_assert_int_eq(current, 2);
    ck_assert_int_eq(old, 1);
    pf_children_count_record(c, 7, 3, &current, &old);
    ck_assert_int_eq(current, 1);
    ck_assert_int_eq(old, 0);
    pf_children_forget(c, 1, &was);
    ck_assert_int_eq(was.pid, 102);
    ck_assert_int_eq(was.record, 5);
    ck_assert(was.ready);
    ck_assert_int_eq(c->slot[1].pid, 0);
    ck_assert_int_eq(pf_children_live(c), 3);
    ck_assert_int_eq(pf_children_free_slot(c, SLOTS), 1);
    ck_assert_int_eq(pf_children_find(c, 102), -1);
}
END_TEST

START_TEST(the_publisher_writes_both_records_from_the_table)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    apr_pool_t *gen;

    apr_pool_create(&gen, pool);
    pf_children_publish_to(c, parents, segment, 0, gen);
    /* Before the fork the counters the child writes start from zero... */
    segment[2].f.accepted = 77;
    segment[2].f.waiting = 1;
    pf_children_forking(c, 2);
    ck_assert_uint_eq(segment[2].f.accepted, 0);
    ck_assert_int_eq(segment[2].f.waiting, 0);
    ck_assert_int_eq(segment[2].f.pid, 0);
    ck_assert_int_eq(segment[2].f.record, -1);
    pf_children_started(c, 2, 4242, 6, 3);
    ck_assert_int_eq(parents[2].pid, 4242);
    ck_assert_int_eq(parents[2].generation, 6);
    ck_assert_int_eq(parents[2].quiescing, 0);
    ck_assert_int_eq(segment[2].f.pid, 4242);
    ck_assert_int_eq(segment[2].f.record, 3);
    ck_assert_int_eq(segment[2].f.generation, 6);
    ck_assert_int_eq(segment[2].f.stopping, 0);
    /* ...and after it they are the child's own. */
    apr_atomic_set64(&segment[2].f.accepted, 12);
    segment[2].f.waiting = 1;
    /* A child scribbles over what the parent writes: it lasts until the
     * next publish, a cycle at most. */
    parents[2].pid = 1;
    parents[2].bucket = 9;
    parents[5].pid = 1;
    segment[2].f.pid = 1;
    segment[2].f.record = 1000000;
    segment[2].f.stopping = 1;
    pf_children_publish(c);
    ck_assert_int_eq(parents[2].pid, 4242);
    ck_assert_int_eq(parents[2].bucket, 0);
    ck_assert_int_eq(segment[2].f.pid, 4242);
    ck_assert_int_eq(segment[2].f.record, 3);
    ck_assert_int_eq(segment[2].f.stopping, 0);
    ck_assert_uint_eq(segment[2].f.accepted, 12);
    ck_assert_int_eq(segment[2].f.waiting, 1);
    /* Past the slots in use nothing is written. */
    ck_assert_int_eq(parents[5].pid, 1);
    /* The reap: the slot is free for readers at once. */
    pf_children_forget(c, 2, NULL);
    ck_assert_int_eq(parents[2].pid, 0);
    ck_assert_int_eq(segment[2].f.pid, 0);
    ck_assert_int_eq(segment[2].f.record, -1);
    /* Once the generation's pool is gone, nothing is written there. */
    apr_pool_destroy(gen);
    pf_children_started(c, 2, 4343, 7, 3);
    ck_assert_int_eq(parents[2].pid, 0);
    ck_assert_int_eq(segment[2].f.pid, 0);
}
END_TEST

START_TEST(a_fresh_scoreboard_keeps_only_the_slots_still_held)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);

    pf_children_started(c, 1, 201, 0, 0);
    pf_children_started(c, 6, 202, 0, 0);
    pf_children_forget(c, 6, NULL);
    ck_assert_int_eq(c->used, 7);
    pf_children_publish_to(c, parents, segment, 0, pool);
    ck_assert_int_eq(c->used, 7);
    pf_children_publish_to(c, parents, segment, 1, pool);
    ck_assert_int_eq(c->used, 2);
    ck_assert_int_eq(parents[1].pid, 201);
    ck_assert_int_eq(segment[1].f.pid, 201);
}
END_TEST

START_TEST(a_stop_is_one_graceful_signal)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    pid_t pid = start_waiter(0);
    int status;

    pf_children_publish_to(c, parents, segment, 0, pool);
    pf_children_started(c, 3, pid, 1, 0);
    ck_assert_int_eq(pf_children_tell_to_stop(c, 3), 1);
    ck_assert_int_eq(parents[3].quiescing, 1);
    ck_assert_int_eq(segment[3].f.stopping, 1);
    ck_assert_int_eq(pf_children_tell_to_stop(c, 3), 0);
    ck_assert_int_eq(pf_children_tell_to_stop(c, 4), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1);
    pf_children_forget(c, 3, NULL);
}
END_TEST

START_TEST(the_reap_frees_only_slots_whose_child_has_exited)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    pid_t running = start_waiter(0), exited = fork();
    seen_t seen;

    ck_assert_int_ge(exited, 0);
    if (exited == 0) {
        _exit(3);
    }
    memset(&seen, 0, sizeof(seen));
    pf_children_publish_to(c, parents, segment, 0, pool);
    pf_children_started(c, 0, running, 1, 4);
    pf_children_started(c, 1, exited, 1, 2);
    wait_until_exited(exited);
    pf_children_reap(c, gone, &seen);
    ck_assert_int_eq(seen.calls, 1);
    ck_assert_int_eq(seen.slot[0], 1);
    ck_assert_int_eq(seen.child[0].pid, exited);
    ck_assert_int_eq(seen.child[0].record, 2);
    ck_assert(seen.how[0].waited);
    ck_assert_int_eq(seen.how[0].proc.pid, exited);
    ck_assert_int_eq(seen.how[0].why, APR_PROC_EXIT);
    ck_assert_int_eq(seen.how[0].status, 3);
    /* Free for readers before the callback runs. */
    ck_assert_int_eq(parents[1].pid, 0);
    ck_assert_int_eq(c->slot[0].pid, running);
    ck_assert_int_eq(pf_children_live(c), 1);
    kill(running, SIGKILL);
    wait_until_exited(running);
    pf_children_reap(c, gone, &seen);
    ck_assert_int_eq(seen.calls, 2);
    ck_assert_int_eq(seen.how[1].why, APR_PROC_SIGNAL);
    ck_assert_int_eq(seen.how[1].status, SIGKILL);
    ck_assert_int_eq(pf_children_live(c), 0);
}
END_TEST

START_TEST(the_reclaim_ends_obedient_children_without_a_step)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    seen_t seen;
    int i;

    memset(&seen, 0, sizeof(seen));
    for (i = 0; i < 4; i++) {
        pf_children_started(c, i, start_waiter(0), 1, i);
    }
    pf_children_reclaim(c, 1, gone, step, &seen);
    ck_assert_int_eq(seen.calls, 4);
    ck_assert_int_eq(seen.steps, 0);
    ck_assert_int_eq(pf_children_live(c), 0);
    for (i = 0; i < 4; i++) {
        ck_assert_int_eq(seen.how[i].why, APR_PROC_SIGNAL);
        ck_assert_int_eq(seen.how[i].status, SIGTERM);
    }
}
END_TEST

START_TEST(the_reclaim_kills_a_child_that_ignores_sigterm)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    seen_t seen;

    memset(&seen, 0, sizeof(seen));
    pf_children_started(c, 0, start_waiter(0), 1, 0);
    pf_children_started(c, 1, start_waiter(1), 1, 0);
    pf_children_reclaim(c, 1, gone, step, &seen);
    ck_assert_int_eq(seen.calls, 2);
    ck_assert_int_eq(pf_children_live(c), 0);
    /* SIGTERM at 3, 5 and 7 seconds after the last exit, then SIGKILL. */
    ck_assert_int_eq(seen.steps, 4);
    ck_assert_int_eq(seen.step_signal[0], SIGTERM);
    ck_assert_int_eq(seen.step_signal[1], SIGTERM);
    ck_assert_int_eq(seen.step_signal[2], SIGTERM);
    ck_assert_int_eq(seen.step_signal[3], SIGKILL);
    ck_assert_int_eq(seen.how[1].status, SIGKILL);
}
END_TEST

Suite *children_suite(void)
{
    Suite *s = suite_create("children");
    TCase *table = tcase_create("table");
    TCase *procs = tcase_create("processes");

    tcase_add_checked_fixture(table, setup, teardown);
    tcase_add_test(table, slots_are_filled_at_the_fork_and_freed_at_the_reap);
    tcase_add_test(table, the_publisher_writes_both_records_from_the_table);
    tcase_add_test(table, a_fresh_scoreboard_keeps_only_the_slots_still_held);
    suite_add_tcase(s, table);
    tcase_add_checked_fixture(procs, setup, teardown);
    tcase_set_timeout(procs, 60);
    tcase_add_test(procs, a_stop_is_one_graceful_signal);
    tcase_add_test(procs, the_reap_frees_only_slots_whose_child_has_exited);
    tcase_add_test(procs, the_reclaim_ends_obedient_children_without_a_step);
    tcase_add_test(procs, the_reclaim_kills_a_child_that_ignores_sigterm);
    suite_add_tcase(s, procs);
    return s;
}
