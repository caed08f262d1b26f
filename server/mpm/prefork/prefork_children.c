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
 * The parent's table of its children, the one record every fork, stop,
 * reap and signal goes through: free slots, signals and the cycle's counts
 * (pf_children_observe()) come from this table, never from the
 * scoreboard's parent fields or the segment's slot records, which
 * publish_slot() writes from it and nothing reads back.  What a child
 * writes of itself (its worker status, accept counter, whether it waits
 * or lingers) is read once per cycle and only compared or added up.  The
 * table also keeps the SIGCHLD wake-up pipe, whose handler a pconf
 * cleanup removes before the module can be unloaded, and the ready
 * channel children report on once they have started (its socket calls
 * first, below).  Whom to fork or stop is for
 * prefork.c, the cycle's decision (carried out by pf_children_retire())
 * and the guard, which reaches this table through the calls
 * pf_children_guard_calls() hands it, to say.
 */

#include "apr.h"
#include "apr_atomic.h"
#include "apr_signal.h"
#include "apr_thread_proc.h"
#include "apr_time.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "ap_config.h"
#include "httpd.h"
#include "mpm_common.h"
#include "scoreboard.h"

#include "prefork_children.h"

/* ------------------------------------------------------------------ */
/* The ready channel                                                   */

/*
 * The channel children report ready on, once each, after child_init:
 * from then on an APEXIT_CHILDFATAL is a module or a script asking to
 * stop the server, not a child that cannot start.
 *
 * An AF_UNIX datagram socket pair kept for the life of the server: the
 * parent's end has SO_PASSCRED, so the kernel names each sender's pid
 * and nothing else in a report is read; every child shares the other
 * end, sends one report and closes it, so that nothing it runs later can
 * report.  A report must never be lost (the child's APEXIT_CHILDFATAL
 * would then stop the whole server): the children's end has room for
 * every child the server can have, twice over (past the system's
 * maximum where the parent may), and a child whose report does not fit
 * waits for room.  The calls here know nothing of slots: the table below
 * opens the channel, sizes it from ServerLimit, keeps its ends, reads it
 * whenever the parent waits and marks who reported.
 */

/* What one report costs the sending socket's buffer: the kernel charges
 * a datagram's whole allocation (about 770 bytes for five bytes of data
 * on Linux 6.x, where the default buffer of 208 KiB holds 277 reports);
 * a round kilobyte leaves a margin. */
#define REPORT_COST 1024

/* How long a waiting child sleeps in poll() between tries: the parent
 * reads reports whenever it waits for children. */
#define WAIT_SLICE_MS 100

/* The kernel doubles what is asked and reports the doubled size. */
static int buffer_room(int fd)
{
    int size = 0;
    socklen_t len = sizeof(size);

    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) != 0) {
        return 0;
    }
    return size / REPORT_COST;
}

/*
 * Opens the channel with room for @a reports reports waiting at once.
 * @param fds Set to the parent's end [0] and the children's end [1]
 *        (both close-on-exec)
 * @param room Set to how many reports the children's end holds, as the
 *        kernel granted it (fewer where the parent may not raise socket
 *        buffers past the system's maximum)
 */
