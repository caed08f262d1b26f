/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * A listening socket's whole state (prefork_sockopts.c), on real
 * loopback sockets: each option a child can set is found and put back (a
 * table: the hostile value, and whether it can go back in place or only
 * with the socket), and so are the file's flags, owner and signal; a
 * connection accepted afterwards has the listener's original values, a
 * fresh socket given a record matches it, a busy socket's record does
 * not move by itself, and the comparison and the description on their
 * own.  And the table against Linux's headers: every option they define
 * for SOL_SOCKET, IP, IPv6 and TCP is compared or in left_out below, with
 * the reason the record leaves it out.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/guard/prefork_sockopts.c"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "unit.h"

/* What Linux's headers define for the four levels and the record leaves
 * out, and why; values of options (IP_PMTUDISC_DO...) are not options
 * and the_table_knows_every_option_of_the_headers skips them by prefix. */
static const struct {
    const char *name;
    const char *why;
} left_out[] = {
    { "SO_TYPE", "read-only" },
    { "SO_PROTOCOL", "read-only" },
    { "SO_DOMAIN", "read-only" },
    { "SO_COOKIE", "read-only" },
    { "SO_NETNS_COOKIE", "read-only" },
    { "SO_BPF_EXTENSIONS", "read-only" },
    { "SO_BSDCOMPAT", "read-only: always 0" },
    { "SO_SNDLOWAT", "read-only: Linux refuses to set it" },
    { "SO_ERROR", "reading it clears a pending error" },
    { "SO_MEMINFO", "changes with traffic" },
    { "SO_INCOMING_NAPI_ID", "changes with traffic" },
    { "SO_PEERCRED", "the peer's, of connected sockets" },
    { "SO_PEERNAME", "the peer's, of connected sockets" },
    { "SO_PEERSEC", "the peer's, of connected sockets" },
    { "SO_PEERGROUPS", "the peer's, of connected sockets" },
    { "SO_PASSSEC", "Unix and datagram sockets only" },
    { "SO_SECURITY_AUTHENTICATION", "not in Linux" },
    { "SO_SECURITY_ENCRYPTION_TRANSPORT", "not in Linux" },
    { "SO_SECURITY_ENCRYPTION_NETWORK", "not in Linux" },
    { "SO_SNDBUFFORCE", "write-only: SO_SNDBUF's value" },
    { "SO_RCVBUFFORCE", "write-only: SO_RCVBUF's value" },
    { "SO_SNDTIMEO_NEW", "the state SO_SNDTIMEO_OLD reads" },
    { "SO_BINDTODEVICE", "the state SO_BINDTOIFINDEX reads" },
    { "SO_DETACH_FILTER", "write-only" },
    { "SO_ATTACH_BPF", "write-only" },
    { "SO_CNX_ADVICE", "write-only" },
    { "SO_BUSY_POLL_BUDGET", "write-only" },
    { "SO_ATTACH_REUSEPORT_CBPF", "write-only: steering attaches its "
                                  "own program again each cycle" },
    { "SO_ATTACH_REUSEPORT_EBPF", "write-only: steering attaches its "
                                  "own program again each cycle" },
    { "SO_DETACH_REUSEPORT_BPF", "write-only: steering attaches its "
                                 "own program again each cycle" },
    { "SO_REUSEPORT", "the guard's own check" },
    { "SO_ACCEPTCONN", "the guard's own check (listening)" },
    { "SO_RCVTIMEO_OLD", "the guard's own check" },
    { "SO_RCVTIMEO_NEW", "the guard's own check" },
    { "SO_ATTACH_FILTER", "the guard's own check (SO_GET_FILTER)" },
    { "SO_LOCK_FILTER", "the guard's own check" },
    { "IP_HDRINCL", "raw sockets only" },
    { "IP_ROUTER_ALERT", "raw sockets only" },
    { "IP_NODEFRAG", "raw sockets only" },
    { "IP_PKTOPTIONS", "connected sockets only" },
    { "IP_MTU", "connected sockets only" },
    { "IP_PROTOCOL", "read-only" },
    { "IP_IPSEC_POLICY", "write-only" },
    { "IP_XFRM_POLICY", "write-only" },
    { "IP_ADD_MEMBERSHIP", "write-only; TCP refuses groups" },
    { "IP_DROP_MEMBERSHIP", "write-only; TCP refuses groups" },
    { "IP_UNBLOCK_SOURCE", "write-only; TCP refuses groups" },
    { "IP_BLOCK_SOURCE", "write-only; TCP refuses groups" },
    { "IP_ADD_SOURCE_MEMBERSHIP", "write-only; TCP refuses groups" },
    { "IP_DROP_SOURCE_MEMBERSHIP", "write-only; TCP refuses groups" },
    { "IP_MSFILTER", "a query of groups, which TCP refuses" },
    { "IPV6_ADDRFORM", "write-only, connected sockets only" },
    { "IPV6_2292PKTOPTIONS", "connected sockets only" },
    { "IPV6_MTU", "connected sockets only" },
    { "IPV6_PATHMTU", "connected sockets only" },
    { "IPV6_CHECKSUM", "raw sockets only" },
    { "IPV6_HDRINCL", "raw sockets only" },
    { "IPV6_NEXTHOP", "write-only" },
    { "IPV6_AUTHHDR", "not in Linux" },
    { "IPV6_USE_MIN_MTU", "not in Linux" },
    { "IPV6_PKTINFO", "datagram sockets only" },
    { "IPV6_HOPLIMIT", "datagram sockets only" },
    { "IPV6_V6ONLY", "fixed once the socket is bound" },
    { "IPV6_ADD_MEMBERSHIP", "write-only; TCP refuses groups" },
    { "IPV6_DROP_MEMBERSHIP", "write-only; TCP refuses groups" },
    { "IPV6_JOIN_ANYCAST", "write-only" },
    { "IPV6_LEAVE_ANYCAST", "write-only" },
    { "IPV6_FLOWLABEL_MGR", "write-only" },
    { "IPV6_IPSEC_POLICY", "write-only" },
    { "IPV6_XFRM_POLICY", "write-only" },
    { "TCP_INFO", "changes with traffic" },
    { "TCP_CC_INFO", "changes with traffic" },
    { "TCP_TIMESTAMP", "changes with time" },
    { "TCP_SAVED_SYN", "read-only, of connections" },
    { "TCP_ZEROCOPY_RECEIVE", "a query of connections" },
    { "TCP_THIN_DUPACK", "no effect since Linux 4.19" },
    { "TCP_MD5SIG", "write-only; the filter refuses it to children" },
    { "TCP_MD5SIG_EXT", "write-only; the filter refuses it to children" },
    { "TCP_FASTOPEN_KEY", "reads the system's key where the socket has "
                          "none, and the kernel makes that key at first "
                          "use; the filter refuses it to children" },
    { "TCP_REPAIR", "repair mode: CAP_NET_ADMIN, on a closed or "
                    "established socket" },
    { "TCP_REPAIR_QUEUE", "repair mode" },
    { "TCP_QUEUE_SEQ", "repair mode" },
    { "TCP_REPAIR_OPTIONS", "repair mode" },
    { "TCP_REPAIR_WINDOW", "repair mode" },
};

