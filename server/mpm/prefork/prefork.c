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
 * The decisions (bucket count, spawn and kill counts) are pure functions
 * in prefork_policy.c; this file gathers their inputs and acts on them.
 */

#include "apr.h"
#include "apr_portable.h"
#include "apr_strings.h"
#include "apr_thread_proc.h"
#include "apr_signal.h"
#include "apr_atomic.h"
#include "apr_shm.h"
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
#include <fcntl.h>
#include <signal.h>
#include <errno.h>

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

#include "prefork_buckets.h"
#include "prefork_policy.h"
#include "prefork_steer.h"
#include "prefork_os.h"

#include <poll.h>
#include <sys/mman.h>

/* Children are single-threaded: one worker slot per process. */
#define HARD_THREAD_LIMIT 1

/* How often the parent runs idle-server maintenance. */
#define MAINTENANCE_INTERVAL apr_time_from_sec(1)

/* A child waiting on the accept mutex cannot see a signal until it holds
 * the mutex, so the holder gives it up this often while no connection
 * arrives; a child told to stop then gets its turn within this time. */
#define ACCEPT_POLL_TIMEOUT apr_time_from_sec(1)

/* One listener bucket, as this generation sees it. */
typedef struct {
    ap_listen_rec *listeners;   /* this bucket's sockets, a private list */
    int num_listeners;
    apr_proc_mutex_t *mutex;    /* only when a child polls several sockets */
    const char *address;        /* first listener, for logs and status */
} prefork_bucket_t;

/* A duplicate SO_REUSEPORT socket, kept open across restarts so that its
 * accept queue is never dropped while the server runs. */
typedef struct {
    const char *key;            /* "<address>#<shard>" */
    apr_socket_t *sd;
    int in_use;                 /* wanted by the current generation */
} prefork_dup_socket_t;

/* ListenBucketSteering's kernel objects.  The idle counts live for the
 * server's lifetime (children of every generation update the same
 * records); the socket map and the programs are made again each
 * generation from the bucket sockets in force, and attaching a program
 * replaces the previous one atomically, so connections never see a
 * half-built state. */
typedef struct {
    int active;                 /* pf_steer_mode_e in force */
    int attached;               /* a program may be on the groups */
    int fallback_logged;        /* the one line for a refusal was logged */
    int stats_fd;               /* the mmap-able array of bucket records */
    pf_steer_bucket_t *stats;
    size_t stats_len;
    int stats_capacity;
    int stats_buckets;          /* records in use by the last layout */
    int *slot_idle;             /* per slot: bucket + 1 while the child
                                   counts itself waiting, else 0 (shared) */
    size_t slot_idle_len;
    int socks_fd;               /* the REUSEPORT_SOCKARRAY, kept too: a
                                   socket can be in one such map only */
    int socks_capacity;
    long *pending;              /* per bucket: difference seen last cycle */
    int pending_len;
    int *cpus;                  /* the affinity mask, ascending */
    int num_cpus;
} prefork_steering_t;

/* State that outlives a restart (ap_retained_data_create). */
typedef struct {
    ap_unixd_mpm_retained_data *mpm;

    int first_server_limit;     /* ServerLimit is fixed at first start */
    int max_daemons_limit;      /* highest slot used + 1, all generations */
    int maxclients_reported;    /* "reached MaxRequestWorkers" logged */
    int reuseport_usable;       /* -1 not probed, 0 no, 1 yes */
    apr_status_t reuseport_status;
    const char *reuseport_failed_call;
    int planned;                /* plan below holds a previous decision */
    pf_bucket_plan_t plan;
    pf_cpu_info_t cpus;
    int *spawn_rate;            /* per bucket, carried between cycles */
    int spawn_rate_len;
    apr_pool_t *keep_pool;      /* outlives generations */
    apr_array_header_t *dup_sockets; /* of prefork_dup_socket_t */
    apr_shm_t *shm;
    pfb_shm_t *shm_base;
    int shm_bucket_capacity;
    apr_time_t started;
    prefork_steering_t steer;
} prefork_retained_data;

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

/* This generation's buckets. */
static prefork_bucket_t *buckets;
static int num_buckets;

static apr_pool_t *pconf;
static int one_process;

/* Child-side state. */
static apr_pool_t *pchild;
static int my_child_num;
static int my_bucket_index;
static int devnull_fd = -1;
static volatile sig_atomic_t child_die_now;
static volatile sig_atomic_t child_in_accept_wait;

module AP_MODULE_DECLARE_DATA mpm_prefork_module;

/* ------------------------------------------------------------------ */
/* Shared state for the status module                                  */

static const pfb_shm_t *prefork_buckets_shm(void)
{
    if (retained == NULL || retained->shm_base == NULL) {
        return NULL;
    }
    return retained->shm_base;
}

static int slot_bucket(int slot)
{
    return ap_scoreboard_image->parent[slot].bucket;
}

static void note_accepted_connection(void)
{
    pfb_shm_t *shm = retained->shm_base;

    if (shm == NULL || my_bucket_index >= (int)shm->num_buckets) {
        return;
    }
    apr_atomic_inc64(&pfb_shm_bucket(shm, my_bucket_index)->f.accepted);
    if (my_child_num < (int)shm->num_slots) {
        apr_atomic_inc64(pfb_shm_slot_accepted(shm, my_child_num));
    }
}

/* ------------------------------------------------------------------ */
/* Idle steering: the counts the kernel program reads                  */

static pf_steer_bucket_t *steer_record(int bucket_index)
{
    prefork_steering_t *st = &retained->steer;

    if (st->active != PF_STEER_IDLE || st->stats == NULL || bucket_index < 0
        || bucket_index >= st->stats_capacity) {
        return NULL;
    }
    return &st->stats[bucket_index];
}

static void steer_add_idle(pf_steer_bucket_t *rec, long delta)
{
    apr_atomic_add64((volatile apr_uint64_t *)&rec->idle,
                     (apr_uint64_t)(apr_int64_t)delta);
}

/* A child about to wait in accept(): it counts itself idle, marking its
 * slot first, so that if it dies in between the parent takes one too many
 * back (corrected at the next cycles) rather than leaving a phantom idle
 * child advertised. */
static void steer_count_in(void)
{
    pf_steer_bucket_t *rec = steer_record(my_bucket_index);

    if (rec == NULL || retained->steer.slot_idle == NULL) {
        return;
    }
    retained->steer.slot_idle[my_child_num] = my_bucket_index + 1;
    steer_add_idle(rec, 1);
}

/* Back from accept(): with a connection, the program already took the
 * child's count when it sent the connection here; without one (a signal,
 * an error, a stop), the child takes its count back itself. */
static void steer_count_out(int got_connection)
{
    pf_steer_bucket_t *rec = steer_record(my_bucket_index);

    if (rec == NULL || retained->steer.slot_idle == NULL
        || retained->steer.slot_idle[my_child_num] == 0) {
        return;
    }
    if (!got_connection) {
        steer_add_idle(rec, -1);
    }
    retained->steer.slot_idle[my_child_num] = 0;
}

/* Parent: a child has gone.  If it was counted as waiting, its count goes
 * now, so a crashed child is never advertised as idle. */
static void steer_forget_slot(int slot)
{
    prefork_steering_t *st = &retained->steer;
    pf_steer_bucket_t *rec;
    int counted;

    if (st->slot_idle == NULL || slot < 0
        || (size_t)slot >= st->slot_idle_len / sizeof(int)) {
        return;
    }
    counted = st->slot_idle[slot];
    st->slot_idle[slot] = 0;
    /* Even when a later generation runs without idle steering: the
     * records outlive generations and must stay true for the next one
     * that uses them. */
    if (counted > 0 && st->stats != NULL && counted <= st->stats_capacity) {
        rec = &st->stats[counted - 1];
        steer_add_idle(rec, -1);
    }
}

/* ------------------------------------------------------------------ */
/* Child                                                               */

static void clean_child_exit(int code) __attribute__((noreturn));
static void clean_child_exit(int code)
{
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

/* AP_SIG_GRACEFUL: finish the connection in hand, then exit. */
static void child_graceful_handler(int sig)
{
    int saved_errno = errno;

    (void)sig;
    child_die_now = 1;
    stop_accepting();
    errno = saved_errno;
}

/* SIGTERM/SIGHUP: exit now.  A child waiting for a connection only sets
 * the flag and leaves through its accept loop.  A child serving a request
 * may sit in a blocking read for the whole Timeout, and a stop must not
 * wait that long, so it exits from the handler the way httpd's own
 * children do. */
static void child_terminate_handler(int sig)
{
    (void)sig;
    child_die_now = 1;
    if (child_in_accept_wait) {
        stop_accepting();
        return;
    }
    clean_child_exit(0);
}

static void child_install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocking accept() must return EINTR on a signal. */
    sa.sa_flags = 0;
    sa.sa_handler = child_terminate_handler;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = child_graceful_handler;
    sigaction(AP_SIG_GRACEFUL, &sa, NULL);
    /* Ctrl-C on a foreground server goes to the parent, which stops the
     * children in order. */
    apr_signal(SIGINT, SIG_IGN);
    apr_signal(AP_SIG_GRACEFUL_STOP, SIG_IGN);
    /* The parent's wake-up handler is no use here; modules that fork
     * (mod_cgi...) expect the default. */
    apr_signal(SIGCHLD, SIG_DFL);
}

/* Waits for and accepts one connection on the bucket's sockets.
 * Returns APR_SUCCESS with *csd set, APR_EINTR when the child should
 * look at its flags again, or APR_EGENERAL when the child must exit. */
static apr_status_t accept_one(prefork_bucket_t *bucket,
                               apr_pollset_t *pollset, void **csd,
                               apr_pool_t *ptrans)
{
    ap_listen_rec *lr = bucket->listeners;
    apr_status_t rv;

    if (bucket->num_listeners == 1) {
        /* One socket: a blocking accept(), where the kernel wakes exactly
         * one waiting child per connection.  No poll, no lock. */
        return ap_unixd_accept(csd, lr, ptrans);
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
        lr = pdesc[0].client_data;
        rv = ap_unixd_accept(csd, lr, ptrans);
        break;
    }
    if (apr_proc_mutex_unlock(bucket->mutex) != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, 0, ap_server_conf,
                     PFBLOGNO(00003) "couldn't release the accept mutex of "
                     "bucket %d", my_bucket_index);
        return APR_EGENERAL;
    }
    return rv;
}

