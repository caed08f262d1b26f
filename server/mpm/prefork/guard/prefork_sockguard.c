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
 * The guard of the generation's bucket sockets as a whole, made and called
 * by prefork.c, the sockets noted in it by the bucket set: when to check
 * them (every bucket each maintenance cycle, one bucket when a child of it
 * exits), the look for other holders before a cycle's check (through
 * /proc, below), replacing every socket at a restart where the kernel can
 * hand their queues over, retiring replaced sockets once the new ones are
 * in steering's map, and refusing new handshakes at a graceful stop.  The
 * children of a bucket whose socket was replaced are told to go, since
 * they hold the old one.  The log lines are here, once per bucket and
 * episode; one socket's check is prefork_guard.c's, and the handover
 * steering's.  Steering and the
 * children's table are reached through the calls they hand the guard
 * (pf_guard_steering_t, pf_guard_children_t), so this room names neither.
 */

#include "apr.h"
#include "apr_portable.h"
#include "apr_strings.h"

#define APR_WANT_STRFUNC
#include "apr_want.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "httpd.h"
#include "http_log.h"
#include "ap_listen.h"

#include "pfb_log.h"
#include "prefork_buckets.h"
#include "prefork_os.h"
#include "prefork_seccomp.h"
#include "prefork_sockguard.h"

APLOG_USE_MODULE(mpm_prefork);

/* ------------------------------------------------------------------ */
/* Other holders: the look through /proc/PID/fd                        */

/*
 * A child can leave a copy of its bucket socket with a process that
 * outlives it (a setsid() grandchild, a process it passed the socket to):
 * the parent's repairs in place lose to such a holder, which can set an
 * option again a millisecond later, accept connections, or keep the port
 * after the server stops.  Found, the socket is replaced (the holder keeps
 * a socket that no longer listens).
 *
 * A look reads every process's descriptor table, which costs CPU in
 * proportion to the processes and descriptors of the host: the looks are
 * spaced so that they take at most HOLDERS_BUDGET_PPM of one CPU
 * (holders_next_look()), every maintenance cycle on a host with a few
 * hundred processes, less often on one with tens of thousands.  A
 * process is taken for a holder only when two looks in a row find it
 * holding the socket: a child's process between fork() and exec() holds
 * it for that moment, legitimately (the descriptor is close-on-exec), and
 * the second look, at the next cycle, checks just the suspects.
 *
 * The look decides and logs nothing: the guard below asks, replaces the
 * sockets and names the holders.
 */

/* The share of one CPU the looks may take, in parts per million. */
#define HOLDERS_BUDGET_PPM 5000

/* A process that holds a socket looked for. */
typedef struct {
    pid_t pid;
    apr_ino_t inode;            /* the socket it holds */
} holder_t;

/* Whether @a pid is the parent or a live child (not a holder). */
typedef int holders_ours_fn(void *baton, pid_t pid);

/* The suspects a look remembers for the next: more would mean a host
 * where many processes hold the server's sockets, and each is found
 * again at a later look. */
#define MAX_SUSPECTS 64

typedef struct {
    apr_time_t next_look;       /* when a whole look may start */
    holder_t suspect[MAX_SUSPECTS];
    int num_suspects;
} holders_t;

static holders_t *holders_create(apr_pool_t *pool)
{
    return apr_pcalloc(pool, sizeof(holders_t));
}

/* When the next whole look may start: a look that took @a cost_usec of
 * CPU is followed by enough time for the looks to take at most
 * HOLDERS_BUDGET_PPM of one CPU, and never sooner than the next cycle. */
static apr_time_t holders_next_look(apr_time_t started,
                                    apr_int64_t cost_usec, apr_time_t cycle)
{
    apr_int64_t spacing = cost_usec > 0
                              ? cost_usec * (1000000 / HOLDERS_BUDGET_PPM)
                              : 0;

    /* Half a cycle: the cycles' own timing varies, and the look should
     * not skip one where it can afford it. */
    if (spacing < cycle / 2) {
        spacing = cycle / 2;
    }
    return started + spacing;
}

