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
 * @file  prefork_close.h
 * @brief Closing a served connection: ap_lingering_close() without the
 *        child's wait (prefork_linger.h).
 *
 * The httpd side of the close: the hooks that note how the connection's
 * exchange went, httpd's own start of the close, and the hand-off to the
 * child's lingering thread.  prefork.c calls it from register_hooks and
 * at the child's start, after each connection and before the child
 * exits; the decision and the thread are prefork_linger.c's, which has
 * no httpd in it.
 */

#ifndef PREFORK_CLOSE_H
#define PREFORK_CLOSE_H

#include "httpd.h"

#include "prefork_linger.h"

/** How long an exiting child waits for its lingering sockets (usec): as
 *  long as the last one may linger, httpd's bound (30 s from the client's
 *  first bytes, then its quiet time).  A stop that must not wait (SIGTERM)
 *  ends the child at once. */
#define PF_CLOSE_EXIT_WAIT      (PF_LINGER_MAX_USEC + PF_LINGER_QUIET_USEC)

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

#endif /* PREFORK_CLOSE_H */