static apr_pollset_t *child_make_pollset(prefork_bucket_t *bucket)
{
    apr_pollset_t *pollset;
    apr_pollfd_t *pfd;
    ap_listen_rec *lr;
    apr_status_t rv;

    rv = apr_pollset_create(&pollset, bucket->num_listeners, pchild,
                            APR_POLLSET_NOCOPY);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_EMERG, rv, ap_server_conf,
                     PFBLOGNO(00004) "couldn't create the pollset of "
                     "bucket %d", my_bucket_index);
        clean_child_exit(APEXIT_CHILDSICK);
    }
    for (lr = bucket->listeners; lr; lr = lr->next) {
        /* APR_POLLSET_NOCOPY keeps a pointer to the descriptor, so each
         * one needs storage of its own for the child's lifetime. */
        pfd = apr_pcalloc(pchild, sizeof(*pfd));
        pfd->desc_type = APR_POLL_SOCKET;
        pfd->desc.s = lr->sd;
        pfd->reqevents = APR_POLLIN;
        pfd->client_data = lr;
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

static void close_parent_wake_pipe(void);

/* BucketCPUAffinity on: the child runs on the CPUs whose connections its
 * bucket takes under cpu steering (prefork_steer.h has the layout). */
static void pin_child_to_bucket_cpus(void)
{
    prefork_steering_t *st = &retained->steer;
    int per_listen = retained->plan.buckets_per_listen;
    int *cpus, n;
    apr_status_t rv;

    if (retained->plan.mode != PFB_MODE_REUSEPORT || per_listen < 2
        || st->num_cpus < 1) {
        return;
    }
    cpus = apr_palloc(pchild, sizeof(int) * (apr_size_t)st->num_cpus);
    n = pf_steer_shard_cpus(st->cpus, st->num_cpus, per_listen,
                            my_bucket_index % per_listen, cpus);
    if (n < 1) {
        return;
    }
    rv = pf_os_pin_to_cpus(cpus, n);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, ap_server_conf,
                     PFBLOGNO(00045) "BucketCPUAffinity: couldn't pin the "
                     "child of bucket %d to its %d CPU(s); it runs "
                     "unpinned", my_bucket_index, n);
    }
}

static void child_init_process(prefork_bucket_t *bucket)
{
    apr_status_t rv;

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
    close_parent_wake_pipe();
    /* The child updates the idle counts through its inherited mapping
     * only; it has no use for the map's descriptor. */
    if (retained->steer.stats_fd >= 0) {
        pf_os_bpf_close(retained->steer.stats_fd);
        retained->steer.stats_fd = -1;
        retained->steer.socks_fd = -1;
    }
    if (bucket_cpu_affinity) {
        pin_child_to_bucket_cpus();
    }
    if (ap_run_drop_privileges(pchild, ap_server_conf)) {
        clean_child_exit(APEXIT_CHILDFATAL);
    }
    ap_run_child_init(pchild, ap_server_conf);
}

static void child_main(int child_num, int bucket_index)
    __attribute__((noreturn));
static void child_main(int child_num, int bucket_index)
{
    prefork_bucket_t *bucket = &buckets[bucket_index];
    apr_allocator_t *allocator;
    apr_pool_t *ptrans;
    apr_bucket_alloc_t *bucket_alloc;
    apr_pollset_t *pollset = NULL;
    ap_sb_handle_t *sbh;
    int connections_served = 0;
    apr_status_t rv;

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
        steer_count_in();
        rv = accept_one(bucket, pollset, &csd, ptrans);
        steer_count_out(rv == APR_SUCCESS && csd != NULL);
        child_in_accept_wait = 0;
        if (rv == APR_EGENERAL) {
            clean_child_exit(APEXIT_CHILDSICK);
        }
        if (rv != APR_SUCCESS || csd == NULL) {
            continue;
        }
        connections_served++;
        note_accepted_connection();

        current_conn = ap_run_create_connection(ptrans, ap_server_conf, csd,
                                                my_child_num, sbh,
                                                bucket_alloc);
        if (current_conn) {
            ap_process_connection(current_conn, csd);
            ap_lingering_close(current_conn);
        }
    }
    child_in_accept_wait = 0;
    ap_update_child_status(sbh, SERVER_GRACEFUL, NULL);
    clean_child_exit(0);
}

/* ------------------------------------------------------------------ */
/* Parent: children                                                    */

static int find_free_slot(void)
{
    int slot;

    for (slot = 0; slot < max_workers; slot++) {
        if (ap_scoreboard_image->parent[slot].pid == 0
            && ap_scoreboard_image->servers[slot][0].status == SERVER_DEAD) {
            return slot;
        }
    }
    return -1;
}

static int make_child(server_rec *s, int slot, int bucket_index)
{
    process_score *ps = &ap_scoreboard_image->parent[slot];
    pid_t pid;

    if (slot + 1 > retained->max_daemons_limit) {
        retained->max_daemons_limit = slot + 1;
        if (retained->shm_base) {
            retained->shm_base->slots_used = slot + 1;
        }
    }
    ps->bucket = bucket_index;
    ps->quiescing = 0;
    ps->generation = retained->mpm->my_generation;
    if (retained->shm_base && slot < (int)retained->shm_base->num_slots) {
        apr_atomic_set64(pfb_shm_slot_accepted(retained->shm_base, slot), 0);
    }
    if (one_process) {
        child_install_signals();
        ps->pid = getpid();
        child_main(slot, bucket_index);
    }
    (void)ap_update_child_status_from_indexes(slot, 0, SERVER_STARTING, NULL);

    if ((pid = fork()) == -1) {
        ap_log_error(APLOG_MARK, APLOG_ERR, errno, s,
                     PFBLOGNO(00008) "fork: unable to fork a new child for "
                     "bucket %d", bucket_index);
        (void)ap_update_child_status_from_indexes(slot, 0, SERVER_DEAD, NULL);
        /* Out of processes or memory: don't spin trying to fork. */
        sleep(10);
        return -1;
    }
    if (!pid) {
#if AP_HAS_THREAD_LOCAL
        ap_thread_current_after_fork();
#endif
        child_install_signals();
        ap_fatal_signal_child_setup(ap_server_conf);
        child_main(slot, bucket_index);
    }

    ps->pid = pid;
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00009) "child pid %" APR_PID_T_FMT " slot %d "
                 "bucket %d generation %d started",
                 pid, slot, bucket_index, retained->mpm->my_generation);
    ap_run_child_status(ap_server_conf, pid, retained->mpm->my_generation,
                        slot, MPM_CHILD_STARTED);
    return 0;
}

/* Forks a child into a bucket if a slot is free.  Returns 0 on success. */
static int spawn_into_bucket(server_rec *s, int bucket_index)
{
    int slot = find_free_slot();

    if (slot < 0) {
        return -1;
    }
    return make_child(s, slot, bucket_index);
}

static void note_child_gone(int slot, pid_t pid, ap_generation_t gen)
{
    process_score *ps = &ap_scoreboard_image->parent[slot];

    (void)ap_update_child_status_from_indexes(slot, 0, SERVER_DEAD, NULL);
    steer_forget_slot(slot);
    ap_run_child_status(ap_server_conf, pid, gen, slot, MPM_CHILD_EXITED);
    ps->pid = 0;
    ps->quiescing = 0;
}

/* ap_reclaim_child_processes() and ap_relieve_child_processes() report
 * each child they reap here. */
static void reclaim_callback(int childnum, pid_t pid, ap_generation_t gen)
{
    if (childnum >= 0 && ap_scoreboard_image->parent[childnum].pid == pid) {
        note_child_gone(childnum, pid, gen);
    }
}

/* Counts the current generation's children in one bucket that are not on
 * their way out. */
static int bucket_live_children(int bucket_index)
{
    int slot, count = 0;

    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        process_score *ps = &ap_scoreboard_image->parent[slot];

        if (ps->pid != 0 && !ps->quiescing
            && ps->generation == retained->mpm->my_generation
            && ps->bucket == bucket_index) {
            count++;
        }
    }
    return count;
}

/* Tells children to finish their connection and exit: those of older
 * generations (all of them when everyone must go). */
static void signal_old_children(int everyone)
{
    int slot;

    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        process_score *ps = &ap_scoreboard_image->parent[slot];

        if (ps->pid == 0 || ps->quiescing) {
            continue;
        }
        if (everyone || ps->generation != retained->mpm->my_generation) {
            ps->quiescing = 1;
            ap_mpm_safe_kill(ps->pid, AP_SIG_GRACEFUL);
        }
    }
}

/* Children of an older generation still in a bucket: each will be
 * replaced in that bucket when it exits. */
static int bucket_old_children(int bucket_index)
{
    int slot, count = 0;

    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        process_score *ps = &ap_scoreboard_image->parent[slot];

        if (ps->pid != 0 && ps->generation != retained->mpm->my_generation
            && ps->bucket == bucket_index) {
            count++;
        }
    }
    return count;
}

/* Per bucket, the children the new generation should have once the old
 * one has gone: as many as the old generation had there (a graceful
 * restart must not shrink the pool under load), and at least the
 * bucket's share of StartServers. */
static int *transition_target;

/* Starts the new generation.  Every bucket gets a child of its own at
 * once (if a slot is free), so none waits on old children that are only
 * finishing their connections; then each bucket is brought to its share
 * of StartServers, counting the old children, which are replaced one for
 * one as they leave (replace_old_child) up to the bucket's target. */
static void startup_children(server_rec *s, apr_pool_t *p)
{
    int b, i, want, old;

    transition_target = apr_pcalloc(p, sizeof(int) * (apr_size_t)num_buckets);
    for (b = 0; b < num_buckets; b++) {
        old = bucket_old_children(b);
        want = pf_bucket_start(start_servers, num_buckets, b);
        transition_target[b] = old > want ? old : want;
        if (bucket_live_children(b) == 0 && spawn_into_bucket(s, b) != 0) {
            return;
        }
    }
    for (b = 0; b < num_buckets; b++) {
        want = pf_bucket_start(start_servers, num_buckets, b)
               - bucket_live_children(b) - bucket_old_children(b);
        for (i = 0; i < want; i++) {
            if (spawn_into_bucket(s, b) != 0) {
                return;
            }
        }
    }
}

