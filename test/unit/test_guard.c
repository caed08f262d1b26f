/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The bucket socket a child must hold (prefork_guard.c): the parent's
 * checks put back each thing a child can change, on real sockets, and
 * replace a socket that cannot be put right in place (filters locked, an
 * option the kernel will not take back) under the same descriptor, its
 * old one no longer listening; the children's system-call filter read
 * as libseccomp exports it (every argument compared on its low 32 bits);
 * and, as root, the filter installed in a process of our own, refusing
 * exactly what it should, with the high bits of its arguments set too,
 * through every ABI the kernel offers a 64-bit process, and nothing
 * else.
 */

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

#ifdef HAVE_LIBSECCOMP
#include <seccomp.h>
#endif

#include "apr_general.h"
#include "apr_portable.h"

#include "prefork_guard.h"
#include "unit.h"
#include "prefork_unit.h"

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

static int int_option(int fd, int level, int name)
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

static const pf_guard_want_t usual = { 128, 0, 1, 0, 0 };

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
        ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_ACCEPTCONN), 0);
        fixed = pf_guard_check_socket(wrap(fd), &usual, &failed);
        ck_assert_int_eq(fixed, PF_GUARD_NOT_LISTENING);
        ck_assert_int_eq(failed, 0);
        ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
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
    ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_REUSEPORT), 1);
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
    pf_guard_want_t polled = { 128, 1, 0, 0, 0 };
    int port, fd = listener(&port), failed;

    /* SO_REUSEPORT not wanted (one bucket): left as it is. */
    ck_assert_int_eq(pf_guard_check_socket(wrap(fd), &polled, &failed),
                     PF_GUARD_NONBLOCK);
    ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_REUSEPORT), 1);
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
    ck_assert(found.options_changed != 0 && found.options_failed == 0);
    ck_assert(inode_of(fd) == before);
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_LINGER, &got, &len), 0);
    ck_assert_int_eq(got.l_onoff, 0);
    ck_assert_int_eq(int_option(fd, IPPROTO_IP, IP_TTL), 64);
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
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, seen, &all), 0);
    ck_assert_int_eq(all.fixed, PF_GUARD_NONBLOCK);
    ck_assert_int_eq(all.failed, 0);
    ck_assert(fcntl(fd_a, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(fd_b, F_GETFL) & O_NONBLOCK);
    ck_assert_int_eq(shutdown(fd_b, SHUT_RD), 0);
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, NULL, &all), 1);
    ck_assert_int_eq(all.fixed, PF_GUARD_NOT_LISTENING);
    ck_assert_int_eq(int_option(fd_b, SOL_SOCKET, SO_ACCEPTCONN), 1);
    ck_assert_int_eq(pf_guard_bucket(book, &bucket, 1, 0, NULL, &all), 0);
    ck_assert_int_eq(all.fixed | all.failed, 0);
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

        fresh_sndbuf = int_option(probe, SOL_SOCKET, SO_SNDBUF);
        close(probe);
        ck_assert_int_eq(setsockopt(held, cases[i].level, cases[i].name,
                                    &cases[i].value, sizeof(int)), 0);
        pf_guard_socket(book, sd, loopback(port), &usual, &found);
        ck_assert_msg(found.fixed & cases[i].guard_bit, "case %d", (int)i);
        ck_assert_msg(found.fixed & PF_GUARD_REPLACED, "case %d", (int)i);
        ck_assert_int_eq(found.failed, 0);
        ck_assert(found.options_failed == 0);
        ck_assert(inode_of(fd) != before);
        ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
        ck_assert_int_eq(int_option(held, SOL_SOCKET, SO_ACCEPTCONN), 0);
        ck_assert_int_eq(int_option(held, SOL_SOCKET, SO_REUSEPORT), 0);
        ck_assert_int_ne(listen(held, 1), 0);
        ck_assert_int_eq(int_option(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP), 0);
        ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_SNDBUF),
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
    ck_assert_int_eq(int_option(fd, IPPROTO_IP, IP_TTL), 64);
    /* No record: the state is checked, the options are not. */
    setsockopt(other, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
    pf_guard_socket(book, other_sd, loopback(other_port), &usual, &found);
    ck_assert(found.options_changed == 0);
    close(other);
    close(fd);
}
END_TEST

