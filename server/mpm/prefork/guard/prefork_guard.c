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
 * The parent's check of one bucket's sockets, and the book of records it
 * checks them against.  A socket is recorded (its backlog, every option
 * of prefork_sockopts.c) when the parent first puts it in service, before
 * any child holds it, keyed by inode so that the record carries over a
 * restart that keeps the socket.  A check puts back the listening state,
 * backlog, O_NONBLOCK, SO_RCVTIMEO, SO_REUSEPORT, a child's socket filter
 * and the options; a socket that cannot be put right in place, or was put
 * right once before, is replaced under its descriptor number, and the old
 * one waits on the book's list to stop listening.  When to check, who
 * else holds a socket and what the log says are prefork_sockguard.c's;
 * the children's filter is prefork_seccomp.c's.
 */
#include "ap_config.h"
#include "mpm_common.h"         /* DEFAULT_LISTENBACKLOG */

#include "apr.h"
#include "apr_network_io.h"
#include "apr_hash.h"
#include "apr_tables.h"
#include "apr_portable.h"
#include "apr_strings.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "prefork_guard.h"
#include "prefork_os.h"

/* ------------------------------------------------------------------ */
/* The parent's checks                                                 */

static int int_option(int fd, int level, int name)
{
    int value = 0;
    socklen_t len = sizeof(value);

    return getsockopt(fd, level, name, &value, &len) == 0 ? value : -1;
}

static int set_int_option(int fd, int level, int name, int value)
{
    return setsockopt(fd, level, name, &value, sizeof(value));
}

/* The accept-queue limit a listening socket has now, 0 if unknown. */
static int pf_guard_backlog(apr_socket_t *sd)
{
    int queued, limit;

    return pf_os_listener_queue(sd, &queued, &limit) == APR_SUCCESS ? limit
                                                                     : 0;
}

/* The local port the kernel says the socket has now, -1 if unknown. */
static int pf_guard_local_port(apr_socket_t *sd)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    apr_os_sock_t fd;

    if (apr_os_sock_get(&fd, sd) != APR_SUCCESS
        || getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        return -1;
    }
    switch (addr.ss_family) {
    case AF_INET:
        return ntohs(((struct sockaddr_in *)&addr)->sin_port);
#if APR_HAVE_IPV6
    case AF_INET6:
        return ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
#endif
    default:
        return -1;
    }
}

/* SO_REUSEPORT goes first: listen() again joins the group only with it.
 * Where the bucket wants none (one bucket, or one socket per Listen that
 * no steering program guards), it goes off, quietly: a socket kept from a
 * generation that had it, or one that a handover gave it for a moment,
 * must let nothing else join its group. */
static int check_reuseport(int fd, const pf_guard_want_t *want)
{
#ifdef SO_REUSEPORT
    int on = int_option(fd, SOL_SOCKET, SO_REUSEPORT);

    if (want->reuseport && on == 0
        && set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1) == 0) {
        return PF_GUARD_REUSEPORT;
    }
    if (!want->reuseport && on > 0) {
        set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 0);
    }
#else
    (void)fd;
    (void)want;
#endif
    return 0;
}

/* A socket that stopped listening (shutdown()) listens again, on its own
 * address, in its reuseport group.  One that cannot (a child connected
 * it elsewhere) is the caller's to replace. */
static int check_listening(apr_socket_t *sd, int fd,
                           const pf_guard_want_t *want, int *failed)
{
    int backlog;

    if (int_option(fd, SOL_SOCKET, SO_ACCEPTCONN) == 0) {
        if (want->backlog > 0 && listen(fd, want->backlog) == 0) {
            return PF_GUARD_NOT_LISTENING;
        }
        *failed |= PF_GUARD_NOT_LISTENING;
        return 0;
    }
    /* listen() on a listening socket only sets its backlog. */
    backlog = want->backlog_seen > 0 ? want->backlog_seen
                                     : pf_guard_backlog(sd);
    if (want->backlog > 0 && backlog > 0 && backlog != want->backlog
        && listen(fd, want->backlog) == 0) {
        return PF_GUARD_BACKLOG;
    }
    return 0;
}

/* One open file description for the parent and every child of the
 * bucket: O_NONBLOCK set by one child (fcntl, FIONBIO) makes the others'
 * blocking accept() return at once. */
static int check_blocking(int fd, const pf_guard_want_t *want)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags >= 0 && ((flags & O_NONBLOCK) != 0) != (want->nonblock != 0)
        && fcntl(fd, F_SETFL, want->nonblock ? flags | O_NONBLOCK
                                             : flags & ~O_NONBLOCK) == 0) {
        return PF_GUARD_NONBLOCK;
    }
    return 0;
}

