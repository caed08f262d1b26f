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
 * This file holds what httpd's prefork.c holds, in its order: the record
 * of children's starts and exits, the child's signals and loop, forking,
 * the maintenance cycle (observe, decide, act, publish) and the parent's
 * loop, stopping, queries and hooks.  Each capability it calls has a room
 * of its own: the directives in prefork_directives.c (their pure parse
 * and corrections in prefork_config.c), the children table in
 * prefork_children.c, the generation in prefork_generation.c, the buckets
 * (sockets, identities, the shared segment) in buckets/, the guard of the
 * sockets children hold in guard/, ListenBucketSteering in steering/, a
 * child's accept and close in conn/.  The cycle's observation is
 * assembled here, from the generation's queues, the children and
 * steering's counts, in that order.
 * The server's decisions are pure functions in their rooms: the bucket
 * count and what a restart keeps in buckets/prefork_plan.c, maintenance
 * and a child's end and respawn pacing in prefork_maintenance.c, and
 * each steering mode's in
 * steering/prefork_steering_rules.h.
 *
 * The parent runs as root and children run untrusted code, so the parent
 * keeps its own record of every child (pid, bucket, generation, whether it
 * was told to stop: prefork_children.c) and never sizes, indexes or
 * signals from anything a child can write: the scoreboard's parent fields
 * are written for mod_status and never read back, and its worker status
 * is only compared with constants.
 */

#include "apr.h"
#include "apr_atomic.h"
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
#include "conn/prefork_conn.h"
#include "prefork_buckets.h"
#include "buckets/prefork_bucketset.h"
#include "prefork_children.h"
#include "prefork_config.h"
#include "prefork_directives.h"
#include "prefork_maintenance.h"
#include "steering/prefork_steering.h"
#include "guard/prefork_sockguard.h"

/* Children are single-threaded: one worker slot per process. */
#define HARD_THREAD_LIMIT 1

/* How often the parent runs idle-server maintenance. */
#define MAINTENANCE_INTERVAL apr_time_from_sec(1)

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
    pf_sockguard_t *guard;      /* the bucket sockets children hold */
    pf_steer_t *steer;          /* ListenBucketSteering */
    pf_generation_t gen;        /* what the last (re)start made */
    apr_time_t started;
    int ready_channel_logged;   /* the one line about the ready channel's
                                   absence */
    pf_filter_retained_t filter;        /* the children's system-call
                                           filter, found out once */
} prefork_retained_data;

static prefork_retained_data *retained;

/* The directives in force (prefork_directives.c holds them): read-only
 * here, through the pointer pre_config gets.  Before the first pre_config
 * (a module that queries the MPM while the modules load) every value
 * reads 0, as it did before the values had a home of their own. */
static const pf_config_t no_directives_yet;
static const pf_config_t *conf = &no_directives_yet;

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

/* Child-side state. */
/* This process's slot and bucket when it is one of the children, given
 * to child_main() at the fork; -1 in the parent and in any process a
 * module forks from it. */
static struct {
    int slot;
    int bucket;
} me = { -1, -1 };
static apr_pool_t *pchild;
static int devnull_fd = -1;
static volatile sig_atomic_t child_die_now;
static volatile sig_atomic_t child_in_accept_wait;
/* Set while the child clears its transaction pool or closes its
 * connection: the pools' cleanups are running, and exiting from the
 * handler would run them again from inside themselves (mod_ssl freeing
 * its connection twice).  A stop then leaves from the loop. */
static volatile sig_atomic_t child_tearing_down;
/* A stop (SIGTERM), not a graceful one: the child leaves without waiting
 * for its lingering sockets, as httpd's child dies in its lingering
 * close. */
static volatile sig_atomic_t child_stopped_at_once;
/* Where the child is, for its stop handler.  Starting: until child_init
 * has run a stop signal only sets child_die_now and the child leaves
 * right after its start-up, since exiting from the handler would destroy
 * pools from inside whatever the start-up was doing (libseccomp building
 * the filter, a module's child_init allocating; glibc aborts on the
 * corrupted heap).  Exiting: once any exit() has begun (a module's too),
 * whose handlers are not reentrant. */
enum { CHILD_STARTING, CHILD_SERVING, CHILD_EXITING };
static volatile sig_atomic_t child_stage;

module AP_MODULE_DECLARE_DATA mpm_prefork_module;

/* ------------------------------------------------------------------ */
/* Parent: the record of its children                                 */

/* A child has been reaped and its slot freed (@a child is what the slot
 * held): what readers see of it goes, and so do its counts. */