/* How many items the table holds. */
static int option_count(void)
{
    return NUM_OPTIONS;
}

/* The name of item @a i of the table ("SO_LINGER"), NULL past it. */
static const char *option_name(int i)
{
    return i >= 0 && i < NUM_OPTIONS ? options[i].label : NULL;
}

/* Finds an item of the table by name; -1 if it has none. */
static int option_find(const char *name)
{
    int i;

    for (i = 0; i < NUM_OPTIONS; i++) {
        if (strcmp(options[i].label, name) == 0) {
            return i;
        }
    }
    return -1;
}

/* Why the record leaves @a name out, NULL if it does not. */
static const char *left_out_reason(const char *name)
{
    apr_size_t i;

    for (i = 0; i < sizeof(left_out) / sizeof(left_out[0]); i++) {
        if (strcmp(left_out[i].name, name) == 0) {
            return left_out[i].why;
        }
    }
    return NULL;
}

/* A listening socket on a kernel-chosen loopback port of @a family. */
static int listener(int family, int *port)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    int fd = socket(family, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    memset(&addr, 0, sizeof(addr));
    if (family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;

        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_loopback;
        len = sizeof(*a6);
    }
    else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;

        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a4);
    }
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, len), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    len = sizeof(addr);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    *port = ntohs(family == AF_INET6
                      ? ((struct sockaddr_in6 *)&addr)->sin6_port
                      : ((struct sockaddr_in *)&addr)->sin_port);
    return fd;
}

/* A connection to the listener, accepted: returns the accepted end and
 * sets *client. */
static int accepted(int lfd, int family, int port, int *client)
{
    struct sockaddr_storage addr;
    socklen_t len;
    int c = socket(family, SOCK_STREAM, 0), a;

    memset(&addr, 0, sizeof(addr));
    if (family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;

        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_loopback;
        a6->sin6_port = htons((unsigned short)port);
        len = sizeof(*a6);
    }
    else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;

        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a4->sin_port = htons((unsigned short)port);
        len = sizeof(*a4);
    }
    ck_assert_int_eq(connect(c, (struct sockaddr *)&addr, len), 0);
    a = accept(lfd, NULL, NULL);
    ck_assert_int_ge(a, 0);
    *client = c;
    return a;
}

static int int_option(int fd, int level, int name)
{
    int value = -12345;
    socklen_t len = sizeof(value);

    ck_assert_int_eq(getsockopt(fd, level, name, &value, &len), 0);
    return value;
}

