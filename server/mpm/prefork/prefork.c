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
 * The prefork MPM, one process per connection, with SO_REUSEPORT listener
 * buckets.
 *
 * Each Listen can be duplicated into several SO_REUSEPORT sockets; every
 * socket is a bucket, and every child belongs to one bucket and accepts on
 * its bucket's socket only, so the kernel spreads connections over buckets
 * and no child polls or takes a lock to accept.  The parent keeps idle
 * children per bucket.  With buckets off, one bucket holds every Listen
 * and the children serialise accept() with the accept mutex, as httpd's
 * own prefork does.
 *
 * This file holds the httpd-shaped parts: hooks, directives, the child's
 * loop, the parent's loop and signals.  The buckets themselves (sockets,
 * identities, the shared segment) are prefork_bucketset.c's, and
 * ListenBucketSteering is prefork_steering.c's, which the bucket set
 * drives; every decision is a pure function in prefork_policy.c or
 * prefork_steering_rules.h.
 *
 * The parent runs as root and children run untrusted code, so the parent
 * keeps its own record of every child (pid, bucket, generation, whether it
 * was told to stop) and never sizes, indexes or signals from anything a
 * child can write: the scoreboard's parent fields are written for
 * mod_status and never read back, and its worker status is only compared
 * with constants.
 */

#include "apr.h"
#include "apr_portable.h"
#include "apr_strings.h"
#include "apr_thread_proc.h"
#include "apr_signal.h"
#include "apr_poll.h"

#define APR_WANT_STDIO
#define APR_WANT_STRFUNC
#include "apr_want.h"

#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif
#if APR_HAVE_SYS_TYPES_H
#include <sys/types.h>
#endif
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <signal.h>
#include <errno.h>
#include <poll.h>

#include "ap_config.h"
#include "httpd.h"
#include "mpm_default.h"
#include "http_main.h"
#include "http_log.h"
#include "http_config.h"
#include "http_core.h"
#include "http_connection.h"
#include "scoreboard.h"
#include "ap_mpm.h"
#include "util_mutex.h"
#include "unixd.h"
#include "mpm_common.h"
#include "ap_listen.h"
#include "ap_mmn.h"

/* ap_update_global_status() arrived in 2.4.35 (MMN 20120211.80). */
#if !AP_MODULE_MAGIC_AT_LEAST(20120211, 80)
#error "this MPM needs httpd 2.4.35 or later; 2.4.37 is the oldest tested"
#endif

#include "pfb_log.h"
#include "prefork_buckets.h"
#include "prefork_bucketset.h"
#include "prefork_children.h"
#include "prefork_close.h"
#include "prefork_filter.h"
#include "prefork_policy.h"
#include "prefork_ready.h"
#include "prefork_steering_rules.h"
#include "prefork_os.h"

/* Children are single-threaded: one worker slot per process. */
#define HARD_THREAD_LIMIT 1

/* How often the parent runs idle-server maintenance. */
#define MAINTENANCE_INTERVAL apr_time_from_sec(1)

/* A child waiting on the accept mutex cannot see a signal until it holds
 * the mutex, so the holder gives it up this often while no connection
 * arrives; a child told to stop then gets its turn within this time. */
#define ACCEPT_POLL_TIMEOUT apr_time_from_sec(1)

/* While a graceful stop drains the accept queues the parent looks at them
 * this often. */
#define DRAIN_POLL_MS 50

/* State that outlives a restart (ap_retained_data_create). */
typedef struct {
    ap_unixd_mpm_retained_data *mpm;

    int first_server_limit;     /* ServerLimit is fixed at first start */
    int maxclients_reported;    /* "reached MaxRequestWorkers" logged */
    int spawn_rate;             /* the server's ramp, between cycles */
    apr_pool_t *keep_pool;      /* outlives generations */
    pf_children_t *children;    /* what it signals, counts and reaps by */
    pf_bucketset_t *buckets;
    apr_time_t started;
    int wake_pipe[2];           /* SIGCHLD wakes the parent through it */
    /* Children report ready through it once they have run child_init
     * (prefork_ready.h): [0] the parent's end, [1] the children's. */
    int ready_channel[2];
    int ready_channel_logged;   /* the one line about its absence */
    pf_filter_retained_t filter;        /* the children's system-call
                                           filter, found out once */
} prefork_retained_data;

/* Per-bucket figures of one maintenance cycle. */
typedef struct {
    pf_bucket_state_t *state;
    pf_bucket_action_t *action;
    pf_rank_t *scratch;
    int *idle, *busy, *starting, *stopping, *queued;
    int *old_generation;        /* children of older generations */
    int *live;                  /* scratch: live children per bucket */
    int occupied;
} maintenance_snapshot_t;

/* One integer directive: where it goes and what it accepts. */
typedef struct {
    int *value;
    long long min;
    long long max;
    const char *replaced_by;    /* a deprecated name's successor */
} int_directive_t;

static prefork_retained_data *retained;

/* Configuration of this generation. */
static int start_servers;
static int min_spare_servers;
static int max_spare_servers;
static int max_workers;         /* MaxRequestWorkers */
static int server_limit;
static int buckets_ratio;       /* ListenCoresBucketsRatio */
static int buckets_explicit;    /* ListenBuckets */
static int steering_wanted;     /* ListenBucketSteering */
static int bucket_cpu_affinity; /* BucketCPUAffinity */
static int child_syscall_filter;        /* ChildSyscallFilter */

/* Where each integer directive's value goes and what it accepts; the
 * command table points each directive at its entry. */
enum {
    D_START_SERVERS,
    D_MIN_SPARE,
    D_MAX_SPARE,
    D_MAX_WORKERS,
    D_MAX_CLIENTS,
    D_SERVER_LIMIT,
    D_MAX_CONNECTIONS,
    D_MAX_REQUESTS,
    D_SHUTDOWN_TIMEOUT,
    D_BUCKETS_RATIO,
    D_BUCKETS_EXPLICIT,
    D_COUNT
};
/* The pool's directives take any whole number httpd's prefork accepts and
 * corrects (pf_correct_pool_config()); what atoi() would have made of junk
 * ("8x", "-1") is refused. */
static int_directive_t int_directives[D_COUNT] = {
    [D_START_SERVERS] = { &start_servers, 0, 2147483647LL, NULL },
    [D_MIN_SPARE] = { &min_spare_servers, 0, 2147483647LL, NULL },
    [D_MAX_SPARE] = { &max_spare_servers, 0, 2147483647LL, NULL },
    [D_MAX_WORKERS] = { &max_workers, 0, 2147483647LL, NULL },
    [D_MAX_CLIENTS] = { &max_workers, 0, 2147483647LL,
                        "MaxRequestWorkers" },
    [D_SERVER_LIMIT] = { &server_limit, 0, 2147483647LL, NULL },
    [D_MAX_CONNECTIONS] = { &ap_max_requests_per_child, 0,
                           2147483647LL, NULL },
    [D_MAX_REQUESTS] = { &ap_max_requests_per_child, 0,
                        2147483647LL, "MaxConnectionsPerChild" },
    [D_SHUTDOWN_TIMEOUT] = { &ap_graceful_shutdown_timeout, 0,
                            2147483LL, NULL },
    [D_BUCKETS_RATIO] = { &buckets_ratio, 0, 2147483647LL, NULL },
    [D_BUCKETS_EXPLICIT] = { &buckets_explicit, 0,
                            PF_MAX_SERVER_LIMIT, NULL },
};

/* What check_config corrected in this generation's configuration, logged
 * once the error log is open (log_corrections()). */
static pf_fix_t pool_fixes[PF_FIX_KINDS];
static int num_pool_fixes;

/* This generation's buckets, what the restart decided for them, and the
 * maintenance scratch. */
static pf_bucket_t *buckets;
static int num_buckets;
static pf_generation_out_t generation_plan;
static maintenance_snapshot_t snapshot;

/* Per bucket of this generation: how fast children may be forked into it
 * (pf_respawn_may_fork), and whether the one line about buckets whose
 * children die at start has been logged for the present episode. */
static pf_respawn_t *respawn;
static int respawn_episode_logged;

/* How a fork is paced. */
typedef enum {
    SPAWN_START,                /* a generation's first children */
    SPAWN_CYCLE,                /* maintenance, an old child's successor */
    SPAWN_AT_ONCE               /* a stranded bucket, in the wake-up on an
                                   exit rather than at maintenance */
} spawn_pace_e;

static apr_pool_t *pconf;
static int one_process;
static pid_t parent_pid;        /* the server's parent, once detached */

/* The write end of the parent's wake-up pipe, for the SIGCHLD handler;
 * -1 whenever the handler is not installed. */
static volatile int wake_fd = -1;

/* Child-side state. */
static int in_bucket_child;     /* this process is one of the children */
static apr_pool_t *pchild;
static int my_child_num;
static int my_bucket_index;
static int devnull_fd = -1;
static volatile sig_atomic_t child_die_now;
static volatile sig_atomic_t child_in_accept_wait;
/* Set once the child is leaving, by any exit() (a module's too): a stop
 * signal that comes then must not run clean_child_exit() inside exit(),
 * whose handlers are not reentrant. */
static volatile sig_atomic_t child_exiting;
/* Set once child_init has run.  Until then a stop signal only sets
 * child_die_now and the child leaves right after its start-up: exiting
 * from the handler would destroy pools from inside whatever the start-up
 * was doing (libseccomp building the filter, a module's child_init
 * allocating), and glibc aborts on the corrupted heap. */
static volatile sig_atomic_t child_started;

/* A listener in a child's pollset, with its position in the bucket. */
typedef struct {
    ap_listen_rec *lr;
    int position;
} poll_listener_t;

/* The child's turn over its bucket's listeners (pick_ready_listener). */
static int *ready_positions;
static int ready_capacity;
static int last_served_listener = -1;

module AP_MODULE_DECLARE_DATA mpm_prefork_module;

/* ------------------------------------------------------------------ */
/* Shared state for the status module                                  */

static const pfb_segment_t *prefork_buckets_segment(void)
{
    if (retained == NULL || retained->buckets == NULL) {
        return NULL;
    }
    return pf_bucketset_segment(retained->buckets);
}

/* ------------------------------------------------------------------ */
/* Child                                                               */

static void clean_child_exit(int code) __attribute__((noreturn));
static void clean_child_exit(int code)
{
    child_exiting = 1;
    retained->mpm->mpm_state = AP_MPMQ_STOPPING;
    apr_signal(SIGHUP, SIG_IGN);
    apr_signal(SIGTERM, SIG_IGN);
    if (pchild) {
#if AP_MODULE_MAGIC_AT_LEAST(20120211, 110)
        /* The child_stopping hook exists from 2.4.49 on. */
        if (!code) {
            ap_run_child_stopping(pchild, 0);
        }
#endif
        apr_pool_destroy(pchild);
        pchild = NULL;
    }
    exit(code);
}

