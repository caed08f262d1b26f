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
 * The listener buckets: the httpd glue that carries out the plan of
 * prefork_plan.c.  At each (re)start pf_bucketset_build() probes
 * SO_REUSEPORT and the CPUs, asks the plan for the count and for what
 * the restart keeps, and gives each bucket an identity record (a Listen
 * and a shard) and its socket: shard 0 is core's listener, the others
 * duplicates kept across restarts, so that a restart closes no queue; a
 * duplicate the kernel refuses means one bucket per Listen.  There are
 * 2 * ServerLimit + 1 records, so that an identity out of use keeps its
 * record, and its counters, while children forked for it run.  The
 * sockets are noted in guard/'s book, which guards them (prefork.c calls
 * the guard for its checks), steering/ steers them, prefork_segment.c
 * writes what readers see; prefork.c is the only caller.
 */

#include "apr.h"
#include "apr_atomic.h"
#include "apr_portable.h"
#include "apr_strings.h"

#define APR_WANT_STRFUNC
#include "apr_want.h"

#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "ap_config.h"
#include "httpd.h"
#include "http_log.h"
#include "ap_listen.h"
#include "mpm_common.h"
#include "util_mutex.h"

#include "pfb_log.h"
#include "prefork_bucketset.h"
#include "prefork_plan.h"
#include "guard/prefork_sockguard.h"
#include "steering/prefork_steering.h"

APLOG_USE_MODULE(mpm_prefork);

/* One bucket identity: a Listen's address and a shard.  Its index is its
 * record in the shared segment, so counters stay with the identity
 * across restarts.  Parent-private. */
typedef struct {
    const char *listener;       /* NULL: the single bucket of every Listen */
    int shard;
    int used;                   /* the record belongs to this identity */
    apr_pool_t *dup_pool;       /* holds the duplicate socket below */
    apr_socket_t *dup;          /* shard > 0: kept for the server's life */
} identity_t;

struct pf_bucketset_s {
    apr_pool_t *pool;           /* outlives generations */
    int num_slots;
    int num_records;
    identity_t *ids;
    apr_time_t started;

    pf_segment_t *seg;          /* what readers see, made at the first
                                   build */
    apr_uint64_t *retired;      /* per record: what its children that
                                   exited accepted */

    /* The generation it builds: the parent's, in its retained data. */
    pf_generation_t *gen;
    int num_listeners;
    int *held;                  /* scratch: per record, children forked
                                   for it still alive */

    pf_sockguard_t *guard;      /* the sockets children hold */

    /* What the count was made from. */
    int reuseport_usable;       /* -1 not probed, 0 no, 1 yes */
    apr_status_t reuseport_status;
    const char *reuseport_failed_call;
    /* What steering found of the host at this plan (the CPUs, whether
     * the mode asked for can run), and the steering in force as last
     * handed over. */
    pf_steer_host_t host;

    /* What the last build decided, for pf_bucketset_log_plan(). */
    pf_bucketset_config_t built_from;
    pf_bucket_plan_t asked;     /* the configuration's plan */
    pf_plan_warm_t warm;
    int change_deferred;        /* a graceful restart kept the old plan */
    int duplicate_failed;       /* fell back to one bucket per Listen */
};

/* ------------------------------------------------------------------ */
/* Creation and the segment                                            */

pf_bucketset_t *pf_bucketset_create(apr_pool_t *pool, int num_slots,
                                    apr_time_t started, pf_generation_t *gen,
                                    pf_sockguard_t *guard)
{
    pf_bucketset_t *bs = apr_pcalloc(pool, sizeof(*bs));
    int r;

    bs->pool = pool;
    bs->num_slots = num_slots;
    bs->num_records = PF_BUCKETSET_RECORDS(num_slots);
    bs->ids = apr_pcalloc(pool, sizeof(identity_t)
                                    * (apr_size_t)bs->num_records);
    gen->num_records = bs->num_records;
    gen->record = apr_pcalloc(pool, sizeof(int)
                                        * (apr_size_t)bs->num_records);
    gen->position = apr_palloc(pool, sizeof(int)
                                         * (apr_size_t)bs->num_records);
    for (r = 0; r < bs->num_records; r++) {
        gen->position[r] = -1;
    }
    bs->gen = gen;
    bs->held = apr_pcalloc(pool, sizeof(int) * (apr_size_t)bs->num_records);
    bs->retired = apr_pcalloc(pool, sizeof(apr_uint64_t)
                                        * (apr_size_t)bs->num_records);
    bs->started = started;
    bs->guard = guard;
    bs->reuseport_usable = -1;
    return bs;
}

