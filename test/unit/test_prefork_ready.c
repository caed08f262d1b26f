/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The channel children report ready on (prefork_ready.c), with real
 * processes: 400 that start at once are all heard; through a channel with
 * room for a handful, 100 senders wait for room and none is lost; a sender
 * that finds no room gives up after its patience, and says so.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/prefork_ready.c"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "apr_time.h"

#include "unit.h"

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
            _exit(pf_ready_report(fds[1], patience) == APR_SUCCESS ? 0 : 1);
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
        pf_ready_read(fds[0], 1024, heard, h);
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                          "sender %d: status %d", (int)pid, status);
            left--;
        }
    }
    pf_ready_read(fds[0], 1024, heard, h);
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

    ck_assert_int_eq(pf_ready_open(fds, 2 * MAX_SENDERS + 64, &room),
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
        pf_ready_read(fds[0], 2 * MAX_SENDERS, heard, &h);
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
    ck_assert_int_eq(pf_ready_open(fds, 1, &room), APR_SUCCESS);
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

    ck_assert_int_eq(pf_ready_open(fds, 1, &room), APR_SUCCESS);
    while (pf_ready_report(fds[1], 0) == APR_SUCCESS && sent < 10000) {
        sent++;
    }
    ck_assert_int_gt(sent, 0);
    ck_assert_int_lt(sent, 10000);
    started = apr_time_now();
    ck_assert_int_eq(pf_ready_report(fds[1], apr_time_from_msec(300)),
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