/* The set of the named items (NULL ends the list). */
static pf_sockopt_set_t set_of(const char *name, ...)
{
    pf_sockopt_set_t s;
    va_list names;
    int i;

    memset(&s, 0, sizeof(s));
    va_start(names, name);
    for (; name != NULL; name = va_arg(names, const char *)) {
        i = option_find(name);
        ck_assert_msg(i >= 0, "%s is not in the table", name);
        s.w[i / 64] |= (apr_uint64_t)1 << (i % 64);
    }
    va_end(names);
    return s;
}

static int set_has(const pf_sockopt_set_t *s, const char *name)
{
    int i = option_find(name);

    ck_assert_msg(i >= 0, "%s is not in the table", name);
    return (s->w[i / 64] >> (i % 64)) & 1;
}

static int set_eq(const pf_sockopt_set_t *a, const pf_sockopt_set_t *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

static int only(const pf_sockopt_set_t *s, const char *name)
{
    pf_sockopt_set_t one = set_of(name, NULL);

    return set_eq(s, &one);
}

/* ------------------------------------------------------------------ */
/* Each option a child can set                                         */

typedef enum {
    PUT_BACK,       /* in place */
    ONLY_WITH_SOCKET /* cannot go back in place: the socket is replaced */
} outcome_e;

typedef struct {
    const char *name;
    int family;
    int level;
    int option;
    int value;              /* an int option's hostile value */
    outcome_e outcome;
    int extra_failed_ok;    /* another option may move with it */
} hostile_case_t;

#ifndef TCP_TX_DELAY
#define TCP_TX_DELAY 37
#endif
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef TCP_INQ
#define TCP_INQ 36
#endif
#ifndef IP_UNICAST_IF
#define IP_UNICAST_IF 50
#endif

static const hostile_case_t hostile_cases[] = {
    { "SO_SNDBUF", AF_INET, SOL_SOCKET, SO_SNDBUF, 2304, ONLY_WITH_SOCKET,
      0 },
    { "SO_RCVBUF", AF_INET, SOL_SOCKET, SO_RCVBUF, 2304, ONLY_WITH_SOCKET,
      0 },
    { "SO_KEEPALIVE", AF_INET, SOL_SOCKET, SO_KEEPALIVE, 1, PUT_BACK, 0 },
    { "SO_OOBINLINE", AF_INET, SOL_SOCKET, SO_OOBINLINE, 1, PUT_BACK, 0 },
    { "SO_DONTROUTE", AF_INET, SOL_SOCKET, SO_DONTROUTE, 1, PUT_BACK, 0 },
    { "SO_RCVLOWAT", AF_INET, SOL_SOCKET, SO_RCVLOWAT, 100, PUT_BACK, 0 },
    /* A large low-water mark also grows the receive buffer and clamps
     * the window: those go only with the socket. */
    { "SO_RCVLOWAT", AF_INET, SOL_SOCKET, SO_RCVLOWAT, 1 << 20,
      ONLY_WITH_SOCKET, 1 },
    { "SO_PRIORITY", AF_INET, SOL_SOCKET, SO_PRIORITY, 6, PUT_BACK, 0 },
    { "IP_TTL", AF_INET, IPPROTO_IP, IP_TTL, 1, PUT_BACK, 0 },
    { "IP_TOS", AF_INET, IPPROTO_IP, IP_TOS, 0x10, PUT_BACK, 0 },
    { "IP_MTU_DISCOVER", AF_INET, IPPROTO_IP, IP_MTU_DISCOVER,
      IP_PMTUDISC_DONT, PUT_BACK, 0 },
    { "IP_MINTTL", AF_INET, IPPROTO_IP, IP_MINTTL, 255, PUT_BACK, 0 },
    { "IPV6_UNICAST_HOPS", AF_INET6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 1,
      PUT_BACK, 0 },
    { "IPV6_TCLASS", AF_INET6, IPPROTO_IPV6, IPV6_TCLASS, 0x20, PUT_BACK,
      0 },
    { "IPV6_MINHOPCOUNT", AF_INET6, IPPROTO_IPV6, IPV6_MINHOPCOUNT, 255,
      PUT_BACK, 0 },
    { "TCP_MAXSEG", AF_INET, IPPROTO_TCP, TCP_MAXSEG, 88, PUT_BACK, 0 },
    { "TCP_NODELAY", AF_INET, IPPROTO_TCP, TCP_NODELAY, 1, PUT_BACK, 0 },
    { "TCP_CORK", AF_INET, IPPROTO_TCP, TCP_CORK, 1, PUT_BACK, 0 },
    { "TCP_KEEPIDLE", AF_INET, IPPROTO_TCP, TCP_KEEPIDLE, 1, PUT_BACK, 0 },
    { "TCP_KEEPINTVL", AF_INET, IPPROTO_TCP, TCP_KEEPINTVL, 1, PUT_BACK, 0 },
    { "TCP_KEEPCNT", AF_INET, IPPROTO_TCP, TCP_KEEPCNT, 1, PUT_BACK, 0 },
    { "TCP_SYNCNT", AF_INET, IPPROTO_TCP, TCP_SYNCNT, 1, PUT_BACK, 0 },
    { "TCP_LINGER2", AF_INET, IPPROTO_TCP, TCP_LINGER2, -1, PUT_BACK, 0 },
    { "TCP_DEFER_ACCEPT", AF_INET, IPPROTO_TCP, TCP_DEFER_ACCEPT, 30,
      PUT_BACK, 0 },
    { "TCP_WINDOW_CLAMP", AF_INET, IPPROTO_TCP, TCP_WINDOW_CLAMP, 2048,
      ONLY_WITH_SOCKET, 0 },
    { "TCP_USER_TIMEOUT", AF_INET, IPPROTO_TCP, TCP_USER_TIMEOUT, 1,
      PUT_BACK, 0 },
    { "TCP_FASTOPEN", AF_INET, IPPROTO_TCP, TCP_FASTOPEN, 5, PUT_BACK, 0 },
    { "TCP_NOTSENT_LOWAT", AF_INET, IPPROTO_TCP, TCP_NOTSENT_LOWAT, 1,
      PUT_BACK, 0 },
    { "TCP_THIN_LINEAR_TIMEOUTS", AF_INET, IPPROTO_TCP,
      TCP_THIN_LINEAR_TIMEOUTS, 1, PUT_BACK, 0 },
    { "TCP_SAVE_SYN", AF_INET, IPPROTO_TCP, TCP_SAVE_SYN, 1, PUT_BACK, 0 },
    { "TCP_TX_DELAY", AF_INET, IPPROTO_TCP, TCP_TX_DELAY, 100000, PUT_BACK,
      0 },
    /* The round-four findings: inherited, and unseen before. */
    { "SO_BUF_LOCK", AF_INET, SOL_SOCKET, SO_BUF_LOCK, 3, PUT_BACK, 0 },
    { "SO_BUSY_POLL", AF_INET, SOL_SOCKET, SO_BUSY_POLL, 50, PUT_BACK, 0 },
    { "SO_INCOMING_CPU", AF_INET, SOL_SOCKET, SO_INCOMING_CPU, 1, PUT_BACK,
      0 },
    { "SO_ZEROCOPY", AF_INET, SOL_SOCKET, SO_ZEROCOPY, 1, PUT_BACK, 0 },
    { "SO_TIMESTAMPING_OLD", AF_INET, SOL_SOCKET, SO_TIMESTAMPING_OLD, 0x7f,
      PUT_BACK, 0 },
    { "IP_RECVERR", AF_INET, IPPROTO_IP, IP_RECVERR, 1, PUT_BACK, 0 },
    { "IP_FREEBIND", AF_INET, IPPROTO_IP, IP_FREEBIND, 1, PUT_BACK, 0 },
    { "IP_PKTINFO", AF_INET, IPPROTO_IP, IP_PKTINFO, 1, PUT_BACK, 0 },
    { "TCP_QUICKACK", AF_INET, IPPROTO_TCP, TCP_QUICKACK, 0, PUT_BACK, 0 },
    { "TCP_INQ", AF_INET, IPPROTO_TCP, TCP_INQ, 1, PUT_BACK, 0 },
    { "IPV6_RECVERR", AF_INET6, IPPROTO_IPV6, IPV6_RECVERR, 1, PUT_BACK, 0 },
};

START_TEST(each_option_a_child_sets_is_found_and_put_back)
{
    const hostile_case_t *c = &hostile_cases[_i];
    pf_sockopts_t *rec = malloc(sizeof(*rec)), *now = malloc(sizeof(*now));
    pf_sockopt_set_t changed, failed, differ;
    int port, fd = listener(c->family, &port), copy = dup(fd), value;

    pf_sockopts_record(fd, rec);
    ck_assert_msg(set_has(&rec->have, c->name), "%s not read", c->name);
    value = c->value;
    /* Set as a child would: through its own descriptor for the socket. */
    ck_assert_msg(setsockopt(copy, c->level, c->option, &value,
                             sizeof(value)) == 0,
                  "%s: %s", c->name, strerror(errno));
    pf_sockopts_read(fd, now);
    differ = pf_sockopts_compare(rec, now);
    ck_assert(set_has(&differ, c->name));

    pf_sockopts_repair(fd, rec, &changed, &failed);
    ck_assert_msg(set_has(&changed, c->name), "%s not found changed",
                  c->name);
    if (c->outcome == PUT_BACK) {
        ck_assert_msg(pf_sockopt_set_empty(&failed), "%s: failed",
                      c->name);
        pf_sockopts_read(fd, now);
        differ = pf_sockopts_compare(rec, now);
        ck_assert_msg(pf_sockopt_set_empty(&differ), "%s", c->name);
        /* Nothing left to find. */
        pf_sockopts_repair(fd, rec, &changed, &failed);
        ck_assert(pf_sockopt_set_empty(&changed));
    }
    else {
        ck_assert_msg(!pf_sockopt_set_empty(&failed), "%s put back in place",
                      c->name);
        ck_assert(c->extra_failed_ok || only(&failed, c->name));
    }
    close(copy);
    close(fd);
    free(rec);
    free(now);
}
END_TEST

/* The open file description every holder shares: O_ASYNC with the
 * process group as owner and SIGSTOP as the signal (each connection would
 * stop every sibling) all go back. */
START_TEST(the_files_flags_owner_and_signal_go_back)
{
    pf_sockopts_t *rec = malloc(sizeof(*rec));
    pf_sockopt_set_t changed, failed, want;
    struct f_owner_ex owner;
    int port, fd = listener(AF_INET, &port), copy = dup(fd), client, a;

    pf_sockopts_record(fd, rec);
    ck_assert_int_eq(fcntl(copy, F_SETOWN, -getpgrp()), 0);
    ck_assert_int_eq(fcntl(copy, F_SETSIG, SIGSTOP), 0);
    ck_assert_int_eq(fcntl(copy, F_SETFL, fcntl(copy, F_GETFL) | O_ASYNC),
                     0);
    pf_sockopts_repair(fd, rec, &changed, &failed);
    want = set_of("F_GETFL", "F_GETOWN_EX", "F_GETSIG", NULL);
    ck_assert(set_eq(&changed, &want));
    ck_assert(pf_sockopt_set_empty(&failed));
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ASYNC, 0);
    ck_assert_int_eq(fcntl(fd, F_GETSIG), 0);
    ck_assert_int_eq(fcntl(fd, F_GETOWN_EX, &owner), 0);
    ck_assert_int_eq(owner.pid, 0);
    /* A connection now signals nobody: we would be stopped. */
    a = accepted(fd, AF_INET, port, &client);
    close(a);
    close(client);
    close(copy);
    close(fd);
    free(rec);
}
END_TEST

