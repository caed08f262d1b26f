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
 * ListenBucketSteering for the server's life: the table of modes and what
 * each mode's program needs; attaching a program to every Listen's
 * reuseport group at each (re)start (a mode refused falls back to hash,
 * and hash with no program to the kernel's own hash, one line each); the
 * idle counts children keep through a shared mapping; and the CPU table
 * of cpu and local steering, by which children are also pinned.  Since
 * children hold the sockets and the mapping, each cycle puts the programs
 * and the socket map back and corrects the idle counts from the cycle's
 * observation.  It owns no socket: it reads them from the generation.
 * The socket guard reaches it through the calls pf_steer_guard_calls()
 * hands it.  The rules are prefork_steering_rules.h's, the kernel calls
 * and the socket maps prefork_steering_kernel.c's.
 */

#include "apr.h"
#include "apr_atomic.h"
#include "apr_strings.h"

#define APR_WANT_STRFUNC
#include "apr_want.h"

#include "ap_config.h"
#include "httpd.h"
#include "http_log.h"

#include "pfb_log.h"
#include "prefork_buckets.h"
#include "prefork_cpus.h"
#include "prefork_steering.h"
#include "prefork_steering_kernel.h"
#include "prefork_topology.h"

APLOG_USE_MODULE(mpm_prefork);

/* The most CPUs the affinity mask is read for. */
#define MAX_MASK_CPUS 8192

/* Room for the verifier's (or libbpf's) last line. */
#define REFUSAL_LINE 512

/* What each mode's program needs besides the socket map.  A new mode is
 * a row here and a program in prefork_steering.bpf.c. */
typedef struct {
    int mode;                   /* pfb_steer_e */
    int idle_table;             /* reads and writes the idle counts */
    int cpu_table;              /* reads the CPU-to-shard table */
    int topology;               /* that table from sysfs's topology */
} mode_needs_t;

static const mode_needs_t mode_needs[] = {
    { PFB_STEER_HASH, 0, 0, 0 },
    { PFB_STEER_IDLE, 1, 0, 0 },
    { PFB_STEER_CPU, 0, 1, 0 },
    { PFB_STEER_LOCAL, 1, 1, 1 },
};

/* Why a step failed, for the one log line of a refusal. */
typedef struct {
    const char *step;
    apr_status_t rv;
    const char *detail;
} refusal_t;

struct pf_steer_s {
    apr_pool_t *pool;           /* outlives generations */
    int active;                 /* pfb_steer_e in force */

    /* The generation. */
    int steerable;              /* reuseport groups of 2 or more */
    int num_buckets;
    int per_listen;
    int listens;

    /* Its programs, one per Listen, kept to attach again every cycle. */
    int *prog_fds;
    int num_progs;
    int prog_room;
    int attached;               /* a program may be on the groups */

    /* The socket map, for the server's life: a socket can be in one
     * REUSEPORT_SOCKARRAY at a time. */
    pf_steer_map_t map;
    int hands_over;             /* its programs choose for the connections
                                   of a socket that stops listening */

    /* The idle counts, for the server's life: children of every
     * generation count in the same records. */
    int idle_fd;
    pf_steer_bucket_t *idle;
    size_t idle_len;
    int idle_capacity;
    int idle_layout;            /* layout the counts were last reset for */
    int64_t *pending;           /* per bucket: difference seen last cycle */
    int pending_len;
    int64_t last_cycle;         /* when the last counted cycle was */

    /* The affinity mask, ascending, read at every (re)start. */
    int *cpus;
    int num_cpus;

    /* "local": where each possible CPU is (sysfs), and the CPU table laid
     * out over it, which also pins the children; made at every (re)start,
     * in buffers kept for the server's life. */
    pf_topo_cpu_t *topo;
    pf_steer_cpu_entry_t *layout;
    int layout_room;
    int layout_entries;         /* 0: no layout in force */
    int topo_nodes;             /* nodes sysfs lists (0: none) */
    int mask_nodes;             /* nodes of the affinity mask's CPUs */

    /* Each logged once (per server, or per episode where reset). */
    int fallback_logged;
    int kernel_hash_logged;
    int reattach_logged;
    int refill_logged;
    int detach_unsupported;
};

pf_steer_t *pf_steer_create(apr_pool_t *pool)
{
    pf_steer_t *st = apr_pcalloc(pool, sizeof(*st));

    st->pool = pool;
    st->active = PFB_STEER_HASH;
    pf_steer_map_init(&st->map, pool);
    st->idle_fd = -1;
    st->idle_layout = -1;
    st->cpus = apr_palloc(pool, sizeof(int) * MAX_MASK_CPUS);
    return st;
}

int pf_steer_active(const pf_steer_t *st)
{
    return st->active;
}

/* Only the generation that was attached, as the bucket set still sees
 * it. */
static int attached_to(const pf_steer_t *st, const pf_generation_t *gen)
{
    return st->steerable && gen->num_buckets == st->num_buckets
           && gen->plan.buckets_per_listen == st->per_listen;
}

/* Whether the programs are on @a gen's reuseport groups, choosing only
 * among the sockets of the map. */
static int guards_groups(const void *steer, const pf_generation_t *gen)
{
    const pf_steer_t *st = steer;

    return attached_to(st, gen) && st->num_progs > 0 && st->map.fd >= 0;
}

/* Whether they also choose where the connections of a socket of the group
 * that stops listening go (Linux 5.14): handed over, not reset. */
static int hands_over(const void *steer)
{
    const pf_steer_t *st = steer;

    return st->num_progs > 0 && st->hands_over;
}

static const mode_needs_t *needs_of(int mode)
{
    size_t i;

    for (i = 0; i < sizeof(mode_needs) / sizeof(mode_needs[0]); i++) {
        if (mode_needs[i].mode == mode) {
            return &mode_needs[i];
        }
    }
    return NULL;
}

/* Whether the mode in force keeps idle counts (its program reads them and
 * the children count themselves). */
static int counts_idle(const pf_steer_t *st)
{
    const mode_needs_t *needs = needs_of(st->active);

    return needs != NULL && needs->idle_table;
}

/* Room for @a needed buckets in a steering map: a power of two, at least
 * 16, so that a restart adding a Listen seldom needs a new map. */
static int map_capacity(int needed)
{
    int capacity = 16;

    while (capacity < needed && capacity < PF_STEER_MAX_RECORDS) {
        capacity *= 2;
    }
    return capacity;
}

/* Buckets per Listen; bucket l * per_listen + k is shard k of Listen l. */
static int shards_of(const pf_generation_t *gen)
{
    return gen->plan.buckets_per_listen;
}

/* Bucket @a k's socket, as of now (the bucket set may replace one in
 * place): in a generation with something to steer, its one socket. */
static apr_socket_t *socket_of(const pf_generation_t *gen, int k)
{
    return gen->bucket[k].listeners->sd;
}

static const char *name_of(const pf_generation_t *gen, int k)
{
    return gen->bucket[k].address;
}

/* The socket of shard 0 of Listen @a l: a program attached through any
 * socket of a reuseport group serves the whole group. */
static apr_socket_t *group_socket(const pf_generation_t *gen, int l)
{
    return socket_of(gen, l * shards_of(gen));
}

static const char *group_name(const pf_generation_t *gen, int l)
{
    return name_of(gen, l * shards_of(gen));
}

static void close_programs(pf_steer_t *st)
{
    int l;

    for (l = 0; l < st->num_progs; l++) {
        pf_steer_kernel_close(st->prog_fds[l]);
    }
    st->num_progs = 0;
}

static void detach_all(pf_steer_t *st, const pf_generation_t *gen,
                       server_rec *s)
{
    int shards = shards_of(gen) > 0 ? shards_of(gen) : 1;
    apr_status_t rv;
    int l;

    for (l = 0; l < gen->num_buckets / shards; l++) {
        rv = pf_steer_kernel_detach(socket_of(gen, l * shards));
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                         PFBLOGNO(00048) "ListenBucketSteering: couldn't "
                         "detach the program from listener %s (needs Linux "
                         "5.8); it stays until the next full restart",
                         name_of(gen, l * shards));
        }
    }
    st->attached = 0;
}