static apr_status_t create_segment(pf_bucketset_t *bs, server_rec *s)
{
    apr_status_t rv = pf_segment_create(&bs->seg, bs->pool, bs->num_records,
                                        bs->num_slots, bs->started);
    pfb_layout_t layout;

    if (rv != APR_SUCCESS) {
        pfb_layout(bs->num_records, bs->num_slots, &layout);
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                     PFBLOGNO(00016) "couldn't create the listener "
                     "buckets' shared memory (%" APR_SIZE_T_FMT " bytes)",
                     layout.size);
    }
    return rv;
}

pf_segment_t *pf_bucketset_segment(const pf_bucketset_t *bs)
{
    return bs != NULL ? bs->seg : NULL;
}

/* ------------------------------------------------------------------ */
/* Identities                                                          */

static int same_listener(const char *a, const char *b)
{
    return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

static int find_identity(const pf_bucketset_t *bs, const pf_identity_t *id)
{
    int r;

    for (r = 0; r < bs->num_records; r++) {
        const identity_t *rec = &bs->ids[r];

        if (rec->used && rec->shard == id->shard
            && same_listener(rec->listener, id->listener)) {
            return r;
        }
    }
    return -1;
}

/* A record for a new identity: one never used, else one whose identity
 * is not in use and has no child left (bs->held, from the children
 * table).  One always exists: of the 2 * ServerLimit + 1 records
 * (pf_bucketset_create), the build has given fewer than ServerLimit + 1
 * to buckets so far (every bucket needs a child), and at most ServerLimit
 * others still have children, each child counting in one record.  -1
 * would mean that sizing broke (PFB00049). */
static int new_identity(pf_bucketset_t *bs, const pf_identity_t *id)
{
    int r, pick = -1, pass;

    for (pass = 0; pass < 2 && pick < 0; pass++) {
        for (r = 0; r < bs->num_records && pick < 0; r++) {
            identity_t *rec = &bs->ids[r];

            if (bs->gen->position[r] >= 0) {
                continue;
            }
            if ((pass == 0 && !rec->used)
                || (pass == 1 && bs->held[r] == 0)) {
                pick = r;
            }
        }
    }
    if (pick < 0) {
        return -1;
    }
    if (bs->ids[pick].dup_pool) {
        apr_pool_destroy(bs->ids[pick].dup_pool);
    }
    memset(&bs->ids[pick], 0, sizeof(identity_t));
    /* Only new identities allocate from the long-lived pool: restarts
     * that keep their Listens make it grow by nothing. */
    bs->ids[pick].listener = id->listener ? apr_pstrdup(bs->pool,
                                                        id->listener)
                                          : NULL;
    bs->ids[pick].shard = id->shard;
    bs->ids[pick].used = 1;
    bs->retired[pick] = 0;
    pf_segment_write_identity(bs->seg, pick, id->listener, id->shard, -1, 0,
                              1);
    return pick;
}

/* Closes the duplicate of an identity that no bucket uses now. */
static void drop_duplicate(identity_t *rec)
{
    if (rec->dup_pool) {
        /* The pool's cleanup closes the socket. */
        apr_pool_destroy(rec->dup_pool);
        rec->dup_pool = NULL;
        rec->dup = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Building a generation                                               */

static ap_listen_rec *nth_listener(int n)
{
    ap_listen_rec *lr = ap_listeners;

    while (lr && n-- > 0) {
        lr = lr->next;
    }
    return lr;
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

/* The socket of a bucket in reuseport or per-listen mode: shard 0 is
 * core's own listener, the others duplicates kept from an earlier
 * generation or opened now. */
static apr_status_t bucket_socket(pf_bucketset_t *bs, identity_t *rec,
                                  ap_listen_rec *orig, server_rec *s,
                                  apr_socket_t **sd)
{
    const pf_guard_record_t *kept;
    int backlog = DEFAULT_LISTENBACKLOG;
    apr_status_t rv;

    if (rec->shard == 0) {
        *sd = orig->sd;
        return APR_SUCCESS;
    }
    if (rec->dup) {
        *sd = rec->dup;
        return APR_SUCCESS;
    }
    /* The duplicate gets the backlog and the options of the original as
     * the parent first had them. */
    kept = pf_sockguard_note(bs->guard, orig->sd);
    if (kept != NULL && kept->backlog > 0) {
        backlog = kept->backlog;
    }
    apr_pool_create(&rec->dup_pool, bs->pool);
    apr_pool_tag(rec->dup_pool, "prefork_bucket_socket");
    rv = pf_os_duplicate_listener(&rec->dup, orig->sd, orig->bind_addr,
                                  backlog, kept ? &kept->options : NULL,
                                  rec->dup_pool);
    if (rv != APR_SUCCESS) {
        apr_pool_destroy(rec->dup_pool);
        rec->dup_pool = NULL;
        rec->dup = NULL;
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     PFBLOGNO(00021) "couldn't open SO_REUSEPORT duplicate "
                     "%d of listener %pI", rec->shard, orig->bind_addr);
        return rv;
    }
    *sd = rec->dup;
    return APR_SUCCESS;
}

/* Gives every bucket of the plan its identity record and its sockets. */
static apr_status_t open_buckets(pf_bucketset_t *bs,
                                 const pf_plan_generation_out_t *out,
                                 apr_pool_t *pconf, server_rec *s)
{
    int b, r;
    apr_status_t rv;

    for (r = 0; r < bs->num_records; r++) {
        bs->gen->position[r] = -1;
    }
    for (b = 0; b < out->plan.num_buckets; b++) {
        pf_bucket_t *bucket = &bs->gen->bucket[b];
        ap_listen_rec *lr;
        apr_socket_t *sd;

        r = find_identity(bs, &out->bucket[b]);
        if (r < 0 && (r = new_identity(bs, &out->bucket[b])) < 0) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, APR_ENOSPC, s,
                         PFBLOGNO(00049) "listener buckets: no record left "
                         "for bucket %d", b);
            return APR_ENOSPC;
        }
        bs->gen->position[r] = b;
        bs->gen->record[b] = r;
        if (out->listener[b] < 0) {
            /* Single mode: every Listen in one bucket. */
            bucket->listeners = ap_listeners;
            bucket->num_listeners = bs->num_listeners;
            bucket->address = apr_psprintf(pconf, "%pI%s",
                                           ap_listeners->bind_addr,
                                           bs->num_listeners > 1 ? " (+more)"
                                                                 : "");
            for (lr = ap_listeners; lr; lr = lr->next) {
                /* Several sockets are polled, so a connection another
                 * child took first must not block us in accept(). */
                apr_socket_opt_set(lr->sd, APR_SO_NONBLOCK,
                                   bs->num_listeners > 1);
                pf_sockguard_note(bs->guard, lr->sd);
            }
            continue;
        }
        lr = nth_listener(out->listener[b]);
        if (out->plan.mode == PFB_MODE_REUSEPORT && out->bucket[b].shard == 0
            && (rv = pf_os_set_reuseport(lr->sd)) != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                         PFBLOGNO(00022) "setsockopt(SO_REUSEPORT) on "
                         "listener %pI failed", lr->bind_addr);
            return rv;
        }
        rv = bucket_socket(bs, &bs->ids[r], lr, s, &sd);
        if (rv != APR_SUCCESS) {
            return rv;
        }
        /* One socket per bucket, used by its children alone: they block
         * in accept(), and the kernel wakes one per connection. */
        apr_socket_opt_set(sd, APR_SO_NONBLOCK, 0);
        pf_sockguard_note(bs->guard, sd);
        bucket->listeners = bucket_listener(pconf, lr, sd);
        bucket->num_listeners = 1;
        bucket->address = out->bucket[b].listener;
    }
    return APR_SUCCESS;
}

