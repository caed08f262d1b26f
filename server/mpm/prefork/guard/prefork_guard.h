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
 * every setsockopt() on the descriptor numbers of its own bucket sockets,
 * which the child first moves out of the low numbers that programs it
 * runs use; and on every descriptor, since nothing else needs them,
 * attaching, replacing or detaching the group's steering program
 * (SO_ATTACH_REUSEPORT_CBPF, SO_ATTACH_REUSEPORT_EBPF,
 * SO_DETACH_REUSEPORT_BPF), locking a socket filter (SO_LOCK_FILTER),
 * and TCP MD5 and TCP-AO keys, which a listener applies to every
 * handshake and which cannot be read back; setsockopt() through 32-bit
 * x86 socketcall(), whose arguments a filter cannot see; and io_uring,
 * whose operations it cannot see at all.  Every argument is compared on
 * its low 32 bits, as the kernel reads it.
 *
 * Checked by the parent and put right (each maintenance cycle, and when a
 * child of the bucket exits), because the calls that do it have
 * legitimate uses a filter cannot tell apart, and a copy of the
 * descriptor escapes the rule by number: a socket that stopped listening
 * (shutdown()) listens again in place, joining its group again; the
 * backlog, O_NONBLOCK, SO_RCVTIMEO and SO_REUSEPORT go back to what the
 * parent set; a socket filter a child attached is removed; the options
 * connections inherit go back to what the parent recorded when it put the
 * socket in service (prefork_sockopts.h).  A socket that cannot be put
 * right in place (connected elsewhere, a filter locked on it, an option
 * the kernel will not take back) is replaced under the same descriptor
 * number, and the old one stops listening.
 *
 * This file is the parent's side for one bucket's sockets: the records it
 * keeps of them (the book), the check against a record, the replacement
 * and the retirement.  The refusal is prefork_seccomp.h's (the rules) and
 * prefork_filter.c's (which processes install them); when the parent
 * checks, who else holds a socket and what the log says are
 * prefork_sockguard.c's; the options are
 * prefork_sockopts.h's.
 */

#ifndef PREFORK_GUARD_H
#define PREFORK_GUARD_H

#include "apr_network_io.h"

#include "prefork_generation.h"
#include "prefork_sockopts.h"

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
    /** The accept queue's limit as the maintenance cycle read it
     *  (TCP_INFO), or 0: read it now. */
    int backlog_seen;
    int replace;                /**< replace it, whatever it looks like:
                                     another process holds it */
} pf_guard_want_t;

/** What a check found changed (bits). */
#define PF_GUARD_NOT_LISTENING  0x01
#define PF_GUARD_BACKLOG        0x02
#define PF_GUARD_NONBLOCK       0x04
#define PF_GUARD_RCVTIMEO       0x08
#define PF_GUARD_FILTER         0x10
#define PF_GUARD_REUSEPORT      0x20
/** Put right by a new socket under the same descriptor. */
#define PF_GUARD_REPLACED       0x40
/** SO_LOCK_FILTER set: no filter can be attached or removed. */
#define PF_GUARD_FILTER_LOCKED  0x80
/** Options connections inherit changed (see pf_guard_found_t). */
#define PF_GUARD_OPTIONS        0x100
/** Put right in place before: replaced, not trusted twice. */
#define PF_GUARD_TWICE          0x200
/** Held by a process that is not a child of the server: replaced. */
#define PF_GUARD_HELD           0x400

/* ------------------------------------------------------------------ */
/* The parent's record of its bucket sockets                           */

/** What the parent read of a bucket socket when it first put it in
 *  service, before any child could hold it. */
typedef struct {
    apr_ino_t inode;            /**< the socket's: the record's key */
    int backlog;                /**< accept-queue limit (0: unknown) */
    int repairs;                /**< times put right in place: a second
                                     time, the socket is replaced */
    pf_sockopts_t options;      /**< its whole state */
} pf_guard_record_t;

/** A socket replaced by a new one under its descriptor number, still
 *  listening until it is retired. */
typedef struct {
    int old_fd;                 /**< the old socket (-1: retired) */
    apr_socket_t *fresh;        /**< the bucket's socket: the new one */
} pf_guard_retiring_t;

/** The records of the sockets in service, kept across restarts. */
typedef struct pf_guard_book_s pf_guard_book_t;