/* ------------------------------------------------------------------ */
/* The idle counts                                                     */

/* The idle table: kept for the server's life, made larger (and new) only
 * when a restart adds buckets; reset when bucket numbers change meaning. */
static apr_status_t ensure_idle_table(pf_steer_t *st,
                                      const pf_generation_t *gen,
                                      refusal_t *why)
{
    pf_steer_bucket_t *table;
    size_t len;
    int fd, capacity, r;
    apr_status_t rv;

    if (st->idle == NULL || st->idle_capacity < gen->num_buckets) {
        capacity = map_capacity(gen->num_buckets);
        rv = capacity < gen->num_buckets
                 ? APR_EINVAL
                 : pf_steer_kernel_idle_table(capacity, &fd, &table, &len);
        if (rv != APR_SUCCESS) {
            why->step = "bpf(BPF_MAP_CREATE) of the mmap-able idle counts";
            why->rv = rv;
            return rv;
        }
        /* Older generations' children keep their own mapping of the old
         * table; unmapping here does not touch theirs. */
        pf_steer_kernel_unmap(st->idle, st->idle_len);
        pf_steer_kernel_close(st->idle_fd);
        st->idle = table;
        st->idle_len = len;
        st->idle_fd = fd;
        st->idle_capacity = capacity;
        st->idle_layout = -1;
    }
    if (st->pending_len < gen->num_buckets) {
        st->pending_len = map_capacity(gen->num_buckets);
        st->pending = apr_pcalloc(st->pool, sizeof(int64_t)
                                                * (apr_size_t)st->pending_len);
    }
    if (st->idle_layout != gen->layout) {
        /* Bucket numbers name other sockets now: the counts start again
         * from the children's slots at the next cycles. */
        for (r = 0; r < st->idle_capacity; r++) {
            st->idle[r].idle = 0;
        }
        memset(st->pending, 0, sizeof(int64_t) * (apr_size_t)st->pending_len);
        st->idle_layout = gen->layout;
        st->last_cycle = 0;
    }
    return APR_SUCCESS;
}