static apr_status_t create_accept_mutexes(pf_bucketset_t *bs,
                                          apr_pool_t *pconf, server_rec *s)
{
    int b;
    apr_status_t rv;

    for (b = 0; b < bs->gen->num_buckets; b++) {
        bs->gen->bucket[b].mutex = NULL;
        if (bs->gen->bucket[b].num_listeners < 2) {
            continue;
        }
        rv = ap_proc_mutex_create(&bs->gen->bucket[b].mutex, NULL,
                                  AP_ACCEPT_MUTEX_TYPE, apr_itoa(pconf, b), s,
                                  pconf, 0);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         PFBLOGNO(00023) "couldn't create the accept mutex "
                         "of bucket %d", b);
            return rv;
        }
    }
    return APR_SUCCESS;
}

/* The Listens' addresses, which name the buckets. */
static const char **listener_names(apr_pool_t *p, int *count)
{
    ap_listen_rec *lr;
    const char **names;
    int n = 0;

    for (lr = ap_listeners; lr; lr = lr->next) {
        n++;
    }
    names = apr_pcalloc(p, sizeof(char *) * (apr_size_t)(n + 1));
    n = 0;
    for (lr = ap_listeners; lr; lr = lr->next) {
        names[n++] = apr_psprintf(p, "%pI", lr->bind_addr);
    }
    *count = n;
    return names;
}