/* An older generation's child has left bucket @a b: fork its replacement
 * while the bucket is short of its target. */
static void replace_old_child(server_rec *s, int b)
{
    if (transition_target == NULL || b < 0 || b >= num_buckets
        || retained->mpm->shutdown_pending
        || retained->mpm->restart_pending) {
        return;
    }
    if (bucket_live_children(b) + bucket_old_children(b)
        < transition_target[b]) {
        spawn_into_bucket(s, b);
    }
}

/* ------------------------------------------------------------------ */
/* Parent: idle-server maintenance                                     */

typedef struct {
    pf_bucket_state_t *state;
    pf_bucket_action_t *action;
    pf_rank_t *scratch;
    apr_uint32_t *busy, *starting, *stopping;
    int *old_generation;        /* children of older generations */
    int *live;                  /* scratch: live children per bucket */
    int occupied;
} maintenance_snapshot_t;

static maintenance_snapshot_t snapshot;

static void snapshot_alloc(apr_pool_t *p)
{
    apr_size_t n = (apr_size_t)num_buckets;

    snapshot.state = apr_pcalloc(p, n * sizeof(*snapshot.state));
    snapshot.action = apr_pcalloc(p, n * sizeof(*snapshot.action));
    snapshot.scratch = apr_pcalloc(p, n * sizeof(*snapshot.scratch));
    snapshot.busy = apr_pcalloc(p, n * sizeof(apr_uint32_t));
    snapshot.starting = apr_pcalloc(p, n * sizeof(apr_uint32_t));
    snapshot.stopping = apr_pcalloc(p, n * sizeof(apr_uint32_t));
    snapshot.live = apr_pcalloc(p, n * sizeof(int));
    snapshot.old_generation = apr_pcalloc(p, n * sizeof(int));
}

/* Reads the scoreboard and the accept queues into the snapshot. */
static void take_snapshot(void)
{
    int slot, b;

    for (b = 0; b < num_buckets; b++) {
        ap_listen_rec *lr;
        int queued, limit;

        snapshot.state[b].children = 0;
        snapshot.state[b].idle = 0;
        snapshot.state[b].queued = 0;
        snapshot.busy[b] = snapshot.starting[b] = snapshot.stopping[b] = 0;
        snapshot.old_generation[b] = 0;
        for (lr = buckets[b].listeners; lr; lr = lr->next) {
            if (pf_os_listener_queue(lr->sd, &queued, &limit)
                == APR_SUCCESS) {
                snapshot.state[b].queued += queued;
            }
        }
    }
    snapshot.occupied = 0;
    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        process_score *ps = &ap_scoreboard_image->parent[slot];
        int status = ap_scoreboard_image->servers[slot][0].status;

        if (ps->pid == 0 && status == SERVER_DEAD) {
            continue;
        }
        snapshot.occupied++;
        b = ps->bucket;
        if (b < 0 || b >= num_buckets || ps->pid == 0) {
            continue;
        }
        if (ps->generation != retained->mpm->my_generation) {
            snapshot.old_generation[b]++;
        }
        if (ps->quiescing || ps->generation != retained->mpm->my_generation) {
            snapshot.stopping[b]++;
            continue;
        }
        snapshot.state[b].children++;
        if (status == SERVER_STARTING) {
            snapshot.starting[b]++;
            snapshot.state[b].idle++;
        }
        else if (status == SERVER_READY) {
            snapshot.state[b].idle++;
        }
        else {
            snapshot.busy[b]++;
        }
    }
}

/* Copies this cycle's figures into the shared segment. */
static void publish_snapshot(void)
{
    pfb_shm_t *shm = retained->shm_base;
    apr_time_t now = apr_time_now();
    int b;

    if (shm == NULL) {
        return;
    }
    for (b = 0; b < num_buckets && b < (int)shm->num_buckets; b++) {
        pfb_bucket_fields_t *f = &pfb_shm_bucket(shm, b)->f;
        pf_steer_bucket_t *rec;
        ap_listen_rec *lr;
        int queued, limit, backlog = 0;
        apr_uint32_t next;

        for (lr = buckets[b].listeners; lr; lr = lr->next) {
            if (pf_os_listener_queue(lr->sd, &queued, &limit)
                == APR_SUCCESS) {
                backlog += limit;
            }
        }
        f->children = (apr_uint32_t)snapshot.state[b].children;
        f->idle = (apr_uint32_t)(snapshot.state[b].idle
                                 - (int)snapshot.starting[b]);
        f->busy = snapshot.busy[b];
        f->starting = snapshot.starting[b];
        f->stopping = snapshot.stopping[b];
        f->queue_depth = (apr_uint32_t)snapshot.state[b].queued;
        f->backlog = (apr_uint32_t)backlog;
        if ((rec = steer_record(b)) != NULL) {
            f->steer_kept = rec->kept;
            f->steer_moved = rec->moved;
            f->steer_idle = rec->idle;
        }
        next = f->sample_next % PFB_RATE_SAMPLES;
        f->accepted_sample[next] = apr_atomic_read64(&f->accepted);
        f->sample_time[next] = now;
        f->sample_next = (next + 1) % PFB_RATE_SAMPLES;
    }
    shm->generation = retained->mpm->my_generation;
    shm->steer_wanted = steering_wanted;
    shm->steer_active = retained->steer.active;
    shm->cpu_affinity = bucket_cpu_affinity;
    shm->slots_used = retained->max_daemons_limit;
    shm->updated = now;
}

/* Slots held by children that are on their way out: an older
 * generation's, or ones told to stop. */
static int leaving_children(void)
{
    int b, leaving = 0;

    for (b = 0; b < num_buckets; b++) {
        leaving += (int)snapshot.stopping[b];
    }
    return leaving;
}

static void log_maintenance_limits(server_rec *s,
                                   const pf_decision_summary_t *summary)
{
    if (summary->at_max_workers && leaving_children() > 0) {
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
    if (summary->fast_ramp_buckets > 0) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00011) "server seems busy (%d bucket(s) "
                     "spawning 8 or more children a second), you may need "
                     "to increase StartServers, or Min/MaxSpareServers",
                     summary->fast_ramp_buckets);
    }
}

/* Tells up to @a count idle children of a bucket to finish and exit. */
static void retire_idle_children(int bucket_index, int count)
{
    int slot;

    /* Highest slots first: children there are the newest, so the pool
     * shrinks back towards low slot numbers. */
    for (slot = retained->max_daemons_limit - 1; slot >= 0 && count > 0;
         slot--) {
        process_score *ps = &ap_scoreboard_image->parent[slot];

        if (ps->pid == 0 || ps->quiescing || ps->bucket != bucket_index
            || ps->generation != retained->mpm->my_generation
            || ap_scoreboard_image->servers[slot][0].status != SERVER_READY) {
            continue;
        }
        ps->quiescing = 1;
        ap_mpm_safe_kill(ps->pid, AP_SIG_GRACEFUL);
        count--;
    }
}

/* Compares each bucket's idle count with what the slots and the accept
 * queue say, and corrects drift: a handshake the program counted that
 * never completed, or a child killed between marking its slot and
 * counting itself. */
static void steer_reconcile(server_rec *s)
{
    prefork_steering_t *st = &retained->steer;
    int *waiting = snapshot.live;
    int slot, b, counted;

    if (st->active != PF_STEER_IDLE || st->stats == NULL
        || st->slot_idle == NULL || st->pending_len < num_buckets) {
        return;
    }
    memset(waiting, 0, sizeof(int) * (apr_size_t)num_buckets);
    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        counted = st->slot_idle[slot];
        if (counted > 0 && counted <= num_buckets) {
            waiting[counted - 1]++;
        }
    }
    for (b = 0; b < num_buckets; b++) {
        long advertised = (long)st->stats[b].idle;
        long truth = pf_steer_idle_truth(waiting[b],
                                         snapshot.state[b].queued);
        long fix = pf_steer_idle_correction(advertised, truth,
                                            &st->pending[b]);

        if (fix != 0) {
            steer_add_idle(&st->stats[b], fix);
            ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                         PFBLOGNO(00047) "idle steering: bucket %d "
                         "advertised %ld idle, %d waiting and %d queued; "
                         "corrected by %ld", b, advertised, waiting[b],
                         snapshot.state[b].queued, fix);
        }
    }
}

static void perform_idle_server_maintenance(server_rec *s)
{
    pf_limits_t lim;
    pf_decision_summary_t summary;
    int b, i;

    take_snapshot();
    steer_reconcile(s);
    /* An older generation's child will be replaced in its bucket as it
     * leaves: for the decision it counts as a child on its way, not as a
     * gap to fill. */
    for (b = 0; b < num_buckets; b++) {
        snapshot.state[b].children += snapshot.old_generation[b];
        snapshot.state[b].idle += snapshot.old_generation[b];
    }
    lim.num_buckets = num_buckets;
    lim.min_spare_servers = min_spare_servers;
    lim.max_spare_servers = max_spare_servers;
    lim.max_workers = max_workers;
    lim.max_spawn_rate = PF_MAX_SPAWN_RATE;
    pf_decide_maintenance(&lim, snapshot.state, snapshot.occupied,
                          retained->spawn_rate, snapshot.action,
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
        int n;

        for (n = 0; n < snapshot.action[bucket_index].spawn; n++) {
            if (spawn_into_bucket(s, bucket_index) != 0) {
                break;
            }
        }
    }
    log_maintenance_limits(s, &summary);
    /* Children of old generations that missed their signal (forked while
     * it was sent) are told again. */
    signal_old_children(0);
    take_snapshot();
    publish_snapshot();
}

/* ------------------------------------------------------------------ */
/* Parent: main loop                                                   */

/* A bucket must never be left without a child to accept.  Whenever a
 * child exits (a crash, recycling, or an old generation's child freeing
 * its slot after a graceful restart) every bucket with no live child of
 * the current generation gets one at once, not at the next maintenance
 * cycle. */
