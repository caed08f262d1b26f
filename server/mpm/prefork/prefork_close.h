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
 */

#ifndef PREFORK_CLOSE_H
#define PREFORK_CLOSE_H

#include "httpd.h"

/** How long an exiting child waits for its lingering sockets (usec):
 *  httpd's quiet time, below the 3 s after which the parent sends a
 *  stopping child SIGTERM again and logs it. */
#define PF_CLOSE_EXIT_WAIT      (2 * APR_INT64_C(1000000))

/**
 * In a new child, once: starts its lingering thread, or says once that
 * this child lingers itself (PFB00120).
 */
void pf_close_child_init(void);

/**
 * In place of ap_lingering_close(c): the pre-close hooks, the flush and
 * the shutdown for writing as httpd does them, then the socket is closed
 * at once when no response byte can be lost, else lingered on by the
 * child's lingering thread (or, when that is impossible, here, as httpd
 * does).
 */
void pf_close_connection(conn_rec *c);

/** Before the child exits: its lingering sockets, PF_CLOSE_EXIT_WAIT at
 *  most. */
void pf_close_finish(void);

#endif /* PREFORK_CLOSE_H */