/* Compares each bucket's idle count with what the slots and the accept
 * queues say, and corrects drift: a handshake the program counted that
 * never completed, or a child killed between marking its slot and
 * counting itself.  Runs once per cycle however often it is called. */
static void reconcile_idle_counts(pf_steer_t *st,
                                  const pf_generation_t *gen,
                                  const pf_observation_t *obs,
                                  server_rec *s)
{
    int bucket;

    if (!counts_idle(st) || st->idle == NULL || obs == NULL
        || st->pending_len < gen->num_buckets
        || st->idle_capacity < gen->num_buckets
        || !pf_steer_new_cycle((int64_t)obs->when, &st->last_cycle)) {
        return;
    }
    for (bucket = 0; bucket < gen->num_buckets; bucket++) {
        /* Read once: a child may change it at any moment. */
        int64_t advertised = st->idle[bucket].idle;
        int64_t truth = pf_steer_idle_truth(obs->waiting[bucket],
                                            obs->queued[bucket]);
        int64_t fix = pf_steer_idle_correction(advertised, truth,
                                               &st->pending[bucket]);

        if (fix != 0) {
            apr_atomic_add64((volatile apr_uint64_t *)&st->idle[bucket].idle,
                             (apr_uint64_t)fix);
            ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s,
                         PFBLOGNO(00047) "%s steering: bucket %d "
                         "advertised %" APR_INT64_T_FMT " idle, %d waiting "
                         "and %d queued; corrected by %" APR_INT64_T_FMT,
                         pfb_steer_name(st->active), bucket,
                         (apr_int64_t)advertised,
                         obs->waiting[bucket], obs->queued[bucket],
                         (apr_int64_t)fix);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Attaching                                                           */

/* "local": the CPU table from the host's topology, kept for pinning. */
static pf_steer_cpu_entry_t *topology_table(pf_steer_t *st, int entries,
                                            int per_listen)
{
    if (st->layout_room < entries) {
        /* The possible CPUs do not change while the server runs: this
         * allocates from the long-lived pool once. */
        st->layout_room = entries;
        st->topo = apr_palloc(st->pool,
                              sizeof(*st->topo) * (apr_size_t)entries);
        st->layout = apr_palloc(st->pool,
                                sizeof(*st->layout) * (apr_size_t)entries);
    }
    st->topo_nodes = pf_topo_read("", st->topo, entries);
    st->mask_nodes = pf_topo_nodes(st->topo, entries, st->cpus,
                                   st->num_cpus);
    if (st->topo_nodes < 0 || st->mask_nodes < 1
        || pf_topo_layout(st->topo, entries, st->cpus, st->num_cpus,
                          per_listen, st->layout) != 0) {
        return NULL;
    }
    st->layout_entries = entries;
    return st->layout;
}

/* The CPU table for the affinity mask and this Listen size, in a map:
 * by rank in the mask ("cpu") or by the topology ("local"). */
static apr_status_t make_cpu_map(pf_steer_t *st, const mode_needs_t *needs,
                                 int per_listen, apr_pool_t *p, int *fd,
                                 refusal_t *why)
{
    pf_steer_cpu_entry_t *table;
    pf_cpu_run_t *runs;
    int num_runs, entries;
    apr_status_t rv;

    if (st->num_cpus < 1) {
        why->step = "sched_getaffinity()";
        why->rv = APR_ENOTIMPL;
        return APR_ENOTIMPL;
    }
    entries = pf_steer_kernel_possible_cpus();
    if (entries <= st->cpus[st->num_cpus - 1]) {
        entries = st->cpus[st->num_cpus - 1] + 1;
    }
    if (needs->topology) {
        table = topology_table(st, entries, per_listen);
        num_runs = table != NULL;
    }
    else {
        runs = apr_palloc(p, sizeof(*runs) * (apr_size_t)st->num_cpus);
        table = apr_palloc(p, sizeof(*table) * (apr_size_t)entries);
        num_runs = pf_steer_cpu_runs(st->cpus, st->num_cpus, per_listen,
                                     runs);
        if (num_runs >= 1
            && pf_steer_cpu_table(runs, num_runs, table, entries) != 0) {
            num_runs = 0;
        }
    }
    if (num_runs < 1) {
        why->step = "laying out the CPUs";
        why->rv = APR_EINVAL;
        return APR_EINVAL;
    }
    rv = pf_steer_kernel_cpu_map(table, entries, fd);
    if (rv != APR_SUCCESS) {
        why->step = "bpf(BPF_MAP_CREATE) of the CPU table";
        why->rv = rv;
    }
    return rv;
}

static void keep_program(pf_steer_t *st, int fd)
{
    if (st->num_progs == st->prog_room) {
        int room = st->prog_room ? 2 * st->prog_room : 4;
        int *grown = apr_palloc(st->pool, sizeof(int) * (apr_size_t)room);

        if (st->num_progs > 0) {
            memcpy(grown, st->prog_fds,
                   sizeof(int) * (apr_size_t)st->num_progs);
        }
        st->prog_fds = grown;
        st->prog_room = room;
    }
    st->prog_fds[st->num_progs++] = fd;
}

/* Loads @a mode's program for every Listen and attaches it.  On failure
 * *why says which step; what was attached stays for the caller's
 * fallback to replace or detach. */
static apr_status_t attach_programs(pf_steer_t *st,
                                    const pf_generation_t *gen, int mode,
                                    apr_pool_t *p, refusal_t *why)
{
    const mode_needs_t *needs = needs_of(mode);
    pf_steer_program_t spec;
    char *line = apr_palloc(p, REFUSAL_LINE);
    apr_status_t rv;
    int l, fd, hands_over;

    memset(&spec, 0, sizeof(spec));
    spec.mode = mode;
    spec.idle_fd = spec.cpu_fd = -1;
    if (needs == NULL) {
        why->step = "choosing the program";
        why->rv = APR_EINVAL;
        return APR_EINVAL;
    }
    if (needs->idle_table && (rv = ensure_idle_table(st, gen, why))) {
        return rv;
    }
    if (needs->cpu_table
        && (rv = make_cpu_map(st, needs, shards_of(gen), p, &spec.cpu_fd,
                              why))) {
        return rv;
    }
    rv = pf_steer_map_ensure(&st->map, gen->num_buckets, &why->step);
    if (rv != APR_SUCCESS) {
        why->rv = rv;
    }
    else {
        int changed, bad;

        rv = pf_steer_map_sync(&st->map, gen, &changed, &bad);
        if (rv != APR_SUCCESS) {
            why->step = "bpf(BPF_MAP_UPDATE_ELEM) of a bucket socket";
            why->rv = rv;
            why->detail = name_of(gen, bad);
        }
    }
    spec.socks_fd = st->map.fd;
    spec.idle_fd = needs->idle_table ? st->idle_fd : -1;
    spec.listen.per_listen = (pf_u32)shards_of(gen);
    spec.listen.probes = (pf_u32)pf_steer_idle_probes(shards_of(gen));
    spec.listen.capacity = (pf_u32)st->idle_capacity;
    st->hands_over = 1;
    for (l = 0; l < st->listens && rv == APR_SUCCESS; l++) {
        spec.listen.first_bucket = (pf_u32)(l * shards_of(gen));
        rv = pf_steer_kernel_load(&spec, &fd, &hands_over, line,
                                  REFUSAL_LINE);
        st->hands_over &= hands_over;
        if (rv != APR_SUCCESS) {
            why->step = "bpf(BPF_PROG_LOAD) of the SK_REUSEPORT program";
            why->rv = rv;
            why->detail = *line ? apr_psprintf(p, "%s says: %s",
                                               strncmp(line, "libbpf", 6)
                                                   ? "verifier" : "libbpf",
                                               line)
                                : NULL;
            break;
        }
        keep_program(st, fd);
        /* From here a program may be on some groups: a fallback
         * replaces or detaches them all. */
        st->attached = 1;
        rv = pf_steer_kernel_attach(group_socket(gen, l), fd);
        if (rv != APR_SUCCESS) {
            why->step = "setsockopt(SO_ATTACH_REUSEPORT_EBPF)";
            why->rv = rv;
        }
    }
    /* The program holds the CPU table now. */
    pf_steer_kernel_close(spec.cpu_fd);
    return rv;
}

void pf_steer_prepare(const pf_steer_t *st, int mode, pf_steer_host_t *out)
{
    memset(out, 0, sizeof(*out));
    pf_cpus_probe(&out->cpus);
    out->usable = pf_steer_probe(mode, out->why, sizeof(out->why));
    out->active = pf_steer_active(st);
}

apr_status_t pf_steer_probe(int mode, char *why, apr_size_t why_len)
{
    pf_steer_program_t spec;
    pf_steer_bucket_t *table = NULL;
    size_t table_len = 0;
    char line[REFUSAL_LINE];
    const char *step;
    apr_status_t rv;
    int prog_fd = -1, hands_over;

    *why = '\0';
    if (mode != PFB_STEER_IDLE && mode != PFB_STEER_LOCAL) {
        return APR_SUCCESS;
    }
    if (!pf_steer_kernel_built()) {
        apr_cpystrn(why, "this build has no BPF programs", why_len);
        return APR_ENOTIMPL;
    }
    memset(&spec, 0, sizeof(spec));
    /* local needs what idle needs (the mmap-able idle table, a socket map,
     * an SK_REUSEPORT program) plus an array it gets like cpu's: idle's
     * program stands for both. */
    spec.mode = PFB_STEER_IDLE;
    spec.idle_fd = spec.cpu_fd = -1;
    spec.listen.per_listen = 2;
    spec.listen.probes = (pf_u32)pf_steer_idle_probes(2);
    spec.listen.capacity = 2;
    line[0] = '\0';
    step = "bpf(BPF_MAP_CREATE) of the socket map";
    rv = pf_steer_kernel_socket_map(2, &spec.socks_fd);
    if (rv == APR_SUCCESS) {
        step = "bpf(BPF_MAP_CREATE) of the mmap-able idle counts";
        rv = pf_steer_kernel_idle_table(2, &spec.idle_fd, &table,
                                        &table_len);
    }
    else {
        spec.socks_fd = -1;
    }
    if (rv == APR_SUCCESS) {
        step = "bpf(BPF_PROG_LOAD) of the SK_REUSEPORT program";
        rv = pf_steer_kernel_load(&spec, &prog_fd, &hands_over, line,
                                  sizeof(line));
    }
    if (rv != APR_SUCCESS) {
        apr_snprintf(why, why_len, "%s failed%s%s", step,
                     line[0] ? ": " : "", line);
    }
    pf_steer_kernel_close(prog_fd);
    pf_steer_kernel_unmap(table, table_len);
    pf_steer_kernel_close(spec.idle_fd);
    pf_steer_kernel_close(spec.socks_fd);
    return rv;
}

/* "idle", "cpu" or "local" refused: back to hash, said once for the
 * server. */
static void fall_back(pf_steer_t *st, int wanted, const refusal_t *why,
                      server_rec *s)
{
    close_programs(st);
    st->active = PFB_STEER_HASH;
    if (!st->fallback_logged) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, why->rv, s,
                     PFBLOGNO(00043) "ListenBucketSteering %s unavailable: "
                     "%s failed%s%s; falling back to hash steering",
                     pfb_steer_name(wanted), why->step,
                     why->detail && *why->detail ? ": " : "",
                     why->detail ? why->detail : "");
        st->fallback_logged = 1;
    }
}