/* SO_LINGER {1, 0} and SO_SNDTIMEO: values that are not one int. */
START_TEST(structured_options_go_back_byte_for_byte)
{
    struct linger reset = { 1, 0 }, got;
    struct timeval tv = { 1, 0 }, tv_got;
    socklen_t len = sizeof(got);
    pf_sockopts_t *rec = malloc(sizeof(*rec));
    pf_sockopt_set_t changed, failed, want;
    int port, fd = listener(AF_INET, &port);

    pf_sockopts_record(fd, rec);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset,
                                sizeof(reset)), 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
                                sizeof(tv)), 0);
    pf_sockopts_repair(fd, rec, &changed, &failed);
    want = set_of("SO_LINGER", "SO_SNDTIMEO_OLD", NULL);
    ck_assert(set_eq(&changed, &want));
    ck_assert(pf_sockopt_set_empty(&failed));
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_LINGER, &got, &len), 0);
    ck_assert_int_eq(got.l_onoff, 0);
    len = sizeof(tv_got);
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv_got, &len),
                     0);
    ck_assert(tv_got.tv_sec == 0 && tv_got.tv_usec == 0);
    close(fd);
    free(rec);
}
END_TEST

/* Another congestion control than the socket's (reno is always built
 * in): the name goes back. */
START_TEST(a_congestion_control_goes_back)
{
    char name[16], other[16];
    socklen_t len = sizeof(name);
    pf_sockopts_t *rec = malloc(sizeof(*rec));
    pf_sockopt_set_t changed, failed;
    int port, fd = listener(AF_INET, &port);

    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name,
                                &len), 0);
    strcpy(other, strcmp(name, "reno") == 0 ? "cubic" : "reno");
    pf_sockopts_record(fd, rec);
    ck_assert_int_eq(setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, other,
                                (socklen_t)strlen(other)), 0);
    pf_sockopts_repair(fd, rec, &changed, &failed);
    ck_assert(only(&changed, "TCP_CONGESTION"));
    ck_assert(pf_sockopt_set_empty(&failed));
    len = sizeof(other);
    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, other,
                                &len), 0);
    ck_assert_str_eq(other, name);
    close(fd);
    free(rec);
}
END_TEST

