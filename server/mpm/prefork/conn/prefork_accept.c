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
 * A child's wait for a connection on its bucket: the accept part of
 * httpd's child_main() loop.  A bucket of one socket gets a blocking
 * accept() and nothing else: the kernel wakes one waiting child per
 * connection.  A bucket of several (the single bucket of every Listen)
 * keeps httpd's way, the accept mutex and a poll(2) set, taking the ready
 * sockets in turn (pf_pick_ready_listener() in prefork_pick.c).  A
 * socket a sibling made non-blocking gets a wait in poll(), not a spin;
 * putting it back is the parent's guard's.  The bucket set made the
 * sockets and the mutex; prefork.c's child loop and stop handlers call
 * this file.
 */

#include "apr.h"
#include "apr_poll.h"
#include "apr_portable.h"
#include "apr_proc_mutex.h"

#include <poll.h>
#include <unistd.h>

#include "ap_config.h"
#include "httpd.h"
#include "http_log.h"
#include "http_main.h"
#include "unixd.h"

#include "pfb_log.h"
#include "prefork_conn.h"
#include "prefork_pick.h"

APLOG_USE_MODULE(mpm_prefork);

/* A child waiting on the accept mutex cannot see a signal until it holds
 * the mutex, so the holder gives it up this often while no connection
 * arrives; a child told to stop then gets its turn within this time. */
#define ACCEPT_POLL_TIMEOUT apr_time_from_sec(1)

/* A listener in a child's pollset, with its position in the bucket. */
typedef struct {
    ap_listen_rec *lr;
    int position;
} poll_listener_t;

struct pf_accept_s {
    pf_bucket_t *bucket;
    int index;                  /* its bucket number, for the log */
    apr_pollset_t *pollset;     /* with several sockets only */
    /* The child's turn over its bucket's listeners (pick_ready_listener):
     * scratch for the ready ones' positions, and the one served last. */
    int *ready;
    int capacity;
    int last_served;
};

/* Takes one of the ready listeners that the pollset reported, in turn
 * (pf_pick_ready_listener), so that none waits while another stays busy. */
static ap_listen_rec *pick_ready_listener(pf_accept_t *a,
                                          const apr_pollfd_t *pdesc,
                                          apr_int32_t numdesc)
{
    const poll_listener_t *pl;
    int i, n = 0, pick;

    for (i = 0; i < numdesc && n < a->capacity; i++) {
        pl = pdesc[i].client_data;
        a->ready[n++] = pl->position;
    }
    pick = pf_pick_ready_listener(a->ready, n, a->capacity, a->last_served);
    if (pick < 0) {
        pick = 0;
    }
    pl = pdesc[pick].client_data;
    a->last_served = pl->position;
    return pl->lr;
}

/* A blocking accept() came back with EAGAIN: another child of the bucket
 * made the socket they share non-blocking (or gave it a receive timeout).
 * The parent puts it back within a maintenance cycle; until then this
 * child waits for a connection in poll() rather than spin in accept(). */
static void wait_for_connection(ap_listen_rec *lr)
{
    struct pollfd pfd;
    apr_os_sock_t fd;

    if (apr_os_sock_get(&fd, lr->sd) != APR_SUCCESS || fd < 0) {
        return;
    }
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    (void)poll(&pfd, 1, (int)apr_time_as_msec(ACCEPT_POLL_TIMEOUT));
}