static apr_status_t ready_open(int fds[2], int reports, int *room)
{
    int pair[2], on = 1, size;
    long long want = (long long)reports * REPORT_COST / 2;
    apr_status_t why;

    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) != 0) {
        return errno;
    }
    if (setsockopt(pair[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
        why = errno;            /* before close() may change it */
        close(pair[0]);
        close(pair[1]);
        return why;
    }
    /* Both ends block: every call on them says MSG_DONTWAIT, and a child
     * that finds no room waits in poll(). */
    size = want > INT_MAX / 2 ? INT_MAX / 2 : (int)want;
#ifdef SO_SNDBUFFORCE
    /* Past the system's maximum (net.core.wmem_max): the parent is root. */
    if (setsockopt(pair[1], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size))
        != 0)
#endif
    {
        setsockopt(pair[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    }
    fds[0] = pair[0];
    fds[1] = pair[1];
    *room = buffer_room(pair[1]);
    return APR_SUCCESS;
}

/*
 * Child: sends its one report on @a fd, waiting up to @a patience for
 * room when the channel is full.
 * @return APR_SUCCESS, APR_TIMEUP when there was no room in time, or the
 *         error that ended it
 */
static apr_status_t ready_report(int fd, apr_interval_time_t patience)
{
    apr_interval_time_t waited = 0;
    struct pollfd pfd;

    for (;;) {
        if (send(fd, "ready", 5, MSG_DONTWAIT | MSG_NOSIGNAL) == 5) {
            return APR_SUCCESS;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
            return errno;
        }
        if (waited >= patience) {
            return APR_TIMEUP;
        }
        pfd.fd = fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        (void)poll(&pfd, 1, WAIT_SLICE_MS);
        waited += apr_time_from_msec(WAIT_SLICE_MS);
    }
}

/*
 * Parent: reads the reports waiting on @a fd (at most @a most), calling
 * @a ready with each sender's pid, as the kernel vouches for it.
 * @return how many were read
 */
static int ready_read(int fd, int most, void (*ready)(void *baton, pid_t pid),
                      void *baton)
{
    int n;

    for (n = 0; fd >= 0 && n < most; n++) {
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(struct ucred))];
        } control;
        struct msghdr msg;
        struct cmsghdr *cmsg;
        struct iovec iov;
        struct ucred cred;
        char data[16];

        memset(&msg, 0, sizeof(msg));
        iov.iov_base = data;
        iov.iov_len = sizeof(data);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        if (recvmsg(fd, &msg, MSG_DONTWAIT) < 0) {
            break;
        }
        for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
             cmsg = CMSG_NXTHDR(&msg, cmsg)) {
            if (cmsg->cmsg_level == SOL_SOCKET
                && cmsg->cmsg_type == SCM_CREDENTIALS
                && cmsg->cmsg_len == CMSG_LEN(sizeof(cred))) {
                memcpy(&cred, CMSG_DATA(cmsg), sizeof(cred));
                ready(baton, cred.pid);
            }
        }
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* The table                                                           */

/* The write end of the wake-up pipe, for the SIGCHLD handler; -1 whenever
 * the handler is not installed. */
static volatile int wake_fd = -1;

pf_children_t *pf_children_create(apr_pool_t *p, int num_slots)
{
    pf_children_t *c = apr_pcalloc(p, sizeof(*c));

    c->slot = apr_pcalloc(p, sizeof(pf_child_t) * (apr_size_t)num_slots);
    c->num_slots = num_slots;
    c->wake_pipe[0] = c->wake_pipe[1] = -1;
    c->ready[0] = c->ready[1] = -1;
    return c;
}

/* The one writer of what readers see of a slot: the scoreboard's parent
 * record (for mod_status and httpd's helpers) and the segment's slot
 * record (for the bucket status module), both from the table.  Before a
 * fork (@a fresh) the counters the child will write start from zero too;
 * after it they are the child's own. */
static void publish_slot(pf_children_t *c, int slot, int fresh)
{
    const pf_child_t *child = &c->slot[slot];

    if (c->scoreboard != NULL) {
        process_score *ps = &c->scoreboard[slot];

        ps->pid = child->pid;
        ps->generation = child->generation;
        ps->quiescing = (char)child->stopping;
        ps->bucket = 0;         /* deprecated: always zero, as in httpd */
    }
    if (c->segment != NULL) {
        pfb_slot_fields_t *f = &c->segment[slot].f;

        if (fresh) {
            f->record = -1;
            apr_atomic_set64(&f->accepted, 0);
            f->waiting = 0;
            f->lingering = 0;
        }
        /* A child that has gone keeps its record, and so its count, for
         * readers until the bucket set moves the count into its bucket's
         * total (pf_segment_retire). */
        if (child->pid != 0) {
            f->record = child->record;
        }
        f->pid = (apr_int32_t)child->pid;
        f->generation = child->generation;
        f->stopping = child->stopping;
    }
}

