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
 * @file  prefork_seccomp.h
 * @brief The children's system-call filter: what a child, and every
 *        program it runs, may do to a descriptor.
 *
 * Every child shares its bucket's listening socket, and one open file
 * description, with the parent and its siblings.  What a child sets on
 * it reaches every connection the socket accepts, and the file's owner,
 * signal and O_ASYNC reach every sibling.  A filter cannot tell a copy of
 * the bucket socket from a socket of the child's own, so the rules hold
 * for every descriptor, as allow-lists of what modules and the programs
 * they run use:
 *
 * - fcntl(): the commands in the table of prefork_seccomp.c; F_SETFL
 *   without O_ASYNC;
 * - ioctl(): the requests in the table;
 * - setsockopt(): the (level, option) pairs in the table, and nothing at
 *   all on the child's own bucket descriptors;
 *
 * every other command, request or pair gets EPERM.  setsockopt() through
 * 32-bit x86 socketcall(), whose arguments a filter cannot read, gets
 * EPERM; io_uring, whose operations it cannot see, gets ENOSYS.  Every
 * argument is compared on its low 32 bits, as the kernel reads it, on
 * every route into the kernel (the native ABI, 32-bit x86 and x32 on
 * x86-64, 32-bit ARM on arm64).
 *
 * libseccomp's rules cannot say "this syscall only with these values"
 * in a filter whose other syscalls are allowed (one comparison per
 * argument, no rule with the default's action), so the filter is a
 * classic BPF program made here from the tables; libseccomp gives the
 * system-call numbers of each ABI.
 *
 * To let children do something new (issue 38's accept path, a module
 * that needs another option), add a row to the table it belongs to, and
 * a line to docs/trust.md saying who needs it: a unit test checks both.
 *
 * libc, libseccomp and APR's socket type only; the httpd side (the
 * directive, which processes install the filter, the log) is
 * prefork_filter.c, declared in the folder's face, prefork_sockguard.h.
 */

#ifndef PREFORK_SECCOMP_H
#define PREFORK_SECCOMP_H

#include "apr_network_io.h"

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

/** Which table a row of the allow-lists belongs to. */
typedef enum {
    PF_ALLOW_FCNTL = 0,         /**< an fcntl() command */
    PF_ALLOW_IOCTL,             /**< an ioctl() request */
    PF_ALLOW_SOCKOPT            /**< a setsockopt() (level, option) */
} pf_allow_kind_e;

/** One row of the allow-lists. */
typedef struct {
    int kind;                   /**< pf_allow_kind_e */
    int level;                  /**< PF_ALLOW_SOCKOPT: the level */
    unsigned int value;         /**< the command, request or option */
    const char *name;           /**< as docs/trust.md writes it */
} pf_allowed_t;

/** Parent, at start: whether children will be able to install the
 *  filter.  @param why A static phrase for the log when they cannot */
pf_filter_state_e pf_seccomp_probe(const char **why);

/**
 * Child, after fork, while still root: installs the filter, which every
 * process it runs inherits.  no_new_privs stays off.
 * @param bucket_fds The descriptors of the child's bucket sockets, on
 *        which every setsockopt() is refused (see pf_seccomp_move_high())
 */
apr_status_t pf_seccomp_install(const int *bucket_fds, int num_fds);

/**
 * Child, before it installs the filter: moves its bucket sockets to
 * descriptor numbers just under 1024 (or the descriptor limit, if lower),
 * where a program it runs will not open a socket of its own, since the
 * filter refuses setsockopt() on those numbers for the child's life and
 * every program it runs.
 * @param fds Set to each socket's descriptor afterwards
 */
void pf_seccomp_move_high(apr_socket_t *const *sds, int n, int *fds);

/** The allow-lists, every row of every table.
 *  @param count Set to the number of rows */
const pf_allowed_t *pf_seccomp_allowed(int *count);

#endif /* PREFORK_SECCOMP_H */