static void respawn_stranded_buckets(server_rec *s)
{
    int *live = snapshot.live;
    int slot, b, occupied = 0;
    int stopping = retained->mpm->shutdown_pending
                   || retained->mpm->restart_pending;

    if (stopping || live == NULL) {
        return;
    }
    memset(live, 0, sizeof(int) * (apr_size_t)num_buckets);
    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        process_score *ps = &ap_scoreboard_image->parent[slot];

        if (ps->pid != 0
            || ap_scoreboard_image->servers[slot][0].status != SERVER_DEAD) {
            occupied++;
        }
        if (ps->pid != 0 && !ps->quiescing
            && ps->generation == retained->mpm->my_generation
            && ps->bucket >= 0 && ps->bucket < num_buckets) {
            live[ps->bucket]++;
        }
    }
    for (b = 0; b < num_buckets; b++) {
        if (pf_bucket_needs_respawn_now(live[b], stopping, occupied,
                                        max_workers)) {
            if (spawn_into_bucket(s, b) != 0) {
                return;
            }
            occupied++;
        }
    }
}

static void handle_child_exit(server_rec *s, apr_proc_t *pid,
                              apr_exit_why_e exitwhy, int status)
{
    int slot = ap_find_child_by_pid(pid);
    int bucket_index;
    ap_generation_t gen;

    if (ap_process_child_status(pid, exitwhy, status) == APEXIT_CHILDFATAL) {
        /* A child could not start at all (bad User, unwritable lock
         * file...); forking more would fail the same way. */
        retained->mpm->mpm_state = AP_MPMQ_STOPPING;
        retained->mpm->shutdown_pending = 1;
        retained->mpm->is_ungraceful = 1;
        if (slot >= 0) {
            note_child_gone(slot, pid->pid,
                            ap_scoreboard_image->parent[slot].generation);
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
    bucket_index = slot_bucket(slot);
    gen = ap_scoreboard_image->parent[slot].generation;
    if (exitwhy == APR_PROC_SIGNAL
        && !ap_scoreboard_image->parent[slot].quiescing
        && (status == SIGKILL || status == SIGTERM)) {
        /* httpd's own status check keeps quiet about these, but a child
         * killed from outside (the OOM killer, an admin) is news. */
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00035) "child pid %" APR_PID_T_FMT " slot %d "
                     "bucket %d killed by signal %d without being asked to "
                     "stop; replacing it", pid->pid, slot, bucket_index,
                     status);
    }
    note_child_gone(slot, pid->pid, gen);
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00013) "child pid %" APR_PID_T_FMT " slot %d "
                 "bucket %d generation %d exited",
                 pid->pid, slot, bucket_index, gen);

    /* After a graceful restart the old generation's children hold the
     * slots the new one needs; each one that leaves is replaced at once in
     * its bucket, so a restart under load does not shrink the pool to one
     * child per bucket and make it grow back at the spawn ramp's pace. */
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
 * second (the suite saw p99 jump to 0.94 s on graceful restarts).  So
 * the handler writes a byte to a pipe and the parent sleeps in poll() on
 * it: an exit before the sleep leaves the byte there and the poll
 * returns at once. */
static int wake_pipe[2] = { -1, -1 };

static void parent_sigchld_handler(int sig)
{
    int saved_errno = errno;
    ssize_t ignored;

    (void)sig;
    if (wake_pipe[1] >= 0) {
        ignored = write(wake_pipe[1], "", 1);  /* full pipe: already awake */
        (void)ignored;
    }
    errno = saved_errno;
}

static void parent_wake_on_child_exit(void)
{
    struct sigaction sa;
    int i;

    if (wake_pipe[0] < 0 && pipe(wake_pipe) == 0) {
        for (i = 0; i < 2; i++) {
            fcntl(wake_pipe[i], F_SETFL, O_NONBLOCK);
            fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
        }
    }
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    sa.sa_handler = parent_sigchld_handler;
    sigaction(SIGCHLD, &sa, NULL);
}

/* Children have no use for the parent's pipe. */
static void close_parent_wake_pipe(void)
{
    int i;

    for (i = 0; i < 2; i++) {
        if (wake_pipe[i] >= 0) {
            close(wake_pipe[i]);
            wake_pipe[i] = -1;
        }
    }
}

/* ap_wait_or_timeout() without its lost-wake-up window: reaps one exited
 * child if there is one, else waits up to a second for the next exit (or
 * any signal). */
static void wait_for_child_exit(apr_exit_why_e *exitwhy, int *status,
                                apr_proc_t *pid, apr_pool_t *p,
                                server_rec *s)
{
    static int calls;
    struct pollfd pfd;
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
    if (APR_STATUS_IS_EINTR(rv) || wake_pipe[0] < 0) {
        if (wake_pipe[0] < 0) {
            apr_sleep(apr_time_from_sec(1));
        }
        return;
    }
    pfd.fd = wake_pipe[0];
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, 1000) > 0) {
        while (read(wake_pipe[0], drain, sizeof(drain)) > 0) {
        }
    }
}

static void server_main_loop(server_rec *s)
{
    /* The first cycle comes a second after (re)start: until then the new
     * generation is being started and the old one replaced child for
     * child, and a deficit seen now would only add to that. */
    apr_time_t last_maintenance = apr_time_now();

    while (!retained->mpm->restart_pending
           && !retained->mpm->shutdown_pending) {
        apr_exit_why_e exitwhy;
        int status;
        apr_proc_t pid;
        apr_time_t now;

        wait_for_child_exit(&exitwhy, &status, &pid, pconf, s);
        if (pid.pid != -1) {
            handle_child_exit(s, &pid, exitwhy, status);
        }
        now = apr_time_now();
        if (retained->mpm->restart_pending || retained->mpm->shutdown_pending) {
            break;
        }
        if (now - last_maintenance >= MAINTENANCE_INTERVAL
            || now < last_maintenance) {
            perform_idle_server_maintenance(s);
            last_maintenance = now;
        }
    }
}

static int any_child_alive(void)
{
    int slot;

    for (slot = 0; slot < retained->max_daemons_limit; slot++) {
        pid_t pid = ap_scoreboard_image->parent[slot].pid;

        if (pid != 0 && ap_mpm_safe_kill(pid, 0) == APR_SUCCESS) {
            return 1;
        }
    }
    return 0;
}

static void close_all_listeners(void)
{
    int i;
    prefork_dup_socket_t *dups;

    ap_close_listeners();
    if (retained->dup_sockets == NULL) {
        return;
    }
    dups = (prefork_dup_socket_t *)retained->dup_sockets->elts;
    for (i = 0; i < retained->dup_sockets->nelts; i++) {
        if (dups[i].sd) {
            apr_socket_close(dups[i].sd);
            dups[i].sd = NULL;
        }
    }
    retained->dup_sockets->nelts = 0;
}

/* Connections waiting in every accept queue of this generation. */
static int queued_connections(void)
{
    int b, total = 0;

    for (b = 0; b < num_buckets; b++) {
        ap_listen_rec *lr;
        int queued, limit;

        for (lr = buckets[b].listeners; lr; lr = lr->next) {
            if (pf_os_listener_queue(lr->sd, &queued, &limit)
                == APR_SUCCESS) {
                total += queued;
            }
        }
    }
    return total;
}

/* A graceful stop finishes what the kernel has already accepted: new
 * handshakes are dropped at every socket, the children keep accepting
 * until the queues are empty (or the time is up), and only then are they
 * told to finish and exit.  Closing the sockets first would reset every
 * connection still queued. */
static void drain_accept_queues(server_rec *s, apr_time_t cutoff)
{
    int b, queued;
    apr_status_t rv = APR_SUCCESS;

    for (b = 0; b < num_buckets && rv == APR_SUCCESS; b++) {
        ap_listen_rec *lr;

        for (lr = buckets[b].listeners; lr && rv == APR_SUCCESS;
             lr = lr->next) {
            rv = pf_os_refuse_new_connections(lr->sd);
        }
    }
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_INFO, rv, s,
                     PFBLOGNO(00040) "graceful stop: can't stop new "
                     "handshakes on the listeners; connections still "
                     "queued when they close will be reset");
        return;
    }
    while ((queued = queued_connections()) > 0
           && !retained->mpm->shutdown_pending
           && (!cutoff || apr_time_now() < cutoff)) {
        apr_sleep(apr_time_from_msec(20));
        ap_relieve_child_processes(reclaim_callback);
    }
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                 PFBLOGNO(00041) "graceful stop: %d connection(s) left in "
                 "the accept queues", queued);
}

static int shutdown_server(server_rec *s)
{
    apr_time_t cutoff = 0;

    retained->mpm->mpm_state = AP_MPMQ_STOPPING;
    if (retained->mpm->is_ungraceful) {
        ap_reclaim_child_processes(1, reclaim_callback);
        ap_remove_pid(pconf, ap_pid_fname);
        close_all_listeners();
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
    close_all_listeners();
    ap_relieve_child_processes(reclaim_callback);
    ap_remove_pid(pconf, ap_pid_fname);
    while (!retained->mpm->shutdown_pending && any_child_alive()
           && (!cutoff || apr_time_now() < cutoff)) {
        apr_sleep(apr_time_from_msec(100));
        ap_relieve_child_processes(reclaim_callback);
    }
    ap_reclaim_child_processes(1, reclaim_callback);
    return DONE;
}

/* ------------------------------------------------------------------ */
/* Shared memory                                                       */

/* ------------------------------------------------------------------ */
/* ListenBucketSteering: attaching the programs                        */

/* The socket of shard 0 of Listen @a l: a program attached through any
 * socket of a reuseport group serves the whole group. */
static apr_socket_t *listen_group_socket(int l)
{
    return buckets[l * retained->plan.buckets_per_listen].listeners->sd;
}

static int listen_groups(void)
{
    return num_buckets / retained->plan.buckets_per_listen;
}

static void steer_detach_all(server_rec *s)
{
    prefork_steering_t *st = &retained->steer;
    apr_status_t rv;
    int l;

    for (l = 0; l < listen_groups(); l++) {
        rv = pf_os_detach_steering(listen_group_socket(l));
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                         PFBLOGNO(00048) "ListenBucketSteering: couldn't "
                         "detach the program from listener %s (needs Linux "
                         "5.8); it stays until the next full restart",
                         buckets[l * retained->plan.buckets_per_listen]
                             .address);
        }
    }
    st->attached = 0;
}

