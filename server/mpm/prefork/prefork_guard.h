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
 * @file  prefork_guard.h
 * @brief The bucket socket a child must hold: what the child is refused,
 *        and what the parent checks and puts right.
 *
 * Every child holds its bucket's listening socket, and that socket is
 * shared three ways: one open file description for the parent and every
 * child of the bucket, one reuseport group for every bucket of its Listen,
 * one port.  A child running hostile code (a PHP script, a program it
 * starts) can use it like any socket of its own.
 *
 * Refused, in the child and everything it runs (a seccomp filter the
 * child installs after fork while it is still root, so no_new_privs is
 * not set and setuid helpers such as sendmail's postdrop keep working):
 * attaching, replacing or detaching the group's steering program
 * (SO_ATTACH_REUSEPORT_CBPF, SO_ATTACH_REUSEPORT_EBPF,
 * SO_DETACH_REUSEPORT_BPF) and locking a socket filter (SO_LOCK_FILTER),
 * on every descriptor, since nothing else needs them; setsockopt() through
 * 32-bit x86 socketcall(), whose arguments a filter cannot see; and
 * io_uring, whose operations it cannot see at all.
 *
 * Checked by the parent and put right (each maintenance cycle, and when a
 * child of the bucket exits), because the calls that do it have
 * legitimate uses a filter cannot tell apart: a socket that stopped
 * listening (shutdown()) listens again in place, joining its group again;
 * one that cannot (connected elsewhere) is replaced under the same
 * descriptor number; the backlog, O_NONBLOCK, SO_RCVTIMEO and
 * SO_REUSEPORT go back to what the parent set; a socket filter a child
 * attached is removed.
 */

#ifndef PREFORK_GUARD_H
#define PREFORK_GUARD_H

#include "apr_network_io.h"

/* ------------------------------------------------------------------ */
/* The child's system-call filter                                      */

/** Whether children can install the filter. */
typedef enum {
    PF_FILTER_READY = 0,        /**< they install it after fork */
    PF_FILTER_NOT_BUILT,        /**< built without libseccomp */
    PF_FILTER_NO_KERNEL,        /**< the kernel has no seccomp filters */
    PF_FILTER_NO_PRIVILEGE      /**< the parent lacks CAP_SYS_ADMIN, so its
                                     children could only install it with
                                     no_new_privs, which would break setuid
                                     helpers */
} pf_filter_state_e;

/** Parent, at start: whether children will be able to install the
 *  filter.  @param why A static phrase for the log when they cannot */
pf_filter_state_e pf_guard_filter_probe(const char **why);

/**
 * Child, after fork, while still root: installs the filter, which every
 * process it runs inherits.  no_new_privs stays off.
 */
apr_status_t pf_guard_install_filter(void);

/* ------------------------------------------------------------------ */
/* The parent's checks                                                 */

/** What a bucket socket should look like. */
typedef struct {
    int backlog;                /**< accept queue limit, as TCP_INFO reports
                                     it (0: unknown, not checked) */
    int nonblock;               /**< O_NONBLOCK (children poll several) */
    int reuseport;              /**< SO_REUSEPORT must be on */
    int keep_filter;            /**< a socket filter of the parent's own is
                                     on (a graceful stop): leave it */
} pf_guard_want_t;

/** What a check found changed (bits). */
#define PF_GUARD_NOT_LISTENING  0x01
#define PF_GUARD_BACKLOG        0x02
#define PF_GUARD_NONBLOCK       0x04
#define PF_GUARD_RCVTIMEO       0x08
#define PF_GUARD_FILTER         0x10
#define PF_GUARD_REUSEPORT      0x20
/** Set by the bucket set when it replaced the socket. */
#define PF_GUARD_REPLACED       0x40

/**
 * Checks a bucket socket and puts back what a child changed.
 * @param failed Set to the bits found changed that could not be put back
 *        (PF_GUARD_NOT_LISTENING: listen() refused, the socket must be
 *        replaced; PF_GUARD_FILTER: a filter locked on it)
 * @return the bits found changed and put back
 */
int pf_guard_check_socket(apr_socket_t *sd, const pf_guard_want_t *want,
                          int *failed);

/** The accept-queue limit a listening socket has now, 0 if unknown. */
int pf_guard_backlog(apr_socket_t *sd);

/** The local port the kernel says the socket has now, -1 if unknown. */
int pf_guard_local_port(apr_socket_t *sd);

/**
 * Describes @a bits for the log: "stopped listening, backlog changed".
 * @return buf
 */
char *pf_guard_describe(int bits, char *buf, apr_size_t len);

#endif /* PREFORK_GUARD_H */