/* A receive timeout on a listening socket times a blocking accept() out
 * the same way. */
static int check_timeout(int fd)
{
    struct timeval tv, none;
    socklen_t len = sizeof(tv);

    memset(&tv, 0, sizeof(tv));
    memset(&none, 0, sizeof(none));
    if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0
        && (tv.tv_sec != 0 || tv.tv_usec != 0)
        && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none))
               == 0) {
        return PF_GUARD_RCVTIMEO;
    }
    return 0;
}

/* How many instructions the classic filter on a socket has (0: none). */
static int filter_length(int fd)
{
#ifdef SO_GET_FILTER
    char none[1];
    socklen_t len = 0;

    /* Given no room, the kernel says how much the program would need. */
    return getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, none, &len) == 0
               ? (int)len
               : 0;
#else
    (void)fd;
    return 0;
#endif
}

/* A socket filter drops the bucket's handshakes.  The parent attaches one
 * of its own only at a graceful stop; any other was a child's.  Detaching
 * where there is none says ENOENT, on a locked socket EPERM (with a filter
 * or without one: a lock alone refuses the parent's own at a stop). */
static int check_filter(int fd, const pf_guard_want_t *want, int *failed)
{
#ifdef SO_DETACH_FILTER
    int zero = 0;

    if (want->keep_filter) {
        return 0;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &zero, sizeof(zero))
        == 0) {
        return PF_GUARD_FILTER;
    }
    if (errno == EPERM) {
        *failed |= PF_GUARD_FILTER_LOCKED
                   | (filter_length(fd) > 0 ? PF_GUARD_FILTER : 0);
    }
#else
    (void)fd;
    (void)want;
    (void)failed;
#endif
    return 0;
}

/*
 * Checks a bucket socket's state (not its options) and puts back what a
 * child changed.
 * @param failed Set to the bits found changed that could not be put back
 *        (PF_GUARD_NOT_LISTENING: listen() refused, the socket must be
 *        replaced; PF_GUARD_FILTER_LOCKED, with PF_GUARD_FILTER if a
 *        filter is on it: the socket must be replaced)
 * @return the bits found changed and put back
 */
static int pf_guard_check_socket(apr_socket_t *sd, const pf_guard_want_t *want,
                                 int *failed)
{
    apr_os_sock_t fd;
    int fixed = 0;

    *failed = 0;
    if (sd == NULL || apr_os_sock_get(&fd, sd) != APR_SUCCESS || fd < 0) {
        return 0;
    }
    fixed |= check_reuseport(fd, want);
    fixed |= check_listening(sd, fd, want, failed);
    fixed |= check_blocking(fd, want);
    fixed |= check_timeout(fd);
    fixed |= check_filter(fd, want, failed);
    return fixed;
}

/* ------------------------------------------------------------------ */
/* The parent's record of its bucket sockets                           */

struct pf_guard_book_s {
    apr_pool_t *parent;
    apr_pool_t *pool;           /* the records of the sockets in service */
    apr_hash_t *records;        /* inode -> pf_guard_record_t */
    apr_pool_t *old_pool;       /* during a (re)start: the last */
    apr_hash_t *old_records;    /* generation's */
    /* Sockets replaced and not yet stopped (pf_guard_retiring_t): grows
     * to the most replaced at once, emptied by every retirement. */
    apr_array_header_t *retiring;
};

pf_guard_book_t *pf_guard_book_create(apr_pool_t *pool)
{
    pf_guard_book_t *book = apr_pcalloc(pool, sizeof(*book));

    book->parent = pool;
    apr_pool_create(&book->pool, pool);
    apr_pool_tag(book->pool, "prefork_guard_book");
    book->records = apr_hash_make(book->pool);
    book->retiring = apr_array_make(pool, 4, sizeof(pf_guard_retiring_t));
    return book;
}

void pf_guard_book_begin(pf_guard_book_t *book)
{
    if (book->old_pool != NULL) {
        /* The last (re)start failed before its end: what it noted goes,
         * the generation before it is still the one in service. */
        apr_pool_destroy(book->pool);
    }
    else {
        book->old_pool = book->pool;
        book->old_records = book->records;
    }
    apr_pool_create(&book->pool, book->parent);
    apr_pool_tag(book->pool, "prefork_guard_book");
    book->records = apr_hash_make(book->pool);
}

