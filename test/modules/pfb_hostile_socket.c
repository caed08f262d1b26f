/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Test-only: mod_pfb_hostile's attacks on the bucket socket a child holds,
 * and on the whole of its open file description (pfb_hostile.h).  They
 * are what native code in a module, a script's extension or a program a
 * child runs could do; the tests check that each is refused or put right.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/sockios.h>

#include "apr_portable.h"

#include "httpd.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_protocol.h"

#include "pfb_hostile.h"

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef TCP_INQ
#define TCP_INQ 36
#endif
#ifndef F_SETSIG
#define F_SETSIG 10
#endif
#ifndef SO_TIMESTAMPING_OLD
#define SO_TIMESTAMPING_OLD 37
#endif

/* ------------------------------------------------------------------ */
/* Attacks on the bucket socket                                        */

static int is_listening(int fd)
{
    int on = 0;
    socklen_t len = sizeof(on);

    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on;
}

/* high=1: every setsockopt() with the high bits of its ints set. */
static int high_bits;

static int set_option(int fd, int level, int name, const void *value,
                      socklen_t len)
{
    long high = high_bits ? 1L << 32 : 0;

    return (int)syscall(SYS_setsockopt, (long)fd | high, (long)level | high,
                        (long)name | high, value, (long)len);
}