apr_status_t pf_accept_one(pf_accept_t *a, volatile sig_atomic_t *die_now,
                           void **csd, apr_pool_t *ptrans)
{
    pf_bucket_t *bucket = a->bucket;
    ap_listen_rec *lr = bucket->listeners;
    apr_status_t rv, unlocked;

    if (bucket->num_listeners == 1) {
        /* One socket: a blocking accept(), where the kernel wakes exactly
         * one waiting child per connection.  No poll, no lock. */
        rv = ap_unixd_accept(csd, lr, ptrans);
        if (APR_STATUS_IS_EAGAIN(rv)) {
            wait_for_connection(lr);
            return APR_EINTR;
        }
        return rv;
    }

    rv = apr_proc_mutex_lock(bucket->mutex);
    if (rv != APR_SUCCESS) {
        if (*die_now || APR_STATUS_IS_EINTR(rv)) {
            return APR_EINTR;
        }
        ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                     PFBLOGNO(00001) "couldn't grab the accept mutex of "
                     "bucket %d", a->index);
        return APR_EGENERAL;
    }
    for (;;) {
        apr_int32_t numdesc;
        const apr_pollfd_t *pdesc;

        if (*die_now) {
            rv = APR_EINTR;
            break;
        }
        rv = apr_pollset_poll(a->pollset, ACCEPT_POLL_TIMEOUT, &numdesc,
                              &pdesc);
        if (rv != APR_SUCCESS) {
            if (APR_STATUS_IS_TIMEUP(rv)) {
                /* Let a waiting child that has been told to stop see it. */
                rv = APR_EINTR;
                break;
            }
            if (APR_STATUS_IS_EINTR(rv)) {
                continue;
            }
            ap_log_error(APLOG_MARK, APLOG_ERR, rv, ap_server_conf,
                         PFBLOGNO(00002) "apr_pollset_poll: (listen)");
            rv = APR_EGENERAL;
            break;
        }
        lr = pick_ready_listener(a, pdesc, numdesc);
        rv = ap_unixd_accept(csd, lr, ptrans);
        break;
    }
    unlocked = apr_proc_mutex_unlock(bucket->mutex);
    if (unlocked != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, unlocked, ap_server_conf,
                     PFBLOGNO(00003) "couldn't release the accept mutex of "
                     "bucket %d", a->index);
        return APR_EGENERAL;
    }
    return rv;
}

pf_accept_t *pf_accept_create(pf_bucket_t *bucket, int index, apr_pool_t *p)
{
    pf_accept_t *a = apr_pcalloc(p, sizeof(*a));
    apr_pollfd_t *pfd;
    poll_listener_t *pl;
    ap_listen_rec *lr;
    apr_status_t rv;
    int position;

    a->bucket = bucket;
    a->index = index;
    a->last_served = -1;
    if (bucket->num_listeners < 2) {
        return a;
    }
    /* poll(2), not epoll: only the holder of the accept mutex polls, and
     * poll() puts it on the listeners' wait queues for that call alone.
     * An epoll set would keep every child's entry on every listener's
     * queue for the child's life, and each new connection would walk them
     * all (docs/benchmarks.md, "Why one bucket serves four times stock
     * prefork"). */
    rv = apr_pollset_create_ex(&a->pollset, bucket->num_listeners, p,
                               APR_POLLSET_NOCOPY, APR_POLLSET_POLL);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                     PFBLOGNO(00004) "couldn't create the pollset of "
                     "bucket %d", index);
        return NULL;
    }
    a->capacity = bucket->num_listeners;
    a->ready = apr_pcalloc(p, sizeof(*a->ready) * (apr_size_t)a->capacity);
    for (lr = bucket->listeners, position = 0; lr && position < a->capacity;
         lr = lr->next, position++) {
        /* APR_POLLSET_NOCOPY keeps a pointer to the descriptor, so each
         * one needs storage of its own for the child's lifetime. */
        pfd = apr_pcalloc(p, sizeof(*pfd));
        pl = apr_pcalloc(p, sizeof(*pl));
        pl->lr = lr;
        pl->position = position;
        pfd->desc_type = APR_POLL_SOCKET;
        pfd->desc.s = lr->sd;
        pfd->reqevents = APR_POLLIN;
        pfd->client_data = pl;
        rv = apr_pollset_add(a->pollset, pfd);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                         PFBLOGNO(00005) "couldn't add a listener to the "
                         "pollset of bucket %d", index);
            return NULL;
        }
    }
    return a;
}

void pf_accept_stop(const pf_bucket_t *bucket, int devnull_fd)
{
    ap_listen_rec *lr;
    apr_os_sock_t fd;

    for (lr = bucket->listeners; lr; lr = lr->next) {
        lr->active = 0;
        if (apr_os_sock_get(&fd, lr->sd) == APR_SUCCESS && fd >= 0) {
            dup2(devnull_fd, fd);
        }
    }
}