static void prefork_note_child_killed(int slot, const pf_child_t *child)
{
    int waited_in;

    (void)ap_update_child_status_from_indexes(slot, 0, SERVER_DEAD, NULL);
    waited_in = pf_bucketset_child_gone(retained->buckets, slot, child);
    if (waited_in >= 0) {
        /* It died counted as waiting in accept(): never advertised as
         * idle again. */
        pf_steer_child_gone(retained->steer, waited_in);
    }
    ap_run_child_status(ap_server_conf, child->pid, child->generation, slot,
                        MPM_CHILD_EXITED);
}

/* A child forked into @a slot for bucket @a bucket_index: the table's
 * record, which the slot's readers see at once. */
static void prefork_note_child_started(int slot, pid_t pid, int bucket_index)
{
    ap_generation_t gen = retained->mpm->my_generation;

    pf_children_started(retained->children, slot, pid, gen,
                        retained->gen.record[bucket_index]);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, ap_server_conf,
                 PFBLOGNO(00009) "child pid %" APR_PID_T_FMT " slot %d "
                 "bucket %d generation %d started",
                 pid, slot, bucket_index, gen);
    ap_run_child_status(ap_server_conf, pid, gen, slot, MPM_CHILD_STARTED);
}

/* pf_children_reap() and pf_children_reclaim(): a child reaped. */
static void child_reaped(void *AP_MAYBE_UNUSED(baton),
                         const pf_child_exit_t *how)
{
    if (how->waited) {
        ap_process_child_status((apr_proc_t *)&how->proc, how->why,
                                how->status);
    }
    prefork_note_child_killed(how->slot, &how->child);
}

/* pf_children_reclaim(): says what it does to children that do not
 * leave. */
static void reclaim_step(void *AP_MAYBE_UNUSED(baton), int live, int sig)
{
    if (sig == SIGKILL) {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, ap_server_conf,
                     PFBLOGNO(00170) "%d child process(es) still did not "
                     "exit, sending a SIGKILL", live);
    }
    else if (sig != 0) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ap_server_conf,
                     PFBLOGNO(00051) "%d child process(es) still did not "
                     "exit, sending a SIGTERM", live);
    }
    else {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, ap_server_conf,
                     PFBLOGNO(00050) "%d child process(es) did not exit "
                     "after SIGKILL; continuing anyway", live);
    }
}

/* The current bucket of a child: its identity's, -1 when out of use. */
static int bucket_of(const pf_child_t *child)
{
    return pf_generation_bucket_of(&retained->gen, child->record);
}

static void count_bucket_children(int bucket_index, int *current, int *old)
{
    pf_children_count_record(retained->children,
                             retained->gen.record[bucket_index],
                             retained->mpm->my_generation, current, old);
}

/* ------------------------------------------------------------------ */
/* Child: leaving                                                     */

