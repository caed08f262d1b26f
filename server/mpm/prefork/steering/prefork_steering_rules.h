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
 * @file  prefork_steering_rules.h
 * @brief ListenBucketSteering's rules: which bucket a new connection goes
 *        to, as pure functions that the kernel programs
 *        (prefork_steering.bpf.c, compiled with clang -target bpf) and
 *        ordinary C (the MPM, the unit tests, the scale model through
 *        build/libpfpolicy.so) both compile from this one file.
 *
 * The part above "User space only" is restricted C that the BPF verifier
 * accepts: fixed-size types, no library calls, loops with a constant
 * bound, every table index checked against the table's size right before
 * it is used.  Each program in prefork_steering.bpf.c is glue around one
 * of these functions: read the connection's hash or CPU, call the rule,
 * hand the chosen bucket's socket to the kernel.
 *
 * Numbering: a Listen's N buckets are l * N ... l * N + N - 1 ("shard" k of
 * Listen l is bucket l * N + k), and every program names a socket by its
 * bucket number through a REUSEPORT_SOCKARRAY, never by its position in
 * the reuseport group, so a socket that joined the group from outside is
 * never chosen.
 */

#ifndef PREFORK_STEERING_RULES_H
#define PREFORK_STEERING_RULES_H

#if defined(__bpf__)
#include <linux/types.h>
typedef __u32 pf_u32;
typedef __u64 pf_u64;
typedef __s64 pf_s64;
#define PF_STEER_INLINE static __always_inline
/* The verifier of older kernels (before 5.3) takes no loop at all. */
#define PF_STEER_UNROLLED _Pragma("unroll")
#else
#include <stddef.h>
#include <stdint.h>
typedef uint32_t pf_u32;
typedef uint64_t pf_u64;
typedef int64_t pf_s64;
#define PF_STEER_INLINE static inline
#define PF_STEER_UNROLLED
#endif

/** Buckets the idle program looks at after the hash's, at most. */
#define PF_STEER_MAX_PROBES 16

/**
 * Per-bucket record of the idle counts, shared by the idle program, the
 * children and the parent; one cache line each.  The records of all
 * buckets are one value of a one-element BPF_F_MMAPABLE array, so the
 * program reaches any bucket with one map lookup and the parent maps the
 * whole table before it forks.
 */
typedef struct {
    /** Children waiting in accept() minus connections sent here and not
     *  accepted yet.  A child adds one before it waits and takes it back
     *  only if it leaves without a connection; the program takes one for
     *  every connection it sends to the bucket.  Children write it:
     *  anything may be here. */
    volatile pf_s64 idle;
    /** Connections the program left in the bucket the hash chose. */
    volatile pf_u64 kept;
    /** Connections the program moved here from a bucket with no idle
     *  child. */
    volatile pf_u64 moved;
    pf_u64 reserved[5];
} pf_steer_bucket_t;

/** The most records the idle table holds: the kernel's limit on an
 *  array map's value (4 MiB) in 64-byte records. */
#define PF_STEER_MAX_RECORDS 65536

/** What a program is loaded for: one Listen's buckets.  Constants of the
 *  loaded program (its read-only data), so the verifier knows them. */
typedef struct {
    pf_u32 first_bucket;    /**< bucket of shard 0 of this Listen */
    pf_u32 per_listen;      /**< shards of this Listen (1 or more: one
                                 socket per Listen gets the hash program
                                 too, so nothing outside the map is
                                 chosen) */
    pf_u32 probes;          /**< idle: buckets tried after the hash's */
    pf_u32 capacity;        /**< idle: records in the idle table */
} pf_steer_listen_t;

/** One CPU's entry of the CPU table: the shards that the connections it
 *  takes go to (first_shard, at random among span), and, for "local",
 *  the shards of its NUMA node (node_first ... node_first + node_span - 1,
 *  which hold its own).  "cpu" reads the first two only; its table leaves
 *  the node's at 0. */
typedef struct {
    pf_u32 first_shard;
    pf_u32 span;
    pf_u32 node_first;
    pf_u32 node_span;
} pf_steer_cpu_entry_t;

/**
 * The shard that the kernel's own hash picks among @a n sockets, the same
 * reciprocal scaling (reciprocal_scale() in the kernel): with a program
 * that uses it, connections spread exactly as with none.
 */
PF_STEER_INLINE pf_u32 pf_steer_hash_shard(pf_u32 hash, pf_u32 n)
{
    return (pf_u32)(((pf_u64)hash * n) >> 32);
}