/* Values at the kernel's default go back to following the kernel: an
 * IP_TTL of -1, not a fixed 64; a TCP_MAXSEG of 0, not 536. */
START_TEST(a_default_goes_back_to_following_the_kernel)
{
    pf_sockopts_t *rec = malloc(sizeof(*rec));
    pf_sockopt_set_t changed, failed;
    int port, fd = listener(AF_INET, &port), one = 1, mss = 88;

    pf_sockopts_record(fd, rec);
    ck_assert(set_has(&rec->kernel_default, "IP_TTL"));
    ck_assert(set_has(&rec->kernel_default, "TCP_MAXSEG"));
    ck_assert(set_has(&rec->kernel_default, "SO_SNDBUF"));
    setsockopt(fd, IPPROTO_IP, IP_TTL, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof(mss));
    pf_sockopts_repair(fd, rec, &changed, &failed);
    ck_assert(pf_sockopt_set_empty(&failed));
    /* An explicit 64 would read 64 too; the proof is a connection's
     * MSS, which a fixed 536 would cap. */
    {
        int client, a = accepted(fd, AF_INET, port, &client);

        ck_assert_int_gt(int_option(a, IPPROTO_TCP, TCP_MAXSEG), 536);
        ck_assert_int_eq(int_option(a, IPPROTO_IP, IP_TTL), 64);
        close(a);
        close(client);
    }
    close(fd);
    free(rec);
}
END_TEST