/* The CPU time this thread has used, in microseconds. */
static apr_int64_t cpu_usec(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (apr_int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int inode_wanted(const apr_ino_t *inodes, int n, apr_ino_t inode)
{
    int low = 0, high = n - 1, mid;

    while (low <= high) {
        mid = low + (high - low) / 2;
        if (inodes[mid] == inode) {
            return 1;
        }
        if (inodes[mid] < inode) {
            low = mid + 1;
        }
        else {
            high = mid - 1;
        }
    }
    return 0;
}

/* The sockets of @a inodes that process @a pid holds, into @a out (room
 * for @a room).  @return how many */
static int sockets_held(pid_t pid, const apr_ino_t *inodes, int n,
                        holder_t *out, int room)
{
    char path[64], target[64];
    struct dirent *entry;
    unsigned long long inode;
    ssize_t len;
    DIR *dir;
    int fd, found = 0;

    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return 0;               /* gone, or no descriptors to read */
    }
    dir = fdopendir(fd);
    if (dir == NULL) {
        close(fd);
        return 0;
    }
    while (found < room && (entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') {
            continue;
        }
        len = readlinkat(dirfd(dir), entry->d_name, target,
                         sizeof(target) - 1);
        if (len <= 0) {
            continue;
        }
        target[len] = '\0';
        if (sscanf(target, "socket:[%llu]", &inode) == 1
            && inode_wanted(inodes, n, (apr_ino_t)inode)) {
            out[found].pid = pid;
            out[found].inode = (apr_ino_t)inode;
            found++;
        }
    }
    closedir(dir);
    return found;
}

static int was_suspect(const holder_t *suspects, int n,
                       const holder_t *h)
{
    int i;

    for (i = 0; i < n; i++) {
        if (suspects[i].pid == h->pid && suspects[i].inode == h->inode) {
            return 1;
        }
    }
    return 0;
}

/* The suspects of the last look that still hold what they held. */
static int confirm_suspects(holders_t *h, const apr_ino_t *inodes, int n,
                            holder_t *found, int room)
{
    holder_t held[8];
    int i, j, k, confirmed = 0;

    for (i = 0; i < h->num_suspects && confirmed < room; i++) {
        k = sockets_held(h->suspect[i].pid, inodes, n, held, 8);
        for (j = 0; j < k && confirmed < room; j++) {
            if (held[j].inode == h->suspect[i].inode) {
                found[confirmed++] = held[j];
            }
        }
    }
    h->num_suspects = 0;
    return confirmed;
}

/* A whole look: every process but ours, its suspects noted for the next
 * call (those already confirmed are not suspected again). */
static void look_at_every_process(holders_t *h, const apr_ino_t *inodes,
                                  int n, holders_ours_fn *ours,
                                  void *baton, const holder_t *confirmed,
                                  int num_confirmed)
{
    holder_t held[8];
    struct dirent *entry;
    DIR *proc = opendir("/proc");
    long pid;
    int j, k;

    if (proc == NULL) {
        return;
    }
    while ((entry = readdir(proc)) != NULL
           && h->num_suspects < MAX_SUSPECTS) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') {
            continue;
        }
        pid = strtol(entry->d_name, NULL, 10);
        if (pid <= 0 || ours(baton, (pid_t)pid)) {
            continue;
        }
        k = sockets_held((pid_t)pid, inodes, n, held, 8);
        for (j = 0; j < k && h->num_suspects < MAX_SUSPECTS; j++) {
            if (!was_suspect(confirmed, num_confirmed, &held[j])) {
                h->suspect[h->num_suspects++] = held[j];
            }
        }
    }
    closedir(proc);
}

