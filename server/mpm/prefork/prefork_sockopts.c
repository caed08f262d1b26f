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

/* The options connections inherit from their listener; see
 * prefork_sockopts.h. */

#include "apr.h"
#include "apr_strings.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "prefork_sockopts.h"
#include "prefork_unit.h"

/* Linux's numbers for options newer than the C library's headers may
 * know: a kernel without one refuses to read it, and the option is then
 * left out of the record. */
#ifdef __linux__
#ifndef TCP_TX_DELAY
#define TCP_TX_DELAY 37
#endif
#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44
#endif
#ifndef TCP_RTO_MIN_US
#define TCP_RTO_MIN_US 45
#endif
#endif

/* How an option goes back. */
typedef enum {
    PUT_VALUE,          /* set the recorded value again */
    PUT_FOLLOW_KERNEL,  /* at the kernel's default: the value that makes
                           it follow the kernel again (reset below) */
    PUT_BUFFER          /* a buffer size: half the value read (the kernel
                           reports twice what was set), through the
                           privileged option, which ignores the system's
                           maximum; one the kernel chose cannot go back */
} put_back_e;

typedef struct {
    int level;
    int name;
    const char *label;
    socklen_t size;     /* what getsockopt() is given */
    put_back_e how;
    int reset;          /* PUT_FOLLOW_KERNEL: the value that does it */
    int forced;         /* PUT_BUFFER: the privileged option */
} option_t;

/* Every option of a TCP listening socket that accepted connections
 * inherit (or that decides which handshakes it takes) and that a process
 * without privileges can set.  Left out: options only root can set
 * (SO_MARK, IP_TRANSPARENT, TCP_REPAIR), options that only shape what the
 * socket's own owner receives (timestamps, SO_RCVTIMEO, which
 * prefork_guard.c puts back for accept()'s sake), and keys, which cannot
 * be read back (TCP_MD5SIG and TCP-AO: the children's filter refuses
 * them). */