/* A buffer the parent set (SendBufferSize) goes back, through the
 * privileged option where the size is past the system's maximum. */
START_TEST(an_explicit_buffer_goes_back)
{
    pf_sockopts_t *rec = malloc(sizeof(*rec));
    pf_sockopt_set_t changed, failed;
    int port, fd = listener(AF_INET, &port), size = 65536, tiny = 2304;

    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size,
                                sizeof(size)), 0);
    pf_sockopts_record(fd, rec);
    ck_assert(!set_has(&rec->kernel_default, "SO_SNDBUF"));
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &tiny,
                                sizeof(tiny)), 0);
    pf_sockopts_repair(fd, rec, &changed, &failed);
    ck_assert(only(&changed, "SO_SNDBUF"));
    ck_assert(pf_sockopt_set_empty(&failed));
    ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_SNDBUF), 2 * size);
    close(fd);
    free(rec);
}
END_TEST

/* What the kernel copies into each connection: SO_LINGER {1, 0}, IP_TTL 1
 * and SO_BUF_LOCK set on the listener reach the next connection; put
 * back, the one after has the listener's own values. */
START_TEST(connections_after_the_repair_inherit_the_original_values)
{
    struct linger reset = { 1, 0 }, got;
    socklen_t len = sizeof(got);
    pf_sockopts_t *rec = malloc(sizeof(*rec));
    pf_sockopt_set_t changed, failed;
    int port, fd = listener(AF_INET, &port), ttl = 1, lock = 3, client, a;

    pf_sockopts_record(fd, rec);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &lock,
                                sizeof(lock)), 0);
    a = accepted(fd, AF_INET, port, &client);
    ck_assert_int_eq(getsockopt(a, SOL_SOCKET, SO_LINGER, &got, &len), 0);
    ck_assert_int_eq(got.l_onoff, 1);
    ck_assert_int_eq(int_option(a, IPPROTO_IP, IP_TTL), 1);
    ck_assert_int_eq(int_option(a, SOL_SOCKET, SO_BUF_LOCK), 3);
    close(a);
    close(client);

    pf_sockopts_repair(fd, rec, &changed, &failed);
    ck_assert(pf_sockopt_set_empty(&failed));
    a = accepted(fd, AF_INET, port, &client);
    len = sizeof(got);
    ck_assert_int_eq(getsockopt(a, SOL_SOCKET, SO_LINGER, &got, &len), 0);
    ck_assert_int_eq(got.l_onoff, 0);
    ck_assert_int_eq(int_option(a, IPPROTO_IP, IP_TTL), 64);
    ck_assert_int_eq(int_option(a, SOL_SOCKET, SO_BUF_LOCK), 0);
    close(a);
    close(client);
    close(fd);
    free(rec);
}
END_TEST

/* A new socket given a record (a replacement, a bucket's duplicate)
 * matches it, and a buffer size the kernel chose stays the kernel's. */
START_TEST(a_fresh_socket_given_a_record_matches_it)
{
    pf_sockopts_t *rec = malloc(sizeof(*rec)), *now = malloc(sizeof(*now));
    pf_sockopt_set_t changed, failed, want, differ;
    int port, fd = listener(AF_INET, &port), one = 1, defer = 30, fresh;

    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer));
    pf_sockopts_record(fd, rec);
    fresh = socket(AF_INET, SOCK_STREAM, 0);
    pf_sockopts_repair(fresh, rec, &changed, &failed);
    /* SO_REUSEADDR: the listener has it, as httpd's do. */
    want = set_of("SO_KEEPALIVE", "TCP_NODELAY", "TCP_DEFER_ACCEPT", NULL);
    ck_assert(!pf_sockopt_set_news(&want, &changed));
    ck_assert(pf_sockopt_set_empty(&failed));
    pf_sockopts_read(fresh, now);
    differ = pf_sockopts_compare(rec, now);
    ck_assert(pf_sockopt_set_empty(&differ));
    close(fresh);
    close(fd);
    free(rec);
    free(now);
}
END_TEST