/* sock=opt: what every connection accepted from the socket inherits. */
static int option_attack(int fd, const char *name)
{
    static const struct {
        const char *name;
        int level, option, value;
    } ints[] = {
        { "ttl", IPPROTO_IP, IP_TTL, 1 },
        { "tos", IPPROTO_IP, IP_TOS, 0x10 },
        { "minttl", IPPROTO_IP, IP_MINTTL, 255 },
        { "sndbuf", SOL_SOCKET, SO_SNDBUF, 2304 },
        { "rcvbuf", SOL_SOCKET, SO_RCVBUF, 2304 },
        { "keepalive", SOL_SOCKET, SO_KEEPALIVE, 0 },
        { "priority", SOL_SOCKET, SO_PRIORITY, 6 },
        { "dontroute", SOL_SOCKET, SO_DONTROUTE, 1 },
        { "rcvlowat", SOL_SOCKET, SO_RCVLOWAT, 100 },
        { "pacing", SOL_SOCKET, SO_MAX_PACING_RATE, 1000 },
        { "maxseg", IPPROTO_TCP, TCP_MAXSEG, 88 },
        { "nodelay", IPPROTO_TCP, TCP_NODELAY, 0 },
        { "cork", IPPROTO_TCP, TCP_CORK, 1 },
        { "keepidle", IPPROTO_TCP, TCP_KEEPIDLE, 1 },
        { "defer", IPPROTO_TCP, TCP_DEFER_ACCEPT, 5 },
        { "clamp", IPPROTO_TCP, TCP_WINDOW_CLAMP, 2048 },
        { "usertimeout", IPPROTO_TCP, TCP_USER_TIMEOUT, 1 },
        /* The fourth round's: inherited, and unseen before. */
        { "buflock", SOL_SOCKET, SO_BUF_LOCK, 3 },
        { "busypoll", SOL_SOCKET, SO_BUSY_POLL, 50 },
        { "incomingcpu", SOL_SOCKET, SO_INCOMING_CPU, 1 },
        { "zerocopy", SOL_SOCKET, SO_ZEROCOPY, 1 },
        { "timestamping", SOL_SOCKET, SO_TIMESTAMPING_OLD, 0x7f },
        { "recverr", IPPROTO_IP, IP_RECVERR, 1 },
        { "freebind", IPPROTO_IP, IP_FREEBIND, 1 },
        { "pktinfo", IPPROTO_IP, IP_PKTINFO, 1 },
        { "quickack", IPPROTO_TCP, TCP_QUICKACK, 0 },
        { "inq", IPPROTO_TCP, TCP_INQ, 1 },
    };
    struct linger reset = { 1, 0 };
    size_t i;

    if (strcmp(name, "linger") == 0) {
        return set_option(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
    if (strcmp(name, "congestion") == 0) {
        return set_option(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
    }
    for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        if (strcmp(name, ints[i].name) == 0) {
            return set_option(fd, ints[i].level, ints[i].option,
                              &ints[i].value, sizeof(int));
        }
    }
    errno = EINVAL;
    return -1;
}

/* sock=async: the shared file's owner (the process group: every child
 * of every bucket), its signal (sig=IO or STOP) and O_ASYNC, so that each
 * new connection signals them all; with how "asyncioctl", by ioctl(). */
static int async_attack(int fd, const char *how, const char *sig)
{
    int signal_number = sig != NULL && strcmp(sig, "STOP") == 0 ? SIGSTOP
                                                                : SIGIO;
    int owner = -getpgrp(), one = 1;

    if (strcmp(how, "asyncioctl") == 0) {
        if (ioctl(fd, SIOCSPGRP, &owner) != 0) {
            return -1;
        }
        return ioctl(fd, FIOASYNC, &one);
    }
    if (fcntl(fd, F_SETOWN, owner) != 0
        || (signal_number != SIGIO
            && fcntl(fd, F_SETSIG, signal_number) != 0)) {
        return -1;
    }
    return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
}

/* sock=connect: the socket stops listening and is connected to its own
 * port, where another bucket answers the handshake.  shutdown() wakes the
 * siblings blocked in accept(); they fail and leave, and the parent,
 * reaping them, may make the socket listen again before connect() runs
 * (connect() then says EISCONN).  A socket found listening again is
 * attacked again, as a child set on it would be: the parent puts a socket
 * right in place only once and replaces it the next time, so this ends
 * with the socket connected, or replaced. */
#define CONNECT_TRIES 10

static int connect_attack(int fd, const struct sockaddr *addr,
                          socklen_t addr_len)
{
    int tries, rc = -1;

    for (tries = 0; tries < CONNECT_TRIES; tries++) {
        if (shutdown(fd, SHUT_RD) != 0) {
            return -1;
        }
        rc = connect(fd, addr, addr_len);
        if (rc == 0 || errno != EISCONN || !is_listening(fd)) {
            return rc;
        }
    }
    return rc;
}

/* One attack on one listening socket: 0 or an errno. */
static int socket_attack(int fd, const char *how, const char *opt,
                         const char *sig)
{
    struct sock_filter pick_two[] = { BPF_STMT(BPF_RET | BPF_K, 2) };
    struct sock_filter drop_all[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
    struct sock_fprog prog;
    struct timeval tv = { 0, 1 };
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof(addr);
    int zero = 0, one = 1, rc = -1;

    memset(&prog, 0, sizeof(prog));
    prog.len = 1;
    if (strcmp(how, "cbpf") == 0) {
        prog.filter = pick_two;
        rc = set_option(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                        sizeof(prog));
    }
    else if (strcmp(how, "ebpf") == 0) {
        /* No program to give (loading one needs privileges a child has
         * not): the kernel says EBADF, a filter EPERM first. */
        int no_program = -1;

        rc = set_option(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF,
                        &no_program, sizeof(no_program));
    }
    else if (strcmp(how, "detach") == 0) {
        rc = set_option(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero,
                        sizeof(zero));
    }
    else if (strcmp(how, "shutdown") == 0) {
        rc = shutdown(fd, SHUT_RDWR);
    }
    else if (strcmp(how, "connect") == 0) {
        rc = getsockname(fd, (struct sockaddr *)&addr, &addr_len);
        if (rc == 0) {
            rc = connect_attack(fd, (struct sockaddr *)&addr, addr_len);
        }
    }
    else if (strcmp(how, "backlog") == 0) {
        rc = listen(fd, 1);
    }
    else if (strcmp(how, "nonblock") == 0) {
        rc = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    else if (strcmp(how, "fionbio") == 0) {
        rc = ioctl(fd, FIONBIO, &one);
    }
    else if (strcmp(how, "rcvtimeo") == 0) {
        rc = set_option(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    else if (strcmp(how, "filter") == 0) {
        prog.filter = drop_all;
        rc = set_option(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
                        sizeof(prog));
    }
    else if (strcmp(how, "lock") == 0) {
        /* With or without a filter: locked, no filter can be attached or
         * removed for the socket's life, not even by root. */
        rc = set_option(fd, SOL_SOCKET, SO_LOCK_FILTER, &one, sizeof(one));
    }
    else if (strcmp(how, "opt") == 0 && opt != NULL) {
        rc = option_attack(fd, opt);
    }
    else if (strcmp(how, "noreuseport") == 0) {
        rc = set_option(fd, SOL_SOCKET, SO_REUSEPORT, &zero, sizeof(zero));
    }
    else if (strcmp(how, "async") == 0 || strcmp(how, "asyncioctl") == 0) {
        rc = async_attack(fd, how, sig);
    }
    else {
        errno = EINVAL;
    }
    return rc == 0 ? 0 : errno;
}

void pfb_hostile_socket_attack(request_rec *r, const char *how,
                               const char *opt, const char *sig, int dup_it,
                               int high)
{
    int fd, found = 0, ok = 0, last_errno = 0, err;

    high_bits = high;
    for (fd = 0; fd < 1024; fd++) {
        int target = fd;

        if (!is_listening(fd)) {
            continue;
        }
        found++;
        if (dup_it && (target = dup(fd)) < 0) {
            last_errno = errno;
            continue;
        }
        err = socket_attack(target, how, opt, sig);
        if (err == 0) {
            ok++;
        }
        else {
            last_errno = err;
        }
        if (target != fd) {
            close(target);
        }
    }
    ap_rprintf(r, "sockets %d ok %d errno %d pid %ld\n", found, ok,
               last_errno, (long)getpid());
}

/* ------------------------------------------------------------------ */
/* A process that outlives the child                                   */

int pfb_hostile_time_is_up(const char *stop_file, time_t started,
                           int max_seconds)
{
    return (stop_file != NULL && access(stop_file, F_OK) == 0)
           || time(NULL) - started > max_seconds;
}

/* A listening socket this process holds, or -1. */
static int bucket_descriptor(void)
{
    int fd;

    for (fd = 0; fd < 1024; fd++) {
        if (is_listening(fd)) {
            return fd;
        }
    }
    return -1;
}

/* mode=steal: every connection the copy gets is answered here, and a copy
 * that stops listening is made to listen again (SO_REUSEPORT on again, so
 * that it joins its old group). */
static void steal(int copy)
{
    static const char answer[] = "HTTP/1.0 200 OK\r\nContent-Length: 7\r\n"
                                 "Connection: close\r\n\r\nstolen\n";
    struct pollfd p;
    int one = 1, c;

    if (!is_listening(copy)) {
        setsockopt(copy, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        listen(copy, 16);
    }
    p.fd = copy;
    p.events = POLLIN;
    if (poll(&p, 1, 20) == 1 && (c = accept(copy, NULL, NULL)) >= 0) {
        if (write(c, answer, sizeof(answer) - 1) < 0) {
            /* the client left: nothing to answer */
        }
        close(c);
    }
}

/* What the grandchild does to its copy until told to stop. */
static void keep_copy(int copy, const char *mode, const char *stop_file)
{
    struct linger reset = { 1, 0 };
    time_t started = time(NULL);

    while (!pfb_hostile_time_is_up(stop_file, started,
                                   2 * PFB_HOSTILE_MAX_SECONDS)) {
        if (strcmp(mode, "linger") == 0) {
            setsockopt(copy, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
            usleep(2000);
        }
        else if (strcmp(mode, "shutdown") == 0) {
            shutdown(copy, SHUT_RDWR);
            usleep(2000);
        }
        else if (strcmp(mode, "steal") == 0) {
            steal(copy);
        }
        else {
            usleep(20000);
        }
    }
}

void pfb_hostile_grandchild(request_rec *r, const char *mode,
                            const char *stop_file)
{
    int pipe_fds[2], bucket = bucket_descriptor(), copy, fd, status;
    pid_t first, grandchild = 0;

    if (bucket < 0 || pipe(pipe_fds) != 0) {
        ap_rprintf(r, "grandchild pid 0\n");
        return;
    }
    first = fork();
    if (first == 0) {
        grandchild = fork();
        if (grandchild != 0) {
            if (write(pipe_fds[1], &grandchild, sizeof(grandchild)) < 0) {
                _exit(1);
            }
            _exit(0);
        }
        setsid();
        /* A number of its own, not the child's bucket number, which the
         * filter guards; everything else closed, as a daemon would. */
        copy = fcntl(bucket, F_DUPFD, 3);
        for (fd = 0; fd < 1024; fd++) {
            if (fd != copy) {
                close(fd);
            }
        }
        fd = open("/dev/null", O_RDWR);
        dup2(fd, 1);
        dup2(fd, 2);
        keep_copy(copy, mode, stop_file);
        _exit(0);
    }
    close(pipe_fds[1]);
    if (first > 0) {
        if (read(pipe_fds[0], &grandchild, sizeof(grandchild))
            != (ssize_t)sizeof(grandchild)) {
            grandchild = 0;
        }
        waitpid(first, &status, 0);
    }
    close(pipe_fds[0]);
    ap_rprintf(r, "grandchild pid %ld\n", (long)grandchild);
}

/* ------------------------------------------------------------------ */
/* What a connection inherited                                         */

static int int_option(int fd, int level, int name)
{
    int value = -1;
    socklen_t len = sizeof(value);

    getsockopt(fd, level, name, &value, &len);
    return value;
}

void pfb_hostile_report_connection(request_rec *r)
{
    apr_socket_t *sd = ap_get_conn_socket(r->connection);
    struct linger linger = { 0, 0 };
    socklen_t len = sizeof(linger);
    apr_os_sock_t fd = -1;

    apr_os_sock_get(&fd, sd);
    getsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, &len);
    ap_rprintf(r, "buf_lock %d sndbuf %d linger %d ttl %d pid %ld\n",
               int_option(fd, SOL_SOCKET, SO_BUF_LOCK),
               int_option(fd, SOL_SOCKET, SO_SNDBUF), linger.l_onoff,
               int_option(fd, IPPROTO_IP, IP_TTL), (long)getpid());
}