/* What the children table said before the build (the caller's census,
 * as data): per record, the children forked for it that still live, into
 * bs->held for new_identity(); per bucket of the generation in force, its
 * children not told to stop, which the new generation's bucket on the
 * same identity starts from. */
static int *children_before(pf_bucketset_t *bs,
                            const pf_bucketset_config_t *cfg, apr_pool_t *p)
{
    int *in_bucket;

    in_bucket = apr_pcalloc(p, sizeof(int)
                                   * (apr_size_t)(bs->gen->num_buckets + 1));
    memset(bs->held, 0, sizeof(int) * (apr_size_t)bs->num_records);
    if (cfg->held != NULL) {
        memcpy(bs->held, cfg->held,
               sizeof(int) * (apr_size_t)bs->num_records);
    }
    if (cfg->in_bucket != NULL) {
        memcpy(in_bucket, cfg->in_bucket,
               sizeof(int) * (apr_size_t)bs->gen->num_buckets);
    }
    return in_bucket;
}

/* The previous generation's identities, for pf_plan_generation().  Its
 * buckets array went with the old pconf; the layout is kept here. */
static pf_identity_t *old_identities(pf_bucketset_t *bs, apr_pool_t *p)
{
    pf_identity_t *old;
    int b;

    old = apr_pcalloc(p, sizeof(*old)
                             * (apr_size_t)(bs->gen->num_buckets + 1));
    for (b = 0; b < bs->gen->num_buckets; b++) {
        identity_t *rec = &bs->ids[bs->gen->record[b]];

        old[b].listener = rec->listener;
        old[b].shard = rec->shard;
    }
    return old;
}

static void alloc_generation_out(apr_pool_t *p, int room, int num_old,
                                 pf_plan_generation_out_t *out)
{
    apr_size_t n = (apr_size_t)room;

    out->bucket = apr_pcalloc(p, sizeof(*out->bucket) * n);
    out->listener = apr_pcalloc(p, sizeof(int) * n);
    out->from_old = apr_pcalloc(p, sizeof(int) * n);
    out->target = apr_pcalloc(p, sizeof(int) * n);
    out->old_survives = apr_pcalloc(p, sizeof(int)
                                           * (apr_size_t)(num_old + 1));
}

/* Every identity's record, from the parent's own state. */
static void write_identities(pf_bucketset_t *bs)
{
    int r;

    for (r = 0; r < bs->num_records; r++) {
        const identity_t *rec = &bs->ids[r];

        if (rec->used) {
            pf_segment_write_identity(bs->seg, r,
                                      rec->listener
                                          ? rec->listener
                                          : bs->gen->bucket[0].address,
                                      rec->shard, bs->gen->position[r],
                                      bs->retired[r], 0);
        }
    }
}

