/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The bucket socket a child must hold (prefork_guard.c): the parent's
 * checks put back each thing a child can change, on real sockets, and
 * replace a socket that cannot be put right in place (filters locked, an
 * option the kernel will not take back) under the same descriptor, its
 * old one no longer listening.  The children's system-call filter has
 * tests of its own (test_prefork_seccomp.c).
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/guard/prefork_guard.c"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/net.h>

#include "apr_general.h"
#include "apr_portable.h"

#include "unit.h"

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

/* A listening socket on a loopback port, explicitly bound as httpd's
 * are, with SO_REUSEPORT, backlog 128. */
static int listener(int *port)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, probe;

    ck_assert_int_ge(fd, 0);
    /* A free port first: the socket must be bound to a chosen one. */
    probe = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(probe, (struct sockaddr *)&addr, sizeof(addr)), 0);
    ck_assert_int_eq(getsockname(probe, (struct sockaddr *)&addr, &len), 0);
    close(probe);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    ck_assert_int_eq(listen(fd, 128), 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

static apr_socket_t *wrap(int fd)
{
    apr_socket_t *sd = NULL;
    apr_os_sock_t os = fd;

    ck_assert_int_eq(apr_os_sock_put(&sd, &os, pool), APR_SUCCESS);
    return sd;
}

static int int_option_of(int fd, int level, int name)
{
    int value = -1;
    socklen_t len = sizeof(value);

    ck_assert_int_eq(getsockopt(fd, level, name, &value, &len), 0);
    return value;
}

/* A connection to the port is accepted on fd. */
static int accepts(int fd, int port)
{
    struct sockaddr_in addr;
    int c = socket(AF_INET, SOCK_STREAM, 0), a, ok;

    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((unsigned short)port);
    ok = connect(c, (struct sockaddr *)&addr, sizeof(addr)) == 0;
    a = ok ? accept(fd, NULL, NULL) : -1;
    close(c);
    if (a >= 0) {
        close(a);
    }
    return a >= 0;
}

static const pf_guard_want_t usual = { 128, 0, 1, 0, 0, 0 };

START_TEST(a_healthy_socket_is_left_alone)
{
    int port, fd = listener(&port), failed = -1;

    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &usual, &failed), 0);
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(pf_guard_backlog(wrap(fd)), 128);
    ck_assert(accepts(fd, port));
    close(fd);
}
END_TEST

START_TEST(a_shut_down_socket_listens_again)
{
    static const int how[] = { SHUT_RD, SHUT_RDWR };
    int i;

    for (i = 0; i < 2; i++) {
        int port, fd = listener(&port), failed = -1, fixed;

        ck_assert_int_eq(shutdown(fd, how[i]), 0);
        ck_assert_int_eq(int_option_of(fd, SOL_SOCKET, SO_ACCEPTCONN), 0);
        fixed = pf_guard_check_socket(wrap(fd), &usual, &failed);
        ck_assert_int_eq(fixed, PF_GUARD_NOT_LISTENING);
        ck_assert_int_eq(failed, 0);
        ck_assert_int_eq(int_option_of(fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
        ck_assert_int_eq(pf_guard_backlog(wrap(fd)), 128);
        ck_assert_int_eq(pf_guard_local_port(wrap(fd)), port);
        ck_assert(accepts(fd, port));
        close(fd);
    }
}
END_TEST

START_TEST(a_socket_connected_elsewhere_is_left_to_replace)
{
    int port, fd = listener(&port), other_port, other = listener(&other_port);
    int failed = 0;
    struct sockaddr_in addr;

    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((unsigned short)other_port);
    ck_assert_int_eq(shutdown(fd, SHUT_RD), 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    pf_guard_check_socket(wrap(fd), &usual, &failed);
    ck_assert(failed & PF_GUARD_NOT_LISTENING);
    close(fd);
    close(other);
}
END_TEST

START_TEST(each_changed_option_is_put_back)
{
    struct timeval tv = { 0, 1 };
    int one = 1, zero = 0, flags;
    int port, fd = listener(&port), failed = -1, fixed;

    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_int_eq(pf_guard_backlog(wrap(fd)), 1);
    ck_assert_int_eq(ioctl(fd, FIONBIO, &one), 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
                                sizeof(tv)), 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &zero,
                                sizeof(zero)), 0);
    fixed = pf_guard_check_socket(wrap(fd), &usual, &failed);
    ck_assert_int_eq(fixed, PF_GUARD_BACKLOG | PF_GUARD_NONBLOCK
                                | PF_GUARD_RCVTIMEO | PF_GUARD_REUSEPORT);
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(pf_guard_backlog(wrap(fd)), 128);
    flags = fcntl(fd, F_GETFL);
    ck_assert_int_eq(flags & O_NONBLOCK, 0);
    ck_assert_int_eq(int_option_of(fd, SOL_SOCKET, SO_REUSEPORT), 1);
    /* A second look finds nothing. */
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &usual, &failed), 0);
    close(fd);
}
END_TEST