/* Looks for the holders of @a inodes (sorted ascending, @a n of them):
 * the whole of /proc when a look is due, otherwise only the processes the
 * last look suspected.  @a found is set to the holders that two looks in
 * a row found (room for @a room).  @return how many it set */
static int holders_look(holders_t *h, const apr_ino_t *inodes, int n,
                        holders_ours_fn *ours, void *baton, apr_time_t now,
                        holder_t *found, int room)
{
    apr_int64_t cpu;
    int confirmed;

    if (n < 1) {
        h->num_suspects = 0;
        return 0;
    }
    confirmed = confirm_suspects(h, inodes, n, found, room);
    if (now < h->next_look) {
        return confirmed;
    }
    cpu = cpu_usec();
    look_at_every_process(h, inodes, n, ours, baton, found, confirmed);
    h->next_look = holders_next_look(now, cpu_usec() - cpu,
                                        apr_time_from_sec(1));
    return confirmed;
}

/* The name of process @a pid (its comm), for the log; "?" if gone. */
static const char *holders_name(pid_t pid, char *buf, apr_size_t len)
{
    char path[64];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(buf, (int)len, f) == NULL) {
        apr_cpystrn(buf, "?", len);
    }
    if (f != NULL) {
        fclose(f);
    }
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    /* Its own choice of name: only printable ASCII reaches the log. */
    for (; n > 0; n--) {
        unsigned char c = (unsigned char)buf[n - 1];

        if (c < 0x20 || c > 0x7e) {
            buf[n - 1] = '?';
        }
    }
    return buf;
}

/* ------------------------------------------------------------------ */
/* The guard                                                           */

/* Holders one look reports at most; more wait for the next look. */
#define MAX_HOLDERS 32

struct pf_sockguard_s {
    apr_pool_t *pool;           /* outlives generations */
    pf_generation_t *gen;
    pf_guard_steering_t steer;  /* steering's maps and programs */
    pf_guard_book_t *book;      /* each socket as the parent opened it */
    pf_guard_children_t children; /* table NULL: none yet */
    holders_t *holders;

    /* Per bucket identity: what the log has said about its sockets in the
     * present episode, and of their options. */
    int num_records;
    int *logged;
    pf_sockopt_set_t *options_logged;

    /* Per socket of the generation, in bucket order: replace it; per
     * bucket: a socket of it was replaced this cycle.  Grow by doubling
     * to the most a generation had. */
    int *replace;
    int *replaced;
    apr_ino_t *inodes;
    apr_ino_t *sorted;
    int room;

    int can_hand_over;          /* -1: not found out yet */
    char hand_over_why[256];
    int kept_logged;            /* PFB00177, once for the server */
    int refusing_new;           /* a graceful stop's filter is on */
};

pf_sockguard_t *pf_sockguard_create(apr_pool_t *pool, int num_records,
                                    pf_generation_t *gen)
{
    pf_sockguard_t *g = apr_pcalloc(pool, sizeof(*g));

    g->pool = pool;
    g->gen = gen;
    g->book = pf_guard_book_create(pool);
    g->holders = holders_create(pool);
    g->num_records = num_records;
    g->logged = apr_pcalloc(pool, sizeof(int) * (apr_size_t)num_records);
    g->options_logged = apr_pcalloc(pool, sizeof(pf_sockopt_set_t)
                                              * (apr_size_t)num_records);
    g->can_hand_over = -1;
    return g;
}

void pf_sockguard_note_begin(pf_sockguard_t *g)
{
    pf_guard_book_begin(g->book);
}

const pf_guard_record_t *pf_sockguard_note(pf_sockguard_t *g,
                                           apr_socket_t *sd)
{
    return pf_guard_book_note(g->book, sd);
}

void pf_sockguard_note_end(pf_sockguard_t *g)
{
    pf_guard_book_end(g->book);
}