pf_guard_book_t *pf_guard_book_create(apr_pool_t *pool);

/** At each (re)start, before the generation's sockets are noted. */
void pf_guard_book_begin(pf_guard_book_t *book);

/**
 * A socket in service in this generation: recorded now if the book has
 * no record of it (a new socket: no child has held it yet), else the
 * record made when it was new.  NULL if it cannot be read.
 */
const pf_guard_record_t *pf_guard_book_note(pf_guard_book_t *book,
                                            apr_socket_t *sd);

/** After the generation's last socket: the records of the sockets that
 *  are no longer in service go. */
void pf_guard_book_end(pf_guard_book_t *book);

/** What one check of a bucket socket found (pf_guard_socket()). */
typedef struct {
    int fixed;                  /**< PF_GUARD_* put right */
    int failed;                 /**< PF_GUARD_* still wrong */
    pf_sockopt_set_t options_changed;   /**< found changed */
    pf_sockopt_set_t options_failed;    /**< of those, still wrong */
} pf_guard_found_t;

/**
 * Checks every socket of @a bucket against its record and puts back what
 * a holder changed.  A socket is replaced (a new socket on its address
 * with the record's options and backlog, in its reuseport group, takes
 * its descriptor number; the old one waits on the book's list of sockets
 * to retire) when it cannot be put right in place, when it was put right
 * in place once before (not trusted twice), or when @a replace says so.
 * What the bucket wants: O_NONBLOCK where its children poll several
 * sockets, SO_REUSEPORT where buckets share a port (@a reuseport), the
 * parent's own socket filter left on at a graceful stop (@a keep_filter:
 * nothing is replaced then), and the backlog of the record.
 * @param seen Each socket's accept-queue limit as the maintenance cycle
 *        read it, in the bucket's order; NULL: read now
 * @param replace Per socket, in the bucket's order: replace it (another
 *        process holds it); NULL: none
 * @param all Set to what the checks found, over the bucket's sockets
 * @return whether a socket of the bucket listens again, in place or
 *         replaced: it left its reuseport group's socket map when it
 *         stopped, or a new one took its place, and the map must have it
 */
int pf_guard_bucket(pf_guard_book_t *book, const pf_bucket_t *bucket,
                    int reuseport, int keep_filter, const int *seen,
                    const int *replace, pf_guard_found_t *all);

/**
 * Replaces @a sd now, whatever it looks like (a restart: whoever keeps a
 * copy of the old one loses it): a new socket in its group under its
 * descriptor number, the old one on the book's list to retire.
 */
apr_status_t pf_guard_replace(pf_guard_book_t *book, apr_socket_t *sd,
                              apr_sockaddr_t *bind_addr, int nonblock);

/** The sockets replaced and not retired yet.  @return how many */
int pf_guard_retiring(pf_guard_book_t *book, pf_guard_retiring_t **list);

/**
 * Retires one: the old socket stops listening if it still does (where a
 * program of its group chooses for handed-over connections, its queue
 * goes to the new socket; otherwise it is reset), leaves its group, and
 * the parent's descriptor of it is closed.
 */
void pf_guard_retire(pf_guard_retiring_t *r);

/**
 * A listening socket the parent lets go of for good (retired, or at a
 * stop): it stops listening (its queue is handed over or reset), leaves
 * SO_REUSEPORT off, and is given to an unprivileged owner, so that no
 * copy anyone keeps can listen on it again beside a socket of the server
 * (the kernel joins reuseport groups of one owner only).
 */
void pf_guard_disown(int fd);

/** Retires every socket on the list, and empties it. */
void pf_guard_retired_all(pf_guard_book_t *book);

/** Child, right after fork: closes the descriptors of the sockets on the
 *  list (the parent retires them), and empties it. */
void pf_guard_close_retiring(pf_guard_book_t *book);

/**
 * Describes @a bits for the log: "stopped listening, backlog changed";
 * PF_GUARD_OPTIONS followed by @a options, the options' names, if any
 * ("options connections inherit changed: SO_LINGER, IP_TTL").
 * @return buf
 */
char *pf_guard_describe(int bits, const char *options, char *buf,
                        apr_size_t len);

#endif /* PREFORK_GUARD_H */