START_TEST(a_child_moves_its_bucket_sockets_out_of_reach)
{
    int port, fd = listener(&port), moved = -1;
    apr_socket_t *sd = wrap(fd);
    apr_os_sock_t now;

    pf_guard_move_high(&sd, 1, &moved);
    ck_assert_int_gt(moved, fd);
    ck_assert_int_lt(moved, 1024);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert(fcntl(moved, F_GETFD) & FD_CLOEXEC);
    apr_os_sock_get(&now, sd);
    ck_assert_int_eq(now, moved);
    ck_assert(accepts(moved, port));
    close(moved);
}
END_TEST

#ifdef HAVE_LIBSECCOMP
static int seccomp_native_is_wide(void)
{
    uint32_t native = seccomp_arch_native();

    return native == SCMP_ARCH_X86_64 || native == SCMP_ARCH_AARCH64;
}

/* The filter as libseccomp would load it: on a 64-bit ABI each argument
 * is two 32-bit words, and every rule must ignore the high one, since the
 * kernel reads the descriptor, the level and the option as ints. */
START_TEST(every_comparison_of_the_filter_is_on_the_low_32_bits)
{
    static const long wanted[] = {
        1000, 1001, SOL_SOCKET, IPPROTO_TCP, SO_ATTACH_REUSEPORT_CBPF,
        SO_ATTACH_REUSEPORT_EBPF, SO_DETACH_REUSEPORT_BPF, SO_LOCK_FILTER,
        TCP_MD5SIG,
    };
    int fds[2] = { 1000, 1001 }, wide = 0, found[9] = { 0 }, low = 0;
    char line[512], *at;
    apr_size_t i;
    FILE *pfc = tmpfile();

    ck_assert_ptr_nonnull(pfc);
    ck_assert_int_eq(pf_guard_filter_export(fileno(pfc), fds, 2), 0);
    rewind(pfc);
    while (fgets(line, sizeof(line), pfc)) {
        if (strstr(line, "# filter for arch")) {
            wide = strstr(line, "x86_64") != NULL
                   || strstr(line, "aarch64") != NULL;
            continue;
        }
        at = strstr(line, "if ($a");
        if (!wide || at == NULL || at[6] < '0' || at[6] > '5') {
            continue;           /* not an argument's comparison */
        }
        ck_assert_msg(strstr(line, ".hi32") || strstr(line, ".lo32"),
                      "a whole 64-bit comparison: %s", line);
        if (strstr(line, ".hi32")) {
            ck_assert_msg(strstr(line, ".hi32 & 0x00000000 == 0") != NULL,
                          "the high word compared: %s", line);
            continue;
        }
        at = strstr(line, ".lo32 & 0xffffffff == ");
        ck_assert_msg(at != NULL, "the low word unmasked: %s", line);
        low++;
        for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
            if (strtol(at + strlen(".lo32 & 0xffffffff == "), NULL, 10)
                == wanted[i]) {
                found[i] = 1;
            }
        }
    }
    fclose(pfc);
    if (seccomp_native_is_wide()) {
        ck_assert_int_gt(low, 0);
        for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
            ck_assert_msg(found[i], "no rule compares %ld", wanted[i]);
        }
    }
}
END_TEST
#endif

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

/* ------------------------------------------------------------------ */
/* The filter, as root                                                 */

#ifdef HAVE_LIBSECCOMP

/* The status line of /proc/self/status that starts with @a key. */
static int status_value(const char *key)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    int value = -1;

    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, strlen(key)) == 0) {
            value = atoi(line + strlen(key));
        }
    }
    if (f) {
        fclose(f);
    }
    return value;
}