/* The kernel or our privileges refused a step: back to hash, said once. */
static void steer_fall_back(server_rec *s, const char *step, apr_status_t rv,
                            const char *detail)
{
    prefork_steering_t *st = &retained->steer;

    if (st->attached) {
        steer_detach_all(s);
    }
    st->active = PF_STEER_HASH;
    if (!st->fallback_logged) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                     PFBLOGNO(00043) "ListenBucketSteering %s unavailable: "
                     "%s failed%s%s; falling back to hash steering",
                     pf_steer_mode_name(steering_wanted), step,
                     detail && *detail ? ": " : "",
                     detail ? detail : "");
        st->fallback_logged = 1;
    }
}

static void setup_cpu_steering(server_rec *s, apr_pool_t *p)
{
    prefork_steering_t *st = &retained->steer;
    int per_listen = retained->plan.buckets_per_listen;
    pf_cpu_run_t *runs;
    pf_cbpf_insn_t *prog;
    int num_runs, len = -1, l;
    apr_status_t rv;

    if (st->num_cpus < 1) {
        steer_fall_back(s, "sched_getaffinity()", APR_ENOTIMPL, NULL);
        return;
    }
    runs = apr_palloc(p, sizeof(*runs) * (apr_size_t)st->num_cpus);
    num_runs = pf_steer_cpu_runs(st->cpus, st->num_cpus, per_listen, runs);
    if (num_runs > 0
        && PF_CBPF_CPU_INSNS(num_runs) <= PF_CBPF_MAX_INSNS) {
        prog = apr_palloc(p, sizeof(*prog) * PF_CBPF_CPU_INSNS(num_runs));
        len = pf_steer_build_cpu_program(runs, num_runs, prog);
    }
    if (len < 0) {
        steer_fall_back(s, "building the program", APR_EINVAL,
                        apr_psprintf(p, "%d CPU groups need more than the "
                                     "kernel's %d instructions", num_runs,
                                     PF_CBPF_MAX_INSNS));
        return;
    }
    /* From here a program may be on some groups: a fallback detaches
     * them all (detaching where there is none is harmless). */
    st->attached = 1;
    for (l = 0; l < listen_groups(); l++) {
        rv = pf_os_attach_cpu_program(listen_group_socket(l), prog, len);
        if (rv != APR_SUCCESS) {
            steer_fall_back(s, "setsockopt(SO_ATTACH_REUSEPORT_CBPF)", rv,
                            NULL);
            return;
        }
    }
    st->active = PF_STEER_CPU;
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                 PFBLOGNO(00044) "ListenBucketSteering cpu: %d CPU(s) of "
                 "the affinity mask feed %d bucket(s) per Listen on %d "
                 "Listen(s) (classic BPF, %d instructions)%s",
                 st->num_cpus, per_listen, listen_groups(), len,
                 bucket_cpu_affinity ? "; children pinned to their "
                                       "bucket's CPUs" : "");
}

/* Room for @a needed buckets in a steering map: a power of two, at least
 * 16, so that a restart adding a Listen seldom needs a new map. */
static int steer_map_capacity(int needed)
{
    int capacity = 16;

    while (capacity < needed) {
        capacity *= 2;
    }
    return capacity;
}

/* The records of the idle counts: kept for the server's lifetime, made
 * larger (and new) only when a restart adds buckets. */
static apr_status_t ensure_steer_stats(server_rec *s)
{
    prefork_steering_t *st = &retained->steer;
    pf_steer_bucket_t *mem;
    size_t len;
    int fd, capacity, b;
    apr_status_t rv;

    if (st->stats == NULL || st->stats_capacity < num_buckets) {
        capacity = steer_map_capacity(num_buckets);
        rv = pf_os_bpf_create_stats_map(capacity, &fd, &mem, &len);
        if (rv != APR_SUCCESS) {
            steer_fall_back(s, "bpf(BPF_MAP_CREATE) of the mmap-able idle "
                            "counts", rv, NULL);
            return rv;
        }
        /* Older generations' children keep their own mapping of the old
         * records; unmapping here does not touch theirs. */
        pf_os_bpf_unmap(st->stats, st->stats_len);
        pf_os_bpf_close(st->stats_fd);
        st->stats = mem;
        st->stats_len = len;
        st->stats_fd = fd;
        st->stats_capacity = capacity;
        st->stats_buckets = 0;
    }
    if (st->pending_len < num_buckets) {
        st->pending = apr_pcalloc(retained->keep_pool,
                                  sizeof(long) * (apr_size_t)num_buckets);
        st->pending_len = num_buckets;
    }
    if (st->stats_buckets != num_buckets) {
        /* A new layout: bucket numbers mean other sockets now.  The counts
         * start from the children's slots at the next cycles. */
        for (b = 0; b < st->stats_capacity; b++) {
            st->stats[b].idle = 0;
        }
        memset(st->pending, 0, sizeof(long) * (apr_size_t)st->pending_len);
        st->stats_buckets = num_buckets;
    }
    return APR_SUCCESS;
}

/* Puts each bucket's socket under its bucket number in the socket map.
 * The map lives as long as the server, because the kernel lets a socket be
 * in one such map at a time, under one key: every (re)start empties it and
 * fills it again from the sockets in force, so a socket closed by a full
 * restart (and its descriptor number reused) can never leave a stale
 * entry.  While it is refilled the program finds no socket and the kernel
 * hashes, so no connection is refused. */
static apr_status_t fill_socket_map(server_rec *s)
{
    prefork_steering_t *st = &retained->steer;
    apr_status_t rv;
    int b;

    for (b = 0; st->socks_fd >= 0 && b < st->socks_capacity; b++) {
        pf_os_bpf_clear_socket(st->socks_fd, b);
    }
    if (st->socks_fd < 0 || st->socks_capacity < num_buckets) {
        int capacity = steer_map_capacity(num_buckets), map_fd;

        rv = pf_os_bpf_create_socket_map(capacity, &map_fd);
        if (rv != APR_SUCCESS) {
            steer_fall_back(s, "bpf(BPF_MAP_CREATE) of the "
                            "REUSEPORT_SOCKARRAY", rv, NULL);
            return rv;
        }
        pf_os_bpf_close(st->socks_fd);
        st->socks_fd = map_fd;
        st->socks_capacity = capacity;
    }
    for (b = 0; b < num_buckets; b++) {
        rv = pf_os_bpf_set_socket(st->socks_fd, b, buckets[b].listeners->sd);
        if (rv != APR_SUCCESS) {
            steer_fall_back(s, "bpf(BPF_MAP_UPDATE_ELEM) of a bucket socket",
                            rv, buckets[b].address);
            return rv;
        }
    }
    return APR_SUCCESS;
}

/* Room for the verifier's account of a refused program. */
#define VERIFIER_LOG_SIZE 16384

/* The verifier's last line, for the one log line of a refusal. */
static const char *last_log_line(apr_pool_t *p, char *log)
{
    char *end = log + strlen(log), *start;

    while (end > log && (end[-1] == '\n' || end[-1] == ' ')) {
        *--end = '\0';
    }
    start = strrchr(log, '\n');
    start = start ? start + 1 : log;
    return *start ? apr_psprintf(p, "verifier says: %s", start) : NULL;
}

static void setup_idle_steering(server_rec *s, apr_pool_t *p)
{
    prefork_steering_t *st = &retained->steer;
    pf_idle_program_t spec;
    pf_ebpf_insn_t *prog;
    int socks_fd, prog_fd, len, l;
    char *verifier_log;
    apr_status_t rv;

    if (st->slot_idle == NULL) {
        steer_fall_back(s, "mmap() of the per-slot marks", APR_ENOMEM, NULL);
        return;
    }
    if (ensure_steer_stats(s) != APR_SUCCESS) {
        return;
    }
    if (fill_socket_map(s) != APR_SUCCESS) {
        return;
    }
    socks_fd = st->socks_fd;
    prog = apr_palloc(p, sizeof(*prog) * PF_EBPF_IDLE_MAX_INSNS);
    verifier_log = apr_palloc(p, VERIFIER_LOG_SIZE);
    spec.stats_map_fd = st->stats_fd;
    spec.socks_map_fd = socks_fd;
    spec.per_listen = retained->plan.buckets_per_listen;
    spec.probes = pf_steer_idle_probes(spec.per_listen);
    st->attached = 1;           /* as for cpu: a fallback detaches all */
    for (l = 0; l < listen_groups(); l++) {
        spec.first_bucket = l * spec.per_listen;
        len = pf_steer_build_idle_program(&spec, prog, PF_EBPF_IDLE_MAX_INSNS);
        rv = len < 0 ? APR_EINVAL
                     : pf_os_bpf_load_idle_program(prog, len, &prog_fd,
                                                   verifier_log,
                                                   VERIFIER_LOG_SIZE);
        if (rv != APR_SUCCESS) {
            steer_fall_back(s, "bpf(BPF_PROG_LOAD) of the "
                            "SK_REUSEPORT program", rv,
                            len < 0 ? "program too large"
                                    : last_log_line(p, verifier_log));
            return;
        }
        rv = pf_os_attach_idle_program(listen_group_socket(l), prog_fd);
        /* The group holds the program now (or it failed): either way our
         * descriptor is no longer needed. */
        pf_os_bpf_close(prog_fd);
        if (rv != APR_SUCCESS) {
            steer_fall_back(s, "setsockopt(SO_ATTACH_REUSEPORT_EBPF)", rv,
                            NULL);
            return;
        }
    }
    st->active = PF_STEER_IDLE;
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                 PFBLOGNO(00046) "ListenBucketSteering idle: eBPF program "
                 "attached to %d Listen(s) of %d bucket(s) each, probing up "
                 "to %d other bucket(s) when the hash's has no idle child",
                 listen_groups(), spec.per_listen, spec.probes);
}

