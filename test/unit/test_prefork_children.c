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
 * a child that ignores SIGTERM and says so at each step.  A cycle's look
 * at the children counts them in the bucket their identity has now, by
 * the state each wrote, lists the idle ones highest slot first, sums the
 * counters they wrote (saturating) and counts their waiting marks only in
 * the numbering they were forked in.  The parent's wait wakes on SIGCHLD,
 * reaps one process, says whose slot it held and whether it had reported
 * ready on the channel, and frees the slot.
 *
 * And the channel children report ready on, with real processes: 400
 * that start at once are all heard; through a channel with room for a
 * handful, 100 senders wait for room and none is lost; a sender that
 * finds no room gives up after its patience, and says so.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/prefork_children.c"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "apr_atomic.h"
#include "apr_general.h"
#include "apr_pools.h"
#include "apr_time.h"

#include "unit.h"
#include "conn/prefork_linger.h"

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

static void gone(void *baton, const pf_child_exit_t *how)
{
    seen_t *seen = baton;

    ck_assert_int_lt(seen->calls, SLOTS);
    seen->slot[seen->calls] = how->slot;
    seen->child[seen->calls] = how->child;
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

/* Two buckets: identity 5 is bucket 0, identity 2 bucket 1; identity 7
 * is out of use.  The numbering was made in generation 3. */
#define RECORDS 8
#define BUCKETS 2

typedef struct {
    pf_generation_t gen;
    int record[RECORDS], position[RECORDS];
    pf_bucket_state_t state[BUCKETS];
    int idle[BUCKETS], busy[BUCKETS], starting[BUCKETS], stopping[BUCKETS];
    int old[BUCKETS], head[BUCKETS], next[SLOTS], queued[BUCKETS];
    int waiting[BUCKETS];
    apr_time_t lived[BUCKETS];
    apr_uint64_t accepted[BUCKETS];
} numbering_t;

static void make_numbering(numbering_t *n)
{
    pf_observation_t *obs = &n->gen.obs;
    int r;

    memset(n, 0, sizeof(*n));
    for (r = 0; r < RECORDS; r++) {
        n->position[r] = -1;
    }
    n->record[0] = 5;
    n->record[1] = 2;
    n->position[5] = 0;
    n->position[2] = 1;
    n->gen.record = n->record;
    n->gen.position = n->position;
    n->gen.num_records = RECORDS;
    n->gen.num_buckets = BUCKETS;
    n->gen.layout = 3;
    obs->state = n->state;
    obs->idle = n->idle;
    obs->busy = n->busy;
    obs->starting = n->starting;
    obs->stopping = n->stopping;
    obs->old_generation = n->old;
    obs->idle_head = n->head;
    obs->idle_next = n->next;
    obs->newest_lived = n->lived;
    obs->queued = n->queued;
    obs->waiting = n->waiting;
    obs->accepted = n->accepted;
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
    /* The reap: the slot is free for readers at once, but keeps its
     * record and count until the bucket set moves the count into its
     * bucket's total (pf_segment_retire): never in neither place. */
    pf_children_forget(c, 2, NULL);
    ck_assert_int_eq(parents[2].pid, 0);
    ck_assert_int_eq(segment[2].f.pid, 0);
    ck_assert_int_eq(segment[2].f.record, 3);
    ck_assert_uint_eq(segment[2].f.accepted, 12);
    pf_children_publish(c);
    ck_assert_int_eq(segment[2].f.record, 3);
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

START_TEST(a_cycle_counts_each_child_in_the_bucket_of_its_identity)
{
    static worker_score rows[SLOTS];
    worker_score *servers[SLOTS];
    pf_children_t *c = pf_children_create(pool, SLOTS);
    numbering_t n;
    pf_observation_t *obs = &n.gen.obs;
    int slot, live[BUCKETS], held[8], status;

    make_numbering(&n);
    for (slot = 0; slot < SLOTS; slot++) {
        servers[slot] = &rows[slot];
        rows[slot].status = SERVER_READY;
    }
    pf_children_publish_to(c, parents, segment, 0, pool);
    /* Generation 4: slots 0, 1, 3 idle and 2 starting in bucket 0; slot
     * 4 busy in bucket 1; slot 5 told to stop, slot 6 of generation 3
     * (forked in the numbering in force), slot 7 of an identity out of
     * use. */
    for (slot = 0; slot < SLOTS; slot++) {
        pf_children_forking(c, slot);
        pf_children_started(c, slot, start_waiter(0), slot == 6 ? 3 : 4,
                            slot == 7 ? 7 : slot >= 4 ? 2 : 5);
    }
    rows[2].status = SERVER_STARTING;
    rows[4].status = SERVER_BUSY_READ;
    /* The scoreboard says ready for the child told to stop: it is not
     * idle for the cycle. */
    ck_assert_int_eq(pf_children_tell_to_stop(c, 5), 1);
    /* Slot 3 has lived a second, slots 0 and 1 longer. */
    obs->when = apr_time_now();
    c->slot[0].started = obs->when - 5000000;
    c->slot[1].started = obs->when - 3000000;
    c->slot[3].started = obs->when - 1000000;
    /* What the children wrote. */
    segment[0].f.accepted = 10;
    segment[1].f.accepted = ~(apr_uint64_t)0 - 5;
    segment[4].f.accepted = 7;
    segment[6].f.accepted = 1;
    segment[7].f.accepted = 1000;
    segment[3].f.waiting = 1;
    segment[6].f.waiting = 1;
    segment[7].f.waiting = 1;
    n.queued[0] = 4;
    pf_children_observe(c, &n.gen, 4, servers, obs);

    ck_assert_int_eq(obs->occupied, 8);
    ck_assert_int_eq(n.state[0].children, 4);
    ck_assert_int_eq(n.state[0].idle, 4);
    ck_assert_int_eq(n.state[0].queued, 4);
    ck_assert_int_eq(n.idle[0], 3);
    ck_assert_int_eq(n.starting[0], 1);
    ck_assert_int_eq(n.busy[0], 0);
    ck_assert_int_eq(n.state[1].children, 1);
    ck_assert_int_eq(n.busy[1], 1);
    ck_assert_int_eq(n.stopping[1], 2);
    ck_assert_int_eq(n.old[1], 1);
    /* Idle slots of bucket 0, highest first; none in bucket 1. */
    ck_assert_int_eq(n.head[0], 3);
    ck_assert_int_eq(n.next[3], 1);
    ck_assert_int_eq(n.next[1], 0);
    ck_assert_int_eq(n.next[0], -1);
    ck_assert_int_eq(n.head[1], -1);
    ck_assert_int_eq(n.lived[0], c->slot[3].started);
    ck_assert_int_eq(n.lived[1], 0);
    /* Counters summed, saturating; the out-of-use identity's count for
     * nobody. */
    ck_assert(n.accepted[0] == ~(apr_uint64_t)0);
    ck_assert_uint_eq(n.accepted[1], 8);
    ck_assert_int_eq(n.waiting[0], 1);
    ck_assert_int_eq(n.waiting[1], 1);
    /* Forked before the numbering in force: its mark does not count. */
    n.gen.layout = 4;
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(n.waiting[1], 0);

    ck_assert_int_eq(pf_children_count_live(c, &n.gen, 4, live), 8);
    ck_assert_int_eq(live[0], 4);
    ck_assert_int_eq(live[1], 1);
    /* The census before a build: per record every live child, of any
     * generation, told to stop or not; per bucket those not told to
     * stop, of any generation; record 7 lies beyond the 7 records asked
     * about and counts nowhere. */
    held[7] = -1;
    pf_children_census(c, &n.gen, 7, held, live);
    ck_assert_int_eq(held[5], 4);
    ck_assert_int_eq(held[2], 3);
    ck_assert_int_eq(held[0] + held[1] + held[3] + held[4] + held[6], 0);
    ck_assert_int_eq(held[7], -1);
    ck_assert_int_eq(live[0], 4);
    ck_assert_int_eq(live[1], 2);
    /* The old generation's child is told to stop; then everyone. */
    ck_assert_int_eq(pf_children_stop(c, 4, 0), 1);
    ck_assert(c->slot[6].stopping);
    ck_assert(!c->slot[0].stopping);
    ck_assert_int_eq(pf_children_stop(c, 4, 1), 6);
    for (slot = 0; slot < SLOTS; slot++) {
        ck_assert(c->slot[slot].stopping);
        ck_assert_int_eq(parents[slot].quiescing, 1);
        ck_assert_int_eq(waitpid(c->slot[slot].pid, &status, 0),
                         c->slot[slot].pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1);
    }
}
END_TEST

/* Retirement: of the idle children, the one whose accept counter has not
 * moved for longest goes first (of equals, the highest slot); one that
 * says it lingers is not a candidate, though it counts as idle. */
START_TEST(retirement_picks_the_child_idle_longest_and_not_lingering)
{
    static worker_score rows[SLOTS];
    worker_score *servers[SLOTS];
    pf_children_t *c = pf_children_create(pool, SLOTS);
    numbering_t n;
    pf_observation_t *obs = &n.gen.obs;
    apr_time_t t0 = apr_time_from_sec(1000);
    int slot, status;

    make_numbering(&n);
    for (slot = 0; slot < SLOTS; slot++) {
        servers[slot] = &rows[slot];
        rows[slot].status = SERVER_READY;
    }
    pf_children_publish_to(c, parents, segment, 0, pool);
    for (slot = 0; slot < 4; slot++) {
        pf_children_forking(c, slot);
        pf_children_started(c, slot, start_waiter(0), 4, 5);
        c->slot[slot].quiet_since = t0;
    }
    /* A second on, slots 0 and 2 have taken connections. */
    segment[0].f.accepted = 5;
    segment[2].f.accepted = 3;
    obs->when = t0 + apr_time_from_sec(1);
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(n.idle[0], 4);
    ck_assert(c->slot[0].quiet_since == obs->when);
    ck_assert(c->slot[1].quiet_since == t0);
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 3);
    /* Slot 3 lingers: idle for the counts, not for retirement. */
    segment[3].f.lingering = 2;
    obs->when = t0 + apr_time_from_sec(2);
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(n.idle[0], 4);
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 1);
    /* Told to stop within the cycle, slot 1 is no longer picked; slots 0
     * and 2 have been quiet as long: the higher goes. */
    c->slot[1].stopping = 1;
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 2);
    /* Slot 2 takes a connection: slot 0 has been idle longest. */
    segment[2].f.accepted = 4;
    obs->when = t0 + apr_time_from_sec(3);
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 0);
    /* Nobody idle in bucket 1. */
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 1), -1);
    /* Slot 3 has said it lingers for longer than httpd lingers (a child
     * may set the mark in every slot): a hint no more, and it is the
     * idlest child again. */
    obs->when = t0 + apr_time_from_sec(2) + PF_LINGERING_HINT_BOUND;
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 0);
    obs->when += 1;
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 3);
    /* Cleared, then set again: the bound starts again. */
    segment[3].f.lingering = 0;
    pf_children_observe(c, &n.gen, 4, servers, obs);
    segment[3].f.lingering = 1;
    obs->when += 1;
    pf_children_observe(c, &n.gen, 4, servers, obs);
    ck_assert_int_eq(pf_children_coldest_idle(c, obs, 0), 0);
    for (slot = 0; slot < 4; slot++) {
        kill(c->slot[slot].pid, SIGTERM);
        ck_assert_int_eq(waitpid(c->slot[slot].pid, &status, 0),
                         c->slot[slot].pid);
    }
}
END_TEST

