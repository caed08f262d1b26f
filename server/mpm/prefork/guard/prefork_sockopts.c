/* Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements.  See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License.  You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/*
 * The record of a listening socket's whole state: the table of every
 * option of SOL_SOCKET, IP, IPv6 and TCP a listener answers for, and of
 * its open file description's flags, owner and signal, each with how it
 * goes back; reading, comparing and putting back; and sets of the table's
 * items (found changed, still wrong).  An option at the kernel's default
 * goes back to following the kernel, not to a number.  The list of what
 * Linux's headers define and the table leaves out, with the reason, is
 * compiled for the unit tests only, which check both against the headers.
 * Plain libc: it decides and logs nothing; the guard (prefork_guard.c)
 * records and repairs with it, and prefork_os.c gives a duplicate the
 * original's options.
 */

#include "apr.h"
#include "apr_strings.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "prefork_sockopts.h"

/* Linux's numbers for options newer than the C library's headers may
 * know: a kernel without one refuses to read it, and the option is then
 * left out of the record. */
#ifdef __linux__
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef SO_RESERVE_MEM
#define SO_RESERVE_MEM 73
#endif
#ifndef SO_TXREHASH
#define SO_TXREHASH 74
#endif
#ifndef SO_RCVMARK
#define SO_RCVMARK 75
#endif
#ifndef SO_RCVPRIORITY
#define SO_RCVPRIORITY 82
#endif
#ifndef SO_TIMESTAMP_NEW
#define SO_TIMESTAMP_NEW 63
#endif
#ifndef SO_TIMESTAMPNS_NEW
#define SO_TIMESTAMPNS_NEW 64
#endif
#ifndef SO_TIMESTAMPING_NEW
#define SO_TIMESTAMPING_NEW 65
#endif
#ifndef SO_SNDTIMEO_OLD
#define SO_SNDTIMEO_OLD 21
#endif
#ifndef SO_TIMESTAMP_OLD
#define SO_TIMESTAMP_OLD 29
#endif
#ifndef SO_TIMESTAMPNS_OLD
#define SO_TIMESTAMPNS_OLD 35
#endif
#ifndef SO_TIMESTAMPING_OLD
#define SO_TIMESTAMPING_OLD 37
#endif
#ifndef IP_RECVERR_RFC4884
#define IP_RECVERR_RFC4884 26
#endif
#ifndef IP_LOCAL_PORT_RANGE
#define IP_LOCAL_PORT_RANGE 51
#endif
#ifndef IPV6_ROUTER_ALERT_ISOLATE
#define IPV6_ROUTER_ALERT_ISOLATE 30
#endif
#ifndef IPV6_RECVERR_RFC4884
#define IPV6_RECVERR_RFC4884 31
#endif
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11
#endif
#ifndef IPV6_FLOWINFO_SEND
#define IPV6_FLOWINFO_SEND 33
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif
#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND 78
#endif
#ifndef IP_UNICAST_IF
#define IP_UNICAST_IF 50
#endif
#ifndef TCP_INQ
#define TCP_INQ 36
#endif
#ifndef TCP_TX_DELAY
#define TCP_TX_DELAY 37
#endif
#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44
#endif
#ifndef TCP_RTO_MIN_US
#define TCP_RTO_MIN_US 45
#endif
#ifndef TCP_DELACK_MAX_US
#define TCP_DELACK_MAX_US 46
#endif
#endif /* __linux__ */

/* The open file description's state, read with fcntl(): a "level" of
 * our own beside the socket's. */
#define LEVEL_FILE (-1)

/* The F_SETFL flags other than O_NONBLOCK, which the guard keeps as the
 * bucket wants it (prefork_guard.c). */
#ifndef O_NOATIME
#define O_NOATIME 0
#endif
#ifndef O_DIRECT
#define O_DIRECT 0
#endif
#define FILE_FLAGS (O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME)

/* How an item goes back. */
typedef enum {
    PUT_VALUE,          /* set the recorded value again */
    PUT_FOLLOW_KERNEL,  /* at the kernel's default: the value that makes
                           it follow the kernel again (reset below) */
    PUT_BUFFER,         /* a buffer size: half the value read (the kernel
                           reports twice what was set), through the
                           privileged option, which ignores the system's
                           maximum; one the kernel chose cannot go back */
    PUT_NEVER,          /* nothing takes it off: only a new socket */
    PUT_FILE_FLAGS,     /* F_SETFL, O_NONBLOCK left as it is */
    PUT_FILE_OWNER,     /* F_SETOWN_EX */
    PUT_FILE_SIG        /* F_SETSIG */
} put_back_e;