void pf_guard_book_end(pf_guard_book_t *book)
{
    if (book->old_pool != NULL) {
        apr_pool_destroy(book->old_pool);
        book->old_pool = NULL;
        book->old_records = NULL;
    }
}

static int socket_inode(apr_socket_t *sd, int *fd, apr_ino_t *inode)
{
    apr_os_sock_t os;
    struct stat st;

    if (sd == NULL || apr_os_sock_get(&os, sd) != APR_SUCCESS || os < 0
        || fstat(os, &st) != 0) {
        return 0;
    }
    *fd = os;
    *inode = (apr_ino_t)st.st_ino;
    return 1;
}

static pf_guard_record_t *book_find(const pf_guard_book_t *book,
                                    apr_socket_t *sd)
{
    apr_ino_t inode;
    int fd;

    if (!socket_inode(sd, &fd, &inode)) {
        return NULL;
    }
    return apr_hash_get(book->records, &inode, sizeof(inode));
}

const pf_guard_record_t *pf_guard_book_note(pf_guard_book_t *book,
                                            apr_socket_t *sd)
{
    pf_guard_record_t *rec, *kept = NULL;
    apr_ino_t inode;
    int fd;

    if (!socket_inode(sd, &fd, &inode)) {
        return NULL;
    }
    rec = apr_hash_get(book->records, &inode, sizeof(inode));
    if (rec != NULL) {
        return rec;
    }
    if (book->old_records != NULL) {
        kept = apr_hash_get(book->old_records, &inode, sizeof(inode));
    }
    rec = apr_palloc(book->pool, sizeof(*rec));
    if (kept != NULL) {
        *rec = *kept;
    }
    else {
        rec->inode = inode;
        rec->backlog = pf_guard_backlog(sd);
        pf_sockopts_record(fd, &rec->options);
    }
    apr_hash_set(book->records, &rec->inode, sizeof(rec->inode), rec);
    return rec;
}

/* The record now belongs to the socket that replaced its own. */
static void book_rekey(pf_guard_book_t *book, pf_guard_record_t *rec,
                       apr_socket_t *sd)
{
    apr_ino_t inode;
    int fd;

    if (rec == NULL || !socket_inode(sd, &fd, &inode)) {
        return;
    }
    apr_hash_set(book->records, &rec->inode, sizeof(rec->inode), NULL);
    rec->inode = inode;
    apr_hash_set(book->records, &rec->inode, sizeof(rec->inode), rec);
}

/* Whether a socket that listens again does so on its own port: one bound
 * without a port lock would have picked another.  Asked of the kernel:
 * APR's record is the address it was bound to. */
static int on_its_port(apr_socket_t *sd, apr_sockaddr_t *bind_addr)
{
    return pf_guard_local_port(sd) == (int)bind_addr->port;
}

/* A new socket for a bucket whose own cannot be trusted any more: same
 * address, the record's options and backlog, in the old one's reuseport
 * group (SO_REUSEPORT goes on the old one for that, even where the bucket
 * wants none: a handover needs the group), under the old descriptor
 * number, so that every record of it in the parent (core's listener, the
 * bucket's) holds the new one.  The old socket is kept, listening, on the
 * book's list of sockets to retire: once the steering programs choose the
 * new one (pf_guard_retiring()), it stops listening and its queue is
 * handed over. */
static apr_status_t replace_socket(pf_guard_book_t *book,
                                   pf_guard_record_t *rec, apr_socket_t *sd,
                                   apr_sockaddr_t *bind_addr,
                                   const pf_guard_want_t *want)
{
    apr_os_sock_t old_fd, new_fd, kept;
    pf_guard_retiring_t *retiring;
    apr_socket_t *fresh;
    apr_pool_t *tmp;
    apr_status_t rv;

    if (apr_os_sock_get(&old_fd, sd) != APR_SUCCESS || old_fd < 0) {
        return APR_EBADF;
    }
#ifdef SO_REUSEPORT
    set_int_option(old_fd, SOL_SOCKET, SO_REUSEPORT, 1);
#endif
    apr_pool_create(&tmp, book->parent);
    rv = pf_os_duplicate_listener(&fresh, sd, bind_addr,
                                  rec != NULL && rec->backlog > 0
                                      ? rec->backlog
                                      : DEFAULT_LISTENBACKLOG,
                                  rec != NULL ? &rec->options : NULL, tmp);
    kept = -1;
    if (rv == APR_SUCCESS) {
        apr_os_sock_get(&new_fd, fresh);
        if (want->nonblock) {
            fcntl(new_fd, F_SETFL, fcntl(new_fd, F_GETFL) | O_NONBLOCK);
        }
        kept = fcntl(old_fd, F_DUPFD_CLOEXEC, 0);
        if (kept < 0 || dup3(new_fd, old_fd, O_CLOEXEC) < 0) {
            rv = errno;
        }
    }
    if (rv == APR_SUCCESS) {
        retiring = apr_array_push(book->retiring);
        retiring->old_fd = kept;
        retiring->fresh = sd;
    }
    else if (kept >= 0) {
        close(kept);
    }
    /* Closes the new socket's first descriptor; the old number keeps it. */
    apr_pool_destroy(tmp);
    return rv;
}