/* In a maintenance cycle the backlog is the one the cycle read: no second
 * TCP_INFO.  A limit read as wrong is put right; one read as right is
 * left alone until the next cycle reads it. */
START_TEST(the_backlog_the_cycle_read_is_the_one_checked)
{
    pf_guard_want_t seen = usual;
    int port, fd = listener(&port), failed = -1;

    ck_assert_int_eq(listen(fd, 1), 0);
    seen.backlog_seen = 128;
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &seen, &failed), 0);
    ck_assert_int_eq(pf_guard_backlog(wrap(fd)), 1);
    seen.backlog_seen = 1;
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &seen, &failed),
                     PF_GUARD_BACKLOG);
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(pf_guard_backlog(wrap(fd)), 128);
    close(fd);
}
END_TEST

START_TEST(a_polled_socket_stays_non_blocking)
{
    pf_guard_want_t polled = { 128, 1, 0, 0, 0, 0 };
    int port, fd = listener(&port), failed;

    /* SO_REUSEPORT not wanted (one bucket): off, quietly, so that nothing
     * joins the group. */
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &polled, &failed),
                     PF_GUARD_NONBLOCK);
    ck_assert_int_eq(int_option_of(fd, SOL_SOCKET, SO_REUSEPORT), 0);
    ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &polled, &failed), 0);
    close(fd);
}
END_TEST

/* Root: this kernel refuses socket filters on TCP sockets to processes
 * without privileges; others allow them. */
START_TEST(a_socket_filter_goes_unless_it_is_the_parents)
{
    struct sock_filter drop_all[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
    struct sock_fprog prog = { 1, drop_all };
    pf_guard_want_t draining = usual;
    int port, fd = listener(&port), failed = -1;

    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
                                sizeof(prog)), 0);
    draining.keep_filter = 1;
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &draining, &failed), 0);
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &usual, &failed),
                     PF_GUARD_FILTER);
    ck_assert_int_eq(failed, 0);
    ck_assert(accepts(fd, port));
    close(fd);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The book, and what cannot be put right in place                     */

static apr_ino_t inode_of(int fd)
{
    struct stat st;

    ck_assert_int_eq(fstat(fd, &st), 0);
    return (apr_ino_t)st.st_ino;
}

static apr_sockaddr_t *loopback(int port)
{
    apr_sockaddr_t *sa = NULL;

    ck_assert_int_eq(apr_sockaddr_info_get(&sa, "127.0.0.1", APR_INET,
                                           (apr_port_t)port, 0, pool),
                     APR_SUCCESS);
    return sa;
}

/* The parent's book with one socket put in service. */
static pf_guard_book_t *book_of(apr_socket_t *sd)
{
    pf_guard_book_t *book = pf_guard_book_create(pool);

    pf_guard_book_begin(book);
    ck_assert_ptr_nonnull(pf_guard_book_note(book, sd));
    pf_guard_book_end(book);
    return book;
}