/* Run by the parent at every (re)start, before the children fork, so that
 * they inherit the mapping of the idle counts. */
static void setup_steering(server_rec *s, apr_pool_t *p)
{
    prefork_steering_t *st = &retained->steer;
    int per_listen = retained->plan.buckets_per_listen;

    if (st->slot_idle == NULL) {
        /* Shared with the children, anonymous: ServerLimit cannot change
         * over restarts, so this is the size for good. */
        size_t len = sizeof(int) * (size_t)retained->first_server_limit;
        void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        if (mem != MAP_FAILED) {
            st->slot_idle = mem;
            st->slot_idle_len = len;
        }
    }
    if (st->cpus == NULL) {
        st->cpus = apr_palloc(retained->keep_pool, sizeof(int) * 8192);
    }
    st->num_cpus = pf_os_affinity_cpus(st->cpus, 8192);
    st->active = PF_STEER_HASH;

    if (retained->plan.mode != PFB_MODE_REUSEPORT || per_listen < 2) {
        if (steering_wanted != PF_STEER_HASH || bucket_cpu_affinity) {
            ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                         PFBLOGNO(00042) "ListenBucketSteering %s, "
                         "BucketCPUAffinity %s: nothing to steer with %d "
                         "bucket(s) per Listen (mode %s)",
                         pf_steer_mode_name(steering_wanted),
                         bucket_cpu_affinity ? "on" : "off", per_listen,
                         pfb_mode_name(retained->plan.mode));
        }
        if (st->attached) {
            steer_detach_all(s);
        }
        return;
    }
    switch (steering_wanted) {
    case PF_STEER_CPU:
        setup_cpu_steering(s, p);
        break;
    case PF_STEER_IDLE:
        setup_idle_steering(s, p);
        break;
    default:
        if (st->attached) {
            steer_detach_all(s);
        }
        break;
    }
}

static apr_status_t setup_shared_state(server_rec *s)
{
    pfb_shm_t *shm;
    apr_status_t rv;
    int b, capacity;

    capacity = retained->shm_bucket_capacity;
    if (retained->shm == NULL || capacity < num_buckets) {
        /* Grow by doubling; a graceful restart that adds Listens needs no
         * new segment most of the time. */
        capacity = capacity > 0 ? capacity : 1;
        while (capacity < num_buckets) {
            capacity *= 2;
        }
        if (retained->shm) {
            apr_shm_destroy(retained->shm);
            retained->shm = NULL;
            retained->shm_base = NULL;
        }
        rv = apr_shm_create(&retained->shm,
                            pfb_shm_size(capacity, server_limit), NULL,
                            retained->keep_pool);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         PFBLOGNO(00016) "couldn't create the listener "
                         "buckets' shared memory (%" APR_SIZE_T_FMT " bytes)",
                         pfb_shm_size(capacity, server_limit));
            return rv;
        }
        retained->shm_bucket_capacity = capacity;
        shm = apr_shm_baseaddr_get(retained->shm);
        memset(shm, 0, pfb_shm_size(capacity, server_limit));
        retained->shm_base = shm;
    }
    shm = retained->shm_base;
    if ((int)shm->num_buckets != num_buckets) {
        /* The slot counters move when the bucket count changes. */
        memset((char *)shm + PFB_SHM_HEADER_SIZE, 0,
               pfb_shm_size(retained->shm_bucket_capacity, server_limit)
                   - PFB_SHM_HEADER_SIZE);
    }
    shm->magic = PFB_SHM_MAGIC;
    shm->version = PFB_SHM_VERSION;
    shm->bucket_size = sizeof(pfb_bucket_t);
    shm->header_size = PFB_SHM_HEADER_SIZE;
    shm->num_buckets = (apr_uint32_t)num_buckets;
    shm->num_slots = (apr_uint32_t)server_limit;
    shm->size = (apr_uint32_t)pfb_shm_size(num_buckets, server_limit);
    shm->mode = retained->plan.mode;
    shm->reason = retained->plan.reason;
    shm->so_reuseport = retained->reuseport_usable;
    shm->cpus_online = retained->cpus.online;
    shm->cpus_affinity = retained->cpus.affinity;
    shm->cpus_quota = retained->cpus.quota;
    shm->cpus_usable = pf_usable_cpus(retained->cpus.online,
                                      retained->cpus.affinity,
                                      retained->cpus.quota);
    shm->ratio = buckets_ratio;
    shm->explicit_buckets = buckets_explicit;
    shm->buckets_per_listen = retained->plan.buckets_per_listen;
    shm->num_listeners = (apr_uint32_t)(retained->plan.mode
                                            == PFB_MODE_SINGLE
                                        ? buckets[0].num_listeners
                                        : num_buckets
                                              / retained->plan
                                                    .buckets_per_listen);
    shm->max_workers = max_workers;
    shm->started = retained->started;
    for (b = 0; b < num_buckets; b++) {
        apr_cpystrn(pfb_shm_bucket(shm, b)->f.listener, buckets[b].address,
                    PFB_LISTENER_LEN);
    }
    return APR_SUCCESS;
}

static int prefork_run(apr_pool_t *p, apr_pool_t *plog, server_rec *s)
{
    (void)plog;
    pconf = p;
    ap_log_pid(pconf, ap_pid_fname);

    if (!retained->mpm->was_graceful) {
        if (ap_run_pre_mpm(s->process->pool, SB_SHARED) != OK) {
            retained->mpm->mpm_state = AP_MPMQ_STOPPING;
            return !OK;
        }
        retained->max_daemons_limit = 0;
    }
    ap_scoreboard_image->global->running_generation =
        retained->mpm->my_generation;
    if (setup_shared_state(s) != APR_SUCCESS) {
        retained->mpm->mpm_state = AP_MPMQ_STOPPING;
        return !OK;
    }
    retained->mpm->restart_pending = retained->mpm->shutdown_pending = 0;
    ap_unixd_mpm_set_signals(pconf, one_process);
    if (!one_process) {
        parent_wake_on_child_exit();
    }

    if (one_process) {
        AP_MONCONTROL(1);
        make_child(s, 0, 0);
        /* not reached: the child loop exits the process */
    }

    setup_steering(s, pconf);
    snapshot_alloc(pconf);
    startup_children(s, pconf);
    /* The new generation is accepting; now let the old one go, so that
     * no bucket is ever left without a child. */
    signal_old_children(0);
    take_snapshot();
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

    server_main_loop(s);

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
        ap_reclaim_child_processes(1, reclaim_callback);
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00020) "SIGHUP received.  Attempting to "
                     "restart");
    }
    return OK;
}

/* ------------------------------------------------------------------ */
/* Buckets: sockets                                                    */

static prefork_dup_socket_t *find_dup_socket(const char *key)
{
    prefork_dup_socket_t *dups =
        (prefork_dup_socket_t *)retained->dup_sockets->elts;
    int i;

    for (i = 0; i < retained->dup_sockets->nelts; i++) {
        if (dups[i].sd && strcmp(dups[i].key, key) == 0) {
            return &dups[i];
        }
    }
    return NULL;
}

/* The socket of shard @a shard of listener @a orig: shard 0 is the
 * original, the others are duplicates kept from an earlier generation or
 * opened now. */
static apr_status_t bucket_socket(server_rec *s, ap_listen_rec *orig,
                                  int shard, apr_socket_t **sd)
{
    const char *key;
    prefork_dup_socket_t *dup;
    apr_status_t rv;
    int queued = 0, backlog = DEFAULT_LISTENBACKLOG;

    if (shard == 0) {
        *sd = orig->sd;
        return APR_SUCCESS;
    }
    key = apr_psprintf(retained->keep_pool, "%pI#%d", orig->bind_addr, shard);
    dup = find_dup_socket(key);
    if (dup) {
        dup->in_use = 1;
        *sd = dup->sd;
        return APR_SUCCESS;
    }
    /* The duplicate gets the backlog the original runs with. */
    if (pf_os_listener_queue(orig->sd, &queued, &backlog) != APR_SUCCESS
        || backlog <= 0) {
        backlog = DEFAULT_LISTENBACKLOG;
    }
    rv = pf_os_duplicate_listener(sd, orig->sd, orig->bind_addr, backlog,
                                  retained->keep_pool);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     PFBLOGNO(00021) "couldn't open SO_REUSEPORT duplicate "
                     "%d of listener %pI", shard, orig->bind_addr);
        return rv;
    }
    dup = apr_array_push(retained->dup_sockets);
    dup->key = key;
    dup->sd = *sd;
    dup->in_use = 1;
    return APR_SUCCESS;
}

/* Closes duplicates no generation wants any more (a Listen removed, or
 * fewer buckets after a full restart). */
static void close_unused_dup_sockets(void)
{
    prefork_dup_socket_t *dups =
        (prefork_dup_socket_t *)retained->dup_sockets->elts;
    int i, kept = 0;

    for (i = 0; i < retained->dup_sockets->nelts; i++) {
        if (dups[i].in_use) {
            dups[kept++] = dups[i];
        }
        else if (dups[i].sd) {
            apr_socket_close(dups[i].sd);
        }
    }
    retained->dup_sockets->nelts = kept;
}

static ap_listen_rec *bucket_listener(apr_pool_t *p, ap_listen_rec *orig,
                                      apr_socket_t *sd)
{
    ap_listen_rec *lr = apr_pmemdup(p, orig, sizeof(*orig));

    lr->next = NULL;
    lr->sd = sd;
    lr->active = 1;
    return lr;
}

static int count_listeners(void)
{
    ap_listen_rec *lr;
    int n = 0;

    for (lr = ap_listeners; lr; lr = lr->next) {
        n++;
    }
    return n;
}