static const option_t options[] = {
    { SOL_SOCKET, SO_LINGER, "SO_LINGER", sizeof(struct linger), PUT_VALUE,
      0, 0 },
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
    { SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", sizeof(int), PUT_VALUE, 0,
      0 },
    { SOL_SOCKET, SO_OOBINLINE, "SO_OOBINLINE", sizeof(int), PUT_VALUE, 0,
      0 },
    { SOL_SOCKET, SO_DONTROUTE, "SO_DONTROUTE", sizeof(int), PUT_VALUE, 0,
      0 },
    { SOL_SOCKET, SO_RCVLOWAT, "SO_RCVLOWAT", sizeof(int), PUT_VALUE, 0, 0 },
    { SOL_SOCKET, SO_SNDTIMEO, "SO_SNDTIMEO", sizeof(struct timeval),
      PUT_VALUE, 0, 0 },
#ifdef SO_PRIORITY
    { SOL_SOCKET, SO_PRIORITY, "SO_PRIORITY", sizeof(int), PUT_VALUE, 0, 0 },
#endif
#ifdef SO_MAX_PACING_RATE
    { SOL_SOCKET, SO_MAX_PACING_RATE, "SO_MAX_PACING_RATE",
      sizeof(apr_uint64_t), PUT_VALUE, 0, 0 },
#endif
#ifdef SO_BINDTOIFINDEX
    { SOL_SOCKET, SO_BINDTOIFINDEX, "SO_BINDTOIFINDEX", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
    { IPPROTO_IP, IP_TTL, "IP_TTL", sizeof(int), PUT_FOLLOW_KERNEL, -1, 0 },
    { IPPROTO_IP, IP_TOS, "IP_TOS", sizeof(int), PUT_VALUE, 0, 0 },
#ifdef IP_MTU_DISCOVER
    { IPPROTO_IP, IP_MTU_DISCOVER, "IP_MTU_DISCOVER", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#ifdef IP_MINTTL
    { IPPROTO_IP, IP_MINTTL, "IP_MINTTL", sizeof(int), PUT_VALUE, 0, 0 },
#endif
#if APR_HAVE_IPV6
    { IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", sizeof(int),
      PUT_FOLLOW_KERNEL, -1, 0 },
#ifdef IPV6_TCLASS
    { IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", sizeof(int), PUT_VALUE, 0,
      0 },
#endif
#ifdef IPV6_MTU_DISCOVER
    { IPPROTO_IPV6, IPV6_MTU_DISCOVER, "IPV6_MTU_DISCOVER", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#ifdef IPV6_MINHOPCOUNT
    { IPPROTO_IPV6, IPV6_MINHOPCOUNT, "IPV6_MINHOPCOUNT", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#endif /* APR_HAVE_IPV6 */
    { IPPROTO_TCP, TCP_MAXSEG, "TCP_MAXSEG", sizeof(int), PUT_FOLLOW_KERNEL,
      0, 0 },
    { IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", sizeof(int), PUT_VALUE, 0,
      0 },
#ifdef TCP_CORK
    { IPPROTO_TCP, TCP_CORK, "TCP_CORK", sizeof(int), PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_KEEPIDLE
    { IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", sizeof(int), PUT_VALUE, 0,
      0 },
    { IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", sizeof(int), PUT_VALUE,
      0, 0 },
    { IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", sizeof(int), PUT_VALUE, 0,
      0 },
#endif
#ifdef TCP_SYNCNT
    { IPPROTO_TCP, TCP_SYNCNT, "TCP_SYNCNT", sizeof(int), PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_LINGER2
    { IPPROTO_TCP, TCP_LINGER2, "TCP_LINGER2", sizeof(int),
      PUT_FOLLOW_KERNEL, 0, 0 },
#endif
#ifdef TCP_DEFER_ACCEPT
    { IPPROTO_TCP, TCP_DEFER_ACCEPT, "TCP_DEFER_ACCEPT", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_WINDOW_CLAMP
    /* Linux refuses to clear a clamp on a listening socket: one a child
     * set can only go with the socket. */
    { IPPROTO_TCP, TCP_WINDOW_CLAMP, "TCP_WINDOW_CLAMP", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_USER_TIMEOUT
    { IPPROTO_TCP, TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_CONGESTION
    { IPPROTO_TCP, TCP_CONGESTION, "TCP_CONGESTION", PF_SOCKOPT_VALUE_MAX,
      PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_FASTOPEN
    { IPPROTO_TCP, TCP_FASTOPEN, "TCP_FASTOPEN", sizeof(int), PUT_VALUE, 0,
      0 },
#endif
#ifdef TCP_FASTOPEN_NO_COOKIE
    { IPPROTO_TCP, TCP_FASTOPEN_NO_COOKIE, "TCP_FASTOPEN_NO_COOKIE",
      sizeof(int), PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_NOTSENT_LOWAT
    { IPPROTO_TCP, TCP_NOTSENT_LOWAT, "TCP_NOTSENT_LOWAT", sizeof(int),
      PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_THIN_LINEAR_TIMEOUTS
    { IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, "TCP_THIN_LINEAR_TIMEOUTS",
      sizeof(int), PUT_VALUE, 0, 0 },
#endif
#ifdef TCP_SAVE_SYN
    { IPPROTO_TCP, TCP_SAVE_SYN, "TCP_SAVE_SYN", sizeof(int), PUT_VALUE, 0,
      0 },
#endif
#ifdef TCP_TX_DELAY
    { IPPROTO_TCP, TCP_TX_DELAY, "TCP_TX_DELAY", sizeof(int), PUT_VALUE, 0,
      0 },
#endif
#ifdef TCP_RTO_MAX_MS
    { IPPROTO_TCP, TCP_RTO_MAX_MS, "TCP_RTO_MAX_MS", sizeof(int), PUT_VALUE,
      0, 0 },
#endif
#ifdef TCP_RTO_MIN_US
    { IPPROTO_TCP, TCP_RTO_MIN_US, "TCP_RTO_MIN_US", sizeof(int), PUT_VALUE,
      0, 0 },
#endif
};

#define NUM_OPTIONS ((int)(sizeof(options) / sizeof(options[0])))

/* One bit per entry of the table, and room for the values of each. */
typedef char options_fit_a_set[NUM_OPTIONS <= PF_SOCKOPT_MAX ? 1 : -1];

static pf_sockopt_set_t bit(int i)
{
    return (pf_sockopt_set_t)1 << i;
}

#ifdef PF_UNIT_TEST
/* How many options the table holds. */
PF_UNIT_STATIC int pf_sockopts_count(void)
{
    return NUM_OPTIONS;
}
#endif

#ifdef PF_UNIT_TEST
/* The name of option @a i of the table ("SO_LINGER"), NULL past it. */
PF_UNIT_STATIC const char *pf_sockopts_name(int i)
{
    return i >= 0 && i < NUM_OPTIONS ? options[i].label : NULL;
}
#endif

#ifdef PF_UNIT_TEST
/* Finds an option of the table by name; -1 if it has none. */
PF_UNIT_STATIC int pf_sockopts_find(const char *name)
{
    int i;

    for (i = 0; i < NUM_OPTIONS; i++) {
        if (strcmp(options[i].label, name) == 0) {
            return i;
        }
    }
    return -1;
}
#endif

/* Reads the options of @a which: a check reads only what the record
 * holds, not options the socket's family lacks. */
static void read_options(int fd, pf_sockopt_set_t which, pf_sockopts_t *now)
{
    unsigned char value[PF_SOCKOPT_VALUE_MAX];
    socklen_t len;
    int i;

    memset(now, 0, sizeof(*now));
    for (i = 0; i < NUM_OPTIONS; i++) {
        if (!(which & bit(i))) {
            continue;
        }
        memset(value, 0, sizeof(value));
        len = options[i].size;
        if (getsockopt(fd, options[i].level, options[i].name, value, &len)
                != 0
            || len > PF_SOCKOPT_VALUE_MAX) {
            continue;
        }
        now->have |= bit(i);
        now->len[i] = (unsigned char)len;
        memcpy(now->value[i], value, len);
    }
}

/* Reads every option of the table from @a fd (kernel_default stays 0). */
PF_UNIT_STATIC void pf_sockopts_read(int fd, pf_sockopts_t *now)
{
    read_options(fd, ~(pf_sockopt_set_t)0, now);
}

static int same_value(const pf_sockopts_t *a, const pf_sockopts_t *b, int i)
{
    return a->len[i] == b->len[i]
           && memcmp(a->value[i], b->value[i], a->len[i]) == 0;
}

void pf_sockopts_record(int fd, pf_sockopts_t *rec)
{
    pf_sockopts_t fresh;
    int domain = AF_INET, i, probe;
    socklen_t len = sizeof(domain);

    pf_sockopts_read(fd, rec);
#ifdef SO_DOMAIN
    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
#else
    (void)len;
#endif
    /* What the kernel gives a socket nobody has set anything on. */
    probe = socket(domain, SOCK_STREAM, IPPROTO_TCP);
    if (probe < 0) {
        return;
    }
    pf_sockopts_read(probe, &fresh);
    close(probe);
    for (i = 0; i < NUM_OPTIONS; i++) {
        if ((rec->have & fresh.have & bit(i)) && same_value(rec, &fresh, i)) {
            rec->kernel_default |= bit(i);
        }
    }
}

/*
 * The options of @a want that @a now does not have: a different value,
 * or none where @a want has one.  Pure.
 */
PF_UNIT_STATIC pf_sockopt_set_t
pf_sockopts_compare(const pf_sockopts_t *want, const pf_sockopts_t *now)
{
    pf_sockopt_set_t differ = 0;
    int i;

    for (i = 0; i < NUM_OPTIONS; i++) {
        if ((want->have & bit(i))
            && (!(now->have & bit(i)) || !same_value(want, now, i))) {
            differ |= bit(i);
        }
    }
    return differ;
}

static void put_back(int fd, int i, const pf_sockopts_t *want)
{
    const option_t *o = &options[i];
    int at_default = (want->kernel_default & bit(i)) != 0, half;

    switch (o->how) {
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

pf_sockopt_set_t pf_sockopts_repair(int fd, const pf_sockopts_t *want,
                                    pf_sockopt_set_t *failed)
{
    pf_sockopts_t now;
    pf_sockopt_set_t changed;
    int i;

    *failed = 0;
    read_options(fd, want->have, &now);
    changed = pf_sockopts_compare(want, &now);
    if (changed == 0) {
        return 0;
    }
    for (i = 0; i < NUM_OPTIONS; i++) {
        if (changed & bit(i)) {
            put_back(fd, i, want);
        }
    }
    /* What the kernel made of it: one option may move another (a large
     * SO_RCVLOWAT grows the receive buffer), and some cannot go back. */
    read_options(fd, changed, &now);
    *failed = pf_sockopts_compare(want, &now) & changed;
    return changed;
}

char *pf_sockopts_describe(pf_sockopt_set_t set, char *buf, apr_size_t len)
{
    apr_size_t used = 0;
    int i;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (i = 0; i < NUM_OPTIONS && used + 1 < len; i++) {
        if (set & bit(i)) {
            apr_snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         options[i].label);
            used += strlen(buf + used);
        }
    }
    return buf;
}