static apr_status_t stop_publishing(void *data)
{
    pf_children_t *c = data;

    c->scoreboard = NULL;
    c->segment = NULL;
    return APR_SUCCESS;
}

static int slots_in_use(const pf_children_t *c)
{
    int slot;

    for (slot = c->used - 1; slot >= 0; slot--) {
        if (c->slot[slot].pid != 0) {
            break;
        }
    }
    return slot + 1;
}

void pf_children_publish_to(pf_children_t *c, process_score *parents,
                            pfb_slot_t *segment, int fresh, apr_pool_t *p)
{
    if (fresh) {
        /* A new scoreboard: only a child that would not die is left. */
        c->used = slots_in_use(c);
    }
    c->scoreboard = parents;
    c->segment = segment;
    apr_pool_cleanup_register(p, c, stop_publishing, apr_pool_cleanup_null);
    pf_children_publish(c);
}

int pf_children_free_slot(const pf_children_t *c, int limit)
{
    int slot;

    for (slot = 0; slot < limit && slot < c->num_slots; slot++) {
        if (c->slot[slot].pid == 0) {
            return slot;
        }
    }
    return -1;
}

/* The slot of our child @a pid, or -1. */
static int pf_children_find(const pf_children_t *c, pid_t pid)
{
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid == pid) {
            return slot;
        }
    }
    return -1;
}

void pf_children_forking(pf_children_t *c, int slot)
{
    if (slot >= 0 && slot < c->num_slots && c->slot[slot].pid == 0) {
        publish_slot(c, slot, 1);
    }
}

void pf_children_started(pf_children_t *c, int slot, pid_t pid,
                         ap_generation_t generation, int record)
{
    pf_child_t *child = &c->slot[slot];

    child->pid = pid;
    child->generation = generation;
    child->record = record;
    child->stopping = 0;
    child->started = apr_time_now();
    child->ready = 0;
    child->accepted_seen = 0;
    child->quiet_since = child->started;
    child->lingering_since = 0;
    if (slot + 1 > c->used) {
        c->used = slot + 1;
    }
    publish_slot(c, slot, 0);
}

/* Notes that child @a pid reported ready: its slot, or -1 when it is none
 * of ours. */
static int pf_children_mark_ready(pf_children_t *c, pid_t pid)
{
    int slot = pid > 0 ? pf_children_find(c, pid) : -1;

    if (slot >= 0) {
        c->slot[slot].ready = 1;
    }
    return slot;
}

int pf_children_tell_to_stop(pf_children_t *c, int slot)
{
    pf_child_t *child = &c->slot[slot];

    if (child->pid == 0 || child->stopping) {
        return 0;
    }
    child->stopping = 1;
    kill(child->pid, AP_SIG_GRACEFUL);
    publish_slot(c, slot, 0);
    return 1;
}

/* Frees a slot whose child has gone; @a was, if not NULL, gets what the
 * slot held. */
static void pf_children_forget(pf_children_t *c, int slot, pf_child_t *was)
{
    if (was != NULL) {
        *was = c->slot[slot];
    }
    memset(&c->slot[slot], 0, sizeof(c->slot[slot]));
    publish_slot(c, slot, 0);
}

int pf_children_live(const pf_children_t *c)
{
    int slot, n = 0;

    for (slot = 0; slot < c->used; slot++) {
        n += c->slot[slot].pid != 0;
    }
    return n;
}