/* Swaps the bucket's listening descriptors for /dev/null in this child
 * only, so that an accept() or poll() that starts after a stop signal
 * returns at once instead of waiting for the next connection.  dup2() is
 * async-signal-safe and keeps the descriptor numbers taken, so nothing
 * else can be opened under them; the sockets stay open in the parent and
 * in the bucket's other children, and no queued connection is lost. */
static void stop_accepting(void)
{
    ap_listen_rec *lr;
    apr_os_sock_t fd;

    if (devnull_fd < 0 || buckets == NULL) {
        return;
    }
    for (lr = buckets[my_bucket_index].listeners; lr; lr = lr->next) {
        lr->active = 0;
        if (apr_os_sock_get(&fd, lr->sd) == APR_SUCCESS && fd >= 0) {
            dup2(devnull_fd, fd);
        }
    }
}

/* Children share a uid, so any of them may signal the others.  A stop
 * signal from a sibling (or anyone but the parent and the kernel) is
 * obeyed, since it may have merged with one from the parent; but the
 * child then leaves with APEXIT_CHILDSICK rather than 0, so that the
 * parent does not take it for a child recycled by MaxConnectionsPerChild
 * and paces its replacements.  In the one-process mode there is no
 * parent. */
static volatile sig_atomic_t stopped_by_another;

static void note_sender(const siginfo_t *info)
{
    if (one_process || info == NULL) {
        return;
    }
    switch (info->si_code) {
    case SI_USER:
    case SI_QUEUE:
    case SI_TKILL:
        if (info->si_pid != getppid()) {
            stopped_by_another = 1;
        }
        break;
    default:
        break;
    }
}

static int stop_exit_code(void)
{
    return stopped_by_another ? APEXIT_CHILDSICK : 0;
}

/* AP_SIG_GRACEFUL: finish the connection in hand, then exit. */
static void child_graceful_handler(int AP_MAYBE_UNUSED(sig), siginfo_t *info,
                                   void *AP_MAYBE_UNUSED(context))
{
    int saved_errno = errno;

    note_sender(info);
    child_die_now = 1;
    stop_accepting();
    errno = saved_errno;
}

/* SIGTERM/SIGHUP: exit now.  A child waiting for a connection only sets
 * the flag and leaves through its accept loop.  A child serving a request
 * may sit in a blocking read for the whole Timeout, and a stop must not
 * wait that long, so it exits from the handler the way httpd's own
 * children do. */
static void child_terminate_handler(int AP_MAYBE_UNUSED(sig),
                                    siginfo_t *info,
                                    void *AP_MAYBE_UNUSED(context))
{
    note_sender(info);
    child_die_now = 1;
    if (child_exiting || !child_started) {
        return;                 /* on its way out, or leaves after start-up */
    }
    if (child_in_accept_wait) {
        stop_accepting();
        return;
    }
    clean_child_exit(stop_exit_code());
}

/* Registered in the child before any module's code runs in it, so it
 * runs first when anything calls exit(). */
static void note_child_exiting(void)
{
    child_exiting = 1;
}

static void child_install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocking accept() must return EINTR on a signal. */
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = child_terminate_handler;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_sigaction = child_graceful_handler;
    sigaction(AP_SIG_GRACEFUL, &sa, NULL);
    /* Ctrl-C on a foreground server goes to the parent, which stops the
     * children in order. */
    apr_signal(SIGINT, SIG_IGN);
    apr_signal(AP_SIG_GRACEFUL_STOP, SIG_IGN);
    /* The parent's wake-up handler is no use here; modules that fork
     * (mod_cgi...) expect the default. */
    apr_signal(SIGCHLD, SIG_DFL);
}

/* Takes one of the ready listeners that the pollset reported, in turn
 * (pf_pick_ready_listener), so that none waits while another stays busy. */
static ap_listen_rec *pick_ready_listener(const apr_pollfd_t *pdesc,
                                          apr_int32_t numdesc)
{
    const poll_listener_t *pl;
    int i, n = 0, pick;

    for (i = 0; i < numdesc && n < ready_capacity; i++) {
        pl = pdesc[i].client_data;
        ready_positions[n++] = pl->position;
    }
    pick = pf_pick_ready_listener(ready_positions, n, ready_capacity,
                                  last_served_listener);
    if (pick < 0) {
        pick = 0;
    }
    pl = pdesc[pick].client_data;
    last_served_listener = pl->position;
    return pl->lr;
}

/* A blocking accept() came back with EAGAIN: another child of the bucket
 * made the socket they share non-blocking (or gave it a receive timeout).
 * The parent puts it back within a maintenance cycle; until then this
 * child waits for a connection in poll() rather than spin in accept(). */
static void wait_for_connection(ap_listen_rec *lr)
{
    struct pollfd pfd;
    apr_os_sock_t fd;

    if (apr_os_sock_get(&fd, lr->sd) != APR_SUCCESS || fd < 0) {
        return;
    }
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    (void)poll(&pfd, 1, (int)apr_time_as_msec(ACCEPT_POLL_TIMEOUT));
}

/* Waits for and accepts one connection on the bucket's sockets.
 * Returns APR_SUCCESS with *csd set, APR_EINTR when the child should
 * look at its flags again, or APR_EGENERAL when the child must exit. */
static apr_status_t accept_one(pf_bucket_t *bucket, apr_pollset_t *pollset,
                               void **csd, apr_pool_t *ptrans)
{
    ap_listen_rec *lr = bucket->listeners;
    apr_status_t rv, unlocked;

    if (bucket->num_listeners == 1) {
        /* One socket: a blocking accept(), where the kernel wakes exactly
         * one waiting child per connection.  No poll, no lock. */
        rv = ap_unixd_accept(csd, lr, ptrans);
        if (APR_STATUS_IS_EAGAIN(rv)) {
            wait_for_connection(lr);
            return APR_EINTR;
        }
        return rv;
    }

    rv = apr_proc_mutex_lock(bucket->mutex);
    if (rv != APR_SUCCESS) {
        if (child_die_now || APR_STATUS_IS_EINTR(rv)) {
            return APR_EINTR;
        }
        ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                     PFBLOGNO(00001) "couldn't grab the accept mutex of "
                     "bucket %d", my_bucket_index);
        return APR_EGENERAL;
    }
    for (;;) {
        apr_int32_t numdesc;
        const apr_pollfd_t *pdesc;

        if (child_die_now) {
            rv = APR_EINTR;
            break;
        }
        rv = apr_pollset_poll(pollset, ACCEPT_POLL_TIMEOUT, &numdesc, &pdesc);
        if (rv != APR_SUCCESS) {
            if (APR_STATUS_IS_TIMEUP(rv)) {
                /* Let a waiting child that has been told to stop see it. */
                rv = APR_EINTR;
                break;
            }
            if (APR_STATUS_IS_EINTR(rv)) {
                continue;
            }
            ap_log_error(APLOG_MARK, APLOG_ERR, rv, ap_server_conf,
                         PFBLOGNO(00002) "apr_pollset_poll: (listen)");
            rv = APR_EGENERAL;
            break;
        }
        lr = pick_ready_listener(pdesc, numdesc);
        rv = ap_unixd_accept(csd, lr, ptrans);
        break;
    }
    unlocked = apr_proc_mutex_unlock(bucket->mutex);
    if (unlocked != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, unlocked, ap_server_conf,
                     PFBLOGNO(00003) "couldn't release the accept mutex of "
                     "bucket %d", my_bucket_index);
        return APR_EGENERAL;
    }
    return rv;
}

static apr_pollset_t *child_make_pollset(pf_bucket_t *bucket)
{
    apr_pollset_t *pollset;
    apr_pollfd_t *pfd;
    poll_listener_t *pl;
    ap_listen_rec *lr;
    apr_status_t rv;
    int position;

    /* poll(2), not epoll: only the holder of the accept mutex polls, and
     * poll() puts it on the listeners' wait queues for that call alone.
     * An epoll set would keep every child's entry on every listener's
     * queue for the child's life, and each new connection would walk them
     * all (docs/benchmarks.md, "Why one bucket serves four times stock
     * prefork"). */
    rv = apr_pollset_create_ex(&pollset, bucket->num_listeners, pchild,
                               APR_POLLSET_NOCOPY, APR_POLLSET_POLL);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                     PFBLOGNO(00004) "couldn't create the pollset of "
                     "bucket %d", my_bucket_index);
        clean_child_exit(APEXIT_CHILDSICK);
    }
    ready_capacity = bucket->num_listeners;
    ready_positions = apr_pcalloc(pchild,
                                  sizeof(*ready_positions) * ready_capacity);
    for (lr = bucket->listeners, position = 0; lr && position < ready_capacity;
         lr = lr->next, position++) {
        /* APR_POLLSET_NOCOPY keeps a pointer to the descriptor, so each
         * one needs storage of its own for the child's lifetime. */
        pfd = apr_pcalloc(pchild, sizeof(*pfd));
        pl = apr_pcalloc(pchild, sizeof(*pl));
        pl->lr = lr;
        pl->position = position;
        pfd->desc_type = APR_POLL_SOCKET;
        pfd->desc.s = lr->sd;
        pfd->reqevents = APR_POLLIN;
        pfd->client_data = pl;
        rv = apr_pollset_add(pollset, pfd);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                         PFBLOGNO(00005) "couldn't add a listener to the "
                         "pollset of bucket %d", my_bucket_index);
            clean_child_exit(APEXIT_CHILDSICK);
        }
    }
    return pollset;
}

/* Children have no use for the parent's wake-up pipe, nor for its end
 * of the ready channel (where they could read other children's
 * reports); a process that is no child, not for the children's end
 * either. */
static void close_parent_channels(int ready_end_too)
{
    int i;

    wake_fd = -1;
    for (i = 0; i < 2; i++) {
        if (retained->wake_pipe[i] >= 0) {
            close(retained->wake_pipe[i]);
            retained->wake_pipe[i] = -1;
        }
    }
    for (i = 0; i < 1 + ready_end_too; i++) {
        if (retained->ready_channel[i] >= 0) {
            close(retained->ready_channel[i]);
            retained->ready_channel[i] = -1;
        }
    }
}

/* Tells the parent, once, that this child has started: child_init has
 * run, so from now on an APEXIT_CHILDFATAL is a module or a script asking
 * to stop the server, not a child that cannot start.  The end is closed
 * at once, so nothing the child runs later can report anything. */
