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
 * @brief The options of a listening socket that every connection accepted
 *        from it inherits: recorded when the parent puts the socket in
 *        service, compared with what the socket has now, put back.
 *
 * A child holds its bucket's listening socket and can set any option on
 * it (through a copy of the descriptor, where the system-call filter
 * refuses the descriptor itself).  The kernel copies the listener's
 * options into each connection it accepts: SO_LINGER {1, 0} turns every
 * close into a reset, IP_TTL 1 keeps every answer from leaving the
 * network, tiny buffers or an MSS of 88 starve every transfer, and so on,
 * long after that child is gone.  The table in prefork_sockopts.c lists
 * every such option an unprivileged process can set on a TCP listener;
 * the record holds each one the kernel let the parent read.
 *
 * Plain data: a record is an array of option values, compared byte for
 * byte.  Only pf_sockopts_record(), pf_sockopts_read() and
 * pf_sockopts_repair() make system calls.
 */

#ifndef PREFORK_SOCKOPTS_H
#define PREFORK_SOCKOPTS_H

#include "apr.h"

/** Room for the options of the table (bits of a pf_sockopt_set_t). */
#define PF_SOCKOPT_MAX 64

/** The largest option value recorded, in bytes (TCP_CONGESTION's name,
 *  SO_SNDTIMEO's struct timeval). */
#define PF_SOCKOPT_VALUE_MAX 16

/** A set of options of the table: bit i is option i. */
typedef apr_uint64_t pf_sockopt_set_t;

/** The options of one socket. */
typedef struct {
    pf_sockopt_set_t have;          /**< options the kernel let us read */
    pf_sockopt_set_t kernel_default; /**< of those, the ones that had the
                                          value a fresh socket of the same
                                          family has (recorded only) */
    unsigned char len[PF_SOCKOPT_MAX];   /**< each value's length */
    unsigned char value[PF_SOCKOPT_MAX][PF_SOCKOPT_VALUE_MAX];
} pf_sockopts_t;

/**
 * Reads every option of the table from @a fd, and which of them have the
 * value a fresh socket of its family has: what the parent keeps of a
 * socket it puts in service, before any child holds it.
 */
void pf_sockopts_record(int fd, pf_sockopts_t *rec);

/**
 * Puts back on @a fd every option that differs from @a want.  An option
 * at the kernel's default goes back to following the kernel (IP_TTL -1,
 * TCP_MAXSEG 0...).  A buffer size the kernel chose cannot be put back:
 * setting one, even to the same size, turns off the kernel's buffer
 * autotuning for every connection, so it counts as failed, as does any
 * option the kernel refuses to put back.
 * @param failed Set to the options found changed that are still not as
 *        @a want has them
 * @return the options found changed
 */
pf_sockopt_set_t pf_sockopts_repair(int fd, const pf_sockopts_t *want,
                                    pf_sockopt_set_t *failed);

/**
 * Names the options of @a set for the log: "SO_LINGER, IP_TTL".
 * @return buf
 */
char *pf_sockopts_describe(pf_sockopt_set_t set, char *buf, apr_size_t len);

#endif /* PREFORK_SOCKOPTS_H */