/* Builds this generation's buckets from ap_listeners and the plan. */
static apr_status_t build_buckets(apr_pool_t *p, server_rec *s)
{
    const pf_bucket_plan_t *plan = &retained->plan;
    int per_listen = plan->buckets_per_listen;
    int nl = count_listeners();
    ap_listen_rec *lr;
    prefork_dup_socket_t *dups;
    int l, k, i;
    apr_status_t rv;

    dups = (prefork_dup_socket_t *)retained->dup_sockets->elts;
    for (i = 0; i < retained->dup_sockets->nelts; i++) {
        dups[i].in_use = 0;
    }

    if (plan->mode == PFB_MODE_SINGLE) {
        num_buckets = 1;
        buckets = apr_pcalloc(p, sizeof(*buckets));
        buckets[0].listeners = ap_listeners;
        buckets[0].num_listeners = nl;
        buckets[0].address = apr_psprintf(p, "%pI%s",
                                          ap_listeners->bind_addr,
                                          nl > 1 ? " (+more)" : "");
        for (lr = ap_listeners; lr; lr = lr->next) {
            /* Several sockets are polled, so a connection another child
             * took first must not block us in accept(). */
            apr_socket_opt_set(lr->sd, APR_SO_NONBLOCK, nl > 1);
        }
        close_unused_dup_sockets();
        return APR_SUCCESS;
    }

    num_buckets = nl * per_listen;
    buckets = apr_pcalloc(p, (apr_size_t)num_buckets * sizeof(*buckets));
    for (l = 0, lr = ap_listeners; lr; lr = lr->next, l++) {
        if (plan->mode == PFB_MODE_REUSEPORT) {
            rv = pf_os_set_reuseport(lr->sd);
            if (rv != APR_SUCCESS) {
                ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                             PFBLOGNO(00022) "setsockopt(SO_REUSEPORT) on "
                             "listener %pI failed", lr->bind_addr);
                return rv;
            }
        }
        for (k = 0; k < per_listen; k++) {
            prefork_bucket_t *bucket = &buckets[l * per_listen + k];
            apr_socket_t *sd;

            rv = bucket_socket(s, lr, k, &sd);
            if (rv != APR_SUCCESS) {
                return rv;
            }
            /* One socket per bucket, used by its children alone: they
             * block in accept(), and the kernel wakes one per connection. */
            apr_socket_opt_set(sd, APR_SO_NONBLOCK, 0);
            bucket->listeners = bucket_listener(p, lr, sd);
            bucket->num_listeners = 1;
            bucket->address = apr_psprintf(p, "%pI", lr->bind_addr);
        }
    }
    close_unused_dup_sockets();
    return APR_SUCCESS;
}

static apr_status_t create_accept_mutexes(apr_pool_t *p, server_rec *s)
{
    int b;
    apr_status_t rv;

    for (b = 0; b < num_buckets; b++) {
        if (buckets[b].num_listeners < 2) {
            continue;
        }
        rv = ap_proc_mutex_create(&buckets[b].mutex, NULL,
                                  AP_ACCEPT_MUTEX_TYPE,
                                  apr_itoa(p, b), s, p, 0);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         PFBLOGNO(00023) "couldn't create the accept mutex "
                         "of bucket %d", b);
            return rv;
        }
    }
    return APR_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Buckets: how many                                                   */

static void log_bucket_plan(server_rec *s, int usable)
{
    const pf_bucket_plan_t *plan = &retained->plan;

    if (plan->reason == PFB_WHY_NO_REUSEPORT) {
        ap_log_error(APLOG_MARK, APLOG_WARNING,
                     retained->reuseport_status, s,
                     PFBLOGNO(00024) "SO_REUSEPORT unavailable (%s failed): "
                     "%s ignored, one bucket per Listen (%d bucket(s))",
                     retained->reuseport_failed_call,
                     buckets_explicit ? "ListenBuckets"
                                      : "ListenCoresBucketsRatio",
                     plan->num_buckets);
        return;
    }
    if (plan->reason == PFB_WHY_CAPPED) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00025) "%s asks for more buckets than "
                     "MaxRequestWorkers (%d) can give a child each; using "
                     "%d bucket(s) per Listen, %d in all (mode %s)",
                     buckets_explicit ? "ListenBuckets"
                                      : "ListenCoresBucketsRatio",
                     max_workers, plan->buckets_per_listen, plan->num_buckets,
                     pfb_mode_name(plan->mode));
        return;
    }
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                 PFBLOGNO(00026) "SO_REUSEPORT %s; listener buckets: %d "
                 "(%d per Listen, mode %s, from %s: %d usable CPU(s) of %d "
                 "online, affinity %d, cgroup quota %d, "
                 "ListenCoresBucketsRatio %d, ListenBuckets %d)",
                 retained->reuseport_usable ? "works" : "unavailable",
                 plan->num_buckets, plan->buckets_per_listen,
                 pfb_mode_name(plan->mode), pfb_reason_name(plan->reason),
                 usable, retained->cpus.online, retained->cpus.affinity,
                 retained->cpus.quota, buckets_ratio, buckets_explicit);
}

/* Decides the bucket count at start-up and full restarts; a graceful
 * restart keeps the count its sockets were made for. */
static void plan_buckets(server_rec *s, int level_flags)
{
    pf_bucket_plan_t wanted;
    int usable;
    server_rec *logto = (level_flags & APLOG_STARTUP) ? NULL : s;

    if (retained->reuseport_usable < 0) {
        retained->reuseport_usable =
            pf_os_probe_reuseport(&retained->reuseport_status,
                                  &retained->reuseport_failed_call);
    }
    pf_os_probe_cpus(&retained->cpus);
    usable = pf_usable_cpus(retained->cpus.online, retained->cpus.affinity,
                            retained->cpus.quota);
    pf_plan_buckets(usable, buckets_ratio, buckets_explicit,
                    retained->reuseport_usable, count_listeners(),
                    max_workers, &wanted);

    if (retained->planned && retained->mpm->was_graceful) {
        if (wanted.mode != retained->plan.mode
            || wanted.buckets_per_listen
                   != retained->plan.buckets_per_listen) {
            ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, logto,
                         PFBLOGNO(00027) "listener buckets: the new "
                         "configuration asks for %d per Listen (mode %s); "
                         "a graceful restart keeps %d (mode %s) so that no "
                         "queued connection is lost; the change takes "
                         "effect at the next full restart",
                         wanted.buckets_per_listen, pfb_mode_name(wanted.mode),
                         retained->plan.buckets_per_listen,
                         pfb_mode_name(retained->plan.mode));
        }
        retained->plan.num_buckets =
            retained->plan.mode == PFB_MODE_SINGLE
                ? 1
                : retained->plan.buckets_per_listen * count_listeners();
        return;
    }
    retained->plan = wanted;
    retained->planned = 1;
    /* Start-up reads the configuration twice and core has pointed stderr
     * at the error log by now, so the first pass stays quiet: the admin
     * gets one line about buckets, not two. */
    if (!(level_flags & APLOG_STARTUP)) {
        log_bucket_plan(s, usable);
    }
}

static void size_spawn_rates(void)
{
    int b;

    if (retained->spawn_rate_len >= num_buckets) {
        return;
    }
    retained->spawn_rate = apr_palloc(retained->keep_pool,
                                      (apr_size_t)num_buckets * sizeof(int));
    for (b = 0; b < num_buckets; b++) {
        retained->spawn_rate[b] = 1;
    }
    retained->spawn_rate_len = num_buckets;
}

/* ------------------------------------------------------------------ */
/* Hooks                                                               */

static int prefork_open_logs(apr_pool_t *p, apr_pool_t *plog,
                             apr_pool_t *ptemp, server_rec *s)
{
    int level_flags = 0;
    int startup = 0;

    (void)plog;
    (void)ptemp;
    pconf = p;
    if (retained->mpm->module_loads == 1) {
        startup = 1;
        level_flags |= APLOG_STARTUP;
    }
    if (ap_setup_listeners(ap_server_conf) < 1) {
        ap_log_error(APLOG_MARK, APLOG_ALERT | level_flags, 0,
                     startup ? NULL : s,
                     PFBLOGNO(00028) "no listening sockets available, "
                     "shutting down");
        return !OK;
    }
    plan_buckets(s, level_flags);
    if (build_buckets(p, s) != APR_SUCCESS) {
        if (retained->plan.mode != PFB_MODE_REUSEPORT) {
            return !OK;
        }
        /* The kernel refused a duplicate (another user's socket on the
         * port, or an exotic listener): run one bucket per Listen rather
         * than not at all. */
        if (!startup) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                         PFBLOGNO(00029) "listener buckets: duplicating "
                         "the Listen sockets failed; falling back to one "
                         "bucket per Listen");
        }
        retained->plan.mode = PFB_MODE_PER_LISTEN;
        retained->plan.reason = PFB_WHY_DUP_FAILED;
        retained->plan.buckets_per_listen = 1;
        retained->plan.num_buckets = count_listeners();
        if (build_buckets(p, s) != APR_SUCCESS) {
            return !OK;
        }
    }
    if (create_accept_mutexes(p, s) != APR_SUCCESS) {
        return !OK;
    }
    size_spawn_rates();
    return OK;
}

static int prefork_pre_config(apr_pool_t *p, apr_pool_t *plog,
                              apr_pool_t *ptemp)
{
    int no_detach, debug, foreground;
    apr_status_t rv;
    const char *userdata_key = "mpm_prefork_buckets_module";

    (void)plog;
    (void)ptemp;
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
        retained->max_daemons_limit = -1;
        retained->reuseport_usable = -1;
        retained->started = apr_time_now();
        apr_pool_create(&retained->keep_pool, ap_pglobal);
        apr_pool_tag(retained->keep_pool, "prefork_buckets_keep");
        retained->dup_sockets = apr_array_make(retained->keep_pool, 8,
                                               sizeof(prefork_dup_socket_t));
        retained->steer.stats_fd = -1;
        retained->steer.socks_fd = -1;
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
            /* Only one reuseport probe per process; it runs after this. */
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
    buckets_explicit = 0;
    steering_wanted = PF_STEER_HASH;
    bucket_cpu_affinity = 0;
    ap_max_mem_free = APR_ALLOCATOR_MAX_FREE_UNLIMITED;

    rv = ap_mutex_register(p, AP_ACCEPT_MUTEX_TYPE, NULL, APR_LOCK_DEFAULT, 0);
    if (rv != APR_SUCCESS) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return OK;
}

static void log_correction(server_rec *s, int startup, const char *msg)
{
    if (startup) {
        ap_log_error(APLOG_MARK, APLOG_WARNING | APLOG_STARTUP, 0, NULL,
                     PFBLOGNO(00031) "WARNING: %s", msg);
    }
    else {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00032) "%s", msg);
    }
}