void pf_sockguard_set_calls(pf_sockguard_t *g,
                            const pf_guard_children_t *children,
                            const pf_guard_steering_t *steering)
{
    g->children = *children;
    g->steer = *steering;
}

static int guards_groups(const pf_sockguard_t *g)
{
    return g->steer.guards_groups(g->steer.steer, g->gen);
}

/* SO_REUSEPORT where buckets share a port; with one socket per Listen,
 * only where a steering program guards the group (choosing nothing
 * outside its map): otherwise nothing may join it. */
static int wants_reuseport(const pf_sockguard_t *g)
{
    return g->gen->plan.mode == PFB_MODE_REUSEPORT
           && (g->gen->plan.buckets_per_listen >= 2
               || guards_groups(g));
}

static int num_sockets(const pf_generation_t *gen)
{
    int b, n = 0;

    for (b = 0; b < gen->num_buckets; b++) {
        n += gen->bucket[b].num_listeners;
    }
    return n;
}

static void make_room(pf_sockguard_t *g, int n)
{
    int room = g->room > 0 ? g->room : 16;

    if (g->room >= n) {
        return;
    }
    while (room < n) {
        room *= 2;
    }
    g->replace = apr_pcalloc(g->pool, sizeof(int) * (apr_size_t)room);
    g->replaced = apr_pcalloc(g->pool, sizeof(int) * (apr_size_t)room);
    g->inodes = apr_pcalloc(g->pool, sizeof(apr_ino_t) * (apr_size_t)room);
    g->sorted = apr_pcalloc(g->pool, sizeof(apr_ino_t) * (apr_size_t)room);
    g->room = room;
}

/* ------------------------------------------------------------------ */
/* Other processes holding a socket                                    */

static int is_ours(void *baton, pid_t pid)
{
    const pf_sockguard_t *g = baton;

    return pid == getpid()
           || (g->children.table != NULL
               && g->children.holds(g->children.table, pid));
}

static int by_inode(const void *a, const void *b)
{
    apr_ino_t x = *(const apr_ino_t *)a, y = *(const apr_ino_t *)b;

    return x < y ? -1 : x > y;
}

/* Where socket @a k of the generation is: its bucket. */
static int bucket_of_socket(const pf_generation_t *gen, int k)
{
    int b;

    for (b = 0; b < gen->num_buckets; b++) {
        if (k < gen->bucket[b].num_listeners) {
            return b;
        }
        k -= gen->bucket[b].num_listeners;
    }
    return -1;
}

/* Marks for replacement every socket that a process neither the parent
 * nor a live child has held at two looks in a row, and says so. */
static void look_for_holders(pf_sockguard_t *g, int n, server_rec *s)
{
    holder_t found[MAX_HOLDERS];
    char name[64];
    ap_listen_rec *lr;
    apr_os_sock_t fd;
    struct stat st;
    int b, k = 0, i, j, num_found;

    for (b = 0; b < g->gen->num_buckets; b++) {
        for (lr = g->gen->bucket[b].listeners; lr && k < n; lr = lr->next) {
            g->inodes[k] = 0;
            if (apr_os_sock_get(&fd, lr->sd) == APR_SUCCESS && fd >= 0
                && fstat(fd, &st) == 0) {
                g->inodes[k] = (apr_ino_t)st.st_ino;
            }
            g->sorted[k] = g->inodes[k];
            k++;
        }
    }
    qsort(g->sorted, (size_t)k, sizeof(apr_ino_t), by_inode);
    num_found = holders_look(g->holders, g->sorted, k, is_ours, g,
                                apr_time_now(), found, MAX_HOLDERS);
    for (i = 0; i < num_found; i++) {
        for (j = 0; j < k && g->inodes[j] != found[i].inode; j++) {
        }
        if (j == k) {
            continue;
        }
        g->replace[j] = 1;
        b = bucket_of_socket(g->gen, j);
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00176) "bucket %d (%s): process %"
                     APR_PID_T_FMT " (%s), which is neither this server's "
                     "parent nor one of its children, holds its listening "
                     "socket; the socket is replaced by a new one, and the "
                     "process keeps one that no longer listens",
                     b, b >= 0 ? g->gen->bucket[b].address : "?",
                     found[i].pid,
                     holders_name(found[i].pid, name, sizeof(name)));
    }
}