static void report_ready(void)
{
    int fd = retained->ready_channel[1];
    apr_status_t rv;

    if (fd < 0) {
        return;
    }
    rv = pf_ready_report(fd, PF_READY_PATIENCE);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, ap_server_conf,
                     PFBLOGNO(00172) "child of bucket %d couldn't report "
                     "ready to the parent within %d s; if it exits with "
                     "APEXIT_CHILDFATAL, the server stops", my_bucket_index,
                     (int)apr_time_sec(PF_READY_PATIENCE));
    }
    close(fd);
    retained->ready_channel[1] = -1;
}

static void child_init_process(pf_bucket_t *bucket)
{
    apr_status_t rv;
    int *bucket_fds, num_fds;

    ap_reopen_scoreboard(pchild, NULL, 0);
    if (bucket->mutex) {
        rv = apr_proc_mutex_child_init(&bucket->mutex,
                                       apr_proc_mutex_lockfile(bucket->mutex),
                                       pchild);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                         PFBLOGNO(00006) "couldn't initialize the accept "
                         "mutex of bucket %d in the child (%s)",
                         my_bucket_index,
                         apr_proc_mutex_name(bucket->mutex));
            clean_child_exit(APEXIT_CHILDFATAL);
        }
    }
    devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    close_parent_channels(0);
    bucket_fds = apr_palloc(pchild, sizeof(int)
                                        * (apr_size_t)bucket->num_listeners);
    num_fds = pf_bucketset_child_init(retained->buckets, my_bucket_index,
                                      my_child_num, bucket_cpu_affinity,
                                      bucket_fds, bucket->num_listeners,
                                      ap_server_conf);
    /* While still root: no_new_privs need not be set, so setuid helpers
     * the child runs keep working. */
    pf_filter_child(&retained->filter, child_syscall_filter, bucket_fds,
                    num_fds, my_bucket_index, ap_server_conf);
    if (ap_run_drop_privileges(pchild, ap_server_conf)) {
        clean_child_exit(APEXIT_CHILDFATAL);
    }
    ap_run_child_init(pchild, ap_server_conf);
    report_ready();
}

static void child_main(int child_num, int bucket_index)
    __attribute__((noreturn));
static void child_main(int child_num, int bucket_index)
{
    pf_bucket_t *bucket = &buckets[bucket_index];
    apr_allocator_t *allocator;
    apr_pool_t *ptrans;
    apr_bucket_alloc_t *bucket_alloc;
    apr_pollset_t *pollset = NULL;
    ap_sb_handle_t *sbh;
    int connections_served = 0;
    apr_status_t rv;

    in_bucket_child = 1;
    my_child_num = child_num;
    my_bucket_index = bucket_index;
    retained->mpm->mpm_state = AP_MPMQ_STARTING;

    apr_allocator_create(&allocator);
    apr_allocator_max_free_set(allocator, ap_max_mem_free);
    apr_pool_create_ex(&pchild, pconf, NULL, allocator);
    apr_allocator_owner_set(allocator, pchild);
    apr_pool_tag(pchild, "pchild");
#if AP_HAS_THREAD_LOCAL
    if (!one_process) {
        apr_thread_t *thd = NULL;
        if ((rv = ap_thread_main_create(&thd, pchild))) {
            ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                         PFBLOGNO(00007) "couldn't initialize the child's "
                         "main thread");
            clean_child_exit(APEXIT_CHILDFATAL);
        }
    }
#endif
    apr_pool_create(&ptrans, pchild);
    apr_pool_tag(ptrans, "transaction");

    child_init_process(bucket);
    child_started = 1;
    if (child_die_now) {
        clean_child_exit(stop_exit_code());
    }
    pf_close_child_init();
    ap_create_sb_handle(&sbh, pchild, my_child_num, 0);
    ap_update_child_status(sbh, SERVER_READY, NULL);
    if (bucket->num_listeners > 1) {
        pollset = child_make_pollset(bucket);
    }
    bucket_alloc = apr_bucket_alloc_create(pchild);
    retained->mpm->mpm_state = AP_MPMQ_RUNNING;

    while (!child_die_now) {
        void *csd = NULL;
        conn_rec *current_conn;

        if (ap_max_requests_per_child > 0
            && connections_served >= ap_max_requests_per_child) {
            break;
        }
        apr_pool_clear(ptrans);
        ap_update_child_status(sbh, SERVER_READY, NULL);

        child_in_accept_wait = 1;
        if (child_die_now) {
            break;
        }
        pf_bucketset_accept_begin(retained->buckets);
        rv = accept_one(bucket, pollset, &csd, ptrans);
        pf_bucketset_accept_end(retained->buckets,
                                rv == APR_SUCCESS && csd != NULL);
        child_in_accept_wait = 0;
        if (rv == APR_EGENERAL) {
            clean_child_exit(APEXIT_CHILDSICK);
        }
        if (rv != APR_SUCCESS || csd == NULL) {
            continue;
        }
        connections_served++;

        current_conn = ap_run_create_connection(ptrans, ap_server_conf, csd,
                                                my_child_num, sbh,
                                                bucket_alloc);
        if (current_conn) {
            ap_process_connection(current_conn, csd);
            pf_close_connection(current_conn);
        }
    }
    child_in_accept_wait = 0;
    pf_close_finish();
    ap_update_child_status(sbh, SERVER_GRACEFUL, NULL);
    clean_child_exit(stop_exit_code());
}

/* ------------------------------------------------------------------ */
/* Parent: children                                                    */

static int make_child(server_rec *s, int slot, int bucket_index)
{
    process_score *ps = &ap_scoreboard_image->parent[slot];
    ap_generation_t gen = retained->mpm->my_generation;
    sigset_t stop_signals, saved_mask;
    pid_t pid;

    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, AP_SIG_GRACEFUL);
    sigaddset(&stop_signals, AP_SIG_GRACEFUL_STOP);
    pf_bucketset_claim_slot(retained->buckets, slot, bucket_index, gen);
    /* For mod_status and httpd's helpers only: nothing here is read back. */
    ps->quiescing = 0;
    ps->generation = gen;
    if (one_process) {
        child_install_signals();
        ps->pid = getpid();
        pf_children_started(retained->children, slot, ps->pid, gen,
                            bucket_index);
        child_main(slot, bucket_index);
    }
    (void)ap_update_child_status_from_indexes(slot, 0, SERVER_STARTING, NULL);

    /* Until the child has its own handlers, a stop signal sent to it would
     * run the parent's (which only sets a flag) and be lost: the child
     * would then wait in accept() until the next signal.  So the stop
     * signals stay blocked across fork() and are delivered once each
     * process has the handlers it needs. */
    sigprocmask(SIG_BLOCK, &stop_signals, &saved_mask);
    if ((pid = fork()) == -1) {
        ap_log_error(APLOG_MARK, APLOG_ERR, errno, s,
                     PFBLOGNO(00008) "fork: unable to fork a new child for "
                     "bucket %d", bucket_index);
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        (void)ap_update_child_status_from_indexes(slot, 0, SERVER_DEAD, NULL);
        pf_bucketset_forget_slot(retained->buckets, slot);
        /* Out of processes or memory: don't spin trying to fork. */
        sleep(10);
        return -1;
    }
    if (!pid) {
#if AP_HAS_THREAD_LOCAL
        ap_thread_current_after_fork();
#endif
        atexit(note_child_exiting);
        child_install_signals();
        ap_fatal_signal_child_setup(ap_server_conf);
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        child_main(slot, bucket_index);
    }
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);

    pf_children_started(retained->children, slot, pid, gen, bucket_index);
    ps->pid = pid;
    pf_bucketset_slot_started(retained->buckets, slot, pid);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00009) "child pid %" APR_PID_T_FMT " slot %d "
                 "bucket %d generation %d started",
                 pid, slot, bucket_index, gen);
    ap_run_child_status(ap_server_conf, pid, gen, slot, MPM_CHILD_STARTED);
    return 0;
}

/* Forks a child into a bucket if a slot is free and the bucket's pacing
 * lets it (children that keep dying at start must not make the parent
 * fork in a loop).  Returns 0 when it forked, 1 when the pacing held the
 * fork back, -1 when no slot was free or fork() failed. */
static int spawn_into_bucket(server_rec *s, int bucket_index,
                             spawn_pace_e pace)
{
    pf_respawn_t *r = respawn != NULL && bucket_index >= 0
                              && bucket_index < num_buckets
                          ? &respawn[bucket_index]
                          : NULL;
    int at_once = pace == SPAWN_AT_ONCE;
    apr_time_t now = apr_time_now();
    int slot;

    if (r != NULL && pace != SPAWN_START
        && !pf_respawn_may_fork(r, at_once, now)) {
        return 1;
    }
    slot = pf_children_free_slot(retained->children, max_workers);
    if (slot < 0 || make_child(s, slot, bucket_index) != 0) {
        return -1;
    }
    if (r != NULL) {
        pf_respawn_note_fork(r, at_once, now);
    }
    return 0;
}

/* Tells the child of a slot to finish its connection and exit. */
static void tell_child_to_stop(int slot)
{
    if (pf_children_tell_to_stop(retained->children, slot)) {
        ap_scoreboard_image->parent[slot].quiescing = 1;
        pf_bucketset_slot_stopping(retained->buckets, slot);
    }
}

/* A child has been reaped: its slot and its counts go. */
static void note_child_gone(int slot)
{
    const pf_child_t *child = &retained->children->slot[slot];
    process_score *ps = &ap_scoreboard_image->parent[slot];

    (void)ap_update_child_status_from_indexes(slot, 0, SERVER_DEAD, NULL);
    pf_bucketset_forget_slot(retained->buckets, slot);
    ps->pid = 0;
    ps->quiescing = 0;
    ap_run_child_status(ap_server_conf, child->pid, child->generation, slot,
                        MPM_CHILD_EXITED);
}

static void count_bucket_children(int bucket_index, int *current, int *old)
{
    pf_children_count_bucket(retained->children, bucket_index,
                             retained->mpm->my_generation, current, old);
}

/* Tells children to finish their connection and exit: those of older
 * generations (all of them when everyone must go). */
static void signal_old_children(int everyone)
{
    int slot;

    for (slot = 0; slot < retained->children->used; slot++) {
        const pf_child_t *child = &retained->children->slot[slot];

        if (child->pid != 0
            && (everyone
                || child->generation != retained->mpm->my_generation)) {
            tell_child_to_stop(slot);
        }
    }
}