START_TEST(a_lingering_mark_counts_within_httpds_bound)
{
    apr_time_t t = apr_time_from_sec(500);

    ck_assert(!pf_children_lingering_counts(0, t, t));
    ck_assert(pf_children_lingering_counts(1, t, t));
    ck_assert(pf_children_lingering_counts(1, t, t + PF_LINGERING_HINT_BOUND));
    ck_assert(!pf_children_lingering_counts(1, t,
                                            t + PF_LINGERING_HINT_BOUND + 1));
    ck_assert_int_eq(PF_LINGERING_HINT_BOUND,
                     PF_LINGER_MAX_USEC + PF_LINGER_QUIET_USEC);
}
END_TEST

/* A child that reports ready (or not) and exits 0. */
static pid_t start_reporter(pf_children_t *c, int report)
{
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pf_children_close_channels(c, 0);
        _exit(report && pf_children_report_ready(c) != APR_SUCCESS ? 1 : 0);
    }
    return pid;
}

START_TEST(the_wait_reaps_one_exit_and_says_what_it_was)
{
    pf_children_t *c = pf_children_create(pool, SLOTS);
    pf_child_exit_t how;
    int wanted = 0, room = 0, reaped = 0, stranger;
    pid_t ready, silent;

    ck_assert_int_eq(pf_children_open(c, pool, &wanted, &room), APR_SUCCESS);
    ck_assert_int_eq(wanted, 2 * SLOTS + 64);
    ck_assert_int_ge(room, 1);
    /* Open already: nothing opened again. */
    ck_assert_int_eq(pf_children_open(c, pool, &wanted, &room), APR_SUCCESS);
    ck_assert_int_eq(room, -1);
    pf_children_publish_to(c, parents, segment, 0, pool);
    ready = start_reporter(c, 1);
    pf_children_started(c, 1, ready, 2, 4);
    silent = start_reporter(c, 0);
    pf_children_started(c, 3, silent, 2, 4);
    /* A process of ours that is no child in the table. */
    stranger = start_reporter(c, 0);
    /* Each exit wakes the wait (a long one: SIGCHLD cuts it short). */
    while (reaped < 3) {
        if (!pf_children_wait(c, 60000, &how, pool)) {
            continue;
        }
        reaped++;
        ck_assert(how.waited);
        ck_assert_int_eq(how.why, APR_PROC_EXIT);
        ck_assert_int_eq(how.status, 0);
        if (how.proc.pid == ready) {
            ck_assert_int_eq(how.slot, 1);
            ck_assert(how.child.ready);
            ck_assert_int_eq(how.child.record, 4);
        }
        else if (how.proc.pid == silent) {
            ck_assert_int_eq(how.slot, 3);
            ck_assert(!how.child.ready);
        }
        else {
            ck_assert_int_eq(how.proc.pid, stranger);
            ck_assert_int_eq(how.slot, -1);
        }
    }
    ck_assert_int_eq(pf_children_live(c), 0);
    ck_assert_int_eq(parents[1].pid, 0);
    ck_assert_int_eq(parents[3].pid, 0);
    /* Nothing left: the wait says so once its time is up. */
    ck_assert_int_eq(pf_children_wait(c, 10, &how, pool), 0);
    pf_children_close_channels(c, 1);
    ck_assert_int_eq(c->wake_pipe[0], -1);
    ck_assert_int_eq(c->ready[1], -1);
    ck_assert_int_eq(pf_children_report_ready(c), APR_SUCCESS);
}
END_TEST