/* ------------------------------------------------------------------ */
/* Checking                                                            */

/* Says once per bucket and episode what the parent found and put right,
 * or could not. */
static void log_found(pf_sockguard_t *g, int b, int found, int unfixed,
                      const pf_sockopt_set_t *options,
                      const pf_sockopt_set_t *options_left, server_rec *s)
{
    int r = g->gen->record[b];
    char what[1024], left[1024], names[768];

    if (r < 0 || r >= g->num_records
        || ((found & ~g->logged[r]) == 0
            && !pf_sockopt_set_news(options, &g->options_logged[r]))) {
        return;                 /* said once for this episode */
    }
    g->logged[r] |= found;
    pf_sockopt_set_merge(&g->options_logged[r], options);
    pf_sockopts_describe(options, names, sizeof(names));
    pf_guard_describe(found, names, what, sizeof(what));
    if (unfixed == 0 && pf_sockopt_set_empty(options_left)) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00060) "bucket %d (%s): a child changed the "
                     "listening socket it shares (%s); put back as the "
                     "parent had it", b, g->gen->bucket[b].address, what);
        return;
    }
    pf_sockopts_describe(options_left, names, sizeof(names));
    pf_guard_describe(unfixed | (pf_sockopt_set_empty(options_left)
                                     ? 0
                                     : PF_GUARD_OPTIONS),
                      names, left, sizeof(left));
    ap_log_error(APLOG_MARK, APLOG_ERR, 0, s,
                 PFBLOGNO(00061) "bucket %d (%s): a child changed the "
                 "listening socket it shares (%s); could not put back: %s; "
                 "the parent tries again at every maintenance cycle",
                 b, g->gen->bucket[b].address, what, left);
}

/* Checks bucket @a b's sockets (with @a seen, the queue limits the cycle
 * read, and @a replace, the holders found) and says what was found;
 * returns whether a socket listens again or was replaced. */
static int check_bucket(pf_sockguard_t *g, int b, const int *seen,
                        const int *replace, server_rec *s)
{
    int r = g->gen->record[b], relistened, held = 0, i;
    pf_guard_found_t all;

    for (i = 0; replace != NULL && i < g->gen->bucket[b].num_listeners;
         i++) {
        held |= replace[i];
    }
    relistened = pf_guard_bucket(g->book, &g->gen->bucket[b],
                                 wants_reuseport(g), g->refusing_new, seen,
                                 replace, &all);
    g->replaced[b] = (all.fixed & PF_GUARD_REPLACED) != 0;
    if (held) {
        /* Said by PFB00176; a change found as well is said below. */
        all.fixed &= ~PF_GUARD_REPLACED;
    }
    if (pf_sockopts_touch_file(&all.options_changed)
        && g->children.table != NULL) {
        /* The file's owner and signal made each connection signal the
         * children: those it stopped run again. */
        g->children.continue_all(g->children.table);
    }
    if ((all.fixed | all.failed) == 0) {
        if (!held && r >= 0 && r < g->num_records) {
            g->logged[r] = 0;
            memset(&g->options_logged[r], 0, sizeof(g->options_logged[r]));
        }
        return relistened;
    }
    log_found(g, b, all.fixed | all.failed, all.failed, &all.options_changed,
              &all.options_failed, s);
    return relistened;
}

/* Whether @a fd is a listening socket with connections in its queue
 * (TCP_INFO's tcpi_unacked, for a listener). */
