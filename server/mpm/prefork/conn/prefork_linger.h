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
 * @file  prefork_linger.h
 * @brief httpd's lingering close without the child's wait.
 *
 * httpd promises that no response is lost to a reset: a socket closed
 * while the client's bytes wait unread, or closed before the client stops
 * sending, answers with RST, and a reset can drop response bytes not yet
 * delivered.  So ap_lingering_close() shuts the socket down for writing,
 * then reads and discards whatever the client sends until it closes
 * (end of file), stays silent for 2 s, or 30 s have passed since its first
 * bytes; a prefork child blocks in that read, usually until the client's
 * FIN, before it can accept again.
 *
 * Here the child closes at once only when the exchange is complete and
 * delivered, or the client has closed its side.  Complete: the request's
 * body was read to its end, no pipelined request was seen on the
 * connection, and nothing from the client waits in the connection's input
 * filters or its socket, so the client has nothing more to send.
 * Delivered: every response byte is acknowledged, so even a client that
 * sends again (a request it pipelines only after its `Connection: close`)
 * has the whole response in its kernel when the reset comes.  Otherwise
 * the socket goes to a small set that a thread of the child reads and
 * closes on httpd's schedule, while the child goes back to accept().  The
 * set is the child's own: no other process is involved, the parent least
 * of all, and the child's blocking, exclusive accept() is untouched.  The
 * thread is started with the child (pf_linger_start), so that a child's
 * threads and descriptors stay the same over its life, which monitoring
 * and the soak test compare; idle, it costs a blocked thread and an epoll
 * descriptor.  A child that stops (graceful stop or restart,
 * MaxConnectionsPerChild, retirement) waits for its lingering sockets
 * first, each bounded as httpd bounds it.
 *
 * This file needs libc, pthreads and APR's types only, so the unit tests
 * drive it with real loopback sockets; prefork_close.c is the httpd glue.
 */

#ifndef PREFORK_LINGER_H
#define PREFORK_LINGER_H

#include <signal.h>

#include "apr.h"
#include "apr_errno.h"

/** httpd's lingering times (server/connection.c), in microseconds: a
 *  lingering read gives up after this long without bytes... */
#define PF_LINGER_QUIET_USEC    (2 * APR_INT64_C(1000000))
/** ...and after this long from the client's first bytes; ... */
#define PF_LINGER_MAX_USEC      (30 * APR_INT64_C(1000000))
/** ...or this long with the "short-lingering-close" note. */
#define PF_LINGER_SHORT_USEC    (2 * APR_INT64_C(1000000))

/** How many lingering sockets one child keeps; beyond, it lingers itself
 *  as httpd does. */
#define PF_LINGER_SLOTS         64

/** What one non-blocking read after the shutdown found. */
typedef enum {
    PF_READ_NOTHING,            /**< nothing pending (EAGAIN) */
    PF_READ_DATA,               /**< bytes from the client were pending */
    PF_READ_EOF,                /**< the client closed its side */
    PF_READ_ERROR               /**< the connection is gone (reset ...) */
} pf_linger_read_e;

/** What is known of a connection's exchange when the child closes it. */
typedef struct {
    pf_linger_read_e input;     /**< a non-blocking look at what the client
                                     sent and nobody read (the input
                                     filters' buffers, then the socket);
                                     PF_READ_NOTHING when the look could
                                     not tell */
    int body_unread;            /**< the last request's body was not read
                                     to its end, or the request was not
                                     read whole */
    int pipelined;              /**< a request on this connection arrived
                                     before the answer to the one before */
} pf_linger_exchange_t;

typedef enum {
    PF_LINGER_CLOSE_NOW,        /**< the promise holds: close */
    PF_LINGER_KEEP,             /**< linger: read until the client is done */
    PF_LINGER_IF_UNDELIVERED    /**< the exchange is complete: linger only
                                     while response bytes are
                                     unacknowledged (pf_linger_delivered) */
} pf_linger_action_e;

/**
 * Whether a connection just shut down for writing may be closed now.
 * Pure.  A client that closed its side can send nothing more: close at
 * once.  One with unread bytes waiting is still sending: linger.  So does
 * one whose exchange is not complete (the body unread, pipelining seen):
 * its body or its next requests are on their way, would get RST, and the
 * client would often never read the answer.  A complete exchange closes
 * once the response is delivered.
 */
pf_linger_action_e pf_linger_decide(const pf_linger_exchange_t *x);

/** When a lingering socket's reads began and last brought bytes. */
typedef struct {
    apr_int64_t started;        /**< the lingering close began (usec) */
    apr_int64_t first_data;     /**< the client's first bytes, 0: none */
    apr_int64_t last_data;      /**< the client's last bytes, 0: none */
    int short_linger;           /**< the "short-lingering-close" note */
} pf_linger_times_t;

/**
 * Whether every response byte on @a fd, shut down for writing, is
 * acknowledged (SIOCOUTQ: at most our FIN is); 0 when unknown.
 */
int pf_linger_delivered(int fd);

/**
 * Starts the child's lingering thread (once; later calls return the first
 * call's result).
 * @return APR_SUCCESS, or why the thread could not be started (the child
 *         then lingers itself, as httpd does)
 */
apr_status_t pf_linger_start(void);

/**
 * From now on, keeps in @a count (NULL: nowhere) how many sockets the
 * lingering thread holds: the child's segment slot, where the parent
 * sees which idle children still linger.
 */
void pf_linger_count_in(volatile apr_int32_t *count);

/**
 * Hands @a fd, shut down for writing, to the child's lingering thread,
 * starting the thread if pf_linger_start() was not called.  On APR_SUCCESS the thread owns the
 * descriptor and closes it; otherwise the caller still does (APR_EAGAIN:
 * every slot is taken; other: the thread could not be started, and never
 * will be in this process).
 */
apr_status_t pf_linger_hand_off(int fd, int short_linger);

/**
 * Lingers on @a fd in the calling thread, as httpd does, until the client
 * closes, the expiry, or a signal that finds @a *stop set (the child's
 * stop: it leaves at once, as httpd's child would die in its lingering
 * close); the caller closes @a fd afterwards.
 */
void pf_linger_here(int fd, int short_linger, volatile sig_atomic_t *stop);

/**
 * Before the child exits: waits up to @a max_wait usec for the lingering
 * thread to finish its sockets (each ends at its own expiry at the
 * latest), then closes what is left.
 */
void pf_linger_finish(apr_int64_t max_wait);

#endif /* PREFORK_LINGER_H */