/* A cycle sums the counters children write (and a reaped child's goes
 * to its bucket's retired total) with include/prefork_buckets.h's
 * saturating add, which the status module shares: a hostile child's
 * value can pin a sum at the largest value, never wrap it. */
START_TEST(sums_of_child_counters_saturate)
{
    static const struct {
        unsigned long long a, b, want;
    } cases[] = {
        { 0, 0, 0 },
        { 1, 2, 3 },
        { ~0ULL, 0, ~0ULL },
        { ~0ULL, 1, ~0ULL },
        { ~0ULL - 1, 1, ~0ULL },
        { ~0ULL - 1, 2, ~0ULL },
        { 1ULL << 63, 1ULL << 63, ~0ULL },
        { (1ULL << 63) - 1, 1ULL << 63, ~0ULL },
        { 0, ~0ULL, ~0ULL },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(pfb_add_saturated(cases[i].a, cases[i].b)
                          == cases[i].want,
                      "case %zu", i);
    }
}
END_TEST

Suite *children_suite(void)
{
    Suite *s = suite_create("children");
    TCase *table = tcase_create("table");
    TCase *procs = tcase_create("processes");
    TCase *sums = tcase_create("sums");

    tcase_add_checked_fixture(table, setup, teardown);
    tcase_add_test(table, slots_are_filled_at_the_fork_and_freed_at_the_reap);
    tcase_add_test(table, the_publisher_writes_both_records_from_the_table);
    tcase_add_test(table, a_fresh_scoreboard_keeps_only_the_slots_still_held);

    suite_add_tcase(s, table);
    tcase_add_checked_fixture(procs, setup, teardown);
    tcase_set_timeout(procs, 60);
    tcase_add_test(procs, a_stop_is_one_graceful_signal);
    tcase_add_test(procs,
                   a_cycle_counts_each_child_in_the_bucket_of_its_identity);
    tcase_add_test(procs,
                   retirement_picks_the_child_idle_longest_and_not_lingering);
    tcase_add_test(procs, a_lingering_mark_counts_within_httpds_bound);
    tcase_add_test(procs, the_reap_frees_only_slots_whose_child_has_exited);
    tcase_add_test(procs, the_wait_reaps_one_exit_and_says_what_it_was);
    tcase_add_test(procs, the_reclaim_ends_obedient_children_without_a_step);
    tcase_add_test(procs, the_reclaim_kills_a_child_that_ignores_sigterm);
    suite_add_tcase(s, procs);
    tcase_add_test(sums, sums_of_child_counters_saturate);
    suite_add_tcase(s, sums);
    return s;
}