/* Starts the new generation.  Every bucket gets a child of its own at
 * once (if a slot is free), so none waits on old children that are only
 * finishing their connections; then each bucket is brought to its share
 * of StartServers, counting the old children, which are replaced one for
 * one as they leave (replace_old_child) up to the bucket's target. */
static void startup_children(server_rec *s)
{
    int b, i, want, current, old;

    for (b = 0; b < num_buckets; b++) {
        count_bucket_children(b, &current, &old);
        if (current == 0 && spawn_into_bucket(s, b, SPAWN_START) != 0) {
            return;
        }
    }
    for (b = 0; b < num_buckets; b++) {
        count_bucket_children(b, &current, &old);
        want = pf_bucket_start(start_servers, num_buckets, b) - current - old;
        for (i = 0; i < want; i++) {
            if (spawn_into_bucket(s, b, SPAWN_START) != 0) {
                return;
            }
        }
    }
}

/* An older generation's child has left bucket @a b: fork its replacement
 * while the bucket is short of its target. */
static void replace_old_child(server_rec *s, int b)
{
    int current, old;

    if (b < 0 || b >= num_buckets || generation_plan.target == NULL
        || retained->mpm->shutdown_pending
        || retained->mpm->restart_pending) {
        return;
    }
    count_bucket_children(b, &current, &old);
    if (current + old < generation_plan.target[b]) {
        spawn_into_bucket(s, b, SPAWN_CYCLE);
    }
}

/* ------------------------------------------------------------------ */
/* Parent: idle-server maintenance                                     */

static void snapshot_alloc(apr_pool_t *p)
{
    apr_size_t n = (apr_size_t)num_buckets;

    snapshot.state = apr_pcalloc(p, n * sizeof(*snapshot.state));
    snapshot.action = apr_pcalloc(p, n * sizeof(*snapshot.action));
    snapshot.scratch = apr_pcalloc(p, n * sizeof(*snapshot.scratch));
    snapshot.idle = apr_pcalloc(p, n * sizeof(int));
    snapshot.busy = apr_pcalloc(p, n * sizeof(int));
    snapshot.starting = apr_pcalloc(p, n * sizeof(int));
    snapshot.stopping = apr_pcalloc(p, n * sizeof(int));
    snapshot.queued = apr_pcalloc(p, n * sizeof(int));
    snapshot.live = apr_pcalloc(p, n * sizeof(int));
    snapshot.old_generation = apr_pcalloc(p, n * sizeof(int));
    /* A restart is the admin's: pacing starts afresh with the
     * generation. */
    respawn = apr_pcalloc(p, n * sizeof(*respawn));
    respawn_episode_logged = 0;
}

/* Reads the parent's table of children, their scoreboard status and,
 * with @a read_queues, the accept queues into the snapshot.  A cycle reads
 * the queues once (TCP_INFO on every bucket socket), at its start; the
 * count after its spawns and kills keeps them. */
static void take_snapshot(server_rec *s, int read_queues)
{
    int slot, b;

    if (read_queues) {
        pf_bucketset_snapshot(retained->buckets, snapshot.queued, s);
    }
    for (b = 0; b < num_buckets; b++) {
        snapshot.state[b].children = snapshot.state[b].idle = 0;
        snapshot.state[b].queued = snapshot.queued[b];
        snapshot.idle[b] = snapshot.busy[b] = snapshot.starting[b] = 0;
        snapshot.stopping[b] = snapshot.old_generation[b] = 0;
    }
    snapshot.occupied = 0;
    for (slot = 0; slot < retained->children->used; slot++) {
        const pf_child_t *cs = &retained->children->slot[slot];
        /* Written by the child: only ever compared with constants. */
        int status = ap_scoreboard_image->servers[slot][0].status;

        if (cs->pid == 0) {
            continue;
        }
        snapshot.occupied++;
        b = cs->bucket;
        if (b < 0 || b >= num_buckets) {
            continue;
        }
        if (cs->generation != retained->mpm->my_generation) {
            snapshot.old_generation[b]++;
            snapshot.stopping[b]++;
            continue;
        }
        if (cs->told_to_stop) {
            snapshot.stopping[b]++;
            continue;
        }
        snapshot.state[b].children++;
        if (status == SERVER_STARTING) {
            snapshot.starting[b]++;
            snapshot.state[b].idle++;
        }
        else if (status == SERVER_READY) {
            snapshot.idle[b]++;
            snapshot.state[b].idle++;
        }
        else {
            snapshot.busy[b]++;
        }
    }
    /* Right after the children's states: both figures of one instant. */
    pf_bucketset_note_idle(retained->buckets);
}

static void publish_snapshot(void)
{
    pf_bucketset_figures_t figures;
    int b;

    pf_children_publish(retained->children);
    for (b = 0; b < num_buckets; b++) {
        snapshot.live[b] = snapshot.state[b].children;
    }
    figures.children = snapshot.live;
    figures.idle = snapshot.idle;
    figures.busy = snapshot.busy;
    figures.starting = snapshot.starting;
    figures.stopping = snapshot.stopping;
    figures.queued = snapshot.queued;
    figures.generation = retained->mpm->my_generation;
    figures.slots_used = retained->children->used;
    pf_bucketset_publish(retained->buckets, &figures);
}

static void log_maintenance_limits(server_rec *s,
                                   const pf_decision_summary_t *summary)
{
    int b, leaving = 0;

    for (b = 0; b < num_buckets; b++) {
        leaving += snapshot.stopping[b];
    }
    if (summary->at_max_workers && leaving > 0) {
        /* A graceful restart or retirements in progress hold slots for a
         * moment: not a reason to raise MaxRequestWorkers. */
        return;
    }
    if (summary->at_max_workers) {
        if (!retained->maxclients_reported) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s,
                         PFBLOGNO(00010) "server reached MaxRequestWorkers "
                         "setting (%d) with %d children wanted; consider "
                         "raising the MaxRequestWorkers setting",
                         max_workers, summary->wanted);
            retained->maxclients_reported = 1;
        }
    }
    else {
        retained->maxclients_reported = 0;
    }
    if (summary->fast_ramp > 0) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00011) "server seems busy (spawning %d "
                     "children a second), you may need to increase "
                     "StartServers, or Min/MaxSpareServers",
                     summary->fast_ramp);
    }
}

/* Tells up to @a count idle children of a bucket to finish and exit. */
static void retire_idle_children(int bucket_index, int count)
{
    int slot;

    /* Highest slots first: children there are the newest, so the pool
     * shrinks back towards low slot numbers. */
    for (slot = retained->children->used - 1; slot >= 0 && count > 0;
         slot--) {
        const pf_child_t *cs = &retained->children->slot[slot];

        if (cs->pid == 0 || cs->told_to_stop || cs->bucket != bucket_index
            || cs->generation != retained->mpm->my_generation
            || ap_scoreboard_image->servers[slot][0].status != SERVER_READY) {
            continue;
        }
        tell_child_to_stop(slot);
        count--;
    }
}

/* A paced bucket whose newest children live a second, or where nothing
 * died at start for a whole delay, is paced no more; the episode's one
 * line gets its closing line once no bucket is. */
static void end_respawn_episodes(server_rec *s)
{
    apr_time_t now = apr_time_now();
    int slot, b, paced = 0;

    for (slot = 0; slot < retained->children->used; slot++) {
        const pf_child_t *cs = &retained->children->slot[slot];

        if (cs->pid != 0 && !cs->told_to_stop && cs->bucket >= 0
            && cs->bucket < num_buckets
            && cs->generation == retained->mpm->my_generation) {
            pf_respawn_note_alive(&respawn[cs->bucket], cs->started, now);
            pf_respawn_note_quiet(&respawn[cs->bucket], now);
        }
    }
    for (b = 0; b < num_buckets; b++) {
        paced += pf_respawn_paced(&respawn[b]);
    }
    if (paced == 0 && respawn_episode_logged) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00067) "children live past their first "
                     "second again in every bucket; replacing them at "
                     "once again");
        respawn_episode_logged = 0;
    }
}

static void perform_idle_server_maintenance(server_rec *s)
{
    pf_limits_t lim;
    pf_decision_summary_t summary;
    int b, i, n;

    end_respawn_episodes(s);
    pf_bucketset_guard(retained->buckets, -1, s);
    take_snapshot(s, 1);
    pf_count_old_generation(snapshot.state, snapshot.old_generation,
                            num_buckets);
    pf_limits_init(&lim, num_buckets, min_spare_servers, max_spare_servers,
                   max_workers);
    pf_decide_maintenance(&lim, snapshot.state, snapshot.occupied,
                          &retained->spawn_rate, snapshot.action,
                          snapshot.scratch, &summary);

    for (b = 0; b < num_buckets; b++) {
        if (snapshot.action[b].kill > 0) {
            retire_idle_children(b, snapshot.action[b].kill);
        }
    }
    if (summary.rebalanced > 0) {
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                     PFBLOGNO(00039) "at MaxRequestWorkers (%d): retiring "
                     "%d idle child(ren) so that buckets with queued "
                     "connections and no idle child get one",
                     max_workers, summary.rebalanced);
    }
    /* Spawn in the priority order the decision used: starved buckets and
     * buckets with queued connections get the free slots first. */
    for (i = 0; i < num_buckets; i++) {
        int bucket_index = snapshot.scratch[i].bucket;

        for (n = 0; n < snapshot.action[bucket_index].spawn; n++) {
            if (spawn_into_bucket(s, bucket_index, SPAWN_CYCLE) != 0) {
                break;
            }
        }
    }
    log_maintenance_limits(s, &summary);
    /* Children of old generations that missed their signal (forked while
     * it was sent) are told again. */
    signal_old_children(0);
    take_snapshot(s, 0);
    publish_snapshot();
}

/* ------------------------------------------------------------------ */
/* Parent: child exits                                                 */

/* A bucket must never be left without a child to accept.  Whenever a
 * child exits (a crash, recycling, or an old generation's child freeing
 * its slot after a graceful restart) every bucket with no live child of
 * the current generation gets one at once, not at the next maintenance
 * cycle. */