/* ------------------------------------------------------------------ */
/* "idle"                                                              */

/**
 * Reads the idle count of shard @a shard of the Listen.
 * @return 0 when the shard is not in the table (nothing is read)
 */
PF_STEER_INLINE int pf_steer_idle_read(
    const pf_steer_bucket_t *table,
    const volatile pf_steer_listen_t *listen, pf_u32 shard, pf_s64 *idle)
{
    pf_u64 bucket = (pf_u64)listen->first_bucket + shard;

    /* The tests are on the index itself, 64 bits wide, so that the
     * verifier bounds the very register the load uses. */
    if (shard >= listen->per_listen || bucket >= listen->capacity
        || bucket >= PF_STEER_MAX_RECORDS) {
        return 0;
    }
    *idle = table[bucket].idle;
    return 1;
}

/**
 * The @a i-th other shard probed after @a home from @a start (both below
 * @a n, n >= 2, i < n - 1): home + 1 + ((start + i) mod (n - 1)), taken mod
 * n, which never lands on home and visits each other shard once.
 */
PF_STEER_INLINE pf_u32 pf_steer_idle_probe_shard(pf_u32 home, pf_u32 start,
                                                 pf_u32 i, pf_u32 n)
{
    pf_u32 step = start + i;

    if (step >= n - 1) {
        step -= n - 1;
    }
    step += home + 1;
    if (step >= n) {
        step -= n;
    }
    return step;
}

/**
 * "idle": the shard the hash picks (pf_steer_hash_shard()) if its bucket
 * has an idle child (count > 0); otherwise up to listen->probes other
 * shards from a random start, the first with an idle child; if none has
 * one, the probed bucket with the highest count, that is the shortest
 * queue for its children, staying with the hash's on a tie.  A shard
 * missing from the table keeps the connection where the hash put it.
 *
 * Counts are only compared, never added: a child may have written any
 * value into them, and the worst it gets is a connection sent to the
 * wrong bucket of its own Listen.
 *
 * @param random A random number (the start of the probes)
 * @param moved Set to 1 when the shard is not the hash's
 * @return the shard, below listen->per_listen
 */
PF_STEER_INLINE pf_u32 pf_steer_idle_choose(
    const pf_steer_bucket_t *table,
    const volatile pf_steer_listen_t *listen, pf_u32 hash, pf_u32 random,
    pf_u32 *moved)
{
    pf_u32 n = listen->per_listen, home, start, i, shard, best;
    pf_s64 idle = 0, best_idle;

    *moved = 0;
    if (n < 2) {
        return 0;
    }
    home = pf_steer_hash_shard(hash, n);
    if (!pf_steer_idle_read(table, listen, home, &idle) || idle > 0) {
        return home;
    }
    best = home;
    best_idle = idle;
    /* The same scaling for the start, so that overflow from one bucket
     * spreads over all the others instead of piling onto its neighbour. */
    start = pf_steer_hash_shard(random, n - 1);
    PF_STEER_UNROLLED
    for (i = 0; i < PF_STEER_MAX_PROBES; i++) {
        if (i >= listen->probes || i >= n - 1) {
            break;
        }
        shard = pf_steer_idle_probe_shard(home, start, i, n);
        if (!pf_steer_idle_read(table, listen, shard, &idle)) {
            return home;
        }
        if (idle > 0) {
            *moved = 1;
            return shard;
        }
        if (idle > best_idle) {
            best = shard;
            best_idle = idle;
        }
    }
    *moved = best != home;
    return best;
}

/**
 * After the kernel took the chosen socket: the bucket has one waiting
 * child less (or one more queued connection), and one more kept or moved
 * connection.  Atomic, with the result unused (the kernel's atomic add,
 * which wraps: a count a child set to the lowest value goes to the
 * highest, a wrong count and nothing worse).
 */
PF_STEER_INLINE void pf_steer_idle_account(
    pf_steer_bucket_t *table, const volatile pf_steer_listen_t *listen,
    pf_u32 shard, pf_u32 moved)
{
    pf_u64 bucket = (pf_u64)listen->first_bucket + shard;

    if (shard >= listen->per_listen || bucket >= listen->capacity
        || bucket >= PF_STEER_MAX_RECORDS) {
        return;
    }
    (void)__sync_fetch_and_add(&table[bucket].idle, -1);
    if (moved) {
        (void)__sync_fetch_and_add(&table[bucket].moved, 1);
    }
    else {
        (void)__sync_fetch_and_add(&table[bucket].kept, 1);
    }
}

