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
 * The lingering close's decision, and the thread that lingers for a child
 * (see prefork_linger.h for why).
 *
 * Who owns a lingering socket: the child that served it, always.  The
 * alternatives were worse for this MPM:
 * - polling the lingering sockets together with the listener puts the
 *   listener back on the child's poll (every poller woken per connection,
 *   the wait-queue walk that this MPM removed);
 * - a timer signal to interrupt accept() interrupts module code too;
 * - a non-blocking accept() would change the listener's file status flags
 *   for every sibling that shares it;
 * - another process (the parent, or a helper it supervises) would take
 *   descriptors from children over SCM_RIGHTS, and the root parent must
 *   not trust what a child sends.
 * A thread blocked in epoll_wait() on the lingering sockets only, with
 * every signal blocked, costs no CPU while nothing lingers.  It touches
 * nothing of httpd: only these descriptors and this file's state, which
 * is static so that no pool's destruction frees it under the thread when
 * the child exits.
 */

#include "ap_config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#ifdef __linux__
#include <linux/sockios.h>
#include <sys/epoll.h>
#endif

#include "prefork_linger.h"

/* Bytes read and discarded per read; httpd reads 512 at a time. */
#define DRAIN_CHUNK             4096
/* Reads per readiness event, so one talkative client cannot keep the
 * thread from the others' (epoll is level-triggered: it comes back). */
#define DRAIN_READS_PER_EVENT   16
/* The lingering thread's stack: epoll_wait and one read buffer. */
#define THREAD_STACK            (64 * 1024)
/* What the thread waits for on a lingering socket: the client's bytes,
 * its end of file, an error. */
#define LINGER_EVENTS           (EPOLLIN | EPOLLRDHUP)

pf_linger_action_e pf_linger_decide(const pf_linger_exchange_t *x)
{
    switch (x->input) {
    case PF_READ_EOF:
        /* The client can send nothing more, and closing a socket whose
         * receive queue is empty sends FIN, never RST: the kernel goes on
         * delivering what is unsent. */
    case PF_READ_ERROR:
        /* Reset or failed already: nothing left to protect. */
        return PF_LINGER_CLOSE_NOW;
    case PF_READ_DATA:
        /* The client is still sending: more may be on its way, and any
         * of it that arrives after close() gets RST. */
        return PF_LINGER_KEEP;
    case PF_READ_NOTHING:
    default:
        break;
    }
    /* Nothing waits now, but a body not read to its end or a client that
     * pipelines has more on its way; only a complete exchange leaves the
     * client nothing to send. */
    return x->body_unread || x->pipelined ? PF_LINGER_KEEP
                                          : PF_LINGER_IF_UNDELIVERED;
}

int pf_linger_delivered(int fd)
{
#ifdef SIOCOUTQ
    int outq = 0;

    /* The FIN takes one sequence number after the data: at most 1 left
     * means the client acknowledged every response byte. */
    return ioctl(fd, SIOCOUTQ, &outq) == 0 && outq <= 1;
#else
    (void)fd;
    return 0;
#endif
}

/*
 * When httpd's lingering read gives up on a socket (usec, the clock of
 * @a t): 2 s after the start or the last bytes, and at most 30 s (2 s with
 * the note) after the first bytes.  Pure.
 */
static apr_int64_t pf_linger_expiry(const pf_linger_times_t *t)
{
    apr_int64_t quiet_from = t->last_data > t->started ? t->last_data
                                                       : t->started;
    apr_int64_t expiry = quiet_from + PF_LINGER_QUIET_USEC;
    apr_int64_t cap;

    if (t->first_data > 0) {
        cap = t->first_data + (t->short_linger ? PF_LINGER_SHORT_USEC
                                               : PF_LINGER_MAX_USEC);
        if (cap < expiry) {
            expiry = cap;
        }
    }
    return expiry;
}