START_TEST(inherited_options_go_back_in_place)
{
    struct linger reset = { 1, 0 }, got;
    socklen_t len = sizeof(got);
    int port, fd = listener(&port), held = dup(fd), ttl = 1;
    apr_socket_t *sd = wrap(fd);
    pf_guard_book_t *book = book_of(sd);
    apr_ino_t before = inode_of(fd);
    pf_guard_found_t found;

    /* A child, through its own descriptor for the socket. */
    ck_assert_int_eq(setsockopt(held, SOL_SOCKET, SO_LINGER, &reset,
                                sizeof(reset)), 0);
    ck_assert_int_eq(setsockopt(held, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)),
                     0);
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed, PF_GUARD_OPTIONS);
    ck_assert_int_eq(found.failed, 0);
    ck_assert(!pf_sockopt_set_empty(&found.options_changed)
              && pf_sockopt_set_empty(&found.options_failed));
    ck_assert(inode_of(fd) == before);
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_LINGER, &got, &len), 0);
    ck_assert_int_eq(got.l_onoff, 0);
    ck_assert_int_eq(int_option_of(fd, IPPROTO_IP, IP_TTL), 64);
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed | found.failed, 0);
    close(held);
    close(fd);
}
END_TEST

/* A bucket of two sockets, which its children poll: each is checked as
 * its record says, O_NONBLOCK goes back on both, and a socket that
 * stopped listening and listens again is reported, since it left its
 * reuseport group's socket map. */
START_TEST(a_bucket_is_checked_socket_by_socket)
{
    int port_a, port_b, fd_a = listener(&port_a), fd_b = listener(&port_b);
    apr_socket_t *sd_a = wrap(fd_a), *sd_b = wrap(fd_b);
    pf_guard_book_t *book = pf_guard_book_create(pool);
    ap_listen_rec lr_a, lr_b;
    pf_bucket_t bucket;
    pf_guard_found_t all;
    int seen[2] = { 128, 128 };

    /* Polled, as the bucket set opens them. */
    fcntl(fd_a, F_SETFL, fcntl(fd_a, F_GETFL) | O_NONBLOCK);
    fcntl(fd_b, F_SETFL, fcntl(fd_b, F_GETFL) | O_NONBLOCK);
    pf_guard_book_begin(book);
    ck_assert_ptr_nonnull(pf_guard_book_note(book, sd_a));
    ck_assert_ptr_nonnull(pf_guard_book_note(book, sd_b));
    pf_guard_book_end(book);
    memset(&lr_a, 0, sizeof(lr_a));
    memset(&lr_b, 0, sizeof(lr_b));
    lr_a.sd = sd_a;
    lr_a.bind_addr = loopback(port_a);
    lr_a.next = &lr_b;
    lr_b.sd = sd_b;
    lr_b.bind_addr = loopback(port_b);
    memset(&bucket, 0, sizeof(bucket));
    bucket.listeners = &lr_a;
    bucket.num_listeners = 2;
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, seen, NULL, &all),
                     0);
    ck_assert_int_eq(all.fixed | all.failed, 0);
    fcntl(fd_a, F_SETFL, fcntl(fd_a, F_GETFL) & ~O_NONBLOCK);
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, seen, NULL, &all),
                     0);
    ck_assert_int_eq(all.fixed, PF_GUARD_NONBLOCK);
    ck_assert_int_eq(all.failed, 0);
    ck_assert(fcntl(fd_a, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(fd_b, F_GETFL) & O_NONBLOCK);
    ck_assert_int_eq(shutdown(fd_b, SHUT_RD), 0);
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, NULL, NULL, &all),
                     1);
    ck_assert_int_eq(all.fixed, PF_GUARD_NOT_LISTENING);
    ck_assert_int_eq(int_option_of(fd_b, SOL_SOCKET, SO_ACCEPTCONN), 1);
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, NULL, NULL, &all),
                     0);
    ck_assert_int_eq(all.fixed | all.failed, 0);
    /* Stopped listening a second time: replaced, polled as before. */
    ck_assert_int_eq(shutdown(fd_b, SHUT_RD), 0);
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, NULL, NULL, &all),
                     1);
    ck_assert_int_eq(all.fixed, PF_GUARD_NOT_LISTENING | PF_GUARD_REPLACED
                                    | PF_GUARD_TWICE);
    pf_guard_retired_all(book);
    ck_assert_int_eq(int_option_of(fd_b, SOL_SOCKET, SO_ACCEPTCONN), 1);
    ck_assert(fcntl(fd_b, F_GETFL) & O_NONBLOCK);
    close(fd_a);
    close(fd_b);
}
END_TEST

