/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The bucket socket a child must hold (prefork_guard.c): the parent's
 * checks put back each thing a child can change, on real sockets; and, as
 * root, the children's system-call filter installed in a process of our
 * own, refusing exactly what it should through every ABI the kernel
 * offers a 64-bit process, and nothing else.
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/net.h>

#include "apr_general.h"
#include "apr_portable.h"

#include "prefork_guard.h"
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

static const pf_guard_want_t usual = { 128, 0, 1, 0 };

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

START_TEST(a_polled_socket_stays_non_blocking)
{
    pf_guard_want_t polled = { 128, 1, 0, 0 };
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

START_TEST(descriptions_name_every_change)
{
    static const struct {
        int bits;
        const char *want;
    } cases[] = {
        { 0, "" },
        { PF_GUARD_NOT_LISTENING, "stopped listening" },
        { PF_GUARD_NOT_LISTENING | PF_GUARD_REPLACED,
          "stopped listening, could not listen again and was replaced" },
        { PF_GUARD_BACKLOG | PF_GUARD_NONBLOCK | PF_GUARD_RCVTIMEO
              | PF_GUARD_FILTER | PF_GUARD_REUSEPORT,
          "backlog changed, O_NONBLOCK changed, receive timeout set, socket "
          "filter attached, SO_REUSEPORT turned off" },
    };
    char buf[256], small[12];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_str_eq(pf_guard_describe(cases[i].bits, buf, sizeof(buf)),
                         cases[i].want);
    }
    /* Cut, never overrun. */
    pf_guard_describe(0x7f, small, sizeof(small));
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

/* Runs in a child of the test: every finding is a distinct exit code, so
 * the test names the one that failed. */
static int filter_findings(void)
{
    struct sock_filter pick[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
    struct sock_fprog prog = { 1, pick };
    int port, fd, copy, one = 1, bad_fd = -1, rcvbuf = 65536;
#if defined(__x86_64__)
    int ia32 = ia32_entry_available();
#endif

    if (pf_guard_install_filter() != APR_SUCCESS) {
        return 10;
    }
    if (status_value("Seccomp:") != 2 || status_value("NoNewPrivs:") != 0) {
        return 11;
    }
    fd = listener(&port);
    copy = dup(fd);
    /* Refused on the socket and on any other number for it. */
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
    /* The rest of SOL_SOCKET, and other levels, as before. */
    if (try_option(fd, SO_REUSEADDR, &one, sizeof(one)) != 0
        || try_option(fd, SO_KEEPALIVE, &one, sizeof(one)) != 0
        || try_option(fd, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0
        || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))
               != 0) {
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
                     (long)(unsigned long)low, 4) != 0) {
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
    tcase_add_test(checks, a_polled_socket_stays_non_blocking);
    tcase_add_test(checks, descriptions_name_every_change);
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