/* The monotonic clock the lingering times use (usec). */
static apr_int64_t pf_linger_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (apr_int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One read of what the client sent, discarded. */
static pf_linger_read_e read_discard(int fd)
{
    char buf[DRAIN_CHUNK];
    ssize_t n;

    do {
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        return PF_READ_DATA;
    }
    if (n == 0) {
        return PF_READ_EOF;
    }
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? PF_READ_NOTHING
                                                     : PF_READ_ERROR;
}

void pf_linger_here(int fd, int short_linger, volatile sig_atomic_t *stop)
{
    pf_linger_times_t t;
    struct pollfd pfd;
    apr_int64_t now, expiry;
    int rc;

    memset(&t, 0, sizeof(t));
    t.started = pf_linger_now();
    t.short_linger = short_linger;
    for (;;) {
        now = pf_linger_now();
        expiry = pf_linger_expiry(&t);
        if (now >= expiry) {
            return;
        }
        pfd.fd = fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        rc = poll(&pfd, 1, (int)((expiry - now + 999) / 1000));
        if (rc < 0 && (errno != EINTR || *stop)) {
            return;
        }
        if (rc <= 0) {
            continue;
        }
        switch (read_discard(fd)) {
        case PF_READ_DATA:
            now = pf_linger_now();
            if (t.first_data == 0) {
                t.first_data = now;
            }
            t.last_data = now;
            break;
        case PF_READ_NOTHING:
            break;
        default:
            return;
        }
    }
}

#ifdef __linux__

typedef struct {
    int in_use;
    int fd;
    pf_linger_times_t times;
} linger_slot_t;

/* The child's lingering state.  One process, one set: a fork() gives the
 * new process a copy with no thread, which it never uses (the parent
 * forks before any child lingers). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t slot_freed;  /* for pf_linger_finish */
    int started;                /* 1: thread running; -1: failed */
    apr_status_t start_error;
    int epfd;
    int sleeping_unbounded;     /* the thread waits with no timeout */
    int used;
    volatile apr_int32_t *published;    /* where used is shown, or NULL */
    linger_slot_t slot[PF_LINGER_SLOTS];
} lingerer = { .lock = PTHREAD_MUTEX_INITIALIZER,
                .slot_freed = PTHREAD_COND_INITIALIZER };

/* With the lock held. */
static void publish_used(void)
{
    if (lingerer.published != NULL) {
        *lingerer.published = lingerer.used;
    }
}

/* With the lock held. */
static void release_slot(int i)
{
    linger_slot_t *s = &lingerer.slot[i];

    /* Removed explicitly: a process forked from the child before exec
     * shares the socket, and epoll would keep reporting a closed
     * descriptor whose file is still open elsewhere. */
    epoll_ctl(lingerer.epfd, EPOLL_CTL_DEL, s->fd, NULL);
    close(s->fd);
    s->in_use = 0;
    s->fd = -1;
    lingerer.used--;
    publish_used();
    pthread_cond_broadcast(&lingerer.slot_freed);
}

/* With the lock held: reads what a readable socket has; closes it at the
 * client's end of file or an error. */
static void serve_slot(int i, apr_int64_t now)
{
    linger_slot_t *s = &lingerer.slot[i];
    int reads;

    for (reads = 0; reads < DRAIN_READS_PER_EVENT; reads++) {
        switch (read_discard(s->fd)) {
        case PF_READ_DATA:
            if (s->times.first_data == 0) {
                s->times.first_data = now;
            }
            s->times.last_data = now;
            continue;
        case PF_READ_NOTHING:
            return;
        default:
            release_slot(i);
            return;
        }
    }
}

/* With the lock held: closes expired sockets; returns the time to the
 * next expiry in ms, -1 for none. */
static int expire_slots(apr_int64_t now)
{
    apr_int64_t next = 0, expiry;
    int i;

    for (i = 0; i < PF_LINGER_SLOTS; i++) {
        if (!lingerer.slot[i].in_use) {
            continue;
        }
        expiry = pf_linger_expiry(&lingerer.slot[i].times);
        if (now >= expiry) {
            release_slot(i);
        }
        else if (next == 0 || expiry < next) {
            next = expiry;
        }
    }
    return next ? (int)((next - now + 999) / 1000) : -1;
}

/* With the lock held: a socket registered with EPOLLOUT to wake the
 * thread (pf_linger_hand_off) is watched for the client only from now
 * on; a socket shut down for writing reports EPOLLOUT for good. */
static void stop_waking(int i)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = LINGER_EVENTS;
    ev.data.u64 = (apr_uint64_t)i;
    if (epoll_ctl(lingerer.epfd, EPOLL_CTL_MOD, lingerer.slot[i].fd, &ev)) {
        /* Not watched at all then: its expiry closes it. */
        epoll_ctl(lingerer.epfd, EPOLL_CTL_DEL, lingerer.slot[i].fd, NULL);
    }
}

static void *linger_thread(void *arg)
{
    struct epoll_event events[16];
    int n, i, timeout;

    (void)arg;
    pthread_mutex_lock(&lingerer.lock);
    for (;;) {
        timeout = expire_slots(pf_linger_now());
        lingerer.sleeping_unbounded = timeout < 0;
        pthread_mutex_unlock(&lingerer.lock);
        n = epoll_wait(lingerer.epfd, events, 16, timeout);
        pthread_mutex_lock(&lingerer.lock);
        lingerer.sleeping_unbounded = 0;
        for (i = 0; i < n; i++) {
            if (events[i].data.u64 < PF_LINGER_SLOTS
                && lingerer.slot[events[i].data.u64].in_use) {
                if (events[i].events & EPOLLOUT) {
                    stop_waking((int)events[i].data.u64);
                }
                serve_slot((int)events[i].data.u64, pf_linger_now());
            }
        }
    }
    return NULL;
}