/* A clamp on the window cannot be cleared on a listening socket, a
 * buffer size once set turns autotuning off for good, filters once locked
 * stay: such a socket is replaced under its descriptor number, with the
 * options the parent recorded, and the old one, which a child may still
 * hold, stops listening and cannot listen again under SO_REUSEPORT. */
START_TEST(a_socket_that_cannot_be_put_right_in_place_is_replaced)
{
    static const struct {
        int level, name, value;
        int guard_bit;
    } cases[] = {
        { SOL_SOCKET, SO_LOCK_FILTER, 1, PF_GUARD_FILTER_LOCKED },
        { IPPROTO_TCP, TCP_WINDOW_CLAMP, 2048, PF_GUARD_OPTIONS },
        { SOL_SOCKET, SO_SNDBUF, 2304, PF_GUARD_OPTIONS },
    };
    apr_size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int port, fd = listener(&port), held = dup(fd), fresh_sndbuf;
        int probe = socket(AF_INET, SOCK_STREAM, 0);
        apr_socket_t *sd = wrap(fd);
        pf_guard_book_t *book = book_of(sd);
        apr_ino_t before = inode_of(fd);
        pf_guard_found_t found;

        fresh_sndbuf = int_option_of(probe, SOL_SOCKET, SO_SNDBUF);
        close(probe);
        ck_assert_int_eq(setsockopt(held, cases[i].level, cases[i].name,
                                    &cases[i].value, sizeof(int)), 0);
        pf_guard_socket(book, sd, loopback(port), &usual, &found);
        ck_assert_msg(found.fixed & cases[i].guard_bit, "case %d", (int)i);
        ck_assert_msg(found.fixed & PF_GUARD_REPLACED, "case %d", (int)i);
        ck_assert_int_eq(found.failed, 0);
        ck_assert(pf_sockopt_set_empty(&found.options_failed));
        ck_assert(inode_of(fd) != before);
        ck_assert_int_eq(int_option_of(fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
        /* The old one listens until it is retired, in its group with the
         * new one: its queue can be handed over then. */
        ck_assert_int_eq(int_option_of(held, SOL_SOCKET, SO_ACCEPTCONN), 1);
        pf_guard_retired_all(book);
        ck_assert_int_eq(int_option_of(held, SOL_SOCKET, SO_ACCEPTCONN), 0);
        ck_assert_int_eq(int_option_of(held, SOL_SOCKET, SO_REUSEPORT), 0);
        ck_assert_int_ne(listen(held, 1), 0);
        ck_assert_int_eq(int_option_of(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP), 0);
        ck_assert_int_eq(int_option_of(fd, SOL_SOCKET, SO_SNDBUF),
                         fresh_sndbuf);
        ck_assert_int_eq(pf_guard_backlog(sd), 128);
        ck_assert(accepts(fd, port));
        /* The record follows the new socket: nothing more to find. */
        pf_guard_socket(book, sd, loopback(port), &usual, &found);
        ck_assert_int_eq(found.fixed | found.failed, 0);
        close(held);
        close(fd);
    }
}
END_TEST

/* Put right in place once, the socket is trusted again; put right a
 * second time, it is replaced: whoever changes it back a millisecond
 * after each repair loses it.  A socket shut down twice the same way. */
START_TEST(a_socket_put_right_twice_is_replaced)
{
    struct linger reset = { 1, 0 };
    int port, fd = listener(&port), held = dup(fd);
    apr_socket_t *sd = wrap(fd);
    pf_guard_book_t *book = book_of(sd);
    apr_ino_t before = inode_of(fd);
    pf_guard_found_t found;

    ck_assert_int_eq(setsockopt(held, SOL_SOCKET, SO_LINGER, &reset,
                                sizeof(reset)), 0);
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed, PF_GUARD_OPTIONS);
    ck_assert(inode_of(fd) == before);
    /* Nothing changed: nothing counted. */
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed | found.failed, 0);
    ck_assert_int_eq(shutdown(held, SHUT_RDWR), 0);
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert(found.fixed & PF_GUARD_NOT_LISTENING);
    ck_assert(found.fixed & PF_GUARD_REPLACED);
    ck_assert(found.fixed & PF_GUARD_TWICE);
    ck_assert(inode_of(fd) != before);
    pf_guard_retired_all(book);
    ck_assert(accepts(fd, port));
    ck_assert_int_eq(int_option_of(held, SOL_SOCKET, SO_ACCEPTCONN), 0);
    /* The new socket starts with a clean slate. */
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset,
                                sizeof(reset)), 0);
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed, PF_GUARD_OPTIONS);
    close(held);
    close(fd);
}
END_TEST