void pf_children_retire(pf_children_t *c, pf_generation_t *gen)
{
    pf_observation_t *obs = &gen->obs;
    int b, slot, count;

    for (b = 0; b < gen->num_buckets; b++) {
        for (count = obs->action[b].kill; count > 0; count--) {
            slot = pf_children_coldest_idle(c, obs, b);
            /* Told to stop, it is no longer a candidate. */
            if (slot < 0 || !pf_children_tell_to_stop(c, slot)) {
                break;
            }
            obs->state[b].children--;
            obs->idle[b]--;
            obs->stopping[b]++;
        }
    }
}

static int holds(const void *table, pid_t pid)
{
    return pid > 0 && pf_children_find(table, pid) >= 0;
}

static void stop_bucket(void *table, const pf_generation_t *gen, int bucket)
{
    pf_children_t *c = table;
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid > 0
            && pf_generation_bucket_of(gen, c->slot[slot].record) == bucket) {
            pf_children_tell_to_stop(c, slot);
        }
    }
}

static void continue_all(const void *table)
{
    const pf_children_t *c = table;
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid > 0) {
            kill(c->slot[slot].pid, SIGCONT);
        }
    }
}

void pf_children_guard_calls(pf_children_t *c, pf_guard_children_t *out)
{
    out->table = c;
    out->holds = holds;
    out->continue_all = continue_all;
    out->stop_bucket = stop_bucket;
}

void pf_children_count_record(const pf_children_t *c, int record,
                              ap_generation_t gen, int *current, int *old)
{
    int slot;

    *current = *old = 0;
    for (slot = 0; slot < c->used; slot++) {
        const pf_child_t *child = &c->slot[slot];

        if (child->pid == 0 || child->record != record) {
            continue;
        }
        if (child->generation != gen) {
            *old += 1;
        }
        else if (!child->stopping) {
            *current += 1;
        }
    }
}

void pf_children_census(const pf_children_t *c, const pf_generation_t *gen,
                        int num_records, int *held, int *in_bucket)
{
    int slot, b;

    memset(held, 0, sizeof(int) * (apr_size_t)num_records);
    memset(in_bucket, 0, sizeof(int) * (apr_size_t)gen->num_buckets);
    for (slot = 0; slot < c->used; slot++) {
        const pf_child_t *child = &c->slot[slot];

        if (child->pid == 0 || child->record < 0
            || child->record >= num_records) {
            continue;
        }
        held[child->record]++;
        b = pf_generation_bucket_of(gen, child->record);
        if (!child->stopping && b >= 0) {
            in_bucket[b]++;
        }
    }
}

int pf_children_count_live(const pf_children_t *c, const pf_generation_t *gen,
                           ap_generation_t number, int *live)
{
    int slot, b, occupied = 0;

    memset(live, 0, sizeof(int) * (apr_size_t)gen->num_buckets);
    for (slot = 0; slot < c->used; slot++) {
        const pf_child_t *child = &c->slot[slot];

        if (child->pid == 0) {
            continue;
        }
        occupied++;
        b = pf_generation_bucket_of(gen, child->record);
        if (b >= 0 && !child->stopping && child->generation == number) {
            live[b]++;
        }
    }
    return occupied;
}

static void start_observing(const pf_generation_t *gen, pf_observation_t *obs)
{
    int b;

    obs->occupied = 0;
    for (b = 0; b < gen->num_buckets; b++) {
        obs->state[b].children = obs->state[b].idle = 0;
        obs->state[b].queued = obs->queued[b];
        obs->idle[b] = obs->busy[b] = obs->starting[b] = 0;
        obs->stopping[b] = obs->old_generation[b] = 0;
        obs->idle_head[b] = -1;
        obs->newest_lived[b] = 0;
        obs->waiting[b] = 0;
        obs->accepted[b] = 0;
    }
}

/* What the child of @a slot, of bucket @a b, wrote in its segment slot:
 * each field read once, only added up, compared with what the parent saw
 * before, or tested for zero.  @return 1 if it says it lingers, and has
 * not said so for longer than httpd lingers. */