/* With the lock held. */
static apr_status_t start_thread(void)
{
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, saved;
    int rc, i;

    lingerer.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (lingerer.epfd < 0) {
        return errno;
    }
    for (i = 0; i < PF_LINGER_SLOTS; i++) {
        lingerer.slot[i].fd = -1;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, THREAD_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Every signal stays with the child's main thread: httpd's handlers
     * (stop, graceful) expect to interrupt it, not this one. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    rc = pthread_create(&thread, &attr, linger_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(lingerer.epfd);
        return rc;
    }
    return APR_SUCCESS;
}

/* With the lock held: the thread, started once. */
static apr_status_t start_once(void)
{
    if (lingerer.started == 0) {
        lingerer.start_error = start_thread();
        lingerer.started = lingerer.start_error == APR_SUCCESS ? 1 : -1;
    }
    return lingerer.started > 0 ? APR_SUCCESS : lingerer.start_error;
}

apr_status_t pf_linger_start(void)
{
    apr_status_t rv;

    pthread_mutex_lock(&lingerer.lock);
    rv = start_once();
    pthread_mutex_unlock(&lingerer.lock);
    return rv;
}

void pf_linger_count_in(volatile apr_int32_t *count)
{
    pthread_mutex_lock(&lingerer.lock);
    lingerer.published = count;
    publish_used();
    pthread_mutex_unlock(&lingerer.lock);
}

apr_status_t pf_linger_hand_off(int fd, int short_linger)
{
    struct epoll_event ev;
    apr_status_t rv = APR_SUCCESS;
    int i;

    pthread_mutex_lock(&lingerer.lock);
    if (start_once() != APR_SUCCESS) {
        rv = lingerer.start_error;
        goto out;
    }
    for (i = 0; i < PF_LINGER_SLOTS && lingerer.slot[i].in_use; i++) {
        continue;
    }
    if (i == PF_LINGER_SLOTS) {
        rv = APR_EAGAIN;
        goto out;
    }
    memset(&ev, 0, sizeof(ev));
    /* A thread waiting with no timeout must learn of the new expiry: the
     * socket, shut down for writing, is writable at once, and EPOLLOUT
     * wakes it (no eventfd to write).  One waiting with a timeout wakes
     * early enough, since no socket already held expires later than this
     * new one, and is not woken. */
    ev.events = LINGER_EVENTS
                | (lingerer.sleeping_unbounded ? (apr_uint32_t)EPOLLOUT : 0);
    ev.data.u64 = (apr_uint64_t)i;
    if (epoll_ctl(lingerer.epfd, EPOLL_CTL_ADD, fd, &ev)) {
        rv = errno;
        goto out;
    }
    memset(&lingerer.slot[i], 0, sizeof(lingerer.slot[i]));
    lingerer.slot[i].in_use = 1;
    lingerer.slot[i].fd = fd;
    lingerer.slot[i].times.started = pf_linger_now();
    lingerer.slot[i].times.short_linger = short_linger;
    lingerer.used++;
    publish_used();
out:
    pthread_mutex_unlock(&lingerer.lock);
    return rv;
}

void pf_linger_finish(apr_int64_t max_wait)
{
    apr_int64_t deadline = pf_linger_now() + max_wait, left;
    struct timespec ts;
    int i;

    pthread_mutex_lock(&lingerer.lock);
    if (lingerer.started <= 0) {
        pthread_mutex_unlock(&lingerer.lock);
        return;
    }
    while (lingerer.used > 0 && (left = deadline - pf_linger_now()) > 0) {
        /* The condition variable uses the realtime clock; only the
         * interval matters, and pf_linger_now() bounds the loop. */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(left / 1000000);
        ts.tv_nsec += (long)(left % 1000000) * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&lingerer.slot_freed, &lingerer.lock, &ts);
    }
    for (i = 0; i < PF_LINGER_SLOTS; i++) {
        if (lingerer.slot[i].in_use) {
            release_slot(i);
        }
    }
    pthread_mutex_unlock(&lingerer.lock);
}

#else /* !__linux__ */

apr_status_t pf_linger_start(void)
{
    return APR_ENOTIMPL;
}

void pf_linger_count_in(volatile apr_int32_t *count)
{
    (void)count;
}

apr_status_t pf_linger_hand_off(int fd, int short_linger)
{
    (void)fd;
    (void)short_linger;
    return APR_ENOTIMPL;
}

void pf_linger_finish(apr_int64_t max_wait)
{
    (void)max_wait;
}

#endif /* __linux__ */