/* What the segment's header says of the server, made afresh from the
 * parent's own state at every write. */
static void fill_header(const pf_bucketset_t *bs, ap_generation_t number,
                        int slots_used, pfb_shm_t *h)
{
    const pf_bucketset_config_t *cfg = &bs->built_from;
    const pf_pool_config_t *pool = &cfg->conf->pool;

    memset(h, 0, sizeof(*h));
    h->num_listeners = (apr_uint32_t)bs->num_listeners;
    h->mode = bs->gen->plan.mode;
    h->reason = bs->gen->plan.reason;
    h->buckets_per_listen = bs->gen->plan.buckets_per_listen;
    h->so_reuseport = bs->reuseport_usable;
    h->cpus_online = bs->host.cpus.online;
    h->cpus_affinity = bs->host.cpus.affinity;
    h->cpus_quota = bs->host.cpus.quota;
    h->cpus_usable = bs->host.cpus.usable;
    h->ratio = pool->ratio;
    h->explicit_buckets = pool->explicit_buckets > 0 ? pool->explicit_buckets
                                                    : 0;
    h->max_workers = pool->max_workers;
    h->steer_wanted = cfg->conf->steering;
    h->steer_active = bs->host.active;
    h->cpu_affinity = cfg->conf->cpu_affinity;
    h->generation = number;
    h->slots_used = slots_used;
}

/* The new layout: whether bucket numbers changed meaning, and the
 * segment's records, table and header. */
static void write_layout(pf_bucketset_t *bs, const pf_bucketset_config_t *cfg,
                         const int *old_records, int num_old)
{
    int b, changed = bs->gen->num_buckets != num_old;
    pfb_shm_t h;

    for (b = 0; b < bs->gen->num_buckets && !changed; b++) {
        changed = old_records[b] != bs->gen->record[b];
    }
    if (changed) {
        /* Bucket numbers now name other identities: idle counts kept by
         * bucket number start again, and only children of this generation
         * and later count in them. */
        bs->gen->layout = cfg->generation;
    }
    write_identities(bs);
    fill_header(bs, cfg->generation,
                cfg->slots_used, &h);
    pf_segment_write(bs->seg, &h, bs->gen, bs->retired, NULL);
}

static apr_status_t plan_and_open(pf_bucketset_t *bs,
                                  pf_plan_generation_in_t *in,
                                  apr_pool_t *pconf, server_rec *s,
                                  pf_plan_generation_out_t *out)
{
    int nb, r;

    alloc_generation_out(pconf, pf_plan_room(in), in->num_old, out);
    /* Each attempt notes its own sockets: one that failed may have closed
     * some, whose inodes a new socket could take. */
    pf_sockguard_note_begin(bs->guard);
    nb = pf_plan_generation(in, out);
    if (nb < 1) {
        return APR_EINVAL;
    }
    bs->gen->bucket = apr_pcalloc(pconf, sizeof(pf_bucket_t) * (apr_size_t)nb);
    bs->gen->num_buckets = nb;
    bs->gen->plan = out->plan;
    if (open_buckets(bs, out, pconf, s) != APR_SUCCESS) {
        return APR_EGENERAL;
    }
    /* Duplicates that no bucket of this generation wants: a Listen
     * removed, or fewer buckets after a full restart. */
    for (r = 0; r < bs->num_records; r++) {
        if (bs->gen->position[r] < 0) {
            drop_duplicate(&bs->ids[r]);
        }
    }
    return APR_SUCCESS;
}

/* Whether the buckets stay warm: the ratio's count cut down, or an
 * explicit count that leaves buckets without an idle child. */