/* Connections come and go, the socket stays as it was: nothing in the
 * record moves with traffic (a false finding would be put back, and a
 * socket put back twice is replaced). */
START_TEST(a_busy_socket_stays_as_recorded)
{
    pf_sockopts_t *rec = malloc(sizeof(*rec)), *now = malloc(sizeof(*now));
    pf_sockopt_set_t differ;
    char names[1024];
    int port, fd = listener(AF_INET, &port), i, client, a;

    pf_sockopts_record(fd, rec);
    for (i = 0; i < 200; i++) {
        a = accepted(fd, AF_INET, port, &client);
        ck_assert_int_eq(write(a, "hello", 5), 5);
        close(a);
        close(client);
    }
    pf_sockopts_read(fd, now);
    differ = pf_sockopts_compare(rec, now);
    ck_assert_msg(pf_sockopt_set_empty(&differ), "moved: %s",
                  pf_sockopts_describe(&differ, names, sizeof(names)));
    close(fd);
    free(rec);
    free(now);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Pure parts                                                          */

START_TEST(compare_finds_values_lengths_and_missing_options)
{
    pf_sockopts_t *want = calloc(1, sizeof(*want));
    pf_sockopts_t *now = malloc(sizeof(*now));
    pf_sockopt_set_t differ;

    want->have.w[0] = 0x7;
    want->have.w[2] = 0x1;
    want->len[0] = want->len[1] = want->len[2] = want->len[128] = 4;
    want->value[1][0] = 9;
    *now = *want;
    differ = pf_sockopts_compare(want, now);
    ck_assert(pf_sockopt_set_empty(&differ));
    now->value[1][0] = 8;               /* another value */
    now->len[2] = 8;                    /* another length */
    now->value[128][3] = 1;             /* in the third word */
    differ = pf_sockopts_compare(want, now);
    ck_assert(differ.w[0] == 0x6 && differ.w[1] == 0 && differ.w[2] == 1);
    *now = *want;
    now->have.w[0] = 0x5;               /* no longer readable */
    differ = pf_sockopts_compare(want, now);
    ck_assert(differ.w[0] == 0x2 && differ.w[2] == 0);
    *now = *want;
    now->have.w[0] = 0xf;               /* more than recorded: ignored */
    differ = pf_sockopts_compare(want, now);
    ck_assert(pf_sockopt_set_empty(&differ));
    free(want);
    free(now);
}
END_TEST

START_TEST(sets_merge_and_tell_what_is_new)
{
    pf_sockopt_set_t a = set_of("SO_LINGER", NULL);
    pf_sockopt_set_t b = set_of("F_GETSIG", NULL);

    ck_assert(!pf_sockopt_set_empty(&a));
    ck_assert(pf_sockopt_set_news(&b, &a));
    pf_sockopt_set_merge(&a, &b);
    ck_assert(!pf_sockopt_set_news(&b, &a));
    ck_assert(set_has(&a, "SO_LINGER") && set_has(&a, "F_GETSIG"));
}
END_TEST

START_TEST(descriptions_name_each_option)
{
    char buf[256], small[10];
    pf_sockopt_set_t none, two = set_of("SO_LINGER", "IP_TTL", NULL), all;

    memset(&none, 0, sizeof(none));
    memset(&all, 0xff, sizeof(all));
    ck_assert_str_eq(pf_sockopts_describe(&none, buf, sizeof(buf)), "");
    ck_assert_str_eq(pf_sockopts_describe(&two, buf, sizeof(buf)),
                     "SO_LINGER, IP_TTL");
    pf_sockopts_describe(&all, small, sizeof(small));
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    ck_assert_ptr_null(option_name(option_count()));
    ck_assert_int_eq(option_find("no such option"), -1);
}
END_TEST

/* Values of options, not options, in the headers: skipped by prefix. */
static int is_a_value(const char *name)
{
    static const char *const prefixes[] = {
        "IP_PMTUDISC_", "IP_DEFAULT_", "IPV6_PMTUDISC_", "IPV6_FL_",
        "IPV6_FLOWINFO_FLOWLABEL", "IPV6_FLOWINFO_PRIORITY",
        "IPV6_PRIORITY_", "IPV6_TLV_", "IPV6_PREFER_SRC_", "IPV6_SRCRT_",
        "IPV6_OPT_", "IPV6_MIN_MTU", "TCP_MSS_", "TCP_REPAIR_ON",
        "TCP_REPAIR_OFF", "TCP_MD5SIG_MAXKEYLEN", "TCP_MD5SIG_FLAG_",
        "TCP_RECEIVE_ZEROCOPY_", "TCP_AO_MAXKEYLEN", "TCP_AO_KEYF_",
    };
    apr_size_t i;

    for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Every option Linux's headers (linux-libc-dev) define for the levels a
 * TCP listener has: the record compares it or says why not.  A kernel
 * that brings a new option fails this test until the table knows it. */
START_TEST(the_table_knows_every_option_of_the_headers)
{
    static const char *const headers[] = {
        "/usr/include/asm-generic/socket.h", "/usr/include/linux/in.h",
        "/usr/include/linux/in6.h", "/usr/include/linux/ipv6.h",
        "/usr/include/linux/tcp.h",
    };
    regex_t define;
    regmatch_t m[2];
    char line[512], name[128];
    apr_size_t h;
    int seen = 0;
    FILE *f;

    ck_assert_int_eq(regcomp(&define, "^#define[ \t]+((SO|IP|IPV6|TCP)_"
                             "[A-Z0-9_]+)[ \t]+[0-9]",
                             REG_EXTENDED), 0);
    for (h = 0; h < sizeof(headers) / sizeof(headers[0]); h++) {
        f = fopen(headers[h], "r");
        ck_assert_msg(f != NULL, "%s: %s", headers[h], strerror(errno));
        while (fgets(line, sizeof(line), f)) {
            if (regexec(&define, line, 2, m, 0) != 0) {
                continue;
            }
            snprintf(name, sizeof(name), "%.*s",
                     (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
            if (is_a_value(name)) {
                continue;
            }
            seen++;
            ck_assert_msg(option_find(name) >= 0
                              || left_out_reason(name) != NULL,
                          "%s (%s) is neither compared nor left out with "
                          "a reason", name, headers[h]);
            ck_assert_msg(!(option_find(name) >= 0
                            && left_out_reason(name) != NULL),
                          "%s is both compared and left out", name);
        }
        fclose(f);
    }
    regfree(&define);
    /* The headers were read: SOL_SOCKET alone defines dozens. */
    ck_assert_int_gt(seen, 150);
}
END_TEST

/* The options the issues name, at least, are in the table. */
START_TEST(the_table_holds_what_connections_inherit)
{
    static const char *const named[] = {
        "SO_LINGER", "SO_SNDBUF", "SO_RCVBUF", "SO_KEEPALIVE",
        "SO_PRIORITY", "IP_TTL", "IP_TOS", "IPV6_UNICAST_HOPS",
        "IPV6_TCLASS", "TCP_MAXSEG", "TCP_NODELAY", "TCP_USER_TIMEOUT",
        "TCP_CONGESTION", "TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT",
        "TCP_DEFER_ACCEPT", "TCP_FASTOPEN", "SO_BUF_LOCK", "SO_BUSY_POLL",
        "IP_RECVERR", "TCP_QUICKACK", "SO_TIMESTAMPING_OLD", "SO_ZEROCOPY",
        "SO_INCOMING_CPU", "IP_FREEBIND", "IP_UNICAST_IF", "IP_PKTINFO",
        "TCP_INQ", "SO_TXTIME", "F_GETFL", "F_GETOWN_EX", "F_GETSIG",
    };
    apr_size_t i;

    ck_assert_int_le(option_count(), PF_SOCKOPT_MAX);
    for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        ck_assert_msg(option_find(named[i]) >= 0, "%s", named[i]);
    }
}
END_TEST

Suite *sockopts_suite(void)
{
    Suite *s = suite_create("sockopts");
    TCase *sockets = tcase_create("sockets");
    TCase *pure = tcase_create("pure");

    tcase_add_loop_test(sockets,
                        each_option_a_child_sets_is_found_and_put_back, 0,
                        (int)(sizeof(hostile_cases)
                              / sizeof(hostile_cases[0])));
    tcase_add_test(sockets, the_files_flags_owner_and_signal_go_back);
    tcase_add_test(sockets, structured_options_go_back_byte_for_byte);
    tcase_add_test(sockets, a_congestion_control_goes_back);
    tcase_add_test(sockets, a_default_goes_back_to_following_the_kernel);
    tcase_add_test(sockets, an_explicit_buffer_goes_back);
    tcase_add_test(sockets,
                   connections_after_the_repair_inherit_the_original_values);
    tcase_add_test(sockets, a_fresh_socket_given_a_record_matches_it);
    tcase_add_test(sockets, a_busy_socket_stays_as_recorded);
    suite_add_tcase(s, sockets);
    tcase_add_test(pure, compare_finds_values_lengths_and_missing_options);
    tcase_add_test(pure, sets_merge_and_tell_what_is_new);
    tcase_add_test(pure, descriptions_name_each_option);
    tcase_add_test(pure, the_table_knows_every_option_of_the_headers);
    tcase_add_test(pure, the_table_holds_what_connections_inherit);
    suite_add_tcase(s, pure);
    return s;
}
