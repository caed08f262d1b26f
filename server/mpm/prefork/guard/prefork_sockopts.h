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

/**
 * @file  prefork_sockopts.h
 * @brief The whole state of a listening socket that a holder can change:
 *        recorded when the parent puts the socket in service, compared
 *        with what the socket has now, put back.
 *
 * A child holds its bucket's listening socket (and a program it runs, or
 * a process it passed the socket to, may hold a copy).  The kernel copies
 * the listener's options into each connection it accepts: SO_LINGER
 * {1, 0} turns every close into a reset, IP_TTL 1 keeps every answer from
 * leaving the network, SO_BUF_LOCK fixes every connection's buffers, and
 * so on, long after that child is gone; and the open file description's
 * flags, owner and signal are shared by every holder (O_ASYNC with a
 * process group as owner signals every sibling at each connection).
 *
 * So the record is not a list of the options someone thought harmful: it
 * is every option of every level a TCP listener has (SOL_SOCKET, IP, IPv6,
 * TCP) that the kernel answers for it, and F_GETFL, F_GETOWN_EX and
 * F_GETSIG.  The table in prefork_sockopts.c names each option Linux's
 * headers define for those levels: compared (and how it goes back), or
 * left out with the reason (read-only, volatile, write-only, checked by
 * the guard itself); a unit test fails when the headers define one the
 * table does not know.
 *
 * Plain data: a record is an array of values, compared byte for byte.
 * Only pf_sockopts_record(), pf_sockopts_read() and pf_sockopts_repair()
 * make system calls.
 */

#ifndef PREFORK_SOCKOPTS_H
#define PREFORK_SOCKOPTS_H

#include "apr.h"

/** Room for the state items of the table. */
#define PF_SOCKOPT_MAX 192

/** The largest value recorded, in bytes (IP_OPTIONS' 40). */
#define PF_SOCKOPT_VALUE_MAX 40

#define PF_SOCKOPT_WORDS (PF_SOCKOPT_MAX / 64)

/** A set of the table's items: bit i is item i. */
typedef struct {
    apr_uint64_t w[PF_SOCKOPT_WORDS];
} pf_sockopt_set_t;

/** The state of one socket. */
typedef struct {
    pf_sockopt_set_t have;          /**< items the kernel let us read */
    pf_sockopt_set_t kernel_default; /**< of those, the ones that had the
                                          value a fresh socket of the same
                                          family has (recorded only) */
    unsigned char len[PF_SOCKOPT_MAX];   /**< each value's length */
    unsigned char value[PF_SOCKOPT_MAX][PF_SOCKOPT_VALUE_MAX];
} pf_sockopts_t;

/** Whether @a s holds no item. */
int pf_sockopt_set_empty(const pf_sockopt_set_t *s);

/** @a a |= @a b. */
void pf_sockopt_set_merge(pf_sockopt_set_t *a, const pf_sockopt_set_t *b);

/** Whether @a s holds an item that @a seen does not. */
int pf_sockopt_set_news(const pf_sockopt_set_t *s,
                        const pf_sockopt_set_t *seen);

/**
 * Reads every item of the table from @a fd, and which of them have the
 * value a fresh socket of its family has: what the parent keeps of a
 * socket it puts in service, before any child holds it.
 */
void pf_sockopts_record(int fd, pf_sockopts_t *rec);

/**
 * Puts back on @a fd every item that differs from @a want.  An option at
 * the kernel's default goes back to following the kernel (IP_TTL -1,
 * TCP_MAXSEG 0...).  What cannot go back in place counts as failed: a
 * buffer size the kernel chose (setting one, even to the same size,
 * turns off its autotuning for every connection), a TCP upper layer or a
 * fast-open key (no call removes them), and any item the kernel refuses
 * to put back; the caller replaces such a socket.
 * @param changed Set to the items found changed
 * @param failed Set to those of them still not as @a want has them
 */
void pf_sockopts_repair(int fd, const pf_sockopts_t *want,
                        pf_sockopt_set_t *changed, pf_sockopt_set_t *failed);

/** Whether @a set holds an item of the open file description (its flags,
 *  owner or signal). */
int pf_sockopts_touch_file(const pf_sockopt_set_t *set);

/**
 * Names the items of @a set for the log: "SO_LINGER, IP_TTL, F_GETFL".
 * @return buf
 */
char *pf_sockopts_describe(const pf_sockopt_set_t *set, char *buf,
                           apr_size_t len);

#endif /* PREFORK_SOCKOPTS_H */