static void log_warm_buckets(const pf_bucketset_t *bs, int startup,
                             server_rec *s)
{
    const pf_bucketset_config_t *cfg = &bs->built_from;
    const pf_pool_config_t *pool = &cfg->conf->pool;
    const char *steering = pfb_steer_name(cfg->conf->steering);
    int per_listen;

    if (bs->change_deferred || bs->duplicate_failed) {
        /* The plan in force is not the one the warm check was made for. */
        return;
    }
    if (bs->warm.capped && !startup) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00090) "ListenCoresBucketsRatio %d asks for %d "
                     "bucket(s), but under %s steering MinSpareServers %d "
                     "keeps an idle child in %d at most: using %d per "
                     "Listen, %d in all; raise MinSpareServers for more",
                     pool->ratio, bs->warm.asked, steering,
                     pool->min_spare_servers, bs->warm.limit,
                     bs->gen->plan.buckets_per_listen,
                     bs->gen->plan.num_buckets);
    }
    if (bs->warm.starved) {
        per_listen = pool->min_spare_servers / bs->num_listeners;
        ap_log_error(APLOG_MARK,
                     APLOG_WARNING | (startup ? APLOG_STARTUP : 0), 0,
                     startup ? NULL : s,
                     PFBLOGNO(00091) "%sListenBuckets %d makes %d bucket(s) "
                     "under %s steering, more than MinSpareServers %d: each "
                     "bucket keeps a single idle child, and a connection the "
                     "kernel gives a bucket whose child is busy waits for a "
                     "new one while other buckets sit idle; raise "
                     "MinSpareServers to at least %d, lower ListenBuckets to "
                     "%d, or use ListenBucketSteering idle",
                     startup ? "WARNING: " : "", pool->explicit_buckets,
                     bs->gen->plan.num_buckets, steering,
                     pool->min_spare_servers, bs->gen->plan.num_buckets,
                     per_listen > 0 ? per_listen : 1);
    }
}

/* One line about the count in force and why. */
static void log_bucket_count(const pf_bucketset_t *bs, server_rec *s)
{
    const pf_bucketset_config_t *cfg = &bs->built_from;
    const pf_pool_config_t *pool = &cfg->conf->pool;
    const pf_bucket_plan_t *plan = &bs->gen->plan;
    int explicit_buckets = pool->explicit_buckets > 0 ? pool->explicit_buckets
                                                   : 0;

    if (bs->change_deferred) {
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     PFBLOGNO(00027) "listener buckets: the new "
                     "configuration asks for %d per Listen (mode %s); a "
                     "graceful restart keeps %d (mode %s) so that no queued "
                     "connection is lost; the change takes effect at the "
                     "next full restart",
                     bs->asked.buckets_per_listen,
                     pfb_mode_name(bs->asked.mode), plan->buckets_per_listen,
                     pfb_mode_name(plan->mode));
        return;
    }
    if (plan->reason == PFB_WHY_NO_IDLE_STEERING) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, bs->host.usable, s,
                     PFBLOGNO(00150) "ListenBucketSteering %s unavailable "
                     "(%s): ListenCoresBucketsRatio %d ignored, every Listen "
                     "in one bucket as in httpd's prefork, since buckets "
                     "under hash steering would each need a spare pool of "
                     "their own", pfb_steer_name(cfg->conf->steering),
                     bs->host.why, pool->ratio);
        return;
    }
    if (plan->reason == PFB_WHY_NO_REUSEPORT) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, bs->reuseport_status, s,
                     PFBLOGNO(00024) "SO_REUSEPORT unavailable (%s failed): "
                     "%s ignored, one bucket per Listen (%d bucket(s))",
                     bs->reuseport_failed_call,
                     explicit_buckets ? "ListenBuckets"
                                      : "ListenCoresBucketsRatio",
                     plan->num_buckets);
        return;
    }
    if (plan->reason == PFB_WHY_CAPPED) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00025) "%s asks for more buckets than "
                     "MaxRequestWorkers (%d) can give a child each; using "
                     "%d bucket(s) per Listen, %d in all (mode %s)",
                     explicit_buckets ? "ListenBuckets"
                                      : "ListenCoresBucketsRatio",
                     pool->max_workers, plan->buckets_per_listen,
                     plan->num_buckets,
                     pfb_mode_name(plan->mode));
        return;
    }
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                 PFBLOGNO(00026) "SO_REUSEPORT %s; listener buckets: %d "
                 "(%d per Listen, mode %s, from %s: %d usable CPU(s) of %d "
                 "online, affinity %d, cgroup quota %d, "
                 "ListenCoresBucketsRatio %d, ListenBuckets %d)",
                 bs->reuseport_usable ? "works" : "unavailable",
                 plan->num_buckets, plan->buckets_per_listen,
                 pfb_mode_name(plan->mode), pfb_reason_name(plan->reason),
                 bs->host.cpus.usable, bs->host.cpus.online,
                 bs->host.cpus.affinity, bs->host.cpus.quota, pool->ratio,
                 explicit_buckets);
}