/* Whether the record says the socket was put right in place before: a
 * second time, it is not trusted to stay right. */
static int put_right_before(pf_guard_record_t *rec, int fixed_in_place)
{
    if (rec == NULL || !fixed_in_place) {
        return 0;
    }
    return ++rec->repairs >= 2;
}

/*
 * Checks a bucket socket against its record and @a want (backlog from
 * the record), puts back what it can, and replaces the socket when it
 * cannot be put right in place, when it was put right in place once
 * before, or when @a want says so (another process holds it): a new
 * socket on @a bind_addr with the record's options and backlog takes its
 * descriptor number, and the old one waits on the book's list to stop
 * listening.
 */
static void pf_guard_socket(pf_guard_book_t *book, apr_socket_t *sd,
                            apr_sockaddr_t *bind_addr,
                            const pf_guard_want_t *want,
                            pf_guard_found_t *found)
{
    pf_guard_record_t *rec = book_find(book, sd);
    pf_guard_want_t mine = *want;
    int fd, replace, twice;

    memset(found, 0, sizeof(*found));
    mine.backlog = rec != NULL ? rec->backlog : 0;
    found->fixed = pf_guard_check_socket(sd, &mine, &found->failed);
    if (rec != NULL && apr_os_sock_get(&fd, sd) == APR_SUCCESS && fd >= 0) {
        pf_sockopts_repair(fd, &rec->options, &found->options_changed,
                           &found->options_failed);
    }
    if (!pf_sockopt_set_empty(&found->options_changed)) {
        found->fixed |= PF_GUARD_OPTIONS;
    }
    /* At a graceful stop (keep_filter) the socket is draining: it keeps
     * its place whatever is wrong with it. */
    if (want->keep_filter) {
        return;
    }
    twice = put_right_before(rec, found->fixed != 0);
    replace = want->replace || twice
              || (found->failed & (PF_GUARD_NOT_LISTENING
                                   | PF_GUARD_FILTER_LOCKED))
              || !pf_sockopt_set_empty(&found->options_failed)
              || ((found->fixed & PF_GUARD_NOT_LISTENING)
                  && !on_its_port(sd, bind_addr));
    if (!replace) {
        return;
    }
    if (replace_socket(book, rec, sd, bind_addr, &mine) == APR_SUCCESS) {
        book_rekey(book, rec, sd);
        if (rec != NULL) {
            rec->repairs = 0;
        }
        found->fixed |= found->failed | PF_GUARD_REPLACED
                        | (twice ? PF_GUARD_TWICE : 0);
        found->failed = 0;
        memset(&found->options_failed, 0, sizeof(found->options_failed));
    }
    else if (found->fixed & PF_GUARD_NOT_LISTENING) {
        /* Listening again, but on a port of its own choosing. */
        found->failed |= PF_GUARD_NOT_LISTENING;
    }
}

apr_status_t pf_guard_replace(pf_guard_book_t *book, apr_socket_t *sd,
                              apr_sockaddr_t *bind_addr, int nonblock)
{
    pf_guard_record_t *rec = book_find(book, sd);
    pf_guard_want_t want;
    apr_status_t rv;

    memset(&want, 0, sizeof(want));
    want.nonblock = nonblock;
    rv = replace_socket(book, rec, sd, bind_addr, &want);
    if (rv == APR_SUCCESS) {
        book_rekey(book, rec, sd);
        if (rec != NULL) {
            rec->repairs = 0;
        }
    }
    return rv;
}

int pf_guard_retiring(pf_guard_book_t *book, pf_guard_retiring_t **list)
{
    *list = (pf_guard_retiring_t *)book->retiring->elts;
    return book->retiring->nelts;
}

/* The owner a retired socket gets: the kernel lets a socket join a
 * reuseport group only where its owner is the group's, and this MPM's
 * sockets are root's. */
#define NOBODY_UID 65534
#define NOBODY_GID 65534