static int has_queue(int fd)
{
#if defined(TCP_INFO) && defined(__linux__)
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    memset(&ti, 0, sizeof(ti));
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0
           && ti.tcpi_state == TCP_LISTEN && ti.tcpi_unacked > 0;
#else
    (void)fd;
    return 0;
#endif
}

/* The replaced sockets stop listening, once the new ones are where the
 * group's program chooses: through steering's map where its programs are
 * on the groups, else through a handover's program, which stays on a
 * group whose Listen has one socket, for the handshakes still in flight
 * on the old one. */
static void retire_replaced(pf_sockguard_t *g, server_rec *s)
{
    pf_guard_retiring_t *list;
    int i, n = pf_guard_retiring(g->book, &list), lost = 0, steered;
    int reuseport = wants_reuseport(g), none = 0;
    int one_per_listen = g->gen->plan.mode != PFB_MODE_REUSEPORT
                         || g->gen->plan.buckets_per_listen == 1;
    apr_os_sock_t fd;

    if (n == 0) {
        return;
    }
    steered = guards_groups(g);
    if (steered) {
        g->steer.refill(g->steer.steer, g->gen, s);
    }
    for (i = 0; i < n; i++) {
        if (steered ? !g->steer.hands_over(g->steer.steer)
                    : (g->can_hand_over != 1
                       || g->steer.handover(list[i].fresh, list[i].old_fd,
                                            one_per_listen)
                              != APR_SUCCESS)) {
            lost += has_queue(list[i].old_fd);
        }
        pf_guard_retire(&list[i]);
        if (!reuseport && apr_os_sock_get(&fd, list[i].fresh) == APR_SUCCESS
            && fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &none, sizeof(none));
        }
    }
    pf_guard_retired_all(g->book);
    if (lost > 0) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00179) "%d replaced listening socket(s) "
                     "stopped with connections queued that could not be "
                     "handed to their new sockets (%s); the kernel reset "
                     "them", lost,
                     g->can_hand_over == 1 ? "the handover failed"
                                           : g->hand_over_why);
    }
}

void pf_sockguard_check(pf_sockguard_t *g, int bucket,
                        const pf_observation_t *obs, server_rec *s)
{
    int b, k = 0, relistened = 0, n = num_sockets(g->gen);

    if (bucket >= g->gen->num_buckets) {
        return;
    }
    make_room(g, n > g->gen->num_buckets ? n : g->gen->num_buckets);
    memset(g->replace, 0, sizeof(int) * (apr_size_t)n);
    memset(g->replaced, 0, sizeof(int) * (apr_size_t)g->gen->num_buckets);
    if (bucket < 0 && !g->refusing_new) {
        look_for_holders(g, n, s);
    }
    for (b = 0; b < g->gen->num_buckets; b++) {
        if (bucket < 0 || b == bucket) {
            relistened |= check_bucket(g, b,
                                       obs ? &obs->socket_backlog[k] : NULL,
                                       &g->replace[k], s);
        }
        k += g->gen->bucket[b].num_listeners;
    }
    if (relistened) {
        /* A socket that stopped listening left steering's socket map, and
         * a new one is not in it yet: until it is under its bucket
         * number, the connections steered there go to the others. */
        g->steer.refill(g->steer.steer, g->gen, s);
    }
    /* The children of a bucket whose socket was replaced hold the old
     * one, which someone may make listen again: they are told to go
     * before it stops, and new ones take the new socket. */
    for (b = 0; g->children.table != NULL && b < g->gen->num_buckets; b++) {
        if (g->replaced[b]) {
            g->children.stop_bucket(g->children.table, g->gen, b);
        }
    }
    retire_replaced(g, s);
}

/* ------------------------------------------------------------------ */
/* Restarts                                                            */

