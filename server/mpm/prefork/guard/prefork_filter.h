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
 * @file  prefork_filter.h
 * @brief The httpd side of the children's system-call filter
 *        (prefork_seccomp.h has its rules): whether it can be used, which
 *        processes install it, and what the log says about it.
 *        ChildSyscallFilter turns it off.
 *
 * A room apart from prefork_seccomp.c, which calls nothing of httpd and
 * which the unit tests link.  prefork.c calls it from its run, check_config,
 * open_logs and drop_privileges hooks and from the child's start.
 */

#ifndef PREFORK_FILTER_H
#define PREFORK_FILTER_H

#include "httpd.h"

#include "prefork_seccomp.h"

/** What the server found out about the filter, once for its life (the
 *  MPM keeps it in its retained data). */
typedef struct {
    int probed;
    pf_filter_state_e state;    /**< whether children can install it */
} pf_filter_retained_t;

/**
 * Parent, at a (re)start, with ChildSyscallFilter on (@a wanted): finds
 * out once whether children can install the filter, and says so once
 * (PFB00063, or PFB00064 with the reason).
 */
void pf_filter_probe(pf_filter_retained_t *r, int wanted, server_rec *s);

/**
 * With ChildSyscallFilter off: the warning that says what is open and
 * what still guards the bucket sockets (PFB00174).  @a startup: the first
 * pass over the configuration, on the console.
 */
void pf_filter_log_off(int wanted, int startup, server_rec *s);

/**
 * Child, after fork, while still root: installs the filter if wanted and
 * usable, refusing setsockopt() on @a bucket_fds; says so if it could not
 * (PFB00065).
 */
void pf_filter_child(const pf_filter_retained_t *r, int wanted,
                     const int *bucket_fds, int num_fds, int bucket,
                     server_rec *s);

/**
 * A process a module forked from the parent to run as User (mod_cgid's
 * daemon), while still root: installs the filter if wanted and usable,
 * with no descriptor rules (it holds no bucket socket); says so if it
 * could not (PFB00175).
 */
void pf_filter_helper(int wanted, server_rec *s);

#endif /* PREFORK_FILTER_H */