static void respawn_stranded_buckets(server_rec *s)
{
    int *live = snapshot.live;
    int slot, b, rv, occupied = 0;
    int stopping = retained->mpm->shutdown_pending
                   || retained->mpm->restart_pending;

    if (stopping || live == NULL) {
        return;
    }
    memset(live, 0, sizeof(int) * (apr_size_t)num_buckets);
    for (slot = 0; slot < retained->children->used; slot++) {
        const pf_child_t *cs = &retained->children->slot[slot];

        if (cs->pid == 0) {
            continue;
        }
        occupied++;
        if (!cs->told_to_stop
            && cs->generation == retained->mpm->my_generation
            && cs->bucket >= 0 && cs->bucket < num_buckets) {
            live[cs->bucket]++;
        }
    }
    for (b = 0; b < num_buckets; b++) {
        if (pf_bucket_needs_respawn_now(live[b], stopping, occupied,
                                        max_workers)) {
            /* Held back by its pacing, a bucket waits for maintenance;
             * its socket stays open in the parent meanwhile, so
             * connections queue rather than fail. */
            rv = spawn_into_bucket(s, b, SPAWN_AT_ONCE);
            if (rv < 0) {
                return;
            }
            occupied += rv == 0;
        }
    }
}

static void note_ready(void *AP_MAYBE_UNUSED(baton), pid_t pid)
{
    pf_children_mark_ready(retained->children, pid);
}

/* Reads the children's ready reports: each names its sender's pid, as
 * the kernel vouches, and nothing else is read from it.  A pid that is
 * none of our children is ignored. */
static void read_ready_reports(void)
{
    pf_ready_read(retained->ready_channel[0], 1024, note_ready, NULL);
}

/* "killed by signal 9", "exit status 15": for the pacing's log line. */
static const char *describe_exit(apr_pool_t *p, apr_exit_why_e why,
                                 int status)
{
    return why == APR_PROC_EXIT ? apr_psprintf(p, "exit status %d", status)
                                : apr_psprintf(p, "killed by signal %d",
                                               status);
}

/* Notes how a child of the current generation left in its bucket's
 * pacing, and says so once when its bucket becomes paced. */
static void pace_after_exit(server_rec *s, const pf_child_t *child,
                            int slot, pid_t pid, apr_exit_why_e why,
                            int status)
{
    apr_time_t now = apr_time_now();
    pf_exit_kind_e kind;
    int b = child->bucket;

    if (respawn == NULL || b < 0 || b >= num_buckets
        || child->generation != retained->mpm->my_generation) {
        return;
    }
    kind = pf_classify_exit(now - child->started, child->told_to_stop,
                            why == APR_PROC_EXIT && status == 0,
                            ap_max_requests_per_child > 0);
    if (pf_respawn_note_exit(&respawn[b], kind, child->started, now)
        && !respawn_episode_logged) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00066) "children of bucket %d (%s) keep "
                     "leaving within a second of starting (the last: pid %"
                     APR_PID_T_FMT " slot %d, %s, not asked to stop); "
                     "forking their replacements at maintenance only, "
                     "waiting from 1 s doubling up to %d s between forks "
                     "into a bucket, until a new child lives a second",
                     b, buckets[b].address, pid, slot,
                     describe_exit(pconf, why, status),
                     (int)(PF_RESPAWN_MAX_DELAY_US / APR_USEC_PER_SEC));
        respawn_episode_logged = 1;
    }
}

static void handle_child_exit(server_rec *s, apr_proc_t *pid,
                              apr_exit_why_e exitwhy, int status)
{
    int slot = pf_children_find(retained->children, pid->pid);
    int bucket_index;
    ap_generation_t gen;

    /* A report sent just before the child died is in the queue now. */
    read_ready_reports();
    if (slot >= 0 && exitwhy == APR_PROC_EXIT && status == APEXIT_CHILDFATAL
        && retained->children->slot[slot].ready) {
        /* httpd stops the server when a child exits with this code,
         * because a child that cannot start would fail the same way
         * forever.  This one had started: whatever asked for the code
         * (a module, a script) is not a reason to stop serving. */
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, s,
                     PFBLOGNO(00068) "child pid %" APR_PID_T_FMT " slot %d "
                     "bucket %d exited with APEXIT_CHILDFATAL after it had "
                     "started; only a child that cannot start stops the "
                     "server, so it is replaced",
                     pid->pid, slot, retained->children->slot[slot].bucket);
    }
    else if (ap_process_child_status(pid, exitwhy, status)
             == APEXIT_CHILDFATAL) {
        /* A child could not start at all (bad User, unwritable lock
         * file...); forking more would fail the same way. */
        retained->mpm->mpm_state = AP_MPMQ_STOPPING;
        retained->mpm->shutdown_pending = 1;
        retained->mpm->is_ungraceful = 1;
        if (slot >= 0) {
            note_child_gone(slot);
            pf_children_forget(retained->children, slot);
        }
        return;
    }
    if (slot < 0) {
        if (apr_proc_other_child_alert(pid, APR_OC_REASON_DEATH, status)
            == APR_SUCCESS) {
            return;             /* a piped logger or the like */
        }
        if (ap_unregister_extra_mpm_process(pid->pid, &gen) == 1) {
            return;
        }
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00012) "long lost child came home! (pid %"
                     APR_PID_T_FMT ")", pid->pid);
        return;
    }
    bucket_index = retained->children->slot[slot].bucket;
    gen = retained->children->slot[slot].generation;
    if (exitwhy == APR_PROC_SIGNAL
        && !retained->children->slot[slot].told_to_stop
        && (status == SIGKILL || status == SIGTERM)) {
        /* httpd's own status check keeps quiet about these, but a child
         * killed from outside (the OOM killer, an admin) is news. */
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00035) "child pid %" APR_PID_T_FMT " slot %d "
                     "bucket %d killed by signal %d without being asked to "
                     "stop; replacing it", pid->pid, slot, bucket_index,
                     status);
    }
    pace_after_exit(s, &retained->children->slot[slot], slot, pid->pid,
                    exitwhy, status);
    note_child_gone(slot);
    pf_children_forget(retained->children, slot);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00013) "child pid %" APR_PID_T_FMT " slot %d "
                 "bucket %d generation %d exited",
                 pid->pid, slot, bucket_index, gen);

    /* After a graceful restart the old generation's children hold the
     * slots the new one needs; each one that leaves is replaced at once in
     * its bucket, so a restart under load does not shrink the pool to one
     * child per bucket and make it grow back at the spawn ramp's pace. */
    /* A child that leaves may have been driven out by what a sibling did
     * to the socket they share (shutdown() makes every accept() fail):
     * its bucket's socket is put right before anything is forked. */
    if (bucket_index >= 0 && bucket_index < num_buckets) {
        pf_bucketset_guard(retained->buckets, bucket_index, s);
    }
    if (gen != retained->mpm->my_generation) {
        replace_old_child(s, bucket_index);
    }
    respawn_stranded_buckets(s);
}

/* ------------------------------------------------------------------ */
/* Parent: waiting for children                                        */

/* A child's exit must wake the parent at once: under MaxRequestWorkers a
 * graceful restart can only start a new child when an old one leaves, and
 * until then its bucket may have nobody accepting.  httpd's
 * ap_wait_or_timeout() checks for exited children and then sleeps a
 * second, and a SIGCHLD that lands between the two is lost for that
 * second.  So the handler writes a byte to a pipe and the parent sleeps in
 * poll() on it: an exit before the sleep leaves the byte there and the
 * poll returns at once.  Writing to a pipe is more than setting a flag,
 * and async-signal-safe. */
static void parent_sigchld_handler(int AP_MAYBE_UNUSED(sig))
{
    int saved_errno = errno;
    int fd = wake_fd;
    ssize_t ignored;

    if (fd >= 0) {
        ignored = write(fd, "", 1);     /* full pipe: already awake */
        (void)ignored;
    }
    errno = saved_errno;
}

/* Runs when pconf is cleared at a restart, before this module's text is
 * unmapped: a SIGCHLD that arrived while the configuration is read again
 * would otherwise jump into code that is gone. */
static apr_status_t restore_sigchld(void *AP_MAYBE_UNUSED(data))
{
    wake_fd = -1;
    apr_signal(SIGCHLD, SIG_DFL);
    return APR_SUCCESS;
}

/* The channel children report ready on (report_ready), one for the life
 * of the server, in retained data: a module loaded again must not open
 * another.  Its room is for twice ServerLimit reports: at most ServerLimit
 * children start at once, and children that left before the parent read
 * their reports hold room until it does.  Without the channel a child's
 * APEXIT_CHILDFATAL stops the server, as in httpd. */
static void open_ready_channel(server_rec *s)
{
    int wanted = 2 * retained->first_server_limit + 64, room = 0;
    apr_status_t why;

    if (retained->ready_channel[0] >= 0) {
        return;
    }
    why = pf_ready_open(retained->ready_channel, wanted, &room);
    if (why == APR_SUCCESS && room < wanted) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00173) "the channel children report ready on "
                     "holds %d reports, fewer than the %d wanted for "
                     "ServerLimit %d: when more children start at once, "
                     "they wait for room", room, wanted,
                     retained->first_server_limit);
    }
    if (why != APR_SUCCESS && !retained->ready_channel_logged) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, why, s,
                     PFBLOGNO(00069) "couldn't open the channel children "
                     "report ready on; a child that exits with "
                     "APEXIT_CHILDFATAL stops the server, as in httpd");
        retained->ready_channel_logged = 1;
    }
}

static void parent_wake_on_child_exit(apr_pool_t *p)
{
    struct sigaction sa;
    int fds[2], i;

    /* One pipe for the life of the server, in retained data: a module
     * loaded again must not open another. */
    if (retained->wake_pipe[0] < 0 && pipe(fds) == 0) {
        for (i = 0; i < 2; i++) {
            fcntl(fds[i], F_SETFL, O_NONBLOCK);
            fcntl(fds[i], F_SETFD, FD_CLOEXEC);
            retained->wake_pipe[i] = fds[i];
        }
    }
    wake_fd = retained->wake_pipe[1];
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: other code in the parent (monitor hooks, piped logs)
     * does not expect EINTR; poll() returns early on a signal anyway. */
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sa.sa_handler = parent_sigchld_handler;
    sigaction(SIGCHLD, &sa, NULL);
    apr_pool_cleanup_register(p, NULL, restore_sigchld,
                              apr_pool_cleanup_null);
}

/* ap_wait_or_timeout() without its lost-wake-up window: reaps one exited
 * child if there is one, else waits up to @a wait_ms for the next exit
 * (or any signal). */