static void log_attached(pf_steer_t *st, const pf_generation_t *gen,
                         int cpu_affinity, server_rec *s)
{
    switch (st->active) {
    case PFB_STEER_CPU:
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00044) "ListenBucketSteering cpu: %d CPU(s) "
                     "of the affinity mask feed %d bucket(s) per Listen on "
                     "%d Listen(s) (eBPF, through the socket map)%s",
                     st->num_cpus, shards_of(gen), st->listens,
                     cpu_affinity ? "; children pinned to their bucket's "
                                    "CPUs"
                                  : "");
        break;
    case PFB_STEER_LOCAL:
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00160) "ListenBucketSteering local: %d CPU(s) "
                     "of the affinity mask on %d NUMA node(s)%s feed %d "
                     "bucket(s) per Listen on %d Listen(s): the receiving "
                     "CPU's bucket while it has an idle child, else one of "
                     "its node's, else any (eBPF)%s",
                     st->num_cpus, st->mask_nodes,
                     st->topo_nodes > 0 ? "" : " (sysfs lists no node: one)",
                     shards_of(gen), st->listens,
                     cpu_affinity ? "; children pinned to their bucket's "
                                    "CPUs"
                                  : "");
        break;
    case PFB_STEER_IDLE:
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00046) "ListenBucketSteering idle: eBPF "
                     "program attached to %d Listen(s) of %d bucket(s) "
                     "each, probing up to %d other bucket(s) when the "
                     "hash's has no idle child", st->listens, shards_of(gen),
                     pf_steer_idle_probes(shards_of(gen)));
        break;
    default:
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00101) "ListenBucketSteering hash: eBPF "
                     "program attached to %d Listen(s) of %d bucket(s) "
                     "each: the kernel's hash, over the MPM's own sockets "
                     "only", st->listens, shards_of(gen));
        break;
    }
}

