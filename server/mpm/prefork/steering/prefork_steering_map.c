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
 * The REUSEPORT_SOCKARRAYs the steering programs choose sockets from.  The
 * generation's map, kept for the server's life and grown by doubling, is
 * made to hold each bucket's socket under its bucket number, leaving
 * alone a key that holds the right one, so that a cycle with nothing to
 * mend changes nothing.  A handover's map holds one socket under the hash
 * program for a moment, so that a replaced socket's queue passes to its
 * successor (Linux 5.14).  prefork_steering.c keeps the generation's map;
 * the guard (prefork_sockguard.c) asks whether a handover can be made and
 * makes one.  Kernel calls go through prefork_steering_kernel.c; nothing
 * here logs.
 */

#include "apr.h"
#include "apr_portable.h"
#include "apr_strings.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "prefork_buckets.h"
#include "prefork_steering_kernel.h"
#include "prefork_steering_map.h"

/* Room for @a needed buckets in a steering map: a power of two, at least
 * 16, so that a restart adding a Listen seldom needs a new map. */
static int map_capacity(int needed)
{
    int capacity = 16;

    while (capacity < needed && capacity < PF_STEER_MAX_RECORDS) {
        capacity *= 2;
    }
    return capacity;
}

void pf_steer_map_init(pf_steer_map_t *m, apr_pool_t *pool)
{
    memset(m, 0, sizeof(*m));
    m->pool = pool;
    m->fd = -1;
}

apr_status_t pf_steer_map_ensure(pf_steer_map_t *m, int needed,
                                 const char **step)
{
    int capacity, fd, key;
    apr_status_t rv;

    if (m->fd >= 0 && m->capacity >= needed) {
        return APR_SUCCESS;
    }
    capacity = map_capacity(needed);
    if (capacity < needed) {
        *step = "sizing the socket map";
        return APR_EINVAL;
    }
    rv = pf_steer_kernel_socket_map(capacity, &fd);
    if (rv != APR_SUCCESS) {
        *step = "bpf(BPF_MAP_CREATE) of the REUSEPORT_SOCKARRAY";
        return rv;
    }
    for (key = 0; m->fd >= 0 && key < m->capacity; key++) {
        pf_steer_kernel_clear_socket(m->fd, key);
    }
    pf_steer_kernel_close(m->fd);
    m->fd = fd;
    m->capacity = capacity;
    /* Grows by doubling, so a long run of restarts allocates from the
     * long-lived pool a bounded number of times. */
    m->wanted_cookie = apr_pcalloc(m->pool, sizeof(apr_uint64_t)
                                                * (apr_size_t)capacity);
    m->held_cookie = apr_pcalloc(m->pool, sizeof(apr_uint64_t)
                                              * (apr_size_t)capacity);
    return APR_SUCCESS;
}

/* Bucket @a k's socket, as of now (the bucket set may replace one in
 * place): in a generation with something to steer, its one socket. */
static apr_socket_t *socket_of(const pf_generation_t *gen, int k)
{
    return gen->bucket[k].listeners->sd;
}

/* Whether @a sd listens now.  One that does not (a child shut it down
 * since the parent's last look) is not hashed, so the kernel takes it in
 * no socket map: the guard's next check, which the child's exit or the
 * next cycle brings, puts it right and refills the map. */
static int listening_now(apr_socket_t *sd)
{
    apr_os_sock_t fd;
    int on = 0;
    socklen_t len = sizeof(on);

    return apr_os_sock_get(&fd, sd) == APR_SUCCESS && fd >= 0
           && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0
           && on != 0;
}

/* Whether @a cookie is wanted under a key other than @a key. */
static int wanted_elsewhere(const pf_steer_map_t *m, apr_uint64_t cookie,
                            int key)
{
    int k;

    for (k = 0; k < m->capacity; k++) {
        if (k != key && m->wanted_cookie[k] == cookie) {
            return 1;
        }
    }
    return 0;
}