static void clean_child_exit(int code) __attribute__((noreturn));
static void clean_child_exit(int code)
{
    child_stage = CHILD_EXITING;
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

/* ------------------------------------------------------------------ */
/* Queries                                                            */

static int prefork_query(int query_code, int *result, apr_status_t *rv)
{
    *rv = APR_SUCCESS;
    switch (query_code) {
    case AP_MPMQ_MAX_DAEMON_USED:
        *result = retained->children ? retained->children->used
                                     : conf->pool.max_workers;
        break;
    case AP_MPMQ_IS_THREADED:
        *result = AP_MPMQ_NOT_SUPPORTED;
        break;
    case AP_MPMQ_IS_FORKED:
        *result = AP_MPMQ_DYNAMIC;
        break;
    case AP_MPMQ_HARD_LIMIT_DAEMONS:
        *result = conf->pool.server_limit;
        break;
    case AP_MPMQ_HARD_LIMIT_THREADS:
        *result = HARD_THREAD_LIMIT;
        break;
    case AP_MPMQ_MAX_THREADS:
        *result = 1;
        break;
    case AP_MPMQ_MIN_SPARE_DAEMONS:
        *result = conf->pool.min_spare_servers;
        break;
    case AP_MPMQ_MIN_SPARE_THREADS:
    case AP_MPMQ_MAX_SPARE_THREADS:
        *result = 0;
        break;
    case AP_MPMQ_MAX_SPARE_DAEMONS:
        *result = conf->pool.max_spare_servers;
        break;
    case AP_MPMQ_MAX_REQUESTS_DAEMON:
        *result = ap_max_requests_per_child;
        break;
    case AP_MPMQ_MAX_DAEMONS:
        *result = conf->pool.max_workers;
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

static const char *prefork_get_name(void)
{
    return "prefork";
}

static const pfb_segment_t *prefork_buckets_segment(void)
{
    const pf_segment_t *seg;

    if (retained == NULL
        || (seg = pf_bucketset_segment(retained->buckets)) == NULL) {
        return NULL;
    }
    return &seg->view;
}

/* ------------------------------------------------------------------ */
/* Child: signals                                                     */

/* A stop signal: the bucket's sockets are swapped for /dev/null in this
 * child only (pf_accept_stop()). */
static void stop_accepting(void)
{
    if (devnull_fd >= 0 && me.bucket >= 0) {
        pf_accept_stop(&retained->gen.bucket[me.bucket], devnull_fd);
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

/* SIGTERM/SIGHUP: exit now.  A child waiting for a connection, or
 * tearing down the one it served, only sets the flag and leaves through
 * its loop.  A child serving a request
 * may sit in a blocking read for the whole Timeout, and a stop must not
 * wait that long, so it exits from the handler the way httpd's own
 * children do. */
static void just_die(int AP_MAYBE_UNUSED(sig), siginfo_t *info,
                     void *AP_MAYBE_UNUSED(context))
{
    note_sender(info);
    child_die_now = 1;
    child_stopped_at_once = 1;
    if (child_stage != CHILD_SERVING) {
        return;                 /* on its way out, or leaves after start-up */
    }
    if (child_in_accept_wait) {
        stop_accepting();
        return;
    }
    if (child_tearing_down) {
        return;
    }
    clean_child_exit(stop_exit_code());
}

/* AP_SIG_GRACEFUL: finish the connection in hand, then exit. */
static void stop_listening(int AP_MAYBE_UNUSED(sig), siginfo_t *info,
                           void *AP_MAYBE_UNUSED(context))
{
    int saved_errno = errno;

    note_sender(info);
    child_die_now = 1;
    stop_accepting();
    errno = saved_errno;
}

/* Registered in the child before any module's code runs in it, so it
 * runs first when anything calls exit(). */
static void note_child_exiting(void)
{
    child_stage = CHILD_EXITING;
}

static void child_install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocking accept() must return EINTR on a signal. */
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = just_die;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_sigaction = stop_listening;
    sigaction(AP_SIG_GRACEFUL, &sa, NULL);
    /* Ctrl-C on a foreground server goes to the parent, which stops the
     * children in order. */
    apr_signal(SIGINT, SIG_IGN);
    apr_signal(AP_SIG_GRACEFUL_STOP, SIG_IGN);
    /* The parent's wake-up handler is no use here; modules that fork
     * (mod_cgi...) expect the default. */
    apr_signal(SIGCHLD, SIG_DFL);
}

/* ------------------------------------------------------------------ */
/* Child: its life                                                    */

/* Tells the parent, once, that this child has started: child_init has
 * run, so from now on an APEXIT_CHILDFATAL is a module or a script asking
 * to stop the server, not a child that cannot start. */
static void report_ready(void)
{
    apr_status_t rv = pf_children_report_ready(retained->children);

    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, ap_server_conf,
                     PFBLOGNO(00172) "child of bucket %d couldn't report "
                     "ready to the parent within %d s; if it exits with "
                     "APEXIT_CHILDFATAL, the server stops", me.bucket,
                     (int)apr_time_sec(PF_READY_PATIENCE));
    }
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
                         me.bucket,
                         apr_proc_mutex_name(bucket->mutex));
            clean_child_exit(APEXIT_CHILDFATAL);
        }
    }
    devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pf_children_close_channels(retained->children, 0);
    bucket_fds = apr_palloc(pchild, sizeof(int)
                                        * (apr_size_t)bucket->num_listeners);
    num_fds = pf_bucketset_child_init(retained->buckets, me.bucket,
                                      bucket_fds, bucket->num_listeners);
    pf_steer_child_init(retained->steer, me.bucket, conf->cpu_affinity,
                        ap_server_conf);
    /* While still root: no_new_privs need not be set, so setuid helpers
     * the child runs keep working. */
    pf_filter_child(&retained->filter, conf->syscall_filter, bucket_fds,
                    num_fds, me.bucket, ap_server_conf);
    if (ap_run_drop_privileges(pchild, ap_server_conf)) {
        clean_child_exit(APEXIT_CHILDFATAL);
    }
    ap_run_child_init(pchild, ap_server_conf);
    report_ready();
}

static void child_main(int slot, int bucket_index)
    __attribute__((noreturn));