/* hash: the kernel's hash through the socket map where the program
 * loads; else the kernel's own hash with no program, said once. */
static void attach_hash(pf_steer_t *st, const pf_generation_t *gen,
                        int cpu_affinity, apr_pool_t *p, server_rec *s)
{
    refusal_t why = { "loading the program", APR_ENOTIMPL, NULL };

    if (!pf_steer_kernel_built()) {
        why.step = NULL;
    }
    else if (attach_programs(st, gen, PFB_STEER_HASH, p, &why)
             == APR_SUCCESS) {
        log_attached(st, gen, cpu_affinity, s);
        return;
    }
    close_programs(st);
    if (st->attached) {
        detach_all(st, gen, s);
    }
    if (!st->kernel_hash_logged && shards_of(gen) < 2) {
        ap_log_error(APLOG_MARK, APLOG_INFO, why.step ? why.rv : 0, s,
                     PFBLOGNO(00180) "one socket per Listen, with no "
                     "program to guard its reuseport group (%s%s%s%s): "
                     "SO_REUSEPORT goes off on those sockets, so that no "
                     "other socket can join the group",
                     why.step ? why.step : "this build has no BPF programs",
                     why.step ? " failed" : "",
                     why.detail ? ": " : "", why.detail ? why.detail : "");
        st->kernel_hash_logged = 1;
    }
    if (!st->kernel_hash_logged) {
        ap_log_error(APLOG_MARK, APLOG_INFO, why.step ? why.rv : 0, s,
                     PFBLOGNO(00100) "ListenBucketSteering hash: the "
                     "kernel's own hash, with no program (%s%s%s%s): a "
                     "process that joins a Listen's reuseport group would "
                     "get a share of its connections",
                     why.step ? why.step : "this build has no BPF programs",
                     why.step ? " failed" : "",
                     why.detail ? ": " : "", why.detail ? why.detail : "");
        st->kernel_hash_logged = 1;
    }
}