static void wait_for_child_exit(apr_exit_why_e *exitwhy, int *status,
                                apr_proc_t *pid, apr_pool_t *p,
                                server_rec *s, int wait_ms)
{
    static int calls;
    struct pollfd pfd[2];
    char drain[64];
    apr_status_t rv;

    /* As httpd does: the monitor hook every tenth pass. */
    if (++calls >= 10) {
        calls = 0;
        ap_run_monitor(p, s);
    }
    rv = apr_proc_wait_all_procs(pid, status, exitwhy, APR_NOWAIT, p);
    ap_update_global_status();
    if (APR_STATUS_IS_CHILD_DONE(rv)) {
        return;
    }
    pid->pid = -1;
    if (APR_STATUS_IS_EINTR(rv)) {
        return;
    }
    if (retained->wake_pipe[0] < 0) {
        apr_sleep(apr_time_from_msec(wait_ms));
        return;
    }
    pfd[0].fd = retained->wake_pipe[0];
    pfd[1].fd = retained->ready_channel[0];     /* -1: poll ignores it */
    pfd[0].events = pfd[1].events = POLLIN;
    pfd[0].revents = pfd[1].revents = 0;
    if (poll(pfd, 2, wait_ms) > 0) {
        while (read(retained->wake_pipe[0], drain, sizeof(drain)) > 0) {
        }
        read_ready_reports();
    }
}

/* Reaps children and keeps the buckets served until a signal asks for a
 * restart or a stop, or, when @a drain_until is set, until the accept
 * queues are empty or that time has come. */
static void server_main_loop(server_rec *s, apr_time_t drain_until)
{
    /* The first cycle comes a second after (re)start: until then the new
     * generation is being started and the old one replaced child for
     * child, and a deficit seen now would only add to that. */
    apr_time_t last_maintenance = apr_time_now();
    int wait_ms = drain_until ? DRAIN_POLL_MS : 1000;

    while (!retained->mpm->restart_pending
           && !retained->mpm->shutdown_pending) {
        apr_exit_why_e exitwhy;
        int status;
        apr_proc_t pid;
        apr_time_t now;

        if (drain_until
            && (apr_time_now() >= drain_until
                || pf_bucketset_queued_total(retained->buckets) == 0)) {
            return;
        }
        wait_for_child_exit(&exitwhy, &status, &pid, pconf, s, wait_ms);
        if (pid.pid != -1) {
            handle_child_exit(s, &pid, exitwhy, status);
        }
        now = apr_time_now();
        if (retained->mpm->restart_pending
            || retained->mpm->shutdown_pending) {
            break;
        }
        if (now - last_maintenance >= MAINTENANCE_INTERVAL
            || now < last_maintenance) {
            perform_idle_server_maintenance(s);
            last_maintenance = now;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Parent: stopping                                                    */

/* A graceful stop finishes what the kernel has already accepted: new
 * handshakes are dropped at every socket, and the children keep accepting
 * (children that leave meanwhile are replaced, as in normal running) until
 * the queues are empty or the drain's bound is reached: the
 * GracefulShutdownTimeout when one is set, otherwise the server's Timeout.
 * Only then are the children told to finish and exit.  Closing the
 * sockets first would reset every connection still queued. */
static void drain_accept_queues(server_rec *s, apr_time_t cutoff)
{
    apr_time_t until = cutoff;
    apr_status_t rv;

    if (!until) {
        until = apr_time_now() + s->timeout;
    }
    rv = pf_bucketset_refuse_new(retained->buckets, s);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_INFO, rv, s,
                     PFBLOGNO(00040) "graceful stop: can't stop new "
                     "handshakes on the listeners; connections still "
                     "queued when they close will be reset");
        return;
    }
    server_main_loop(s, until);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00041) "graceful stop: %d connection(s) left in "
                 "the accept queues",
                 pf_bucketset_queued_total(retained->buckets));
}

static int shutdown_server(server_rec *s)
{
    apr_time_t cutoff = 0;

    retained->mpm->mpm_state = AP_MPMQ_STOPPING;
    if (retained->mpm->is_ungraceful) {
        pf_children_reclaim(retained->children, 1, note_child_gone);
        ap_remove_pid(pconf, ap_pid_fname);
        pf_bucketset_close(retained->buckets);
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00014) "caught SIGTERM, shutting down");
        return DONE;
    }

    ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                 PFBLOGNO(00015) "caught " AP_SIG_GRACEFUL_STOP_STRING
                 ", shutting down gracefully (GracefulShutdownTimeout %d)",
                 ap_graceful_shutdown_timeout);
    if (ap_graceful_shutdown_timeout) {
        cutoff = apr_time_now()
                 + apr_time_from_sec(ap_graceful_shutdown_timeout);
    }
    /* A second signal (SIGTERM) during the wait cuts it short. */
    retained->mpm->shutdown_pending = 0;
    drain_accept_queues(s, cutoff);
    signal_old_children(1);
    pf_bucketset_close(retained->buckets);
    pf_children_reap(retained->children, note_child_gone);
    ap_remove_pid(pconf, ap_pid_fname);
    while (!retained->mpm->shutdown_pending
           && pf_children_live(retained->children) > 0
           && (!cutoff || apr_time_now() < cutoff)) {
        apr_sleep(apr_time_from_msec(100));
        pf_children_reap(retained->children, note_child_gone);
    }
    pf_children_reclaim(retained->children, 1, note_child_gone);
    return DONE;
}

/* ------------------------------------------------------------------ */
/* Parent: a generation                                                */

/* Children of the generation so far, per bucket, that the new one's
 * buckets of the same identity take over (not those told to stop). */
static int *children_per_old_bucket(apr_pool_t *p)
{
    int old_buckets, slot, *count;

    pf_bucketset_buckets(retained->buckets, &old_buckets);
    count = apr_pcalloc(p, sizeof(int) * (apr_size_t)(old_buckets + 1));
    for (slot = 0; slot < retained->children->used; slot++) {
        const pf_child_t *cs = &retained->children->slot[slot];

        if (cs->pid != 0 && !cs->told_to_stop && cs->bucket >= 0
            && cs->bucket < old_buckets) {
            count[cs->bucket]++;
        }
    }
    return count;
}

/* Builds this generation's buckets (the bucket set decides what the
 * (re)start keeps and acts on it), and notes where each running child now
 * belongs. */
static int build_generation(apr_pool_t *p, server_rec *s, int startup)
{
    pf_bucketset_config_t cfg;
    int slot;

    memset(&cfg, 0, sizeof(cfg));
    cfg.how = startup ? PF_START_FIRST
                      : (retained->mpm->was_graceful ? PF_RESTART_GRACEFUL
                                                     : PF_RESTART_FULL);
    cfg.ratio = buckets_ratio;
    cfg.explicit_buckets = buckets_explicit;
    cfg.max_workers = max_workers;
    cfg.min_spare_servers = min_spare_servers;
    cfg.start_servers = start_servers;
    cfg.steer_wanted = steering_wanted;
    cfg.cpu_affinity = bucket_cpu_affinity;
    cfg.old_children = children_per_old_bucket(p);
    if (pf_bucketset_build(retained->buckets, &cfg, p, s, &generation_plan)
        != APR_SUCCESS) {
        return !OK;
    }
    buckets = pf_bucketset_buckets(retained->buckets, &num_buckets);
    for (slot = 0; slot < retained->children->used; slot++) {
        pf_child_t *child = &retained->children->slot[slot];

        child->bucket = child->pid != 0
                            ? pf_bucketset_slot_bucket(retained->buckets, slot)
                            : -1;
    }
    return OK;
}

static int prefork_run(apr_pool_t *p, apr_pool_t *plog, server_rec *s)
{
    pconf = p;
    ap_log_pid(pconf, ap_pid_fname);

    if (!retained->mpm->was_graceful) {
        if (ap_run_pre_mpm(s->process->pool, SB_SHARED) != OK) {
            retained->mpm->mpm_state = AP_MPMQ_STOPPING;
            return !OK;
        }
        /* A new scoreboard: only a child that would not die is left. */
        retained->children->used = pf_children_in_use(retained->children);
    }
    ap_scoreboard_image->global->running_generation =
        retained->mpm->my_generation;
    /* A stop asked for while the configuration was read again is kept:
     * the main loop then ends at once and the server stops, where httpd's
     * own prefork would forget it and run on. */
    retained->mpm->restart_pending = 0;
    ap_unixd_mpm_set_signals(pconf, one_process);
    if (!one_process) {
        parent_wake_on_child_exit(pconf);
        open_ready_channel(s);
        pf_filter_probe(&retained->filter, child_syscall_filter, s);
    }

    if (one_process) {
        AP_MONCONTROL(1);
        make_child(s, 0, 0);
        /* not reached: the child loop exits the process */
    }

    pf_bucketset_steer(retained->buckets, steering_wanted,
                       bucket_cpu_affinity, pconf, s);
    snapshot_alloc(pconf);
    startup_children(s);
    /* The new generation is accepting; now let the old one go, so that
     * no bucket is ever left without a child. */
    signal_old_children(0);
    take_snapshot(s, 1);
    publish_snapshot();

    ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                 PFBLOGNO(00017) "%s configured -- resuming normal "
                 "operations", ap_get_server_description());
    ap_log_mpm_common(s);
    ap_log_command_line(plog, s);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00018) "Accept mutex: %s (default: %s)",
                 buckets[0].mutex ? apr_proc_mutex_name(buckets[0].mutex)
                                  : "none",
                 apr_proc_mutex_defname());
    retained->mpm->mpm_state = AP_MPMQ_RUNNING;

    server_main_loop(s, 0);

    if (retained->mpm->shutdown_pending) {
        return shutdown_server(s);
    }

    /* Restart: the listeners and the bucket sockets stay open in this
     * process, so connections keep queueing while the configuration is
     * read again. */
    retained->mpm->mpm_state = AP_MPMQ_STOPPING;
    ++retained->mpm->my_generation;
    ap_scoreboard_image->global->running_generation =
        retained->mpm->my_generation;
    if (!retained->mpm->is_ungraceful) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00019) "Graceful restart requested, doing "
                     "restart");
        /* Old children are told to go once the new ones run. */
    }
    else {
        pf_children_reclaim(retained->children, 1, note_child_gone);
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00020) "SIGHUP received.  Attempting to "
                     "restart");
    }
    return OK;
}

/* ------------------------------------------------------------------ */
/* Hooks                                                               */

static int prefork_open_logs(apr_pool_t *p, apr_pool_t *AP_MAYBE_UNUSED(plog),
                             apr_pool_t *AP_MAYBE_UNUSED(ptemp),
                             server_rec *s)
{
    int startup = retained->mpm->module_loads == 1;

    pconf = p;
    parent_pid = getpid();
    if (ap_setup_listeners(ap_server_conf) < 1) {
        ap_log_error(APLOG_MARK, APLOG_ALERT | (startup ? APLOG_STARTUP : 0),
                     0, startup ? NULL : s,
                     PFBLOGNO(00028) "no listening sockets available, "
                     "shutting down");
        return !OK;
    }
    if (retained->buckets == NULL) {
        retained->buckets = pf_bucketset_create(retained->keep_pool,
                                                retained->first_server_limit,
                                                retained->started);
    }
    if (build_generation(p, s, startup) != OK) {
        return !OK;
    }
    if (startup) {
        /* The console still is stderr: what the admin must change. */
        pf_bucketset_log_plan(retained->buckets, 1, s);
    }
    return OK;
}

