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
 * @file  prefork_os.h
 * @brief Thin operating-system glue for the MPM's sockets: the SO_REUSEPORT
 *        probe, duplicating a listening socket, reading a listener's
 *        accept queue, refusing new handshakes at a graceful stop.
 *
 * Each call is one step with errno as its status, and a fallback where
 * the system lacks the feature; nothing here logs or decides.  Its
 * callers: the bucket set (the probe, SO_REUSEPORT, the duplicates),
 * prefork_guard.c (replacements, the backlog), prefork_generation.c (the
 * queues) and prefork_sockguard.c (a graceful stop).
 */

#ifndef PREFORK_OS_H
#define PREFORK_OS_H

#include "apr_network_io.h"
#include "apr_pools.h"

#include "prefork_sockguard.h"

/**
 * Makes a listening socket drop every new handshake (a classic BPF socket
 * filter that drops a SYN without ACK and keeps every other packet), while
 * the connections already in its accept queue stay there to be accepted,
 * and handshakes already answered complete and join them.  Used at a
 * graceful stop: a client then sees its SYN go unanswered and, once the
 * socket is closed, refused, instead of being queued and then reset.
 * @return APR_SUCCESS, or APR_ENOTIMPL where socket filters do not exist
 */
apr_status_t pf_os_refuse_new_connections(apr_socket_t *sd);

#endif /* PREFORK_OS_H */