void pf_sockguard_renew(pf_sockguard_t *g, int first_start, server_rec *s)
{
    ap_listen_rec *lr;
    int b, replaced = 0, failed = 0;

    if (g->can_hand_over < 0) {
        g->can_hand_over = g->steer.can_hand_over(g->hand_over_why,
                                                  sizeof(g->hand_over_why));
    }
    if (first_start) {
        /* One socket per Listen: core's own, which got SO_REUSEPORT after
         * it listened, is in no reuseport group until another socket
         * joins, and steering's map takes no socket outside a group.  A
         * new one, made with SO_REUSEPORT, takes its place. */
        if (g->gen->plan.mode != PFB_MODE_REUSEPORT
            || g->gen->plan.buckets_per_listen != 1 || !g->can_hand_over) {
            return;
        }
    }
    else if (!g->can_hand_over) {
        if (!g->kept_logged) {
            ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                         PFBLOGNO(00177) "restarts keep the bucket sockets "
                         "instead of replacing them with new ones, since "
                         "their queued connections could not be handed "
                         "over (%s): a process that keeps a copy of one "
                         "keeps it until the parent finds it",
                         g->hand_over_why);
            g->kept_logged = 1;
        }
        return;
    }
    for (b = 0; b < g->gen->num_buckets; b++) {
        for (lr = g->gen->bucket[b].listeners; lr; lr = lr->next) {
            if (pf_guard_replace(g->book, lr->sd, lr->bind_addr,
                                 g->gen->bucket[b].num_listeners > 1)
                == APR_SUCCESS) {
                replaced++;
            }
            else {
                failed++;
            }
        }
    }
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00178) "bucket sockets: %d replaced by new ones "
                 "in their reuseport groups, %d kept (no new "
                 "socket could be opened); the old ones hand their queues "
                 "over once the new children run", replaced, failed);
}

void pf_sockguard_retire(pf_sockguard_t *g, server_rec *s)
{
    retire_replaced(g, s);
}

void pf_sockguard_child_init(pf_sockguard_t *g, apr_socket_t *const *own,
                             int n, int *fds)
{
    pf_guard_close_retiring(g->book);
    if (n > 0) {
        pf_seccomp_move_high(own, n, fds);
    }
}

/* ------------------------------------------------------------------ */
/* Stopping                                                            */

/* A socket whose filters a child locked takes no filter of the parent's
 * either: it goes on taking handshakes while the others drain, and those
 * it holds when it closes are reset.  Said for each such bucket; any other
 * failure ends the refusal. */
apr_status_t pf_sockguard_refuse_new(pf_sockguard_t *g, server_rec *s)
{
    apr_status_t rv = APR_SUCCESS, failed;
    ap_listen_rec *lr;
    int b;

    g->refusing_new = 1;
    for (b = 0; b < g->gen->num_buckets && rv == APR_SUCCESS; b++) {
        for (lr = g->gen->bucket[b].listeners; lr && rv == APR_SUCCESS;
             lr = lr->next) {
            failed = pf_os_refuse_new_connections(lr->sd);
            if (failed == EPERM) {
                ap_log_error(APLOG_MARK, APLOG_WARNING, failed, s,
                             PFBLOGNO(00171) "graceful stop: bucket %d "
                             "(%s): a child locked the socket filters of "
                             "its listening socket %pI, so it goes on "
                             "taking new handshakes while the other "
                             "sockets drain; connections still queued on "
                             "it when it closes are reset",
                             b, g->gen->bucket[b].address, lr->bind_addr);
            }
            else {
                rv = failed;
            }
        }
    }
    return rv;
}

void pf_sockguard_stop(pf_sockguard_t *g)
{
    ap_listen_rec *lr;
    apr_os_sock_t fd;
    int b;

    for (b = 0; b < g->gen->num_buckets; b++) {
        for (lr = g->gen->bucket[b].listeners; lr; lr = lr->next) {
            if (apr_os_sock_get(&fd, lr->sd) == APR_SUCCESS && fd >= 0) {
                pf_guard_disown(fd);
            }
        }
    }
    pf_guard_retired_all(g->book);
}