void pf_guard_disown(int fd)
{
    /* Whoever keeps a copy could otherwise listen on it again, setting
     * SO_REUSEPORT, and join the group (or, clearing the option after,
     * sit first in the kernel's list of the port's listeners, where a
     * socket without SO_REUSEPORT takes every handshake).  The owner
     * changes first: a holder that sees the socket stop listening and
     * listens again at once finds it owned by another user already. */
    if (fchown(fd, NOBODY_UID, NOBODY_GID) != 0) {
        /* Not root: nothing else can join a group of ours either. */
    }
#ifdef SO_REUSEPORT
    set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 0);
#endif
    shutdown(fd, SHUT_RDWR);
}

/* The old socket stops listening, if it still does (its queue goes where
 * the group's program chooses, or is reset), and is disowned. */
void pf_guard_retire(pf_guard_retiring_t *r)
{
    if (r->old_fd < 0) {
        return;
    }
    pf_guard_disown(r->old_fd);
    close(r->old_fd);
    r->old_fd = -1;
}

void pf_guard_retired_all(pf_guard_book_t *book)
{
    pf_guard_retiring_t *list;
    int i, n = pf_guard_retiring(book, &list);

    for (i = 0; i < n; i++) {
        pf_guard_retire(&list[i]);
    }
    apr_array_clear(book->retiring);
}

void pf_guard_close_retiring(pf_guard_book_t *book)
{
    pf_guard_retiring_t *list;
    int i, n = pf_guard_retiring(book, &list);

    for (i = 0; i < n; i++) {
        if (list[i].old_fd >= 0) {
            close(list[i].old_fd);
        }
    }
    apr_array_clear(book->retiring);
}

int pf_guard_bucket(pf_guard_book_t *book, const pf_bucket_t *bucket,
                    int reuseport, int keep_filter, const int *seen,
                    const int *replace, pf_guard_found_t *all)
{
    pf_guard_want_t want;
    pf_guard_found_t got;
    ap_listen_rec *lr;
    int i;

    memset(all, 0, sizeof(*all));
    memset(&want, 0, sizeof(want));
    want.backlog = 0;           /* each socket's own, from the book */
    want.nonblock = bucket->num_listeners > 1;
    want.reuseport = reuseport;
    want.keep_filter = keep_filter;
    for (lr = bucket->listeners, i = 0; lr; lr = lr->next, i++) {
        want.backlog_seen = seen != NULL ? seen[i] : 0;
        want.replace = replace != NULL ? replace[i] : 0;
        pf_guard_socket(book, lr->sd, lr->bind_addr, &want, &got);
        all->fixed |= got.fixed;
        all->failed |= got.failed;
        pf_sockopt_set_merge(&all->options_changed, &got.options_changed);
        pf_sockopt_set_merge(&all->options_failed, &got.options_failed);
    }
    /* A socket that stopped listening left its reuseport group's socket
     * map; listening again (in place or replaced), it must go back. */
    return ((all->fixed | all->failed)
            & (PF_GUARD_NOT_LISTENING | PF_GUARD_REPLACED))
           && !(all->failed & PF_GUARD_NOT_LISTENING);
}

char *pf_guard_describe(int bits, const char *options, char *buf,
                        apr_size_t len)
{
    static const struct {
        int bit;
        const char *words;
    } names[] = {
        { PF_GUARD_NOT_LISTENING, "stopped listening" },
        { PF_GUARD_BACKLOG, "backlog changed" },
        { PF_GUARD_NONBLOCK, "O_NONBLOCK changed" },
        { PF_GUARD_RCVTIMEO, "receive timeout set" },
        { PF_GUARD_FILTER, "socket filter attached" },
        { PF_GUARD_FILTER_LOCKED, "socket filters locked" },
        { PF_GUARD_REUSEPORT, "SO_REUSEPORT turned off" },
        { PF_GUARD_OPTIONS, "options connections inherit changed" },
        { PF_GUARD_TWICE, "put right before" },
        { PF_GUARD_HELD, "held by a process that is no child" },
        { PF_GUARD_REPLACED, "could not be put right in place and was "
                             "replaced" },
    };
    apr_size_t i, used = 0;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (bits & names[i].bit) {
            apr_snprintf(buf + used, len - used, "%s%s%s%s",
                         used ? ", " : "", names[i].words,
                         names[i].bit == PF_GUARD_OPTIONS && options
                                 && *options
                             ? ": "
                             : "",
                         names[i].bit == PF_GUARD_OPTIONS && options
                             ? options
                             : "");
            used += strlen(buf + used);
        }
    }
    return buf;
}