/* ------------------------------------------------------------------ */
/* "cpu"                                                               */

/**
 * "cpu": the shard of the CPU that took the connection, from its entry
 * of the table (pf_steer_cpu_table()); at random among the entry's shards
 * when the CPU owns several.  A CPU with no entry, or an entry that does
 * not fit the Listen, goes by the hash.
 * @return the shard, below @a n
 */
PF_STEER_INLINE pf_u32 pf_steer_cpu_choose(const pf_steer_cpu_entry_t *entry,
                                           pf_u32 n, pf_u32 hash,
                                           pf_u32 random)
{
    pf_u32 first, span;

    if (n < 1) {
        return 0;
    }
    if (entry == NULL) {
        return pf_steer_hash_shard(hash, n);
    }
    first = entry->first_shard;
    span = entry->span;
    if (span < 1 || first >= n || span > n - first) {
        return pf_steer_hash_shard(hash, n);
    }
    return first + random % span;
}

/* ------------------------------------------------------------------ */
/* "local"                                                             */

/**
 * The node's shards of @a entry when they fit the Listen of @a n shards
 * and hold @a home; else just @a home (nothing to borrow within a node).
 */
PF_STEER_INLINE void pf_steer_local_node(const pf_steer_cpu_entry_t *entry,
                                         pf_u32 n, pf_u32 home,
                                         pf_u32 *first, pf_u32 *span)
{
    *first = home;
    *span = 1;
    if (entry == NULL) {
        return;
    }
    if (entry->node_span < 1 || entry->node_first >= n
        || entry->node_span > n - entry->node_first
        || home < entry->node_first
        || home - entry->node_first >= entry->node_span) {
        return;
    }
    *first = entry->node_first;
    *span = entry->node_span;
}

/**
 * "local" (locality that can borrow): the shard of the CPU that took the
 * connection (pf_steer_cpu_choose()) while its bucket has an idle child;
 * otherwise the first shard of the same NUMA node with one, then the
 * first shard of another node with one, each looked at from a random
 * start, at most PF_STEER_MAX_PROBES of each; if none has one, the CPU's
 * own shard (its children are the nearest to the connection's packets).
 * A shard missing from the idle table keeps the connection at home.
 *
 * As in "idle", counts are only compared: a child may have written any
 * value into them.
 *
 * @param entry The CPU's entry of the CPU table, or NULL for none (then
 *        the hash picks the home shard and there is no node to prefer)
 * @param random A random number (the shard among the CPU's own, and the
 *        probes' starts)
 * @param moved Set to 1 when the shard is not the CPU's own
 * @return the shard, below listen->per_listen
 */
PF_STEER_INLINE pf_u32 pf_steer_local_choose(
    const pf_steer_bucket_t *table,
    const volatile pf_steer_listen_t *listen,
    const pf_steer_cpu_entry_t *entry, pf_u32 hash, pf_u32 random,
    pf_u32 *moved)
{
    pf_u32 n = listen->per_listen, home, first, span, others, start, i;
    pf_u32 step, shard;
    pf_s64 idle = 0;

    *moved = 0;
    if (n < 2) {
        return 0;
    }
    home = pf_steer_cpu_choose(entry, n, hash, random);
    if (!pf_steer_idle_read(table, listen, home, &idle) || idle > 0) {
        return home;
    }
    pf_steer_local_node(entry, n, home, &first, &span);
    /* The node's other shards, from a random start (the high bits: the
     * low ones chose among the CPU's own). */
    start = pf_steer_hash_shard(random, span);
    /* A constant trip count with the bound inside: clang cannot unroll a
     * loop whose exit it folds into min(span, 16). */
    PF_STEER_UNROLLED
    for (i = 0; i < PF_STEER_MAX_PROBES; i++) {
        step = start + i;
        if (step >= span) {
            step -= span;
        }
        shard = first + step;
        if (i < span && shard != home) {
            if (!pf_steer_idle_read(table, listen, shard, &idle)) {
                return home;
            }
            if (idle > 0) {
                *moved = 1;
                return shard;
            }
        }
    }
    /* Then the shards outside the node: first + span ... first - 1, taken
     * round the end of the Listen. */
    others = n - span;
    start = pf_steer_hash_shard((random >> 16) | (random << 16), others);
    PF_STEER_UNROLLED
    for (i = 0; i < PF_STEER_MAX_PROBES; i++) {
        step = start + i;
        if (step >= others) {
            step -= others;
        }
        shard = first + span + step;
        if (shard >= n) {
            shard -= n;
        }
        if (i < others) {
            if (!pf_steer_idle_read(table, listen, shard, &idle)) {
                return home;
            }
            if (idle > 0) {
                *moved = 1;
                return shard;
            }
        }
    }
    return home;
}