static void child_main(int slot, int bucket_index)
{
    pf_bucket_t *bucket = &retained->gen.bucket[bucket_index];
    apr_allocator_t *allocator;
    apr_pool_t *ptrans;
    apr_bucket_alloc_t *bucket_alloc;
    pf_accept_t *accepting;
    ap_sb_handle_t *sbh;
    /* This child's own record in the segment: the fields it writes. */
    pfb_slot_fields_t *mine =
        &pf_bucketset_segment(retained->buckets)->slots[slot].f;
    int connections_served = 0, accepted;
    apr_status_t rv;

    me.slot = slot;
    me.bucket = bucket_index;
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
    child_stage = CHILD_SERVING;
    if (child_die_now) {
        clean_child_exit(stop_exit_code());
    }
    pf_close_child_init(&mine->lingering);
    ap_create_sb_handle(&sbh, pchild, me.slot, 0);
    ap_update_child_status(sbh, SERVER_READY, NULL);
    accepting = pf_accept_create(bucket, me.bucket, pchild);
    if (accepting == NULL) {
        clean_child_exit(APEXIT_CHILDSICK);
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
        child_tearing_down = 1;
        apr_pool_clear(ptrans);
        child_tearing_down = 0;
        if (child_die_now) {
            break;
        }
        ap_update_child_status(sbh, SERVER_READY, NULL);

        child_in_accept_wait = 1;
        if (child_die_now) {
            break;
        }
        pf_steer_accept_begin(retained->steer, me.bucket, &mine->waiting);
        rv = pf_accept_one(accepting, &child_die_now, &csd, ptrans);
        accepted = rv == APR_SUCCESS && csd != NULL;
        pf_steer_accept_end(retained->steer, me.bucket, &mine->waiting,
                            accepted);
        if (accepted) {
            apr_atomic_inc64(&mine->accepted);
        }
        child_in_accept_wait = 0;
        if (rv == APR_EGENERAL) {
            clean_child_exit(APEXIT_CHILDSICK);
        }
        if (rv != APR_SUCCESS || csd == NULL) {
            continue;
        }
        connections_served++;

        current_conn = ap_run_create_connection(ptrans, ap_server_conf, csd,
                                                me.slot, sbh,
                                                bucket_alloc);
        if (current_conn) {
            ap_process_connection(current_conn, csd);
            child_tearing_down = 1;
            pf_close_connection(current_conn, &child_die_now);
            child_tearing_down = 0;
        }
    }
    child_in_accept_wait = 0;
    if (!child_stopped_at_once) {
        /* Leaving: not idle while its lingering sockets finish. */
        ap_update_child_status(sbh, SERVER_GRACEFUL, NULL);
        pf_close_finish();
    }
    clean_child_exit(stop_exit_code());
}

/* ------------------------------------------------------------------ */
/* Parent: forking children                                           */

static int make_child(server_rec *s, int slot, int bucket_index)
{
    sigset_t stop_signals, saved_mask;
    pid_t pid;

    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, AP_SIG_GRACEFUL);
    sigaddset(&stop_signals, AP_SIG_GRACEFUL_STOP);
    pf_children_forking(retained->children, slot);
    if (one_process) {
        child_install_signals();
        prefork_note_child_started(slot, getpid(), bucket_index);
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

    prefork_note_child_started(slot, pid, bucket_index);
    return 0;
}

/* Forks a child into a bucket if a slot is free and the bucket's pacing
 * lets it (children that keep dying at start must not make the parent
 * fork in a loop).  Returns 0 when it forked, 1 when the pacing held the
 * fork back, -1 when no slot was free or fork() failed. */
static int spawn_into_bucket(server_rec *s, int bucket_index,
                             spawn_pace_e pace)
{
    pf_respawn_t *r = retained->gen.respawn != NULL && bucket_index >= 0
                              && bucket_index < retained->gen.num_buckets
                          ? &retained->gen.respawn[bucket_index]
                          : NULL;
    int at_once = pace == SPAWN_AT_ONCE;
    apr_time_t now = apr_time_now();
    int slot;

    if (r != NULL && pace != SPAWN_START
        && !pf_respawn_may_fork(r, at_once, now)) {
        return 1;
    }
    slot = pf_children_free_slot(retained->children, conf->pool.max_workers);
    if (slot < 0 || make_child(s, slot, bucket_index) != 0) {
        return -1;
    }
    if (r != NULL) {
        pf_respawn_note_fork(r, at_once, now);
    }
    return 0;
}

/* Starts the new generation.  Every bucket gets a child of its own at
 * once (if a slot is free), so none waits on old children that are only
 * finishing their connections; then each bucket is brought to its share
 * of StartServers, counting the old children, which are replaced one for
 * one as they leave (replace_old_child) up to the bucket's target. */