void pf_bucketset_log_plan(const pf_bucketset_t *bs, int startup,
                           server_rec *s)
{
    if (bs->gen->num_buckets == 0) {
        return;
    }
    if (bs->duplicate_failed && !startup) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00029) "listener buckets: duplicating the "
                     "Listen sockets failed; falling back to one bucket "
                     "per Listen");
    }
    log_warm_buckets(bs, startup, s);
    if (!startup) {
        log_bucket_count(bs, s);
    }
}

apr_status_t pf_bucketset_build(pf_bucketset_t *bs,
                                const pf_bucketset_config_t *cfg,
                                apr_pool_t *pconf, server_rec *s)
{
    const pf_pool_config_t *pool = &cfg->conf->pool;
    pf_plan_generation_in_t in;
    pf_plan_generation_out_t out;
    pf_plan_in_t count;
    apr_status_t rv;
    int *old_records, num_old = bs->gen->num_buckets;

    if (bs->seg == NULL && create_segment(bs, s) != APR_SUCCESS) {
        return APR_EGENERAL;
    }
    if (bs->reuseport_usable < 0) {
        bs->reuseport_usable = pf_os_probe_reuseport(
            &bs->reuseport_status, &bs->reuseport_failed_call);
    }
    bs->host = *cfg->host;

    memset(&in, 0, sizeof(in));
    in.how = cfg->how;
    in.max_workers = pool->max_workers;
    in.start_servers = pool->start_servers;
    in.listeners = listener_names(pconf, &in.num_listeners);
    bs->num_listeners = in.num_listeners;
    if (in.num_listeners < 1) {
        return APR_EINVAL;
    }
    memset(&count, 0, sizeof(count));
    count.usable_cpus = bs->host.cpus.usable;
    count.ratio = pool->ratio;
    count.explicit_buckets = pool->explicit_buckets;
    count.reuseport_ok = bs->reuseport_usable;
    count.num_listeners = in.num_listeners;
    count.max_workers = pool->max_workers;
    count.min_spare_servers = pool->min_spare_servers;
    count.steering = cfg->conf->steering;
    count.steering_usable = bs->host.usable == APR_SUCCESS;
    pf_plan_buckets(&count, &in.wanted, &bs->warm);
    bs->asked = in.wanted;
    bs->built_from = *cfg;
    bs->built_from.held = bs->built_from.in_bucket = NULL;
    bs->built_from.host = NULL;
    bs->duplicate_failed = 0;
    in.previous = num_old > 0 ? &bs->gen->plan : NULL;
    in.num_old = num_old;
    in.old = old_identities(bs, pconf);
    in.old_children = children_before(bs, cfg, pconf);
    old_records = apr_pmemdup(pconf, bs->gen->record,
                              sizeof(int) * (apr_size_t)(num_old + 1));
    rv = plan_and_open(bs, &in, pconf, s, &out);
    if (rv == APR_EGENERAL && out.plan.mode == PFB_MODE_REUSEPORT) {
        /* The kernel refused a duplicate (another user's socket on the
         * port, or an exotic listener): one bucket per Listen rather than
         * not at all. */
        bs->duplicate_failed = 1;
        pf_plan_per_listen_fallback(in.num_listeners, &in.wanted);
        in.how = PF_RESTART_FULL;
        rv = plan_and_open(bs, &in, pconf, s, &out);
    }
    if (rv != APR_SUCCESS) {
        return rv;
    }
    pf_sockguard_note_end(bs->guard);
    /* Whoever kept a copy of a socket of the last generation loses it.
     * Not before the first generation has run: httpd reads the
     * configuration twice at start-up, and nobody held a socket yet. */
    pf_sockguard_renew(bs->guard, cfg->generation == 0, s);
    bs->change_deferred = out.change_deferred;
    rv = create_accept_mutexes(bs, pconf, s);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    pf_generation_start(bs->gen, out.target, bs->num_slots, pconf);
    write_layout(bs, cfg, old_records, num_old);
    return APR_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Children gone                                                       */

int pf_bucketset_child_gone(pf_bucketset_t *bs, int slot,
                            const pf_child_t *child)
{
    pfb_slot_fields_t *f;
    int r = child->record, b;

    if (slot < 0 || slot >= bs->num_slots || r < 0 || r >= bs->num_records
        || bs->seg == NULL) {
        return -1;
    }
    f = &bs->seg->slots[slot].f;
    /* What the child wrote is only added up (saturating) or tested for
     * zero: a hostile value makes a report wrong and nothing else.  Its
     * count moves from its slot into its identity's total in one step
     * that readers can tell. */
    bs->retired[r] = pfb_add_saturated(bs->retired[r],
                                       apr_atomic_read64(&f->accepted));
    pf_segment_retire(bs->seg, slot, r, bs->retired[r]);
    /* A child that died while counted as waiting in accept() is never
     * advertised as idle: its count goes now, if it was made in the
     * bucket numbering in force (where its bucket is its identity's). */
    b = pf_generation_bucket_of(bs->gen, r);
    return f->waiting != 0 && child->generation >= bs->gen->layout ? b : -1;
}

/* ------------------------------------------------------------------ */
/* Each cycle                                                          */

void pf_bucketset_publish(pf_bucketset_t *bs, const pf_observation_t *obs,
                          ap_generation_t number, int slots_used,
                          int steer_active)
{
    pfb_shm_t h;

    if (bs->seg == NULL) {
        return;
    }
    bs->host.active = steer_active;
    write_identities(bs);
    fill_header(bs, number, slots_used, &h);
    pf_segment_write(bs->seg, &h, bs->gen, bs->retired, obs);
}

/* ------------------------------------------------------------------ */
/* Children                                                            */

/* Closes a listening socket in this child only.  The descriptor is marked
 * closed in the APR socket too, so no later cleanup closes the number
 * again once something else has reused it. */
static void close_in_child(apr_socket_t *sd)
{
    apr_os_sock_t fd, none = -1;

    if (sd != NULL && apr_os_sock_get(&fd, sd) == APR_SUCCESS && fd >= 0) {
        close(fd);
        apr_os_sock_put(&sd, &none, NULL);
    }
}

int pf_bucketset_child_init(pf_bucketset_t *bs, int bucket, int *fds,
                            int room)
{
    apr_socket_t **own;
    ap_listen_rec *lr;
    int b, n = 0;

    /* A child holds only its own bucket's sockets, as httpd's children
     * do: it can reach nothing it does not use, and which bucket it
     * serves can be seen from outside in /proc/PID/fd. */
    for (b = 0; b < bs->gen->num_buckets; b++) {
        if (b == bucket) {
            continue;
        }
        for (lr = bs->gen->bucket[b].listeners; lr; lr = lr->next) {
            close_in_child(lr->sd);
        }
    }
    own = NULL;
    if (bucket >= 0 && bucket < bs->gen->num_buckets && room > 0) {
        own = apr_palloc(bs->pool, sizeof(*own) * (apr_size_t)room);
        for (lr = bs->gen->bucket[bucket].listeners; lr && n < room;
             lr = lr->next) {
            own[n++] = lr->sd;
        }
    }
    pf_sockguard_child_init(bs->guard, own, n, fds);
    return n;
}

/* ------------------------------------------------------------------ */
/* The sockets children hold: prefork_sockguard.c                      */

void pf_bucketset_close(pf_bucketset_t *bs)
{
    int r;

    /* Whoever keeps a copy of a socket must not hold the port. */
    pf_sockguard_stop(bs->guard);
    ap_close_listeners();
    for (r = 0; r < bs->num_records; r++) {
        drop_duplicate(&bs->ids[r]);
    }
}