#if !defined(__bpf__)
/* ------------------------------------------------------------------ */
/* User space only                                                     */

/**
 * The usable CPUs (the affinity mask, ascending) are split evenly and in
 * order over the N buckets of a Listen.  With no more buckets than CPUs,
 * the CPU of rank j feeds bucket floor(j * N / m): bucket k gets a run of
 * neighbouring CPUs, which on a multi-socket host keeps it on one node.
 * With more buckets than CPUs, the CPU of rank j owns buckets
 * floor(j * N / m) up to floor((j + 1) * N / m) - 1 and a connection it
 * takes goes to one of them at random.  A CPU outside the mask (it may
 * still take interrupts) counts as the nearest mask CPU below it, or the
 * lowest one.
 */
typedef struct {
    int first_cpu;      /**< lowest CPU number of the run */
    int first_bucket;   /**< shard taken by CPUs of this run... */
    int span;           /**< ...and how many shards from there (>= 1) */
} pf_cpu_run_t;

/**
 * Builds the runs: consecutive CPU numbers that send connections to the
 * same shards merge into one run.
 * @param cpus The usable CPU numbers, ascending, no duplicates
 * @param num_cpus Entries in cpus (>= 1)
 * @param per_listen Buckets per Listen (>= 1)
 * @param runs Output, room for num_cpus entries
 * @return the number of runs, or -1 on bad input
 */
int pf_steer_cpu_runs(const int *cpus, int num_cpus, int per_listen,
                      pf_cpu_run_t *runs);

/**
 * The cpu program's table: for every CPU number below @a entries (the
 * kernel's possible CPUs), the shards its connections go to, from the
 * runs.
 * @return 0, or -1 on bad input
 */
int pf_steer_cpu_table(const pf_cpu_run_t *runs, int num_runs,
                       pf_steer_cpu_entry_t *table, int entries);

/**
 * The CPUs that serve shard @a shard: the children of every bucket with
 * that shard are pinned to them (BucketCPUAffinity on).
 * @param out Room for num_cpus entries
 * @return how many CPUs were written (>= 1 for a valid shard), -1 on bad
 *         input
 */
int pf_steer_shard_cpus(const int *cpus, int num_cpus, int per_listen,
                        int shard, int *out);

/** How many buckets the idle program tries after the hash's: all the
 *  others up to PF_STEER_MAX_PROBES. */
int pf_steer_idle_probes(int per_listen);


/**
 * What a bucket's idle count should read: the children counted as waiting
 * in accept() minus the connections queued for them.
 */
int64_t pf_steer_idle_truth(int64_t waiting, int64_t queued);

/**
 * The parent compares each bucket's idle count with the truth once per
 * maintenance cycle.  The two are read at slightly different moments, so
 * under load a difference may be a race rather than drift (a handshake the
 * program counted that never completed, a child killed between its two
 * steps).  A correction is made only when two cycles in a row see a
 * difference of the same sign, and then by the smaller of the two, so a
 * race never pushes the count further off.  Saturating: any value a child
 * wrote into @a advertised gives a defined result.
 * @param advertised The count as read now
 * @param truth pf_steer_idle_truth() now
 * @param pending In/out: the difference seen at the previous cycle
 * @return the amount to add to the count now (0 for none)
 */
int64_t pf_steer_idle_correction(int64_t advertised, int64_t truth,
                                 int64_t *pending);

/** The least time between two reconciliations that count as two cycles:
 *  half the maintenance interval, in microseconds. */
#define PF_STEER_CYCLE_SPACING 500000

/**
 * Whether an observation at @a now counts as a new cycle for the drift
 * correction: the first one does, then one at least
 * PF_STEER_CYCLE_SPACING after the last that counted (which *last then
 * becomes).  A clock that went back starts the count again.
 */
int pf_steer_new_cycle(int64_t now, int64_t *last);
#endif /* !__bpf__ */

#endif /* PREFORK_STEERING_RULES_H */