static void startup_children(server_rec *s)
{
    int num_buckets = retained->gen.num_buckets;
    int b, i, want, current, old;

    for (b = 0; b < num_buckets; b++) {
        count_bucket_children(b, &current, &old);
        if (current == 0 && spawn_into_bucket(s, b, SPAWN_START) != 0) {
            return;
        }
    }
    for (b = 0; b < num_buckets; b++) {
        count_bucket_children(b, &current, &old);
        want = pf_maintenance_bucket_start(conf->pool.start_servers,
                                           num_buckets, b)
               - current - old;
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

    if (b < 0 || b >= retained->gen.num_buckets
        || retained->mpm->shutdown_pending
        || retained->mpm->restart_pending) {
        return;
    }
    count_bucket_children(b, &current, &old);
    if (current + old < retained->gen.target[b]) {
        spawn_into_bucket(s, b, SPAWN_CYCLE);
    }
}

/* ------------------------------------------------------------------ */
/* Parent: idle-server maintenance                                    */

/* Observe: one look, at the start of a cycle, at the children (the
 * parent's table, their states in the scoreboard, what they wrote in the
 * segment), the accept queues and steering's counts, into the
 * generation's observation.  Nothing in the cycle reads them again. */
static pf_observation_t *observe(void)
{
    pf_observation_t *obs = &retained->gen.obs;

    pf_generation_observe_queues(&retained->gen);
    pf_children_observe(retained->children, &retained->gen,
                        retained->mpm->my_generation,
                        ap_scoreboard_image->servers, obs);
    /* Right after the children's states: both figures of one instant.
     * Read apart, a connection steered in between makes them differ for
     * a whole cycle. */
    pf_steer_observe(retained->steer, &retained->gen, obs);
    return obs;
}

/* Act: forks what the decision wants, in the priority order it used:
 * starved buckets and buckets with queued connections get the free slots
 * first.  The observation follows, for the publish. */
static void spawn_wanted_children(server_rec *s, pf_observation_t *obs)
{
    int i, n, b;

    for (i = 0; i < retained->gen.num_buckets; i++) {
        b = obs->scratch[i].bucket;
        for (n = 0; n < obs->action[b].spawn; n++) {
            if (spawn_into_bucket(s, b, SPAWN_CYCLE) != 0) {
                break;
            }
            obs->state[b].children++;
            obs->starting[b]++;
            obs->occupied++;
        }
    }
}

/* Publish: what the cycle saw and did, for mod_status and the bucket
 * status module, from the parent's own state.  Only writes. */
static void publish(const pf_observation_t *obs)
{
    pf_children_publish(retained->children);
    pf_bucketset_publish(retained->buckets, obs,
                         retained->mpm->my_generation,
                         retained->children->used,
                         pf_steer_active(retained->steer));
}

/* One cycle: observe, decide, act, publish. */
static void perform_idle_server_maintenance(server_rec *s)
{
    pf_generation_t *gen = &retained->gen;
    pf_observation_t *obs = observe();
    pf_decision_summary_t summary;

    pf_generation_end_pacing(gen, s);
    pf_generation_decide(gen, &retained->spawn_rate, &summary, s);

    /* The bucket sockets children hold, put right before anything is
     * forked onto them. */
    pf_sockguard_check(retained->guard, -1, obs, s);
    pf_children_retire(retained->children, gen);
    spawn_wanted_children(s, obs);
    pf_generation_log_limits(gen, &summary,
                             &retained->maxclients_reported, s);
    /* Children of old generations that missed their signal (forked while
     * it was sent) are told again. */
    pf_children_stop(retained->children, retained->mpm->my_generation, 0);
    /* Steering's programs and socket-map entries put back, its idle
     * counts corrected from what the cycle saw. */
    pf_steer_cycle(retained->steer, gen, obs, s);

    publish(obs);
}

/* ------------------------------------------------------------------ */
/* Parent: child exits                                                */

/* A bucket must never be left without a child to accept.  Whenever a
 * child exits (a crash, recycling, or an old generation's child freeing
 * its slot after a graceful restart) every bucket with no live child of
 * the current generation gets one at once, not at the next maintenance
 * cycle. */
static void respawn_stranded_buckets(server_rec *s)
{
    pf_generation_t *gen = &retained->gen;
    int *live = gen->live;
    int b, rv, occupied;
    int stopping = retained->mpm->shutdown_pending
                   || retained->mpm->restart_pending;

    if (stopping || live == NULL) {
        return;
    }
    occupied = pf_children_count_live(retained->children, gen,
                                      retained->mpm->my_generation, live);
    for (b = 0; b < gen->num_buckets; b++) {
        if (pf_maintenance_respawn_now(live[b], stopping, occupied,
                                       conf->pool.max_workers)) {
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

/* The act on a process's exit (pf_respawn_classify_end() says what it
 * means): the server stops, a child is replaced, or a process that is not
 * ours is handed to whoever started it. */
static void handle_child_exit(server_rec *s, pf_child_exit_t *how)
{
    const pf_child_t *child = &how->child;
    int fatal = how->why == APR_PROC_EXIT && how->status == APEXIT_CHILDFATAL;
    int killed = how->why == APR_PROC_SIGNAL
                 && (how->status == SIGKILL || how->status == SIGTERM);
    int b = how->slot >= 0 ? bucket_of(child) : -1;
    ap_generation_t gen;

    switch (pf_respawn_classify_end(how->slot >= 0, child->ready,
                                    child->stopping, fatal, killed)) {
    case PF_END_FATAL_STARTED:
        /* httpd stops the server when a child exits with this code,
         * because a child that cannot start would fail the same way
         * forever.  This one had started: whatever asked for the code
         * (a module, a script) is not a reason to stop serving. */
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, s,
                     PFBLOGNO(00068) "child pid %" APR_PID_T_FMT " slot %d "
                     "bucket %d exited with APEXIT_CHILDFATAL after it had "
                     "started; only a child that cannot start stops the "
                     "server, so it is replaced", how->proc.pid, how->slot,
                     b);
        break;
    case PF_END_FATAL:
        /* A child could not start at all (bad User, unwritable lock
         * file...); forking more would fail the same way. */
        ap_process_child_status(&how->proc, how->why, how->status);
        retained->mpm->mpm_state = AP_MPMQ_STOPPING;
        retained->mpm->shutdown_pending = 1;
        retained->mpm->is_ungraceful = 1;
        if (how->slot >= 0) {
            prefork_note_child_killed(how->slot, child);
        }
        return;
    case PF_END_LOST:
        ap_process_child_status(&how->proc, how->why, how->status);
        if (apr_proc_other_child_alert(&how->proc, APR_OC_REASON_DEATH,
                                       how->status) == APR_SUCCESS
            || ap_unregister_extra_mpm_process(how->proc.pid, &gen) == 1) {
            return;             /* a piped logger or the like */
        }
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00012) "long lost child came home! (pid %"
                     APR_PID_T_FMT ")", how->proc.pid);
        return;
    case PF_END_KILLED:
        ap_process_child_status(&how->proc, how->why, how->status);
        /* httpd's own status check keeps quiet about these, but a child
         * killed from outside (the OOM killer, an admin) is news. */
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00035) "child pid %" APR_PID_T_FMT " slot %d "
                     "bucket %d killed by signal %d without being asked to "
                     "stop; replacing it", how->proc.pid, how->slot, b,
                     how->status);
        break;
    default:
        ap_process_child_status(&how->proc, how->why, how->status);
        break;
    }
    pf_generation_note_exit(&retained->gen, how, b,
                            retained->mpm->my_generation, s);
    prefork_note_child_killed(how->slot, child);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00013) "child pid %" APR_PID_T_FMT " slot %d "
                 "bucket %d generation %d exited",
                 how->proc.pid, how->slot, b, child->generation);

    /* A child that leaves may have been driven out by what a sibling did
     * to the socket they share (shutdown() makes every accept() fail):
     * its bucket's socket is put right before anything is forked. */
    if (b >= 0) {
        pf_sockguard_check(retained->guard, b, NULL, s);
    }
    /* After a graceful restart the old generation's children hold the
     * slots the new one needs; each one that leaves is replaced at once in
     * its bucket, so a restart under load does not shrink the pool to one
     * child per bucket and make it grow back at the spawn ramp's pace. */
    if (child->generation != retained->mpm->my_generation) {
        replace_old_child(s, b);
    }
    respawn_stranded_buckets(s);
}