static int note_written(const pf_children_t *c, int slot, pf_child_t *child,
                        const pf_generation_t *gen, int b,
                        pf_observation_t *obs)
{
    pfb_slot_fields_t *f;
    apr_uint64_t accepted;
    apr_int32_t lingering;

    if (c->segment == NULL) {
        return 0;
    }
    f = &c->segment[slot].f;
    accepted = apr_atomic_read64(&f->accepted);
    obs->accepted[b] = pfb_add_saturated(obs->accepted[b], accepted);
    if (accepted != child->accepted_seen) {
        child->accepted_seen = accepted;
        child->quiet_since = obs->when;
    }
    /* Only a child forked in the numbering in force counts itself idle
     * under its bucket's number there. */
    if (child->generation >= gen->layout && f->waiting != 0) {
        obs->waiting[b]++;
    }
    lingering = f->lingering;       /* read once */
    if (lingering == 0) {
        child->lingering_since = 0;
        return 0;
    }
    if (child->lingering_since == 0) {
        child->lingering_since = obs->when;
    }
    return pf_children_lingering_counts(1, child->lingering_since, obs->when);
}

int pf_children_lingering_counts(int marked, apr_time_t since,
                                 apr_time_t now)
{
    return marked && now - since <= PF_LINGERING_HINT_BOUND;
}

void pf_children_observe(pf_children_t *c, const pf_generation_t *gen,
                         ap_generation_t number, worker_score **servers,
                         pf_observation_t *obs)
{
    apr_time_t lived_by = obs->when - PF_RESPAWN_YOUNG_US;
    int slot, b, status, lingering;

    start_observing(gen, obs);
    for (slot = 0; slot < c->used; slot++) {
        pf_child_t *child = &c->slot[slot];

        if (child->pid == 0) {
            continue;
        }
        obs->occupied++;
        b = pf_generation_bucket_of(gen, child->record);
        if (b < 0) {
            continue;
        }
        lingering = note_written(c, slot, child, gen, b, obs);
        if (child->generation != number || child->stopping) {
            obs->old_generation[b] += child->generation != number;
            obs->stopping[b]++;
            continue;
        }
        obs->state[b].children++;
        if (child->started <= lived_by
            && child->started > obs->newest_lived[b]) {
            obs->newest_lived[b] = child->started;
        }
        /* Written by the child: only ever compared with constants. */
        status = servers[slot][0].status;
        if (status == SERVER_STARTING) {
            obs->starting[b]++;
            obs->state[b].idle++;
        }
        else if (status == SERVER_READY) {
            obs->idle[b]++;
            obs->state[b].idle++;
            /* A child whose lingering thread still reads closed
             * connections accepts like any idle one, but retiring it
             * would make it wait for them while its slot stays taken. */
            if (!lingering) {
                /* Slots go up: each goes first, so the highest leads. */
                obs->idle_next[slot] = obs->idle_head[b];
                obs->idle_head[b] = slot;
            }
        }
        else {
            obs->busy[b]++;
        }
    }
}

int pf_children_coldest_idle(const pf_children_t *c,
                             const pf_observation_t *obs, int b)
{
    int slot, coldest = -1, steps = 0;

    for (slot = obs->idle_head[b]; slot >= 0 && slot < c->used
                                   && steps < c->used;
         slot = obs->idle_next[slot], steps++) {
        if (c->slot[slot].pid == 0 || c->slot[slot].stopping) {
            continue;
        }
        /* Strictly older: of equals, the first (the highest slot). */
        if (coldest < 0
            || c->slot[slot].quiet_since < c->slot[coldest].quiet_since) {
            coldest = slot;
        }
    }
    return coldest;
}

int pf_children_stop(pf_children_t *c, ap_generation_t number, int everyone)
{
    int slot, told = 0;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid != 0
            && (everyone || c->slot[slot].generation != number)) {
            told += pf_children_tell_to_stop(c, slot);
        }
    }
    return told;
}