/* Asked to (another process holds it, a restart), the guard replaces a
 * healthy socket: the old one keeps its queue until it is retired. */
START_TEST(a_socket_held_elsewhere_is_replaced_on_request)
{
    pf_guard_want_t held_elsewhere = usual;
    int port, fd = listener(&port), held = dup(fd), n;
    apr_socket_t *sd = wrap(fd);
    pf_guard_book_t *book = book_of(sd);
    apr_ino_t before = inode_of(fd);
    pf_guard_retiring_t *list;
    pf_guard_found_t found;

    held_elsewhere.replace = 1;
    pf_guard_socket(book, sd, loopback(port), &held_elsewhere, &found);
    ck_assert_int_eq(found.fixed, PF_GUARD_REPLACED);
    ck_assert(inode_of(fd) != before);
    n = pf_guard_retiring(book, &list);
    ck_assert_int_eq(n, 1);
    ck_assert(list[0].fresh == sd);
    ck_assert(inode_of(list[0].old_fd) == before);
    ck_assert_int_eq(int_option_of(held, SOL_SOCKET, SO_ACCEPTCONN), 1);
    pf_guard_retired_all(book);
    ck_assert_int_eq(pf_guard_retiring(book, &list), 0);
    ck_assert_int_eq(int_option_of(held, SOL_SOCKET, SO_ACCEPTCONN), 0);
    ck_assert(accepts(fd, port));
    /* A restart's replacement, the same way. */
    before = inode_of(fd);
    ck_assert_int_eq(pf_guard_replace(book, sd, loopback(port), 0),
                     APR_SUCCESS);
    ck_assert(inode_of(fd) != before);
    pf_guard_retired_all(book);
    ck_assert(accepts(fd, port));
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed | found.failed, 0);
    close(held);
    close(fd);
}
END_TEST

/* A socket kept across a restart keeps the record made when it was new;
 * one no longer in service loses it. */