typedef struct {
    int level;          /* LEVEL_FILE: an fcntl() command */
    int name;
    const char *label;
    socklen_t size;     /* what getsockopt() is given */
    put_back_e how;
    int reset;          /* PUT_FOLLOW_KERNEL: the value that does it */
    int forced;         /* PUT_BUFFER: the privileged option */
} option_t;

#define INT(level, name, how) \
    { level, name, #name, sizeof(int), how, 0, 0 }
#define SIZED(level, name, size, how) \
    { level, name, #name, size, how, 0, 0 }
#define FOLLOW(level, name, reset) \
    { level, name, #name, sizeof(int), PUT_FOLLOW_KERNEL, reset, 0 }

/* Every option of SOL_SOCKET, IP, IPv6 and TCP that a listening socket
 * answers for and a holder of it can change, and the file's flags, owner
 * and signal.  What Linux's headers define for those levels and is not
 * here is in test/unit/test_prefork_sockopts.c's left_out, with the
 * reason, and that test checks the two against the headers. */
static const option_t options[] = {
    INT(SOL_SOCKET, SO_DEBUG, PUT_VALUE),
    INT(SOL_SOCKET, SO_REUSEADDR, PUT_VALUE),
    INT(SOL_SOCKET, SO_DONTROUTE, PUT_VALUE),
    INT(SOL_SOCKET, SO_BROADCAST, PUT_VALUE),
    { SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF", sizeof(int), PUT_BUFFER, 0,
#ifdef SO_SNDBUFFORCE
      SO_SNDBUFFORCE
#else
      SO_SNDBUF
#endif
    },
    { SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF", sizeof(int), PUT_BUFFER, 0,
#ifdef SO_RCVBUFFORCE
      SO_RCVBUFFORCE
#else
      SO_RCVBUF
#endif
    },
    INT(SOL_SOCKET, SO_KEEPALIVE, PUT_VALUE),
    INT(SOL_SOCKET, SO_OOBINLINE, PUT_VALUE),
    INT(SOL_SOCKET, SO_NO_CHECK, PUT_VALUE),
    INT(SOL_SOCKET, SO_PRIORITY, PUT_VALUE),
    SIZED(SOL_SOCKET, SO_LINGER, sizeof(struct linger), PUT_VALUE),
    INT(SOL_SOCKET, SO_PASSCRED, PUT_VALUE),
    INT(SOL_SOCKET, SO_RCVLOWAT, PUT_VALUE),
    SIZED(SOL_SOCKET, SO_SNDTIMEO_OLD, sizeof(struct timeval), PUT_VALUE),
    INT(SOL_SOCKET, SO_TIMESTAMP_OLD, PUT_VALUE),
    INT(SOL_SOCKET, SO_TIMESTAMPNS_OLD, PUT_VALUE),
    INT(SOL_SOCKET, SO_MARK, PUT_VALUE),
    SIZED(SOL_SOCKET, SO_TIMESTAMPING_OLD, 2 * sizeof(int), PUT_VALUE),
    INT(SOL_SOCKET, SO_RXQ_OVFL, PUT_VALUE),
    INT(SOL_SOCKET, SO_WIFI_STATUS, PUT_VALUE),
    INT(SOL_SOCKET, SO_PEEK_OFF, PUT_VALUE),
    INT(SOL_SOCKET, SO_NOFCS, PUT_VALUE),
    INT(SOL_SOCKET, SO_SELECT_ERR_QUEUE, PUT_VALUE),
    INT(SOL_SOCKET, SO_BUSY_POLL, PUT_VALUE),
    SIZED(SOL_SOCKET, SO_MAX_PACING_RATE, sizeof(apr_uint64_t), PUT_VALUE),
    INT(SOL_SOCKET, SO_INCOMING_CPU, PUT_VALUE),
    INT(SOL_SOCKET, SO_ZEROCOPY, PUT_VALUE),
    /* Setting it turns transmit times on, which no read shows. */
    SIZED(SOL_SOCKET, SO_TXTIME, 2 * sizeof(int), PUT_NEVER),
    INT(SOL_SOCKET, SO_BINDTOIFINDEX, PUT_VALUE),
    INT(SOL_SOCKET, SO_TIMESTAMP_NEW, PUT_VALUE),
    INT(SOL_SOCKET, SO_TIMESTAMPNS_NEW, PUT_VALUE),
    SIZED(SOL_SOCKET, SO_TIMESTAMPING_NEW, 2 * sizeof(int), PUT_VALUE),
    INT(SOL_SOCKET, SO_PREFER_BUSY_POLL, PUT_VALUE),
    INT(SOL_SOCKET, SO_BUF_LOCK, PUT_VALUE),
    INT(SOL_SOCKET, SO_RESERVE_MEM, PUT_VALUE),
    INT(SOL_SOCKET, SO_TXREHASH, PUT_VALUE),
    INT(SOL_SOCKET, SO_RCVMARK, PUT_VALUE),
    INT(SOL_SOCKET, SO_RCVPRIORITY, PUT_VALUE),

    INT(IPPROTO_IP, IP_TOS, PUT_VALUE),
    FOLLOW(IPPROTO_IP, IP_TTL, -1),
    SIZED(IPPROTO_IP, IP_OPTIONS, PF_SOCKOPT_VALUE_MAX, PUT_VALUE),
    INT(IPPROTO_IP, IP_RECVOPTS, PUT_VALUE),
    INT(IPPROTO_IP, IP_RETOPTS, PUT_VALUE),
    INT(IPPROTO_IP, IP_PKTINFO, PUT_VALUE),
    INT(IPPROTO_IP, IP_MTU_DISCOVER, PUT_VALUE),
    INT(IPPROTO_IP, IP_RECVERR, PUT_VALUE),
    INT(IPPROTO_IP, IP_RECVTTL, PUT_VALUE),
    INT(IPPROTO_IP, IP_RECVTOS, PUT_VALUE),
    INT(IPPROTO_IP, IP_FREEBIND, PUT_VALUE),
    INT(IPPROTO_IP, IP_PASSSEC, PUT_VALUE),
    INT(IPPROTO_IP, IP_TRANSPARENT, PUT_VALUE),
    INT(IPPROTO_IP, IP_ORIGDSTADDR, PUT_VALUE),
    INT(IPPROTO_IP, IP_MINTTL, PUT_VALUE),
    INT(IPPROTO_IP, IP_CHECKSUM, PUT_VALUE),
    INT(IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, PUT_VALUE),
    INT(IPPROTO_IP, IP_RECVFRAGSIZE, PUT_VALUE),
    INT(IPPROTO_IP, IP_RECVERR_RFC4884, PUT_VALUE),
    INT(IPPROTO_IP, IP_MULTICAST_IF, PUT_VALUE),
    INT(IPPROTO_IP, IP_MULTICAST_TTL, PUT_VALUE),
    INT(IPPROTO_IP, IP_MULTICAST_LOOP, PUT_VALUE),
    INT(IPPROTO_IP, IP_MULTICAST_ALL, PUT_VALUE),
    INT(IPPROTO_IP, IP_UNICAST_IF, PUT_VALUE),
    INT(IPPROTO_IP, IP_LOCAL_PORT_RANGE, PUT_VALUE),

#if APR_HAVE_IPV6
    INT(IPPROTO_IPV6, IPV6_2292PKTINFO, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_2292HOPOPTS, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_2292DSTOPTS, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_2292RTHDR, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_2292HOPLIMIT, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_FLOWINFO, PUT_VALUE),
    FOLLOW(IPPROTO_IPV6, IPV6_UNICAST_HOPS, -1),
    INT(IPPROTO_IPV6, IPV6_MULTICAST_IF, PUT_VALUE),
    FOLLOW(IPPROTO_IPV6, IPV6_MULTICAST_HOPS, -1),
    INT(IPPROTO_IPV6, IPV6_MULTICAST_LOOP, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_ROUTER_ALERT, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_MTU_DISCOVER, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVERR, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_MULTICAST_ALL, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_ROUTER_ALERT_ISOLATE, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVERR_RFC4884, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_FLOWINFO_SEND, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVPKTINFO, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVHOPLIMIT, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVHOPOPTS, PUT_VALUE),
    SIZED(IPPROTO_IPV6, IPV6_HOPOPTS, PF_SOCKOPT_VALUE_MAX, PUT_VALUE),
    SIZED(IPPROTO_IPV6, IPV6_RTHDRDSTOPTS, PF_SOCKOPT_VALUE_MAX, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVRTHDR, PUT_VALUE),
    SIZED(IPPROTO_IPV6, IPV6_RTHDR, PF_SOCKOPT_VALUE_MAX, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVDSTOPTS, PUT_VALUE),
    SIZED(IPPROTO_IPV6, IPV6_DSTOPTS, PF_SOCKOPT_VALUE_MAX, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVPATHMTU, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_DONTFRAG, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVTCLASS, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_TCLASS, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_ADDR_PREFERENCES, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_MINHOPCOUNT, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_ORIGDSTADDR, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_TRANSPARENT, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_UNICAST_IF, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_RECVFRAGSIZE, PUT_VALUE),
    INT(IPPROTO_IPV6, IPV6_FREEBIND, PUT_VALUE),
#endif /* APR_HAVE_IPV6 */

    INT(IPPROTO_TCP, TCP_NODELAY, PUT_VALUE),
    FOLLOW(IPPROTO_TCP, TCP_MAXSEG, 0),
    INT(IPPROTO_TCP, TCP_CORK, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_KEEPIDLE, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_KEEPINTVL, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_KEEPCNT, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_SYNCNT, PUT_VALUE),
    FOLLOW(IPPROTO_TCP, TCP_LINGER2, 0),
    INT(IPPROTO_TCP, TCP_DEFER_ACCEPT, PUT_VALUE),
    /* Linux refuses to clear a clamp on a listening socket: one a holder
     * set can only go with the socket. */
    INT(IPPROTO_TCP, TCP_WINDOW_CLAMP, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_QUICKACK, PUT_VALUE),
    SIZED(IPPROTO_TCP, TCP_CONGESTION, 16, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_USER_TIMEOUT, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_FASTOPEN, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_NOTSENT_LOWAT, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_SAVE_SYN, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_FASTOPEN_CONNECT, PUT_VALUE),
    /* An upper layer stays for the socket's life. */
    SIZED(IPPROTO_TCP, TCP_ULP, 16, PUT_NEVER),
    INT(IPPROTO_TCP, TCP_FASTOPEN_NO_COOKIE, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_INQ, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_TX_DELAY, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_RTO_MAX_MS, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_RTO_MIN_US, PUT_VALUE),
    INT(IPPROTO_TCP, TCP_DELACK_MAX_US, PUT_VALUE),

    /* The open file description, shared by every holder: O_ASYNC with an
     * owner and a signal makes each connection signal them. */
    { LEVEL_FILE, F_GETFL, "F_GETFL", sizeof(int), PUT_FILE_FLAGS, 0, 0 },
    { LEVEL_FILE, F_GETOWN_EX, "F_GETOWN_EX", sizeof(struct f_owner_ex),
      PUT_FILE_OWNER, 0, 0 },
    { LEVEL_FILE, F_GETSIG, "F_GETSIG", sizeof(int), PUT_FILE_SIG, 0, 0 },
};

#define NUM_OPTIONS ((int)(sizeof(options) / sizeof(options[0])))

/* One bit per entry of the table, and room for the values of each. */
typedef char options_fit_a_set[NUM_OPTIONS <= PF_SOCKOPT_MAX ? 1 : -1];

/* ------------------------------------------------------------------ */
/* Sets                                                                */

static int has(const pf_sockopt_set_t *s, int i)
{
    return (s->w[i / 64] >> (i % 64)) & 1;
}

static void add(pf_sockopt_set_t *s, int i)
{
    s->w[i / 64] |= (apr_uint64_t)1 << (i % 64);
}

int pf_sockopt_set_empty(const pf_sockopt_set_t *s)
{
    int w;

    for (w = 0; w < PF_SOCKOPT_WORDS; w++) {
        if (s->w[w]) {
            return 0;
        }
    }
    return 1;
}

void pf_sockopt_set_merge(pf_sockopt_set_t *a, const pf_sockopt_set_t *b)
{
    int w;

    for (w = 0; w < PF_SOCKOPT_WORDS; w++) {
        a->w[w] |= b->w[w];
    }
}

int pf_sockopt_set_news(const pf_sockopt_set_t *s,
                        const pf_sockopt_set_t *seen)
{
    int w;

    for (w = 0; w < PF_SOCKOPT_WORDS; w++) {
        if (s->w[w] & ~seen->w[w]) {
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */

/* Item @a i of @a fd into @a value; its length, or -1 if the kernel
 * does not answer it. */
static int read_item(int fd, int i, unsigned char *value)
{
    const option_t *o = &options[i];
    socklen_t len = o->size;
    int flags;

    if (o->level != LEVEL_FILE) {
        if (getsockopt(fd, o->level, o->name, value, &len) != 0
            || len > PF_SOCKOPT_VALUE_MAX) {
            return -1;
        }
        return (int)len;
    }
    if (o->how == PUT_FILE_FLAGS) {
        flags = fcntl(fd, F_GETFL);
        if (flags < 0) {
            return -1;
        }
        flags &= FILE_FLAGS;
        memcpy(value, &flags, sizeof(flags));
        return sizeof(flags);
    }
    if (o->how == PUT_FILE_OWNER) {
        return fcntl(fd, F_GETOWN_EX, value) == 0
                   ? (int)sizeof(struct f_owner_ex)
                   : -1;
    }
    flags = fcntl(fd, o->name);
    if (flags < 0) {
        return -1;
    }
    memcpy(value, &flags, sizeof(flags));
    return sizeof(flags);
}

/* Reads the items of @a which: a check reads only what the record holds,
 * not options the socket's family lacks. */
static void read_options(int fd, const pf_sockopt_set_t *which,
                         pf_sockopts_t *now)
{
    unsigned char value[PF_SOCKOPT_VALUE_MAX];
    int i, len;

    memset(&now->have, 0, sizeof(now->have));
    memset(&now->kernel_default, 0, sizeof(now->kernel_default));
    for (i = 0; i < NUM_OPTIONS; i++) {
        if (which != NULL && !has(which, i)) {
            continue;
        }
        memset(value, 0, sizeof(value));
        len = read_item(fd, i, value);
        if (len < 0) {
            continue;
        }
        add(&now->have, i);
        now->len[i] = (unsigned char)len;
        memcpy(now->value[i], value, (size_t)len);
    }
}

/* Reads every item of the table from @a fd (kernel_default stays
 * empty). */
static void pf_sockopts_read(int fd, pf_sockopts_t *now)
{
    read_options(fd, NULL, now);
}

static int same_value(const pf_sockopts_t *a, const pf_sockopts_t *b, int i)
{
    return a->len[i] == b->len[i]
           && memcmp(a->value[i], b->value[i], a->len[i]) == 0;
}

/* A socket nobody has set anything on, of @a fd's family; -1 if none. */
static int fresh_like(int fd)
{
    int domain = AF_INET;
    socklen_t len = sizeof(domain);

#ifdef SO_DOMAIN
    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
#else
    (void)len;
#endif
    return socket(domain, SOCK_STREAM, IPPROTO_TCP);
}

void pf_sockopts_record(int fd, pf_sockopts_t *rec)
{
    pf_sockopts_t *fresh = malloc(sizeof(*fresh));
    int i, probe;

    pf_sockopts_read(fd, rec);
    probe = fresh_like(fd);
    if (probe < 0 || fresh == NULL) {
        if (probe >= 0) {
            close(probe);
        }
        free(fresh);
        return;
    }
    pf_sockopts_read(probe, fresh);
    close(probe);
    for (i = 0; i < NUM_OPTIONS; i++) {
        if (has(&rec->have, i) && has(&fresh->have, i)
            && same_value(rec, fresh, i)) {
            add(&rec->kernel_default, i);
        }
    }
    free(fresh);
}

/*
 * The items of @a want that @a now does not have: a different value, or
 * none where @a want has one.  Pure.
 */
static pf_sockopt_set_t
pf_sockopts_compare(const pf_sockopts_t *want, const pf_sockopts_t *now)
{
    pf_sockopt_set_t differ;
    int i;

    memset(&differ, 0, sizeof(differ));
    for (i = 0; i < NUM_OPTIONS; i++) {
        if (has(&want->have, i)
            && (!has(&now->have, i) || !same_value(want, now, i))) {
            add(&differ, i);
        }
    }
    return differ;
}

/* ------------------------------------------------------------------ */
/* Putting back                                                        */

static void put_file(int fd, const option_t *o, const unsigned char *value)
{
    int recorded, flags;

    memcpy(&recorded, value, sizeof(recorded));
    switch (o->how) {
    case PUT_FILE_FLAGS:
        flags = fcntl(fd, F_GETFL);
        if (flags >= 0) {
            fcntl(fd, F_SETFL, (flags & ~FILE_FLAGS) | recorded);
        }
        break;
    case PUT_FILE_OWNER:
        fcntl(fd, F_SETOWN_EX, value);
        break;
    default:
        fcntl(fd, F_SETSIG, recorded);
        break;
    }
}

static void put_back(int fd, int i, const pf_sockopts_t *want)
{
    const option_t *o = &options[i];
    int at_default = has(&want->kernel_default, i), half;

    switch (o->how) {
    case PUT_NEVER:
        return;
    case PUT_FILE_FLAGS:
    case PUT_FILE_OWNER:
    case PUT_FILE_SIG:
        put_file(fd, o, want->value[i]);
        return;
    case PUT_BUFFER:
        if (at_default || want->len[i] != sizeof(int)) {
            return;
        }
        memcpy(&half, want->value[i], sizeof(half));
        half /= 2;
        if (setsockopt(fd, o->level, o->forced, &half, sizeof(half)) != 0) {
            setsockopt(fd, o->level, o->name, &half, sizeof(half));
        }
        return;
    case PUT_FOLLOW_KERNEL:
        if (at_default) {
            setsockopt(fd, o->level, o->name, &o->reset, sizeof(o->reset));
            return;
        }
        break;
    case PUT_VALUE:
    default:
        break;
    }
    setsockopt(fd, o->level, o->name, want->value[i], want->len[i]);
}

/* Of @a changed, the items at the kernel's default that read now as a
 * fresh socket reads them: the kernel's default moved (an admin's sysctl,
 * IP_TTL's net.ipv4.ip_default_ttl), not the socket. */
static void drop_moved_defaults(int fd, const pf_sockopts_t *want,
                                const pf_sockopts_t *now,
                                pf_sockopt_set_t *changed)
{
    unsigned char value[PF_SOCKOPT_VALUE_MAX];
    int i, len, probe = -1;

    for (i = 0; i < NUM_OPTIONS; i++) {
        if (!has(changed, i) || !has(&want->kernel_default, i)
            || !has(&now->have, i) || options[i].level == LEVEL_FILE) {
            continue;
        }
        if (probe < 0 && (probe = fresh_like(fd)) < 0) {
            return;
        }
        memset(value, 0, sizeof(value));
        len = read_item(probe, i, value);
        if (len == now->len[i] && memcmp(value, now->value[i], len) == 0) {
            changed->w[i / 64] &= ~((apr_uint64_t)1 << (i % 64));
        }
    }
    if (probe >= 0) {
        close(probe);
    }
}

void pf_sockopts_repair(int fd, const pf_sockopts_t *want,
                        pf_sockopt_set_t *changed, pf_sockopt_set_t *failed)
{
    pf_sockopts_t *now = malloc(sizeof(*now));
    pf_sockopt_set_t differ;
    int i;

    memset(changed, 0, sizeof(*changed));
    memset(failed, 0, sizeof(*failed));
    if (now == NULL) {
        return;
    }
    read_options(fd, &want->have, now);
    *changed = pf_sockopts_compare(want, now);
    if (!pf_sockopt_set_empty(changed)) {
        drop_moved_defaults(fd, want, now, changed);
    }
    if (pf_sockopt_set_empty(changed)) {
        free(now);
        return;
    }
    for (i = 0; i < NUM_OPTIONS; i++) {
        if (has(changed, i)) {
            put_back(fd, i, want);
        }
    }
    /* What the kernel made of it: one option may move another (a large
     * SO_RCVLOWAT grows the receive buffer), and some cannot go back. */
    read_options(fd, changed, now);
    differ = pf_sockopts_compare(want, now);
    for (i = 0; i < PF_SOCKOPT_WORDS; i++) {
        failed->w[i] = differ.w[i] & changed->w[i];
    }
    free(now);
}

int pf_sockopts_touch_file(const pf_sockopt_set_t *set)
{
    int i;

    for (i = 0; i < NUM_OPTIONS; i++) {
        if (options[i].level == LEVEL_FILE && has(set, i)) {
            return 1;
        }
    }
    return 0;
}

char *pf_sockopts_describe(const pf_sockopt_set_t *set, char *buf,
                           apr_size_t len)
{
    apr_size_t used = 0;
    int i;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (i = 0; i < NUM_OPTIONS && used + 1 < len; i++) {
        if (has(set, i)) {
            apr_snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         options[i].label);
            used += strlen(buf + used);
        }
    }
    return buf;
}