int pf_steer_attach(pf_steer_t *st, const pf_generation_t *gen, int wanted,
                    int cpu_affinity, apr_pool_t *p, server_rec *s)
{
    refusal_t why = { NULL, APR_SUCCESS, NULL };

    st->num_cpus = pf_cpus_affinity(st->cpus, MAX_MASK_CPUS);
    st->active = PFB_STEER_HASH;
    st->layout_entries = 0;
    st->num_buckets = gen->num_buckets;
    st->per_listen = shards_of(gen);
    /* One socket per Listen gets the hash program too: it chooses that
     * socket, and nothing that joins the group. */
    st->steerable = gen->plan.mode == PFB_MODE_REUSEPORT && shards_of(gen) >= 1
                    && gen->num_buckets >= shards_of(gen);
    st->listens = st->steerable ? gen->num_buckets / shards_of(gen) : 0;
    st->reattach_logged = st->refill_logged = 0;
    /* The groups keep the previous generation's programs until the new
     * ones replace them; our descriptors of those are not needed. */
    close_programs(st);

    if (!st->steerable || shards_of(gen) < 2) {
        if (wanted != PFB_STEER_HASH || cpu_affinity) {
            ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                         PFBLOGNO(00042) "ListenBucketSteering %s, "
                         "BucketCPUAffinity %s: nothing to steer with %d "
                         "bucket(s) per Listen (mode %s)",
                         pfb_steer_name(wanted), cpu_affinity ? "on" : "off",
                         shards_of(gen), pfb_mode_name(gen->plan.mode));
        }
        wanted = PFB_STEER_HASH;
    }
    if (!st->steerable) {
        if (st->attached) {
            detach_all(st, gen, s);
        }
        return st->active;
    }
    if (wanted != PFB_STEER_HASH) {
        if (attach_programs(st, gen, wanted, p, &why) == APR_SUCCESS) {
            st->active = wanted;
            log_attached(st, gen, cpu_affinity, s);
            return st->active;
        }
        fall_back(st, wanted, &why, s);
    }
    attach_hash(st, gen, cpu_affinity, p, s);
    return st->active;
}