START_TEST(the_book_keeps_records_across_restarts_and_drops_the_rest)
{
    int port, fd = listener(&port), other_port, other = listener(&other_port);
    int ttl = 1;
    apr_socket_t *sd = wrap(fd), *other_sd = wrap(other);
    pf_guard_book_t *book = pf_guard_book_create(pool);
    const pf_guard_record_t *first, *again;
    pf_guard_found_t found;

    pf_guard_book_begin(book);
    first = pf_guard_book_note(book, sd);
    pf_guard_book_note(book, other_sd);
    pf_guard_book_end(book);
    ck_assert_ptr_nonnull(first);
    /* Changed by a child before the restart: not what is kept. */
    setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
    pf_guard_book_begin(book);
    again = pf_guard_book_note(book, sd);
    pf_guard_book_end(book);
    ck_assert_int_eq(again->inode, inode_of(fd));
    pf_guard_socket(book, sd, loopback(port), &usual, &found);
    ck_assert_int_eq(found.fixed, PF_GUARD_OPTIONS);
    ck_assert_int_eq(int_option_of(fd, IPPROTO_IP, IP_TTL), 64);
    /* No record: the state is checked, the options are not. */
    setsockopt(other, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
    pf_guard_socket(book, other_sd, loopback(other_port), &usual, &found);
    ck_assert(pf_sockopt_set_empty(&found.options_changed));
    close(other);
    close(fd);
}
END_TEST

START_TEST(descriptions_name_every_change)
{
    static const struct {
        int bits;
        const char *options;
        const char *want;
    } cases[] = {
        { 0, NULL, "" },
        { PF_GUARD_NOT_LISTENING, NULL, "stopped listening" },
        { PF_GUARD_NOT_LISTENING | PF_GUARD_REPLACED, "SO_LINGER",
          "stopped listening, could not be put right in place and was "
          "replaced" },
        { PF_GUARD_FILTER | PF_GUARD_FILTER_LOCKED | PF_GUARD_OPTIONS
              | PF_GUARD_REPLACED, "",
          "socket filter attached, socket filters locked, options "
          "connections inherit changed, could not be put right in place "
          "and was replaced" },
        { PF_GUARD_OPTIONS | PF_GUARD_REPLACED, "SO_SNDBUF, IP_TTL",
          "options connections inherit changed: SO_SNDBUF, IP_TTL, could "
          "not be put right in place and was replaced" },
        { PF_GUARD_BACKLOG | PF_GUARD_NONBLOCK | PF_GUARD_RCVTIMEO
              | PF_GUARD_FILTER | PF_GUARD_REUSEPORT, NULL,
          "backlog changed, O_NONBLOCK changed, receive timeout set, socket "
          "filter attached, SO_REUSEPORT turned off" },
    };
    char buf[256], small[12];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_str_eq(pf_guard_describe(cases[i].bits, cases[i].options,
                                           buf, sizeof(buf)),
                         cases[i].want);
    }
    /* Cut, never overrun. */
    pf_guard_describe(0x1ff, "SO_LINGER", small, sizeof(small));
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

Suite *guard_suite(void)
{
    Suite *s = suite_create("guard");
    TCase *checks = tcase_create("checks");

    tcase_add_checked_fixture(checks, setup, teardown);
    tcase_add_test(checks, a_healthy_socket_is_left_alone);
    tcase_add_test(checks, a_shut_down_socket_listens_again);
    tcase_add_test(checks, a_socket_connected_elsewhere_is_left_to_replace);
    tcase_add_test(checks, each_changed_option_is_put_back);
    tcase_add_test(checks, the_backlog_the_cycle_read_is_the_one_checked);
    tcase_add_test(checks, a_polled_socket_stays_non_blocking);
    tcase_add_test(checks, descriptions_name_every_change);
    tcase_add_test(checks, inherited_options_go_back_in_place);
    tcase_add_test(checks, a_bucket_is_checked_socket_by_socket);
    tcase_add_test(checks,
                   a_socket_that_cannot_be_put_right_in_place_is_replaced);
    tcase_add_test(checks, a_socket_put_right_twice_is_replaced);
    tcase_add_test(checks, a_socket_held_elsewhere_is_replaced_on_request);
    tcase_add_test(checks,
                   the_book_keeps_records_across_restarts_and_drops_the_rest);
    suite_add_tcase(s, checks);
    return s;
}

Suite *guard_kernel_suite(void)
{
    Suite *s = suite_create("guard-kernel");
    TCase *root = tcase_create("root");

    tcase_add_checked_fixture(root, setup, teardown);
    tcase_add_test(root, a_socket_filter_goes_unless_it_is_the_parents);
    suite_add_tcase(s, root);
    return s;
}
