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
 * @file  prefork_conn.h
 * @brief The face of conn/: a child's connections, from its accept on its
 *        bucket to the close of what it served.
 *
 * The accept (prefork_accept.c): one blocking accept() where the bucket is
 * one socket (the kernel wakes one waiting child per connection: no poll,
 * no lock), else httpd's arrangement, the accept mutex and a poll(2) set
 * over the bucket's sockets, taking the ready ones in turn.  The close
 * (prefork_close.c): ap_lingering_close() without the child's wait, the
 * lingering handed to a thread of the child (prefork_linger.c, which has
 * no httpd in it).
 *
 * prefork.c calls it from register_hooks (pf_close_hooks), once in a new
 * child (pf_accept_create, pf_close_child_init), for each connection
 * (pf_accept_one, pf_close_connection), from the child's stop handlers
 * (pf_accept_stop) and before the child exits (pf_close_finish).  The
 * bucket set made the sockets and the accept mutex.
 */

#ifndef PREFORK_CONN_H
#define PREFORK_CONN_H

#include <signal.h>

#include "apr_pools.h"
#include "httpd.h"

#include "prefork_generation.h"

/* ------------------------------------------------------------------ */
/* Accepting                                                          */

typedef struct pf_accept_s pf_accept_t;

/**
 * Child, once: what it needs to accept on @a bucket (bucket number
 * @a index), from @a p, which lives as long as the child.
 * @return NULL when the pollset could not be made (said in the log): the
 *         child cannot serve
 */
pf_accept_t *pf_accept_create(pf_bucket_t *bucket, int index, apr_pool_t *p);

/**
 * Waits for and accepts one connection on the bucket's sockets.
 * @param die_now The child's stop flag, which its signal handlers set
 * @return APR_SUCCESS with *csd set, APR_EINTR when the child should look
 *         at its flags again, or APR_EGENERAL when it must exit
 */
apr_status_t pf_accept_one(pf_accept_t *a, volatile sig_atomic_t *die_now,
                           void **csd, apr_pool_t *ptrans);

/**
 * For the child's stop handlers (async-signal-safe): swaps @a bucket's
 * listening descriptors for @a devnull_fd, open on /dev/null, in this
 * child only, so that an accept() or poll() that starts after a stop
 * signal returns at once instead of waiting for the next connection.
 * dup2() keeps the descriptor numbers taken, so nothing else can be
 * opened under them; the sockets stay open in the parent and in the
 * bucket's other children, and no queued connection is lost.
 */
void pf_accept_stop(const pf_bucket_t *bucket, int devnull_fd);

/* ------------------------------------------------------------------ */
/* Closing                                                            */

/** Registers what the close learns while the child serves: whether each
 *  request's body was read to its end, whether requests came pipelined
 *  (from the MPM's register_hooks). */
void pf_close_hooks(void);

/**
 * In a new child, once: starts its lingering thread, or says once that
 * this child lingers itself (PFB00120); the thread keeps in @a lingering
 * (the child's segment slot) how many sockets it holds.
 */
void pf_close_child_init(volatile apr_int32_t *lingering);

/**
 * In place of ap_lingering_close(c): the pre-close hooks, the flush and
 * the shutdown for writing as httpd does them, then the socket is closed
 * at once when the exchange is complete (pf_linger_decide), else lingered
 * on by the child's lingering thread (or, when that is impossible, here,
 * as httpd does, until a signal finds @a *stop set).
 */
void pf_close_connection(conn_rec *c, volatile sig_atomic_t *stop);

/** Before the child exits: its lingering sockets, PF_CLOSE_EXIT_WAIT at
 *  most. */
void pf_close_finish(void);

#endif /* PREFORK_CONN_H */