static int prefork_pre_config(apr_pool_t *p, apr_pool_t *AP_MAYBE_UNUSED(plog),
                              apr_pool_t *AP_MAYBE_UNUSED(ptemp))
{
    int no_detach, debug, foreground;
    apr_status_t rv;
    const char *userdata_key = "mpm_prefork_buckets_module";

    debug = ap_exists_config_define("DEBUG");
    if (debug) {
        foreground = one_process = 1;
        no_detach = 0;
    }
    else {
        one_process = ap_exists_config_define("ONE_PROCESS");
        no_detach = ap_exists_config_define("NO_DETACH");
        foreground = ap_exists_config_define("FOREGROUND");
    }

    retained = ap_retained_data_get(userdata_key);
    if (!retained) {
        retained = ap_retained_data_create(userdata_key, sizeof(*retained));
        retained->mpm = ap_unixd_mpm_get_retained_data();
        retained->started = apr_time_now();
        retained->wake_pipe[0] = retained->wake_pipe[1] = -1;
        retained->ready_channel[0] = retained->ready_channel[1] = -1;
        apr_pool_create(&retained->keep_pool, ap_pglobal);
        apr_pool_tag(retained->keep_pool, "prefork_buckets_keep");
    }
    retained->mpm->mpm_state = AP_MPMQ_STARTING;
    if (retained->mpm->baton != retained) {
        retained->mpm->was_graceful = 0;
        retained->mpm->baton = retained;
    }
    ++retained->mpm->module_loads;

    /* Detach on the second pass over the configuration, once it has been
     * checked, as httpd's own MPMs do. */
    if (!retained->mpm->was_graceful && retained->mpm->module_loads == 2) {
        if (!one_process && !foreground) {
            rv = apr_proc_detach(no_detach ? APR_PROC_DETACH_FOREGROUND
                                           : APR_PROC_DETACH_DAEMONIZE);
            if (rv != APR_SUCCESS) {
                ap_log_error(APLOG_MARK, APLOG_CRIT, rv, NULL,
                             PFBLOGNO(00030) "apr_proc_detach failed");
                return HTTP_INTERNAL_SERVER_ERROR;
            }
        }
    }

    ap_listen_pre_config();
    start_servers = DEFAULT_START_DAEMON;
    min_spare_servers = DEFAULT_MIN_FREE_DAEMON;
    max_spare_servers = DEFAULT_MAX_FREE_DAEMON;
    server_limit = DEFAULT_SERVER_LIMIT;
    max_workers = DEFAULT_SERVER_LIMIT;
    buckets_ratio = 0;
    buckets_explicit = PF_BUCKETS_UNSET;
    steering_wanted = PFB_STEER_HASH;
    bucket_cpu_affinity = 0;
    child_syscall_filter = 1;
    ap_max_mem_free = APR_ALLOCATOR_MAX_FREE_UNLIMITED;

    rv = ap_mutex_register(p, AP_ACCEPT_MUTEX_TYPE, NULL, APR_LOCK_DEFAULT, 0);
    if (rv != APR_SUCCESS) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return OK;
}

/* One correction, in httpd's words where httpd makes it.  At start-up's
 * first pass the line goes to the console (the error log is not open);
 * later, once core has opened the error log. */
static void log_correction(const pf_fix_t *fix, int startup, server_rec *s)
{
    int startup_flag = startup ? APLOG_STARTUP : 0;
    const server_rec *to = startup ? NULL : s;
    const char *warning = startup ? "WARNING: " : "";

    switch (fix->kind) {
    case PF_FIX_SERVER_LIMIT_ABOVE_CAP:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00080) "%sServerLimit of %d exceeds the "
                     "compile-time limit of %d servers, decreasing to %d",
                     warning, fix->given, PF_MAX_SERVER_LIMIT, fix->used);
        break;
    case PF_FIX_SERVER_LIMIT_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00081) "%sServerLimit of %d not allowed, "
                     "increasing to %d", warning, fix->given, fix->used);
        break;
    case PF_FIX_SERVER_LIMIT_RESTART:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00082) "%schanging ServerLimit to %d from the "
                     "original value of %d is not allowed during a restart; "
                     "ServerLimit stays %d until the server is stopped and "
                     "started", warning, fix->given, fix->used, fix->used);
        break;
    case PF_FIX_WORKERS_ABOVE_LIMIT:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00083) "%sMaxRequestWorkers of %d exceeds "
                     "ServerLimit value of %d servers, decreasing "
                     "MaxRequestWorkers to %d; to increase it, increase "
                     "ServerLimit", warning, fix->given, fix->used,
                     fix->used);
        break;
    case PF_FIX_WORKERS_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00084) "%sMaxRequestWorkers of %d not "
                     "allowed, increasing to %d", warning, fix->given,
                     fix->used);
        break;
    case PF_FIX_START_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00085) "%sStartServers of %d not allowed, "
                     "increasing to %d", warning, fix->given, fix->used);
        break;
    case PF_FIX_START_ABOVE_WORKERS:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00086) "%sStartServers of %d exceeds "
                     "MaxRequestWorkers of %d, decreasing StartServers to %d",
                     warning, fix->given, fix->used, fix->used);
        break;
    case PF_FIX_MIN_SPARE_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00087) "%sMinSpareServers of %d not allowed, "
                     "increasing to %d to avoid almost certain server "
                     "failure", warning, fix->given, fix->used);
        break;
    case PF_FIX_MAX_SPARE_NOT_ABOVE_MIN:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00088) "%sMaxSpareServers of %d is not above "
                     "MinSpareServers of %d, increasing MaxSpareServers to "
                     "%d", warning, fix->given, fix->used - 1, fix->used);
        break;
    case PF_FIX_RATIO_WITH_EXPLICIT:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00089) "%sboth ListenBuckets (%d) and "
                     "ListenCoresBucketsRatio (%d) are set; ListenBuckets "
                     "wins and the ratio is ignored", warning, fix->used,
                     fix->given);
        break;
    default:
        break;
    }
}

static void log_corrections(int startup, server_rec *s)
{
    int i;

    for (i = 0; i < num_pool_fixes; i++) {
        log_correction(&pool_fixes[i], startup, s);
    }
}

static int prefork_check_config(apr_pool_t *AP_MAYBE_UNUSED(p),
                                apr_pool_t *AP_MAYBE_UNUSED(plog),
                                apr_pool_t *AP_MAYBE_UNUSED(ptemp),
                                server_rec *AP_MAYBE_UNUSED(s))
{
    int startup = retained->mpm->module_loads == 1;
    pf_pool_config_t cfg;

    cfg.server_limit = server_limit;
    cfg.max_workers = max_workers;
    cfg.start_servers = start_servers;
    cfg.min_spare_servers = min_spare_servers;
    cfg.max_spare_servers = max_spare_servers;
    cfg.ratio = buckets_ratio;
    cfg.explicit_buckets = buckets_explicit;
    num_pool_fixes = pf_correct_pool_config(&cfg,
                                            retained->first_server_limit,
                                            pool_fixes);
    server_limit = cfg.server_limit;
    max_workers = cfg.max_workers;
    start_servers = cfg.start_servers;
    min_spare_servers = cfg.min_spare_servers;
    max_spare_servers = cfg.max_spare_servers;
    buckets_ratio = cfg.ratio;
    if (!retained->first_server_limit) {
        retained->first_server_limit = server_limit;
        retained->children = pf_children_create(retained->keep_pool,
                                                server_limit);
    }
    /* At start-up's first pass the console is stderr; at the second the
     * daemon's stderr is /dev/null until core opens the error log, so
     * these wait for log_after_core_opened_logs(). */
    if (startup) {
        log_corrections(1, NULL);
        pf_filter_log_off(child_syscall_filter, 1, NULL);
    }
    return OK;
}

/* Runs after core's open_logs hook, which opened the error log and pointed
 * stderr at it.  Before that a daemon's stderr is /dev/null (apr_proc_detach
 * at the second pass), so what check_config corrected and what the bucket
 * set decided are logged here, in daemon mode as in the foreground, and
 * into the new error log at a restart.  The first pass logged its
 * warnings to the console and stays quiet here, so that each line is
 * logged once. */
static int log_after_core_opened_logs(apr_pool_t *AP_MAYBE_UNUSED(p),
                                      apr_pool_t *AP_MAYBE_UNUSED(plog),
                                      apr_pool_t *AP_MAYBE_UNUSED(ptemp),
                                      server_rec *s)
{
    if (retained->mpm->module_loads == 1) {
        return OK;
    }
    log_corrections(0, s);
    pf_filter_log_off(child_syscall_filter, 0, s);
    if (retained->buckets != NULL) {
        pf_bucketset_log_plan(retained->buckets, 0, s);
    }
    return OK;
}

static int prefork_query(int query_code, int *result, apr_status_t *rv)
{
    *rv = APR_SUCCESS;
    switch (query_code) {
    case AP_MPMQ_MAX_DAEMON_USED:
        *result = retained->children ? retained->children->used
                                     : max_workers;
        break;
    case AP_MPMQ_IS_THREADED:
        *result = AP_MPMQ_NOT_SUPPORTED;
        break;
    case AP_MPMQ_IS_FORKED:
        *result = AP_MPMQ_DYNAMIC;
        break;
    case AP_MPMQ_HARD_LIMIT_DAEMONS:
        *result = server_limit;
        break;
    case AP_MPMQ_HARD_LIMIT_THREADS:
        *result = HARD_THREAD_LIMIT;
        break;
    case AP_MPMQ_MAX_THREADS:
        *result = 1;
        break;
    case AP_MPMQ_MIN_SPARE_DAEMONS:
        *result = min_spare_servers;
        break;
    case AP_MPMQ_MIN_SPARE_THREADS:
    case AP_MPMQ_MAX_SPARE_THREADS:
        *result = 0;
        break;
    case AP_MPMQ_MAX_SPARE_DAEMONS:
        *result = max_spare_servers;
        break;
    case AP_MPMQ_MAX_REQUESTS_DAEMON:
        *result = ap_max_requests_per_child;
        break;
    case AP_MPMQ_MAX_DAEMONS:
        *result = max_workers;
        break;
    case AP_MPMQ_MPM_STATE:
        *result = retained->mpm->mpm_state;
        break;
    case AP_MPMQ_GENERATION:
        *result = retained->mpm->my_generation;
        break;
    default:
        *rv = APR_ENOTIMPL;
        break;
    }
    return OK;
}

