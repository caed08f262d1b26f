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
 * @file  prefork_sockguard.h
 * @brief The face of guard/: guarding the generation's bucket sockets,
 *        which children hold (when to check them, who else holds them,
 *        when to replace them, and what the log says), the children's
 *        system-call filter (ChildSyscallFilter), and the system calls
 *        that open and read the sockets.  Nothing outside guard/ includes
 *        another of its headers.
 *
 * The bucket set (prefork_bucketset.c) opens the sockets with the calls
 * at the end of this header and notes them in the guard's book; prefork.c
 * makes the guard and calls it, which acts with prefork_guard.h (one
 * socket against its record), its own look through /proc for other
 * processes holding one, and steering's socket maps (a replacement's
 * handover):
 *
 *   each cycle, and when a child of a bucket exits: pf_sockguard_check
 *   at a restart, after the build:          pf_sockguard_renew
 *   once the new children run and the old were told to go:
 *                                           pf_sockguard_retire
 *   in a child, right after fork:           pf_sockguard_child_init
 *   graceful stop:                          pf_sockguard_refuse_new
 *   stop:                                   pf_sockguard_stop
 *
 * A socket is replaced by a new one in its reuseport group, under its
 * descriptor number, and the old one stops listening only once the new
 * one is where connections are chosen: its queued connections are handed
 * over (Linux 5.14, with a program on the group), not reset.
 */

#ifndef PREFORK_SOCKGUARD_H
#define PREFORK_SOCKGUARD_H

#include "apr_pools.h"
#include "httpd.h"

#include "prefork_generation.h"
#include "prefork_guard.h"

typedef struct pf_sockguard_s pf_sockguard_t;

/**
 * What the guard asks of steering, handed over as calls so that the guard
 * names nothing of steering's room (prefork_steering.c fills it in).
 */
typedef struct {
    void *steer;
    /** Whether steering's programs are on @a gen's reuseport groups,
     *  choosing nothing outside their map. */
    int (*guards_groups)(const void *steer, const pf_generation_t *gen);
    /** Whether those programs also hand a closing socket's queue over. */
    int (*hands_over)(const void *steer);
    /** Puts every listening socket of @a gen back in the socket map. */
    void (*refill)(void *steer, const pf_generation_t *gen, server_rec *s);
    /** Whether a handover program loads here; if not, why in @a why. */
    int (*can_hand_over)(char *why, apr_size_t why_len);
    /** Stops @a old_fd listening, its queue handed to @a fresh. */
    apr_status_t (*handover)(apr_socket_t *fresh, int old_fd, int stays);
} pf_guard_steering_t;

/**
 * What the guard asks of the parent's record of its children, handed
 * over as calls (prefork_children.c fills it in): the live children hold
 * the sockets by right, and the guard tells them to go or to run again.
 */
typedef struct {
    void *table;
    /** Whether @a pid is a live child. */
    int (*holds)(const void *table, pid_t pid);
    /** Sends SIGCONT to every live child. */
    void (*continue_all)(const void *table);
    /** Tells the live children of @a bucket of @a gen to go. */
    void (*stop_bucket)(void *table, const pf_generation_t *gen, int bucket);
} pf_guard_children_t;

/** Made once per server, in @a pool, for @a gen's buckets (@a num_records
 *  bucket identities at most). */
pf_sockguard_t *pf_sockguard_create(apr_pool_t *pool, int num_records,
                                    pf_generation_t *gen);

/**
 * The bucket set's notes, at each (re)start, of the sockets the generation
 * puts in service: begin, then every socket (recorded now if the guard has
 * no record of it, a new socket that no child has held yet; else the
 * record made when it was new, whose backlog and options a duplicate of it
 * gets; NULL if it cannot be read), then end, after which the records of
 * the sockets no longer in service go.
 */
void pf_sockguard_note_begin(pf_sockguard_t *g);
const pf_guard_record_t *pf_sockguard_note(pf_sockguard_t *g,
                                           apr_socket_t *sd);
void pf_sockguard_note_end(pf_sockguard_t *g);

/**
 * The calls into the children's table (whose live children hold the
 * sockets by right) and into steering (its maps and programs), copied.
 * Handed again before each generation is built, before any other call of
 * that generation: httpd unloads the module with the configuration pool at
 * every restart and loads it again, maybe elsewhere, so the calls of the
 * last load must not outlive it.
 */
void pf_sockguard_set_calls(pf_sockguard_t *g,
                            const pf_guard_children_t *children,
                            const pf_guard_steering_t *steering);