/* ------------------------------------------------------------------ */
/* Each cycle                                                          */

/* A child holds its bucket's socket and may attach or detach a program
 * on its group (a seccomp filter refuses that too; this is the second
 * line): the parent's own goes back every cycle. */
static void reassert_programs(pf_steer_t *st, const pf_generation_t *gen,
                              server_rec *s)
{
    apr_status_t rv, failed = APR_SUCCESS;
    int l, at = -1;

    for (l = 0; l < st->listens; l++) {
        if (st->num_progs > 0) {
            rv = l < st->num_progs
                     ? pf_steer_kernel_attach(group_socket(gen, l),
                                              st->prog_fds[l])
                     : APR_SUCCESS;
        }
        else if (!st->detach_unsupported) {
            rv = pf_steer_kernel_detach(group_socket(gen, l));
            if (rv == ENOPROTOOPT) {
                /* Before Linux 5.8 nothing can be detached. */
                st->detach_unsupported = 1;
                rv = APR_SUCCESS;
            }
        }
        else {
            rv = APR_SUCCESS;
        }
        if (rv != APR_SUCCESS && failed == APR_SUCCESS) {
            failed = rv;
            at = l;
        }
    }
    if (failed != APR_SUCCESS && !st->reattach_logged) {
        if (st->num_progs > 0) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, failed, s,
                         PFBLOGNO(00104) "ListenBucketSteering %s: couldn't "
                         "attach the program to listener %s again; its "
                         "connections may go elsewhere until it can",
                         pfb_steer_name(st->active), group_name(gen, at));
        }
        else {
            ap_log_error(APLOG_MARK, APLOG_WARNING, failed, s,
                         PFBLOGNO(00105) "ListenBucketSteering %s: couldn't "
                         "detach programs from listener %s again; a "
                         "program a child attached may steer its "
                         "connections until it can",
                         pfb_steer_name(st->active), group_name(gen, at));
        }
    }
    st->reattach_logged = failed != APR_SUCCESS;
}

static void refill_socket_map(pf_steer_t *st, const pf_generation_t *gen,
                              server_rec *s)
{
    int changed, bad;
    apr_status_t rv = pf_steer_map_sync(&st->map, gen, &changed, &bad);

    if (changed > 0) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00102) "ListenBucketSteering %s: %d bucket "
                     "socket(s) put back in the socket map",
                     pfb_steer_name(st->active), changed);
    }
    if (rv != APR_SUCCESS && !st->refill_logged) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                     PFBLOGNO(00103) "ListenBucketSteering %s: couldn't put "
                     "the socket of bucket %d (%s) back in the socket map; "
                     "connections steered there go to another socket of "
                     "its Listen in the map until it can", pfb_steer_name(st->active), bad,
                     name_of(gen, bad));
    }
    st->refill_logged = rv != APR_SUCCESS;
}

void pf_steer_cycle(pf_steer_t *st, const pf_generation_t *gen,
                    const pf_observation_t *obs, server_rec *s)
{
    if (!attached_to(st, gen)) {
        return;
    }
    reassert_programs(st, gen, s);
    if (st->num_progs > 0 && st->map.fd >= 0) {
        refill_socket_map(st, gen, s);
    }
    reconcile_idle_counts(st, gen, obs, s);
}

/* At once when the guard made a socket listen again (in place or
 * replaced): back in the socket map. */