/* A process a module forks from the parent and runs as User: mod_cgid's
 * daemon, which forks every CGI script.  It would hold every bucket
 * socket the parent held at the fork and run outside the children's
 * system-call filter, with everything it starts, so that a child could
 * have it start a program and pass that its socket.  It gets what a child
 * gets: no bucket socket (it serves none), none of the parent's channels,
 * and the filter. */
static int prefork_drop_privileges(apr_pool_t *AP_MAYBE_UNUSED(p),
                                   server_rec *s)
{
    if (in_bucket_child || getpid() == parent_pid || retained == NULL
        || retained->buckets == NULL) {
        return DECLINED;
    }
    pf_bucketset_child_init(retained->buckets, -1, -1, 0, NULL, 0, s);
    close_parent_channels(1);
    pf_filter_helper(child_syscall_filter, s);
    return DECLINED;
}

static const char *prefork_get_name(void)
{
    return "prefork";
}

static void prefork_hooks(apr_pool_t *AP_MAYBE_UNUSED(p))
{
    /* Open the listeners before core's open_logs hook points stderr at the
     * error log, as httpd's own MPMs do: a bind error at start-up then
     * reaches the console, and piped loggers don't inherit a half-made
     * set of sockets. */
    static const char *const before_core[] = { "core.c", NULL };
    /* What the generation's start logs waits for core to open the error
     * log (log_after_core_opened_logs). */
    static const char *const after_core[] = { "core.c", NULL };

    ap_hook_open_logs(prefork_open_logs, NULL, before_core,
                      APR_HOOK_REALLY_FIRST);
    ap_hook_open_logs(log_after_core_opened_logs, after_core, NULL,
                      APR_HOOK_REALLY_FIRST);
    /* Our pre_config must run before core's pre_config, which may want to
     * know the MPM's state. */
    ap_hook_pre_config(prefork_pre_config, NULL, NULL, APR_HOOK_REALLY_FIRST);
    ap_hook_check_config(prefork_check_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_mpm(prefork_run, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_mpm_query(prefork_query, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_mpm_get_name(prefork_get_name, NULL, NULL, APR_HOOK_MIDDLE);
    /* Before mod_unixd's: the filter goes in while the process is root. */
    ap_hook_drop_privileges(prefork_drop_privileges, NULL, NULL,
                            APR_HOOK_FIRST);
    APR_REGISTER_OPTIONAL_FN(prefork_buckets_segment);
}

/* ------------------------------------------------------------------ */
/* Directives                                                          */

/* Every integer directive: a strict parse and its range, from the entry
 * its command_rec points at.  The message names the directive, echoes the
 * value and gives the range. */
static const char *set_int_directive(cmd_parms *cmd,
                                     void *AP_MAYBE_UNUSED(dir_config),
                                     const char *arg)
{
    const int_directive_t *d = cmd->info;
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    char msg[512];
    pf_parse_e why;

    if (err != NULL) {
        return err;
    }
    if (d->replaced_by) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, NULL,
                     PFBLOGNO(00033) "%s is deprecated, use %s instead.",
                     cmd->cmd->name, d->replaced_by);
    }
    why = pf_parse_bounded_int(arg, d->min, d->max, d->value);
    if (why == PF_PARSE_OK) {
        return NULL;
    }
    return apr_pstrdup(cmd->pool,
                       pf_format_parse_error(msg, sizeof(msg), cmd->cmd->name,
                                             arg, d->min, d->max, why));
}

static const char *set_bucket_steering(cmd_parms *cmd,
                                       void *AP_MAYBE_UNUSED(dir_config),
                                       const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    const char *missing;

    if (err != NULL) {
        return err;
    }
    if (pf_steer_parse_mode(arg, &steering_wanted) != 0) {
        return apr_psprintf(cmd->pool, "%s: '%s' is not a steering mode; "
                            "expected hash, cpu, idle or local", cmd->cmd->name,
                            arg);
    }
    missing = pf_steer_mode_missing(steering_wanted);
    if (missing != NULL) {
        return apr_psprintf(cmd->pool, "%s: '%s' needs the MPM's BPF "
                            "programs, and this build has none: it was "
                            "made without %s; use hash, or rebuild the MPM "
                            "with them (docs/building.md)", cmd->cmd->name,
                            arg, missing);
    }
    return NULL;
}

/* BucketCPUAffinity and ChildSyscallFilter: On or Off, into the int
 * their command_rec points at. */
static const char *set_switch(cmd_parms *cmd, void *AP_MAYBE_UNUSED(dir_config),
                              const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    int *value = cmd->info;

    if (err != NULL) {
        return err;
    }
    if (!strcasecmp(arg, "on")) {
        *value = 1;
    }
    else if (!strcasecmp(arg, "off")) {
        *value = 0;
    }
    else {
        return apr_psprintf(cmd->pool, "%s: '%s' is not a switch; expected "
                            "On or Off", cmd->cmd->name, arg);
    }
    return NULL;
}

/* clang-format off */
/* Built from core's individual Listen handlers instead of LISTEN_COMMANDS,
 * because that macro carries core's own ListenCoresBucketsRatio and the
 * first match in a table wins. */
static const command_rec prefork_cmds[] = {
AP_INIT_TAKE_ARGV("Listen", ap_set_listener, NULL, RSRC_CONF,
    "A port number or a numeric IP address and a port number, and an "
    "optional protocol"),
AP_INIT_TAKE1("ListenBacklog", ap_set_listenbacklog, NULL, RSRC_CONF,
    "Maximum length of the queue of pending connections, as used by "
    "listen(2)"),
AP_INIT_TAKE1("SendBufferSize", ap_set_send_buffer_size, NULL, RSRC_CONF,
    "Send buffer size in bytes"),
AP_INIT_TAKE1("ReceiveBufferSize", ap_set_receive_buffer_size, NULL,
    RSRC_CONF, "Receive buffer size in bytes"),
#ifdef HAVE_AP_SET_LISTENTCPDEFERACCEPT
/* Core's handler exists only in releases that have the directive (found by
 * configure); without it the directive is unknown there, as with any MPM. */
AP_INIT_TAKE1("ListenTCPDeferAccept", ap_set_listentcpdeferaccept, NULL,
    RSRC_CONF, "Value set for the socket option TCP_DEFER_ACCEPT if it is "
    "set"),
#endif
AP_INIT_TAKE1("ListenCoresBucketsRatio", set_int_directive,
    &int_directives[D_BUCKETS_RATIO], RSRC_CONF,
    "an integer from 0 to 2147483647: usable CPUs per listener bucket, 0 = "
    "buckets off"),
AP_INIT_TAKE1("ListenBuckets", set_int_directive,
    &int_directives[D_BUCKETS_EXPLICIT],
    RSRC_CONF, "an integer from 0 to 200000: listener buckets per Listen; "
    "0 = every Listen in one bucket, unless ListenCoresBucketsRatio is set"),
AP_INIT_TAKE1("ListenBucketSteering", set_bucket_steering, NULL, RSRC_CONF,
    "hash, cpu, idle or local: how a new connection picks its bucket "
    "among a Listen's sockets (default hash)"),
AP_INIT_TAKE1("BucketCPUAffinity", set_switch, &bucket_cpu_affinity,
    RSRC_CONF, "On or Off: pin each bucket's children to the CPUs that feed "
    "it under cpu or local steering (default Off)"),
AP_INIT_TAKE1("ChildSyscallFilter", set_switch, &child_syscall_filter,
    RSRC_CONF, "On or Off: children install the system-call filter that "
    "guards the bucket sockets (default On)"),
AP_INIT_TAKE1("StartServers", set_int_directive,
    &int_directives[D_START_SERVERS],
    RSRC_CONF, "an integer from 0 to 2147483647: number of child processes "
    "created at start-up (0 is corrected to 1)"),
AP_INIT_TAKE1("MinSpareServers", set_int_directive,
    &int_directives[D_MIN_SPARE],
    RSRC_CONF, "an integer from 0 to 2147483647: minimum number of idle "
    "children, split over the buckets (0 is corrected to 1)"),
AP_INIT_TAKE1("MaxSpareServers", set_int_directive,
    &int_directives[D_MAX_SPARE],
    RSRC_CONF, "an integer from 0 to 2147483647: maximum number of idle "
    "children, split over the buckets (at least MinSpareServers + 1)"),
AP_INIT_TAKE1("MaxClients", set_int_directive,
    &int_directives[D_MAX_CLIENTS],
    RSRC_CONF, "an integer from 0 to 2147483647 (deprecated name of "
    "MaxRequestWorkers)"),
AP_INIT_TAKE1("MaxRequestWorkers", set_int_directive,
    &int_directives[D_MAX_WORKERS],
    RSRC_CONF, "an integer from 0 to 2147483647: maximum number of children "
    "alive at the same time (1 to ServerLimit)"),
AP_INIT_TAKE1("ServerLimit", set_int_directive,
    &int_directives[D_SERVER_LIMIT],
    RSRC_CONF, "an integer from 0 to 2147483647: maximum value of "
    "MaxRequestWorkers for this run of Apache (1 to 200000)"),
AP_INIT_TAKE1("MaxConnectionsPerChild", set_int_directive,
    &int_directives[D_MAX_CONNECTIONS], RSRC_CONF, "an integer from 0 to "
    "2147483647: connections a child serves before it exits, 0 = no limit"),
AP_INIT_TAKE1("MaxRequestsPerChild", set_int_directive,
    &int_directives[D_MAX_REQUESTS], RSRC_CONF,
    "an integer from 0 to 2147483647 "
    "(deprecated name of MaxConnectionsPerChild)"),
AP_INIT_TAKE1("GracefulShutdownTimeout", set_int_directive,
    &int_directives[D_SHUTDOWN_TIMEOUT], RSRC_CONF,
    "an integer from 0 to 2147483: "
    "seconds to wait for children to finish their connections at a "
    "graceful stop, 0 = no limit"),
{ NULL }
};

AP_DECLARE_MODULE(mpm_prefork) = {
    MPM20_MODULE_STUFF,
    NULL,                       /* hook to run before apache parses args */
    NULL,                       /* create per-directory config structure */
    NULL,                       /* merge per-directory config structures */
    NULL,                       /* create per-server config structure */
    NULL,                       /* merge per-server config structures */
    prefork_cmds,               /* command apr_table_t */
    prefork_hooks,              /* register hooks */
    AP_MODULE_FLAG_NONE         /* flags */
};
/* clang-format on */