/**
 * Parent: checks the listening sockets of bucket @a bucket (every bucket
 * when -1, which also looks for processes that hold one and are neither
 * the parent nor a live child, as the budget allows), which children hold
 * and can change, and puts back what a holder changed: a socket that
 * stopped listening listens again in place; its backlog, blocking mode,
 * file flags, owner and signal, and every option the kernel lets the
 * parent read, go back to what the parent recorded when it put the socket
 * in service; a socket filter it did not attach goes.  A socket that
 * cannot be put right in place, that was put right in place once before,
 * or that another process holds is replaced by a new one in its group,
 * under the same descriptor, its queue handed over.  One log line per
 * bucket and episode.  Run each maintenance cycle, with the backlogs
 * @a obs read (no second TCP_INFO), and when a child of the bucket exits
 * (@a obs NULL).
 */
void pf_sockguard_check(pf_sockguard_t *g, int bucket,
                        const pf_observation_t *obs, server_rec *s);

/**
 * At a restart (not at start-up, @a first_start), once the generation's
 * buckets have their sockets: each is
 * replaced by a new one in its group (whoever keeps a copy of the old one
 * loses it), where the kernel can hand the old one's queue over; where it
 * cannot, they are kept, and that is said once for the server.  The old
 * ones keep listening until pf_sockguard_retire().
 */
void pf_sockguard_renew(pf_sockguard_t *g, int first_start, server_rec *s);

/**
 * The replaced sockets stop listening, their queues handed to the new
 * ones: run when the steering programs choose the new sockets and the
 * children that held the old ones were told to stop.
 */
void pf_sockguard_retire(pf_sockguard_t *g, server_rec *s);

/**
 * Child, right after fork: closes the replaced sockets it inherited, and
 * moves its own @a n bucket sockets @a own to descriptor numbers just
 * under 1024 (or the descriptor limit), where a program it runs will not
 * open a socket of its own, since the filter refuses setsockopt() on
 * those numbers for the child's life (pf_seccomp_move_high()).
 * @param fds Set to each socket's descriptor afterwards
 */
void pf_sockguard_child_init(pf_sockguard_t *g, apr_socket_t *const *own,
                             int n, int *fds);

/**
 * Graceful stop: every bucket socket drops new handshakes from now on,
 * while the connections already queued stay to be accepted; a socket
 * whose filters are locked cannot, and is named in the log.
 * @return APR_SUCCESS, or the first failure on a socket that was not
 *         locked (the drain is pointless then)
 */
apr_status_t pf_sockguard_refuse_new(pf_sockguard_t *g, server_rec *s);

/**
 * Stop, before the sockets close: each stops listening and leaves its
 * group, so that a copy someone else keeps holds the port for nobody and
 * the next start binds it.
 */
void pf_sockguard_stop(pf_sockguard_t *g);

/* ------------------------------------------------------------------ */
/* The children's system-call filter (prefork_filter.c)                */

/** What the server found out about the filter, once for its life (the
 *  MPM keeps it in its retained data). */
typedef struct {
    int probed;
    int state;                  /**< pf_filter_state_e (prefork_seccomp.h):
                                     whether children can install it */
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

/* ------------------------------------------------------------------ */
/* The sockets' system calls (prefork_os.c)                            */

/**
 * Tries SO_REUSEPORT the way the buckets use it: two sockets bound to one
 * loopback port.  Linux (3.9 and later) then balances connections across
 * them; other systems either refuse or do not balance, and count as "no".
 * @param why Set to the failing call on failure (static string)
 * @return 1 if it works, 0 if not (errno-style status in *status)
 */
int pf_os_probe_reuseport(apr_status_t *status, const char **why);

/** Sets SO_REUSEPORT on a socket that is already listening, so that the
 *  duplicates bound afterwards join its group. */
apr_status_t pf_os_set_reuseport(apr_socket_t *sd);

/**
 * Opens a new listening socket on the same address as @a orig, with
 * SO_REUSEADDR, SO_REUSEPORT, the options connections inherit as
 * @a options has them (NULL: as @a orig has them now), the original's
 * IPV6_V6ONLY and IP_FREEBIND, and the given backlog.
 * @param out The new socket, allocated from @a p
 */
apr_status_t pf_os_duplicate_listener(apr_socket_t **out, apr_socket_t *orig,
                                      apr_sockaddr_t *bind_addr, int backlog,
                                      const pf_sockopts_t *options,
                                      apr_pool_t *p);

/**
 * Reads a listener's current accept-queue length and its limit.
 * @return APR_SUCCESS, or APR_ENOTIMPL where TCP_INFO is not available
 */
apr_status_t pf_os_listener_queue(apr_socket_t *sd, int *queued,
                                  int *limit);

#endif /* PREFORK_SOCKGUARD_H */