/* setsockopt(), or -errno. */
static int try_option(int fd, int name, const void *value, socklen_t len)
{
    return setsockopt(fd, SOL_SOCKET, name, value, len) == 0 ? 0 : -errno;
}

#if defined(__x86_64__)
/* The 32-bit x86 entry point, open to 64-bit processes too: returns the
 * kernel's result (-errno on failure). */
static int int80(long nr, long a, long b, long c, long d, long e)
{
    long ret;

    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e)
                     : "memory");
    return (int)ret;
}

/* Whether this kernel takes 32-bit x86 system calls from us: without
 * IA32 emulation, int 0x80 is a fault, so a probe process tries it. */
static int ia32_entry_available(void)
{
    int status = 0;
    pid_t pid = fork();

    if (pid == 0) {
        _exit(int80(20 /* i386 getpid */, 0, 0, 0, 0, 0) == getpid() ? 0
                                                                     : 1);
    }
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)
           && WEXITSTATUS(status) == 0;
}
#endif

/* setsockopt() with bits 32 to 63 of the descriptor, the level and the
 * option set: the kernel reads the low 32 bits only. */
static int high_option(int fd, int level, int name, const void *value,
                       socklen_t len)
{
    long high = 1L << 32;

    return syscall(SYS_setsockopt, (long)fd | high, (long)level | high,
                   (long)name | high, value, (long)len) == 0 ? 0 : -errno;
}

/* Runs in a child of the test: every finding is a distinct exit code, so
 * the test names the one that failed. */
