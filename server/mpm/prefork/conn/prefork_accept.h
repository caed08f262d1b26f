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
 * @file  prefork_accept.h
 * @brief A child's accept on its bucket: one blocking accept() where the
 *        bucket is one socket (the kernel wakes one waiting child per
 *        connection: no poll, no lock), else httpd's arrangement, the
 *        accept mutex and a poll(2) set over the bucket's sockets, taking
 *        the ready ones in turn.
 *
 * prefork.c's child loop calls it for each connection, and its stop
 * handlers call pf_accept_stop(); the bucket set made the sockets and the
 * accept mutex, and the order in which ready sockets are taken is
 * prefork_policy.c's (pf_pick_ready_listener()).
 */

#ifndef PREFORK_ACCEPT_H
#define PREFORK_ACCEPT_H

#include <signal.h>

#include "apr_pools.h"

#include "prefork_generation.h"

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

#endif /* PREFORK_ACCEPT_H */