/* ------------------------------------------------------------------ */
/* The ready channel, with real processes                               */

#define MAX_SENDERS 400

typedef struct {
    pid_t pids[MAX_SENDERS];
    int seen[MAX_SENDERS];
    int n;
    int strangers;
} heard_t;

static void heard(void *baton, pid_t pid)
{
    heard_t *h = baton;
    int i;

    for (i = 0; i < h->n; i++) {
        if (h->pids[i] == pid) {
            h->seen[i]++;
            return;
        }
    }
    h->strangers++;
}

/* Forks @a n senders on the children's end; each exits 0 when its report
 * went, 1 when not. */
static void start_senders(heard_t *h, int fds[2], int n,
                          apr_interval_time_t patience)
{
    int i;

    memset(h, 0, sizeof(*h));
    for (i = 0; i < n; i++) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            _exit(ready_report(fds[1], patience) == APR_SUCCESS ? 0 : 1);
        }
        h->pids[i] = pid;
        h->n++;
    }
}

/* Reads reports while senders live, then what is left; every sender must
 * have exited 0. */
static void collect(heard_t *h, int fds[2])
{
    int left = h->n, status, i;
    pid_t pid;

    while (left > 0) {
        struct pollfd pfd = { fds[0], POLLIN, 0 };

        (void)poll(&pfd, 1, 100);
        ready_read(fds[0], 1024, heard, h);
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                          "sender %d: status %d", (int)pid, status);
            left--;
        }
    }
    ready_read(fds[0], 1024, heard, h);
    for (i = 0; i < h->n; i++) {
        ck_assert_msg(h->seen[i] == 1, "sender %d heard %d times", i,
                      h->seen[i]);
    }
    ck_assert_int_eq(h->strangers, 0);
}