apr_status_t pf_steer_map_sync(pf_steer_map_t *m, const pf_generation_t *gen,
                               int *changed, int *bad)
{
    apr_status_t rv, first = APR_SUCCESS;
    int key;

    *changed = 0;
    *bad = -1;
    for (key = 0; key < m->capacity; key++) {
        m->wanted_cookie[key] = 0;
        if (key < gen->num_buckets && socket_of(gen, key) != NULL) {
            pf_steer_kernel_cookie(socket_of(gen, key),
                                   &m->wanted_cookie[key]);
        }
        if (pf_steer_kernel_socket_at(m->fd, key, &m->held_cookie[key])
            != APR_SUCCESS) {
            m->held_cookie[key] = 0;
        }
    }
    /* A socket can be under one key at a time: one that moves is taken
     * out of its old key first, and a key no bucket wants is emptied. */
    for (key = 0; key < m->capacity; key++) {
        if (m->held_cookie[key] != 0
            && m->held_cookie[key] != m->wanted_cookie[key]
            && (m->wanted_cookie[key] == 0
                || wanted_elsewhere(m, m->held_cookie[key], key))) {
            pf_steer_kernel_clear_socket(m->fd, key);
        }
    }
    for (key = 0; key < gen->num_buckets && key < m->capacity; key++) {
        if (m->held_cookie[key] == m->wanted_cookie[key]
            || socket_of(gen, key) == NULL) {
            continue;
        }
        rv = pf_steer_kernel_put_socket(m->fd, key, socket_of(gen, key));
        if (rv == APR_SUCCESS) {
            (*changed)++;
        }
        else if (first == APR_SUCCESS && listening_now(socket_of(gen, key))) {
            first = rv;
            *bad = key;
        }
    }
    return first;
}

void pf_steer_map_close(pf_steer_map_t *m)
{
    pf_steer_kernel_close(m->fd);
    m->fd = -1;
}

/* ------------------------------------------------------------------ */
/* A handover                                                          */

/* The hash program over a map of one socket: it chooses key 0, or
 * nothing. */
static apr_status_t load_handover(int *map_fd, int *prog_fd, int *hands_over,
                                  char *line, apr_size_t line_len)
{
    pf_steer_program_t spec;
    apr_status_t rv;

    *map_fd = *prog_fd = -1;
    *hands_over = 0;
    rv = pf_steer_kernel_socket_map(1, map_fd);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    memset(&spec, 0, sizeof(spec));
    spec.mode = PFB_STEER_HASH;
    spec.socks_fd = *map_fd;
    spec.idle_fd = spec.cpu_fd = -1;
    spec.listen.first_bucket = 0;
    spec.listen.per_listen = 1;
    spec.listen.probes = 0;
    spec.listen.capacity = 1;
    return pf_steer_kernel_load(&spec, prog_fd, hands_over, line, line_len);
}

int pf_steer_can_hand_over(char *why, apr_size_t why_len)
{
    char line[256];
    int map_fd, prog_fd, hands_over;
    apr_status_t rv;

    *why = '\0';
    if (!pf_steer_kernel_built()) {
        apr_cpystrn(why, "this build has no BPF programs", why_len);
        return 0;
    }
    rv = load_handover(&map_fd, &prog_fd, &hands_over, line, sizeof(line));
    pf_steer_kernel_close(prog_fd);
    pf_steer_kernel_close(map_fd);
    if (rv != APR_SUCCESS) {
        apr_snprintf(why, why_len, "loading the SK_REUSEPORT program "
                     "failed%s%s", *line ? ": " : "", line);
        return 0;
    }
    if (!hands_over) {
        apr_cpystrn(why, "the kernel has no program that chooses where a "
                    "closing socket's connections go (Linux 5.14)",
                    why_len);
    }
    return hands_over;
}

apr_status_t pf_steer_handover(apr_socket_t *fresh, int old_fd, int stays)
{
    int map_fd, prog_fd, hands_over;
    apr_status_t rv;

    rv = load_handover(&map_fd, &prog_fd, &hands_over, NULL, 0);
    if (rv == APR_SUCCESS && !hands_over) {
        rv = APR_ENOTIMPL;
    }
    if (rv == APR_SUCCESS) {
        rv = pf_steer_kernel_put_socket(map_fd, 0, fresh);
    }
    if (rv == APR_SUCCESS) {
        rv = pf_steer_kernel_attach(fresh, prog_fd);
    }
    if (rv == APR_SUCCESS) {
        /* The kernel hands every connection queued on the old socket, and
         * every handshake it answered, to the one the program chooses. */
        if (shutdown(old_fd, SHUT_RDWR) != 0) {
            rv = errno;
        }
        if (!stays) {
            pf_steer_kernel_detach(fresh);
        }
    }
    pf_steer_kernel_close(prog_fd);
    pf_steer_kernel_close(map_fd);
    return rv;
}