static int prefork_check_config(apr_pool_t *p, apr_pool_t *plog,
                                apr_pool_t *ptemp, server_rec *s)
{
    int startup = retained->mpm->module_loads == 1;

    (void)plog;
    (void)ptemp;
    if (!retained->first_server_limit) {
        retained->first_server_limit = server_limit;
    }
    else if (server_limit != retained->first_server_limit) {
        log_correction(s, startup, apr_psprintf(p,
            "changing ServerLimit to %d from the original value of %d "
            "is not allowed during a restart; ServerLimit stays %d until "
            "the server is stopped and started",
            server_limit, retained->first_server_limit,
            retained->first_server_limit));
        server_limit = retained->first_server_limit;
    }
    if (max_workers > server_limit) {
        log_correction(s, startup, apr_psprintf(p,
            "MaxRequestWorkers of %d exceeds ServerLimit value of %d "
            "servers, decreasing MaxRequestWorkers to %d; to increase "
            "it, increase ServerLimit",
            max_workers, server_limit, server_limit));
        max_workers = server_limit;
    }
    if (start_servers > max_workers) {
        log_correction(s, startup, apr_psprintf(p,
            "StartServers of %d exceeds MaxRequestWorkers of %d, "
            "decreasing StartServers to %d",
            start_servers, max_workers, max_workers));
        start_servers = max_workers;
    }
    if (min_spare_servers >= max_spare_servers) {
        log_correction(s, startup, apr_psprintf(p,
            "MinSpareServers of %d is not below MaxSpareServers of %d, "
            "increasing MaxSpareServers to %d",
            min_spare_servers, max_spare_servers, min_spare_servers + 1));
        max_spare_servers = min_spare_servers + 1;
    }
    if (buckets_explicit && buckets_ratio) {
        log_correction(s, startup, apr_psprintf(p,
            "both ListenBuckets (%d) and ListenCoresBucketsRatio (%d) are "
            "set; ListenBuckets wins and the ratio is ignored",
            buckets_explicit, buckets_ratio));
    }
    return OK;
}

static int prefork_query(int query_code, int *result, apr_status_t *rv)
{
    *rv = APR_SUCCESS;
    switch (query_code) {
    case AP_MPMQ_MAX_DAEMON_USED:
        *result = retained->max_daemons_limit < 0 ? max_workers
                                                  : retained->max_daemons_limit;
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

static const char *prefork_get_name(void)
{
    return "prefork";
}

static void prefork_hooks(apr_pool_t *p)
{
    /* Open the listeners before mod_log_config opens the logs, as httpd's
     * own MPMs do, so that piped loggers don't inherit a half-made set. */
    static const char *const log_config_first[] = { "mod_log_config.c",
                                                    NULL };

    (void)p;
    ap_hook_open_logs(prefork_open_logs, NULL, log_config_first,
                      APR_HOOK_REALLY_FIRST);
    /* Our pre_config must run before core's pre_config, which may want to
     * know the MPM's state. */
    ap_hook_pre_config(prefork_pre_config, NULL, NULL, APR_HOOK_REALLY_FIRST);
    ap_hook_check_config(prefork_check_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_mpm(prefork_run, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_mpm_query(prefork_query, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_mpm_get_name(prefork_get_name, NULL, NULL, APR_HOOK_MIDDLE);
    APR_REGISTER_OPTIONAL_FN(prefork_buckets_shm);
}

/* ------------------------------------------------------------------ */
/* Directives                                                          */

/* Parses a directive's value strictly; returns NULL or the message that
 * stops start-up. */
static const char *parse_directive_int(cmd_parms *cmd, const char *arg,
                                       long long min, long long max,
                                       int *out)
{
    char msg[512];
    pf_parse_e why;
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    if (err != NULL) {
        return err;
    }
    why = pf_parse_bounded_int(arg, min, max, out);
    if (why == PF_PARSE_OK) {
        return NULL;
    }
    return apr_pstrdup(cmd->pool,
                       pf_format_parse_error(msg, sizeof(msg),
                                             cmd->cmd->name, arg, min, max,
                                             why));
}

static const char *set_start_servers(cmd_parms *cmd, void *dummy,
                                     const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 0, PF_MAX_SERVER_LIMIT,
                               &start_servers);
}

static const char *set_min_spare_servers(cmd_parms *cmd, void *dummy,
                                         const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 1, PF_MAX_SERVER_LIMIT,
                               &min_spare_servers);
}

static const char *set_max_spare_servers(cmd_parms *cmd, void *dummy,
                                         const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 1, PF_MAX_SERVER_LIMIT,
                               &max_spare_servers);
}

static const char *set_max_request_workers(cmd_parms *cmd, void *dummy,
                                           const char *arg)
{
    (void)dummy;
    if (!strcasecmp(cmd->cmd->name, "MaxClients")) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, NULL,
                     PFBLOGNO(00033) "MaxClients is deprecated, use "
                     "MaxRequestWorkers instead.");
    }
    return parse_directive_int(cmd, arg, 1, PF_MAX_SERVER_LIMIT,
                               &max_workers);
}

static const char *set_server_limit(cmd_parms *cmd, void *dummy,
                                    const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 1, PF_MAX_SERVER_LIMIT,
                               &server_limit);
}

static const char *set_max_connections_per_child(cmd_parms *cmd, void *dummy,
                                                 const char *arg)
{
    (void)dummy;
    if (!strcasecmp(cmd->cmd->name, "MaxRequestsPerChild")) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, NULL,
                     PFBLOGNO(00034) "MaxRequestsPerChild is deprecated, "
                     "use MaxConnectionsPerChild instead.");
    }
    return parse_directive_int(cmd, arg, 0, 2147483647LL,
                               &ap_max_requests_per_child);
}

static const char *set_graceful_shutdown_timeout(cmd_parms *cmd, void *dummy,
                                                 const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 0, 2147483LL,
                               &ap_graceful_shutdown_timeout);
}

static const char *set_buckets_ratio(cmd_parms *cmd, void *dummy,
                                     const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 0, PF_MAX_SERVER_LIMIT,
                               &buckets_ratio);
}

static const char *set_buckets_explicit(cmd_parms *cmd, void *dummy,
                                        const char *arg)
{
    (void)dummy;
    return parse_directive_int(cmd, arg, 0, PF_MAX_SERVER_LIMIT,
                               &buckets_explicit);
}

static const char *set_bucket_steering(cmd_parms *cmd, void *dummy,
                                       const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    (void)dummy;
    if (err != NULL) {
        return err;
    }
    if (pf_steer_parse_mode(arg, &steering_wanted) != 0) {
        return apr_psprintf(cmd->pool, "%s: '%s' is not a steering mode; "
                            "expected hash, cpu or idle", cmd->cmd->name,
                            arg);
    }
    return NULL;
}

static const char *set_bucket_cpu_affinity(cmd_parms *cmd, void *dummy,
                                           const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    (void)dummy;
    if (err != NULL) {
        return err;
    }
    if (!strcasecmp(arg, "on")) {
        bucket_cpu_affinity = 1;
    }
    else if (!strcasecmp(arg, "off")) {
        bucket_cpu_affinity = 0;
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
    RSRC_CONF, "Value set for the socket option TCP_DEFER_ACCEPT if it is set"),
#endif
AP_INIT_TAKE1("ListenCoresBucketsRatio", set_buckets_ratio, NULL, RSRC_CONF,
    "an integer from 0 to 200000: usable CPUs per listener bucket, 0 = "
    "buckets off"),
AP_INIT_TAKE1("ListenBuckets", set_buckets_explicit, NULL, RSRC_CONF,
    "an integer from 0 to 200000: listener buckets per Listen, 0 = follow "
    "ListenCoresBucketsRatio"),
AP_INIT_TAKE1("ListenBucketSteering", set_bucket_steering, NULL, RSRC_CONF,
    "hash, cpu or idle: how a new connection picks its bucket among a "
    "Listen's sockets (default hash)"),
AP_INIT_TAKE1("BucketCPUAffinity", set_bucket_cpu_affinity, NULL, RSRC_CONF,
    "On or Off: pin each bucket's children to the CPUs that feed it under "
    "cpu steering (default Off)"),
AP_INIT_TAKE1("StartServers", set_start_servers, NULL, RSRC_CONF,
    "an integer from 0 to 200000: number of child processes created at "
    "start-up"),
AP_INIT_TAKE1("MinSpareServers", set_min_spare_servers, NULL, RSRC_CONF,
    "an integer from 1 to 200000: minimum number of idle children, split "
    "over the buckets"),
AP_INIT_TAKE1("MaxSpareServers", set_max_spare_servers, NULL, RSRC_CONF,
    "an integer from 1 to 200000: maximum number of idle children, split "
    "over the buckets"),
AP_INIT_TAKE1("MaxClients", set_max_request_workers, NULL, RSRC_CONF,
    "an integer from 1 to 200000 (deprecated name of MaxRequestWorkers)"),
AP_INIT_TAKE1("MaxRequestWorkers", set_max_request_workers, NULL, RSRC_CONF,
    "an integer from 1 to 200000: maximum number of children alive at the "
    "same time"),
AP_INIT_TAKE1("ServerLimit", set_server_limit, NULL, RSRC_CONF,
    "an integer from 1 to 200000: maximum value of MaxRequestWorkers for "
    "this run of Apache"),
AP_INIT_TAKE1("MaxConnectionsPerChild", set_max_connections_per_child, NULL,
    RSRC_CONF, "an integer from 0 to 2147483647: connections a child "
    "serves before it exits, 0 = no limit"),
AP_INIT_TAKE1("MaxRequestsPerChild", set_max_connections_per_child, NULL,
    RSRC_CONF, "an integer from 0 to 2147483647 (deprecated name of "
    "MaxConnectionsPerChild)"),
AP_INIT_TAKE1("GracefulShutdownTimeout", set_graceful_shutdown_timeout, NULL,
    RSRC_CONF, "an integer from 0 to 2147483: seconds to wait for children "
    "to finish their connections at a graceful stop, 0 = no limit"),
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