START_TEST(every_one_of_400_children_starting_at_once_is_heard)
{
    static heard_t h;
    int fds[2], room = 0, status, i;

    ck_assert_int_eq(ready_open(fds, 2 * MAX_SENDERS + 64, &room),
                     APR_SUCCESS);
    /* As root the room is what was asked; otherwise the system's cap. */
    if (geteuid() == 0) {
        ck_assert_int_ge(room, 2 * MAX_SENDERS + 64);
    }
    /* The parent reads nothing until every child has sent and exited, as
     * when it forks StartServers children in one go. */
    start_senders(&h, fds, MAX_SENDERS, PF_READY_PATIENCE);
    if (room >= MAX_SENDERS) {
        for (i = 0; i < h.n; i++) {
            ck_assert_int_eq(waitpid(h.pids[i], &status, 0), h.pids[i]);
            ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        ready_read(fds[0], 2 * MAX_SENDERS, heard, &h);
        for (i = 0; i < h.n; i++) {
            ck_assert_msg(h.seen[i] == 1, "child %d heard %d times", i,
                          h.seen[i]);
        }
    }
    else {
        collect(&h, fds);
    }
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(a_full_channel_makes_senders_wait_and_loses_none)
{
    static heard_t h;
    int fds[2], room = 0;

    /* Room for one report: the kernel's smallest buffer holds a few. */
    ck_assert_int_eq(ready_open(fds, 1, &room), APR_SUCCESS);
    ck_assert_int_lt(room, 20);
    start_senders(&h, fds, 100, apr_time_from_sec(60));
    collect(&h, fds);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(a_sender_that_finds_no_room_gives_up_after_its_patience)
{
    int fds[2], room = 0, sent = 0;
    apr_time_t started;

    ck_assert_int_eq(ready_open(fds, 1, &room), APR_SUCCESS);
    while (ready_report(fds[1], 0) == APR_SUCCESS && sent < 10000) {
        sent++;
    }
    ck_assert_int_gt(sent, 0);
    ck_assert_int_lt(sent, 10000);
    started = apr_time_now();
    ck_assert_int_eq(ready_report(fds[1], apr_time_from_msec(300)),
                     APR_TIMEUP);
    ck_assert(apr_time_now() - started >= apr_time_from_msec(300));
    close(fds[0]);
    close(fds[1]);
}
END_TEST

Suite *ready_suite(void)
{
    Suite *s = suite_create("ready");
    TCase *channel = tcase_create("channel");

    tcase_set_timeout(channel, 120);
    tcase_add_test(channel, every_one_of_400_children_starting_at_once_is_heard);
    tcase_add_test(channel, a_full_channel_makes_senders_wait_and_loses_none);
    tcase_add_test(channel,
                   a_sender_that_finds_no_room_gives_up_after_its_patience);
    suite_add_tcase(s, channel);
    return s;
}