/* ------------------------------------------------------------------ */
/* Parent: running and stopping                                       */

/* SIGCHLD wakes the parent's wait at once, and children can report ready
 * (pf_children_open()), for the life of the server.  Without the ready
 * channel a child's APEXIT_CHILDFATAL stops the server, as in httpd. */
static void wake_on_child_exit(server_rec *s)
{
    apr_status_t why;
    int wanted, room;

    why = pf_children_open(retained->children, pconf, &wanted, &room);
    if (why == APR_SUCCESS && room >= 0 && room < wanted) {
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

/* Reaps children and keeps the buckets served until a signal asks for a
 * restart or a stop, or, when @a drain_until is set, until the accept
 * queues are empty at two looks in a row (a handshake answered just
 * before the first joins its queue within a round trip) or that time has
 * come. */
static void server_main_loop(server_rec *s, apr_time_t drain_until)
{
    /* The first cycle comes a second after (re)start: until then the new
     * generation is being started and the old one replaced child for
     * child, and a deficit seen now would only add to that. */
    apr_time_t last_maintenance = apr_time_now();
    int wait_ms = drain_until ? DRAIN_POLL_MS : 1000, passes = 0, empty = 0;

    while (!retained->mpm->restart_pending
           && !retained->mpm->shutdown_pending) {
        pf_child_exit_t how;
        apr_time_t now;

        if (drain_until) {
            empty = pf_generation_queued(&retained->gen) == 0 ? empty + 1 : 0;
            if (empty >= 2 || apr_time_now() >= drain_until) {
                return;
            }
        }
        /* As httpd does: the monitor hook every tenth pass. */
        if (++passes >= 10) {
            passes = 0;
            ap_run_monitor(pconf, s);
        }
        ap_update_global_status();
        if (pf_children_wait(retained->children, wait_ms, &how, pconf)) {
            handle_child_exit(s, &how);
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
    rv = pf_sockguard_refuse_new(retained->guard, s);
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
                 pf_generation_queued(&retained->gen));
}

static int shutdown_server(server_rec *s)
{
    apr_time_t cutoff = 0;

    retained->mpm->mpm_state = AP_MPMQ_STOPPING;
    if (retained->mpm->is_ungraceful) {
        pf_children_reclaim(retained->children, 1, child_reaped,
                            reclaim_step, NULL);
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
    pf_children_stop(retained->children, retained->mpm->my_generation, 1);
    pf_bucketset_close(retained->buckets);
    pf_children_reap(retained->children, child_reaped, NULL);
    ap_remove_pid(pconf, ap_pid_fname);
    while (!retained->mpm->shutdown_pending
           && pf_children_live(retained->children) > 0
           && (!cutoff || apr_time_now() < cutoff)) {
        apr_sleep(apr_time_from_msec(100));
        pf_children_reap(retained->children, child_reaped, NULL);
    }
    pf_children_reclaim(retained->children, 1, child_reaped, reclaim_step,
                        NULL);
    return DONE;
}

/* Builds this generation's buckets (the bucket set decides what the
 * (re)start keeps and acts on it), and notes where each running child now
 * belongs. */
static int build_generation(apr_pool_t *p, server_rec *s, int startup)
{
    pf_bucketset_config_t cfg;
    pf_guard_children_t children_calls;
    pf_guard_steering_t steering_calls;
    pf_steer_host_t host;
    int num_records = PF_BUCKETSET_RECORDS(retained->first_server_limit);
    int *held, *in_bucket;

    memset(&cfg, 0, sizeof(cfg));
    cfg.how = startup ? PF_START_FIRST
                      : (retained->mpm->was_graceful ? PF_RESTART_GRACEFUL
                                                     : PF_RESTART_FULL);
    cfg.conf = conf;
    cfg.generation = retained->mpm->my_generation;
    /* What the children table says, handed over as data: the bucket set
     * keeps the identities children still hold. */
    held = apr_palloc(p, sizeof(int) * (apr_size_t)num_records);
    in_bucket = apr_palloc(p, sizeof(int)
                                  * (apr_size_t)(retained->gen.num_buckets
                                                 + 1));
    pf_children_census(retained->children, &retained->gen, num_records,
                       held, in_bucket);
    cfg.held = held;
    cfg.in_bucket = in_bucket;
    cfg.slots_used = retained->children->used;
    pf_steer_prepare(retained->steer, conf->steering, &host);
    cfg.host = &host;
    /* Before the build, whose sockets the guard renews: this load of the
     * module's calls (the last load's went with it). */
    pf_children_guard_calls(retained->children, &children_calls);
    pf_steer_guard_calls(retained->steer, &steering_calls);
    pf_sockguard_set_calls(retained->guard, &children_calls,
                           &steering_calls);
    if (pf_bucketset_build(retained->buckets, &cfg, p, s)
        != APR_SUCCESS) {
        return !OK;
    }
    return OK;
}

static int prefork_run(apr_pool_t *p, apr_pool_t *plog, server_rec *s)
{
    pf_observation_t *obs;

    pconf = p;
    ap_log_pid(pconf, ap_pid_fname);

    if (!retained->mpm->was_graceful) {
        if (ap_run_pre_mpm(s->process->pool, SB_SHARED) != OK) {
            retained->mpm->mpm_state = AP_MPMQ_STOPPING;
            return !OK;
        }
    }
    /* What mod_status and the bucket status module see of the children,
     * in this generation's scoreboard (a new one unless graceful). */
    pf_children_publish_to(retained->children, ap_scoreboard_image->parent,
                           pf_bucketset_segment(retained->buckets)->slots,
                           !retained->mpm->was_graceful, pconf);
    ap_scoreboard_image->global->running_generation =
        retained->mpm->my_generation;
    /* A stop asked for while the configuration was read again is kept:
     * the main loop then ends at once and the server stops, where httpd's
     * own prefork would forget it and run on. */
    retained->mpm->restart_pending = 0;
    ap_unixd_mpm_set_signals(pconf, one_process);
    if (!one_process) {
        wake_on_child_exit(s);
        pf_filter_probe(&retained->filter, conf->syscall_filter, s);
    }

    if (one_process) {
        AP_MONCONTROL(1);
        make_child(s, 0, 0);
        /* not reached: the child loop exits the process */
    }

    pf_steer_attach(retained->steer, &retained->gen, conf->steering,
                    conf->cpu_affinity, pconf, s);
    /* The limits every cycle of the generation decides within, derived
     * once: the directives and the steering now in force. */
    pf_maintenance_limits_init(&retained->gen.limits,
                               retained->gen.num_buckets,
                               conf->pool.min_spare_servers,
                               conf->pool.max_spare_servers,
                               conf->pool.max_workers,
                               pf_steer_active(retained->steer));
    /* The steering in force, before any child can answer a status
     * request; the children's figures follow after they are forked. */
    pf_bucketset_publish(retained->buckets, NULL,
                         retained->mpm->my_generation,
                         retained->children->used,
                         pf_steer_active(retained->steer));
    startup_children(s);
    /* The new generation is accepting; now let the old one go, so that
     * no bucket is ever left without a child, then the sockets it held. */
    pf_children_stop(retained->children, retained->mpm->my_generation, 0);
    pf_sockguard_retire(retained->guard, s);
    obs = observe();
    pf_steer_cycle(retained->steer, &retained->gen, obs, s);
    publish(obs);

    ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                 PFBLOGNO(00017) "%s configured -- resuming normal "
                 "operations", ap_get_server_description());
    ap_log_mpm_common(s);
    ap_log_command_line(plog, s);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00018) "Accept mutex: %s (default: %s)",
                 retained->gen.bucket[0].mutex
                     ? apr_proc_mutex_name(retained->gen.bucket[0].mutex)
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
        pf_children_reclaim(retained->children, 1, child_reaped,
                            reclaim_step, NULL);
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00020) "SIGHUP received.  Attempting to "
                     "restart");
    }
    return OK;
}