static int filter_findings(void)
{
    struct sock_filter pick[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
    struct sock_fprog prog = { 1, pick };
    struct tcp_md5sig md5;
    int port, bucket_port, fd, bucket, copy, one = 1, bad_fd = -1;
    int rcvbuf = 65536, ttl = 64;
#if defined(__x86_64__)
    int ia32 = ia32_entry_available();
#endif

    /* The child's own bucket socket, as it has it when it installs the
     * filter; another socket it opens later; its bucket socket under
     * another number. */
    bucket = listener(&bucket_port);
    if (pf_guard_install_filter(&bucket, 1) != APR_SUCCESS) {
        return 10;
    }
    if (status_value("Seccomp:") != 2 || status_value("NoNewPrivs:") != 0) {
        return 11;
    }
    fd = listener(&port);
    copy = dup(bucket);
    /* Refused on any socket, the bucket's under any number. */
    if (try_option(fd, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog))
            != -EPERM
        || try_option(copy, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog))
               != -EPERM) {
        return 12;
    }
    if (try_option(fd, SO_ATTACH_REUSEPORT_EBPF, &bad_fd, sizeof(bad_fd))
        != -EPERM) {
        return 13;
    }
    if (try_option(copy, SO_DETACH_REUSEPORT_BPF, &one, sizeof(one))
        != -EPERM) {
        return 14;
    }
    if (try_option(fd, SO_LOCK_FILTER, &one, sizeof(one)) != -EPERM) {
        return 15;
    }
    /* The rest of SOL_SOCKET, and other levels, as before, on any socket
     * but the bucket's own number. */
    if (try_option(fd, SO_REUSEADDR, &one, sizeof(one)) != 0
        || try_option(fd, SO_KEEPALIVE, &one, sizeof(one)) != 0
        || try_option(fd, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0
        || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0
        || try_option(copy, SO_KEEPALIVE, &one, sizeof(one)) != 0) {
        return 16;
    }
    /* A level other than SOL_SOCKET with the same option numbers. */
    if (setsockopt(fd, IPPROTO_TCP, SO_ATTACH_REUSEPORT_CBPF, &one,
                   sizeof(one)) != 0
        && errno == EPERM) {
        return 17;
    }
#ifdef SYS_io_uring_setup
    if (syscall(SYS_io_uring_setup, 1, NULL) != -1 || errno != ENOSYS) {
        return 18;
    }
#endif
    /* Every option on the bucket's own number. */
    if (try_option(bucket, SO_KEEPALIVE, &one, sizeof(one)) != -EPERM
        || setsockopt(bucket, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)) == 0
        || setsockopt(bucket, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))
               == 0) {
        return 22;
    }
    /* The high bits set: the same refusals. */
    if (high_option(copy, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                    sizeof(prog)) != -EPERM
        || high_option(copy, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &one,
                       sizeof(one)) != -EPERM
        || high_option(fd, SOL_SOCKET, SO_LOCK_FILTER, &one, sizeof(one))
               != -EPERM
        || high_option(bucket, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one))
               != -EPERM) {
        return 23;
    }
    /* TCP MD5 keys, plain and with the high bits. */
    memset(&md5, 0, sizeof(md5));
    md5.tcpm_addr.ss_family = AF_INET;
    if (setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof(md5)) == 0
        || errno != EPERM
        || high_option(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof(md5))
               != -EPERM) {
        return 24;
    }
    /* The masks refuse no more than the values: high bits on an option
     * nobody refuses still reach the kernel, which takes it. */
    if (high_option(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        return 25;
    }
#if defined(__x86_64__)
    if (ia32) {
        /* 32-bit x86 entry: setsockopt() direct, then via socketcall(),
         * with arguments where a 32-bit pointer reaches them. */
        unsigned int *low = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
                                 -1, 0);

        if (low == MAP_FAILED) {
            return 19;
        }
        low[0] = 1;             /* an int 1 for SO_REUSEADDR */
        if (int80(366, fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF,
                  (long)(unsigned long)low, 4) != -EPERM
            || int80(366, fd, SOL_SOCKET, SO_REUSEADDR,
                     (long)(unsigned long)low, 4) != 0
            || int80(366, bucket, SOL_SOCKET, SO_REUSEADDR,
                     (long)(unsigned long)low, 4) != -EPERM) {
            return 20;
        }
        low[1] = (unsigned int)fd;
        low[2] = SOL_SOCKET;
        low[3] = SO_REUSEADDR;
        low[4] = (unsigned int)(unsigned long)low;
        low[5] = 4;
        if (int80(102, SYS_SETSOCKOPT, (long)(unsigned long)(low + 1), 0, 0,
                  0) != -EPERM) {
            return 21;
        }
    }
    else {
        printf("guard-kernel: no 32-bit x86 entry in this kernel; its "
               "rules were not exercised\n");
    }
#endif
    close(copy);
    close(fd);
    close(bucket);
    return 0;
}

START_TEST(the_filter_refuses_what_it_should_and_nothing_else)
{
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        _exit(filter_findings());
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "killed by signal %d",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ck_assert_msg(WEXITSTATUS(status) == 0, "finding %d",
                  WEXITSTATUS(status));
}
END_TEST

#endif /* HAVE_LIBSECCOMP */

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
    tcase_add_test(checks,
                   the_book_keeps_records_across_restarts_and_drops_the_rest);
    tcase_add_test(checks, a_child_moves_its_bucket_sockets_out_of_reach);
#ifdef HAVE_LIBSECCOMP
    tcase_add_test(checks,
                   every_comparison_of_the_filter_is_on_the_low_32_bits);
#endif
    suite_add_tcase(s, checks);
    return s;
}

Suite *guard_kernel_suite(void)
{
    Suite *s = suite_create("guard-kernel");
    TCase *root = tcase_create("root");

    tcase_add_checked_fixture(root, setup, teardown);
    tcase_add_test(root, a_socket_filter_goes_unless_it_is_the_parents);
#ifdef HAVE_LIBSECCOMP
    tcase_add_test(root, the_filter_refuses_what_it_should_and_nothing_else);
#endif
    suite_add_tcase(s, root);
    return s;
}
