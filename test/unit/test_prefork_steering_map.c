/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * steering/prefork_steering_map.c against the running kernel (root only;
 * the runner leaves this suite out, and says so, for other users): when
 * the guard replaces a bucket socket, the connections queued on the old
 * one reach the new one, both where steering's program chooses the socket
 * through the map and where a handover's program does it on a group that
 * has none.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/steering/prefork_steering_map.c"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "ap_config.h"
#include "apr_general.h"
#include "apr_portable.h"

#include "unit.h"
#include "prefork_buckets.h"
#include "steering/prefork_steering_kernel.h"

#ifdef HAVE_BPF_STEERING

#include "steer_group.h"

/* Connections queued on a socket that stops listening go to the socket
 * the group's program chooses, where the kernel can (5.14): the guard's
 * replacement of a bucket socket loses nothing.  Both ways: steering's
 * own program with the new socket under the old one's key, and a
 * handover's program on a group that has none. */
START_TEST(test_kernel_hands_a_closing_sockets_queue_over)
{
    char why[256];
    int prog_fd, clients[6], i, got, fd, one = 1, way;
    apr_socket_t *fresh = NULL;
    steer_group_t g;

    if (!pf_steer_can_hand_over(why, sizeof(why))) {
        printf("steering-map: no handover on this kernel (%s)\n", why);
        return;
    }
    for (way = 0; way < 2; way++) {
        steer_group_open(&g, 1, -1);
        prog_fd = -1;
        if (way == 0) {
            prog_fd = steer_group_load(&g, PFB_STEER_HASH, 0, 1, g.map_fd,
                                       -1, STEER_MAP_CAPACITY, -1);
        }
        for (i = 0; i < 6; i++) {
            clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            ck_assert_int_eq(connect(clients[i], (struct sockaddr *)&g.addr,
                                     sizeof(g.addr)), 0);
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&g.addr, sizeof(g.addr)),
                         0);
        ck_assert_int_eq(listen(fd, 64), 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        ck_assert_int_eq(apr_os_sock_put(&fresh, &fd, g.pool), APR_SUCCESS);
        if (way == 0) {
            ck_assert_int_eq(pf_steer_kernel_put_socket(g.map_fd, 0, fresh),
                             APR_SUCCESS);
            ck_assert_int_eq(shutdown(g.fds[0], SHUT_RDWR), 0);
        }
        else {
            ck_assert_int_eq(pf_steer_handover(fresh, g.fds[0], 0),
                             APR_SUCCESS);
        }
        for (i = 0, got = 0; i < 6; i++) {
            int a = accept(fd, NULL, NULL);

            if (a >= 0) {
                got++;
                close(a);
            }
        }
        ck_assert_msg(got == 6, "way %d: %d of 6 handed over", way, got);
        for (i = 0; i < 6; i++) {
            close(clients[i]);
        }
        close(fd);
        fresh = NULL;
        pf_steer_kernel_close(prog_fd);
        steer_group_close(&g);
    }
}
END_TEST

/* A handshake in flight on the old socket is handed over when its last
 * packet comes, which takes a round trip on a real network, and only if
 * the group still has the program then: where the new socket is its
 * Listen's only one, the handover's program stays on the group.  Seen
 * from outside: a socket that joins the group afterwards gets nothing
 * while the program stays, and its hash share once it is detached. */
START_TEST(test_kernel_handover_program_stays_with_one_socket)
{
    char why[256];
    int stays, i, fd, out, one = 1, taken[2] = { 0, 0 };
    apr_socket_t *fresh = NULL;
    steer_group_t g;

    if (!pf_steer_can_hand_over(why, sizeof(why))) {
        printf("steering-map: no handover on this kernel (%s)\n", why);
        return;
    }
    for (stays = 0; stays < 2; stays++) {
        steer_group_open(&g, 1, -1);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&g.addr, sizeof(g.addr)),
                         0);
        ck_assert_int_eq(listen(fd, 64), 0);
        ck_assert_int_eq(apr_os_sock_put(&fresh, &fd, g.pool), APR_SUCCESS);
        ck_assert_int_eq(pf_steer_handover(fresh, g.fds[0], stays),
                         APR_SUCCESS);
        out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(out, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ck_assert_int_eq(bind(out, (struct sockaddr *)&g.addr,
                              sizeof(g.addr)), 0);
        ck_assert_int_eq(listen(out, 64), 0);
        fcntl(out, F_SETFL, O_NONBLOCK);
        for (i = 0; i < 40; i++) {
            int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), a;

            ck_assert_int_eq(connect(c, (struct sockaddr *)&g.addr,
                                     sizeof(g.addr)), 0);
            if ((a = accept(out, NULL, NULL)) >= 0) {
                taken[stays]++;
                close(a);
            }
            close(c);
        }
        close(out);
        close(fd);
        fresh = NULL;
        steer_group_close(&g);
    }
    ck_assert_msg(taken[1] == 0, "the outsider took %d of 40 with the "
                  "program on the group", taken[1]);
    /* Detached, the kernel's hash gives it about half (none of 40: one
     * chance in 2^40). */
    ck_assert_msg(taken[0] > 0, "the outsider took none of 40 with the "
                  "program detached");
}
END_TEST

#endif /* HAVE_BPF_STEERING */

Suite *steering_map_suite(void)
{
    Suite *s = suite_create("steering-map");
    TCase *tc = tcase_create("kernel");

#ifdef HAVE_BPF_STEERING
    apr_initialize();
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kernel_hands_a_closing_sockets_queue_over);
    tcase_add_test(tc, test_kernel_handover_program_stays_with_one_socket);
#endif
    suite_add_tcase(s, tc);
    return s;
}