/* ------------------------------------------------------------------ */
/* Hooks                                                              */

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
        retained->steer = pf_steer_create(retained->keep_pool);
        retained->guard = pf_sockguard_create(
            retained->keep_pool,
            PF_BUCKETSET_RECORDS(retained->first_server_limit),
            &retained->gen);
        retained->buckets = pf_bucketset_create(retained->keep_pool,
                                                retained->first_server_limit,
                                                retained->started,
                                                &retained->gen,
                                                retained->guard);
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
    conf = pf_directives_reset();
    ap_max_mem_free = APR_ALLOCATOR_MAX_FREE_UNLIMITED;

    rv = ap_mutex_register(p, AP_ACCEPT_MUTEX_TYPE, NULL, APR_LOCK_DEFAULT, 0);
    if (rv != APR_SUCCESS) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return OK;
}

static int prefork_check_config(apr_pool_t *AP_MAYBE_UNUSED(p),
                                apr_pool_t *AP_MAYBE_UNUSED(plog),
                                apr_pool_t *AP_MAYBE_UNUSED(ptemp),
                                server_rec *AP_MAYBE_UNUSED(s))
{
    int startup = retained->mpm->module_loads == 1;

    pf_directives_correct(retained->first_server_limit);
    if (!retained->first_server_limit) {
        retained->first_server_limit = conf->pool.server_limit;
        retained->children = pf_children_create(retained->keep_pool,
                                                conf->pool.server_limit);
    }
    /* At start-up's first pass the console is stderr; at the second the
     * daemon's stderr is /dev/null until core opens the error log, so
     * these wait for log_after_core_opened_logs(). */
    if (startup) {
        pf_directives_log_fixes(1, NULL);
        pf_filter_log_off(conf->syscall_filter, 1, NULL);
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
    pf_directives_log_fixes(0, s);
    pf_filter_log_off(conf->syscall_filter, 0, s);
    if (retained->buckets != NULL) {
        pf_bucketset_log_plan(retained->buckets, 0, s);
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
    if (me.slot >= 0 || getpid() == parent_pid || retained == NULL
        || retained->buckets == NULL) {
        return DECLINED;
    }
    pf_bucketset_child_init(retained->buckets, -1, NULL, 0);
    pf_steer_child_init(retained->steer, -1, 0, s);
    pf_children_close_channels(retained->children, 1);
    pf_filter_helper(conf->syscall_filter, s);
    return DECLINED;
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
    pf_close_hooks();
    APR_REGISTER_OPTIONAL_FN(prefork_buckets_segment);
}

AP_DECLARE_MODULE(mpm_prefork) = {
    MPM20_MODULE_STUFF,
    NULL,                       /* hook to run before apache parses args */
    NULL,                       /* create per-directory config structure */
    NULL,                       /* merge per-directory config structures */
    NULL,                       /* create per-server config structure */
    NULL,                       /* merge per-server config structures */
    pf_directives_cmds,         /* command apr_table_t */
    prefork_hooks,              /* register hooks */
    AP_MODULE_FLAG_NONE         /* flags */
};
/* clang-format on */