static void refill(void *steer, const pf_generation_t *gen, server_rec *s)
{
    pf_steer_t *st = steer;

    if (!attached_to(st, gen)) {
        return;
    }
    if (st->num_progs > 0 && st->map.fd >= 0) {
        refill_socket_map(st, gen, s);
    }
}

void pf_steer_guard_calls(pf_steer_t *st, pf_guard_steering_t *out)
{
    out->steer = st;
    out->guards_groups = guards_groups;
    out->hands_over = hands_over;
    out->refill = refill;
    out->can_hand_over = pf_steer_can_hand_over;
    out->handover = pf_steer_handover;
}

void pf_steer_observe(const pf_steer_t *st, const pf_generation_t *gen,
                      pf_observation_t *obs)
{
    int b;

    obs->steer_figures = counts_idle(st) && st->idle != NULL;
    for (b = 0; obs->steer_figures && b < gen->num_buckets; b++) {
        /* Read once each: a child may change them at any moment. */
        const pf_steer_bucket_t *rec = b < st->idle_capacity ? &st->idle[b]
                                                             : NULL;

        obs->steer_idle[b] = rec != NULL ? rec->idle : 0;
        obs->steer_kept[b] = rec != NULL ? rec->kept : 0;
        obs->steer_moved[b] = rec != NULL ? rec->moved : 0;
    }
}

void pf_steer_child_gone(pf_steer_t *st, int bucket)
{
    if (st->idle != NULL && bucket >= 0 && bucket < st->idle_capacity) {
        apr_atomic_add64((volatile apr_uint64_t *)&st->idle[bucket].idle,
                         (apr_uint64_t)(apr_int64_t)-1);
    }
}

/* ------------------------------------------------------------------ */
/* Children                                                            */

static void pin_to_bucket_cpus(pf_steer_t *st, int bucket, server_rec *s)
{
    int cpus[MAX_MASK_CPUS];
    int n;
    apr_status_t rv;

    if (!st->steerable || st->per_listen < 2 || st->num_cpus < 1) {
        return;
    }
    if (st->active == PFB_STEER_LOCAL && st->layout_entries > 0) {
        n = pf_topo_shard_cpus(st->layout, st->layout_entries, st->cpus,
                               st->num_cpus, bucket % st->per_listen, cpus);
    }
    else {
        n = pf_steer_shard_cpus(st->cpus, st->num_cpus, st->per_listen,
                                bucket % st->per_listen, cpus);
    }
    if (n < 1) {
        return;
    }
    rv = pf_cpus_pin(cpus, n);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                     PFBLOGNO(00045) "BucketCPUAffinity: couldn't pin the "
                     "child of bucket %d to its %d CPU(s); it runs "
                     "unpinned", bucket, n);
    }
}

void pf_steer_child_init(pf_steer_t *st, int bucket, int cpu_affinity,
                         server_rec *s)
{
    /* The child updates the idle counts through its inherited mapping
     * only; the descriptors would let it rewrite the socket map or load
     * the programs elsewhere. */
    close_programs(st);
    pf_steer_map_close(&st->map);
    pf_steer_kernel_close(st->idle_fd);
    st->idle_fd = -1;
    if (cpu_affinity && bucket >= 0) {
        pin_to_bucket_cpus(st, bucket, s);
    }
}

static pf_steer_bucket_t *idle_record(pf_steer_t *st, int bucket)
{
    if (!counts_idle(st) || st->idle == NULL || bucket < 0
        || bucket >= st->idle_capacity) {
        return NULL;
    }
    return &st->idle[bucket];
}

/* The slot is marked before the count rises, so that if the child dies in
 * between the parent takes one too many back (corrected at the next
 * cycles) rather than leaving a phantom idle child advertised. */
void pf_steer_accept_begin(pf_steer_t *st, int bucket,
                           volatile apr_int32_t *waiting)
{
    pf_steer_bucket_t *rec = idle_record(st, bucket);

    if (rec == NULL || waiting == NULL) {
        return;
    }
    *waiting = 1;
    apr_atomic_inc64((volatile apr_uint64_t *)&rec->idle);
}

void pf_steer_accept_end(pf_steer_t *st, int bucket,
                         volatile apr_int32_t *waiting, int got_connection)
{
    pf_steer_bucket_t *rec = idle_record(st, bucket);

    if (rec == NULL || waiting == NULL || *waiting == 0) {
        return;
    }
    if (!got_connection) {
        apr_atomic_add64((volatile apr_uint64_t *)&rec->idle,
                         (apr_uint64_t)(apr_int64_t)-1);
    }
    *waiting = 0;
}