void pf_children_reap(pf_children_t *c, pf_child_gone_fn *gone, void *baton)
{
    pf_child_exit_t how;
    apr_status_t rv;
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid == 0) {
            continue;
        }
        memset(&how, 0, sizeof(how));
        how.proc.pid = c->slot[slot].pid;
        rv = apr_proc_wait(&how.proc, &how.status, &how.why, APR_NOWAIT);
        if (rv == APR_CHILD_NOTDONE) {
            continue;
        }
        how.waited = rv == APR_CHILD_DONE;
        how.slot = slot;
        pf_children_forget(c, slot, &how.child);
        gone(baton, &how);
    }
}

void pf_children_reclaim(pf_children_t *c, int terminate,
                         pf_child_gone_fn *gone, pf_reclaim_step_fn *step,
                         void *baton)
{
    static const struct {
        int at_sec;
        int sig;
    } steps[] = { { 3, SIGTERM }, { 5, SIGTERM }, { 7, SIGTERM },
                  { 9, SIGKILL }, { 10, 0 } };
    apr_time_t started = apr_time_now(), progress = started;
    apr_interval_time_t wait = apr_time_from_msec(16);
    int slot, next = 0, sig = terminate ? SIGTERM : 0, live, last_live;

    last_live = pf_children_live(c);
    for (;;) {
        for (slot = 0; sig && slot < c->used; slot++) {
            if (c->slot[slot].pid != 0) {
                kill(c->slot[slot].pid, sig);
            }
        }
        sig = 0;
        pf_children_reap(c, gone, baton);
#if APR_HAS_OTHER_CHILD
        apr_proc_other_child_refresh_all(APR_OC_REASON_RESTART);
#endif
        if ((live = pf_children_live(c)) == 0) {
            return;
        }
        if (live < last_live) {
            /* Children are leaving, only slowly (a loaded host, a big
             * pool, modules that take long to unload): the escalation
             * counts from the last exit, up to a minute in all. */
            last_live = live;
            if (apr_time_now() - started < apr_time_from_sec(60)) {
                progress = apr_time_now();
            }
        }
        /* Each step is decided after a reap, so that a child the last
         * signal ended is not counted as one that would not go. */
        if (apr_time_now() - progress
            >= apr_time_from_sec(steps[next].at_sec)) {
            sig = steps[next++].sig;
            step(baton, live, sig);
            if (sig == 0) {
                return;
            }
            continue;
        }
        apr_sleep(wait);
        wait = wait * 4 > apr_time_from_sec(1) ? apr_time_from_sec(1)
                                               : wait * 4;
    }
}

void pf_children_publish(pf_children_t *c)
{
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        publish_slot(c, slot, 0);
    }
}

/* ------------------------------------------------------------------ */
/* Waiting for children                                                */

/* A child's exit must wake the parent at once: under MaxRequestWorkers a
 * graceful restart can only start a new child when an old one leaves, and
 * until then its bucket may have nobody accepting.  httpd's
 * ap_wait_or_timeout() checks for exited children and then sleeps a
 * second, and a SIGCHLD that lands between the two is lost for that
 * second.  So the handler writes a byte to a pipe and the parent sleeps in
 * poll() on it: an exit before the sleep leaves the byte there and the
 * poll returns at once.  Writing to a pipe is more than setting a flag,
 * and async-signal-safe. */
static void wake_on_child_exit(int sig)
{
    int saved_errno = errno;
    int fd = wake_fd;
    ssize_t ignored;

    (void)sig;
    if (fd >= 0) {
        ignored = write(fd, "", 1);     /* full pipe: already awake */
        (void)ignored;
    }
    errno = saved_errno;
}

/* Runs when the configuration pool is cleared at a restart, before the
 * module's text is unmapped: a SIGCHLD that arrived while the
 * configuration is read again would otherwise jump into code that is
 * gone. */
static apr_status_t restore_sigchld(void *data)
{
    (void)data;
    wake_fd = -1;
    apr_signal(SIGCHLD, SIG_DFL);
    return APR_SUCCESS;
}

apr_status_t pf_children_open(pf_children_t *c, apr_pool_t *p, int *wanted,
                              int *room)
{
    struct sigaction sa;
    int fds[2], i;

    /* One pipe for the life of the server, in the table: a module loaded
     * again must not open another. */
    if (c->wake_pipe[0] < 0 && pipe(fds) == 0) {
        for (i = 0; i < 2; i++) {
            fcntl(fds[i], F_SETFL, O_NONBLOCK);
            fcntl(fds[i], F_SETFD, FD_CLOEXEC);
            c->wake_pipe[i] = fds[i];
        }
    }
    wake_fd = c->wake_pipe[1];
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: other code in the parent (monitor hooks, piped logs)
     * does not expect EINTR; poll() returns early on a signal anyway. */
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sa.sa_handler = wake_on_child_exit;
    sigaction(SIGCHLD, &sa, NULL);
    apr_pool_cleanup_register(p, NULL, restore_sigchld,
                              apr_pool_cleanup_null);

    *wanted = 2 * c->num_slots + 64;
    *room = -1;
    if (c->ready[0] >= 0) {
        return APR_SUCCESS;
    }
    return ready_open(c->ready, *wanted, room);
}

static void note_ready(void *baton, pid_t pid)
{
    pf_children_mark_ready(baton, pid);
}

/* The children's ready reports: each names its sender's pid, as the
 * kernel vouches, and nothing else is read from it.  A pid that is none
 * of our children is ignored. */
static void read_ready_reports(pf_children_t *c)
{
    ready_read(c->ready[0], 1024, note_ready, c);
}

int pf_children_wait(pf_children_t *c, int wait_ms, pf_child_exit_t *how,
                     apr_pool_t *p)
{
    struct pollfd pfd[2];
    char drain[64];
    apr_status_t rv;

    memset(how, 0, sizeof(*how));
    rv = apr_proc_wait_all_procs(&how->proc, &how->status, &how->why,
                                 APR_NOWAIT, p);
    if (APR_STATUS_IS_CHILD_DONE(rv)) {
        /* A report sent just before the child died is in the queue now. */
        read_ready_reports(c);
        how->waited = 1;
        how->slot = pf_children_find(c, how->proc.pid);
        if (how->slot >= 0) {
            pf_children_forget(c, how->slot, &how->child);
        }
        return 1;
    }
    if (APR_STATUS_IS_EINTR(rv)) {
        return 0;
    }
    if (c->wake_pipe[0] < 0) {
        apr_sleep(apr_time_from_msec(wait_ms));
        return 0;
    }
    pfd[0].fd = c->wake_pipe[0];
    pfd[1].fd = c->ready[0];            /* -1: poll ignores it */
    pfd[0].events = pfd[1].events = POLLIN;
    pfd[0].revents = pfd[1].revents = 0;
    if (poll(pfd, 2, wait_ms) > 0) {
        while (read(c->wake_pipe[0], drain, sizeof(drain)) > 0) {
        }
        read_ready_reports(c);
    }
    return 0;
}

void pf_children_close_channels(pf_children_t *c, int all)
{
    int i;

    wake_fd = -1;
    for (i = 0; i < 2; i++) {
        if (c->wake_pipe[i] >= 0) {
            close(c->wake_pipe[i]);
            c->wake_pipe[i] = -1;
        }
    }
    for (i = 0; i < 1 + (all != 0); i++) {
        if (c->ready[i] >= 0) {
            close(c->ready[i]);
            c->ready[i] = -1;
        }
    }
}

apr_status_t pf_children_report_ready(pf_children_t *c)
{
    apr_status_t rv;

    if (c->ready[1] < 0) {
        return APR_SUCCESS;
    }
    rv = ready_report(c->ready[1], PF_READY_PATIENCE);
    close(c->ready[1]);
    c->ready[1] = -1;
    return rv;
}
