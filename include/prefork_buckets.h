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
 * @file  prefork_buckets.h
 * @brief The one interface between the bucketed prefork MPM and the modules
 *        that report on it (mod_bucket_status): the modes and their names,
 *        the shared-memory layout, and bounded accessors to read it.
 *
 * The MPM creates one shared-memory segment at first start and keeps it
 * for the life of the server; its size is fixed then (ServerLimit cannot
 * change until the server stops).  It holds a header, a table from bucket
 * number to bucket record, one cache-line record per bucket identity (a
 * Listen's address and shard: the record stays with its bucket across
 * restarts that add, remove or reorder Listens), and one record per
 * scoreboard slot.
 *
 * Who writes what.  The parent writes the header, the table, the bucket
 * records and the slots' parent fields.  A child writes only its own
 * slot's `accepted`, `waiting` and `lingering`.
 *
 * The trust rule.  Children run untrusted code, so everything in the
 * segment is hostile input to the root parent: the parent never reads
 * back anything from it to size, index or signal.  Its counts, the slot
 * table, the bucket table, each record's summed `accepted` and its
 * `sample_next` are private copies in its own memory, and it rewrites
 * every field it owns each maintenance cycle.  From the segment it reads
 * only the fields children write, in the slots its own table says are
 * in use, each once per read:
 *   - `accepted`: every live child's, each maintenance cycle (the
 *     bucket's total), and a reaped child's once (its bucket's
 *     `retired`); only added up, saturating at the largest value, and
 *     compared with the value the parent saw the cycle before (whether
 *     the child took a connection since: which idle child is retired);
 *   - `waiting`: every live child's, each maintenance cycle under idle
 *     steering (counted per bucket, so at most one per slot), and a
 *     reaped child's once (its idle count goes); only tested for zero;
 *   - `lingering`: every live child's, each maintenance cycle; only tested
 *     for zero (a child that lingers is not retired as idle, for at most
 *     httpd's lingering bound, 32 s, after which it is idle like any).
 * A hostile value there makes a report or an idle count wrong until the
 * next cycle, or spares that child a retirement another idle child gets,
 * and nothing else.  Readers get the segment through the optional
 * function below as a pfb_segment_t, whose sizes come from the reader's
 * own process memory, not from the segment; the accessors bound every
 * index by those sizes, so a child that scribbles over the segment can
 * make a report wrong but cannot make a reader read out of bounds.
 */

#ifndef PREFORK_BUCKETS_H
#define PREFORK_BUCKETS_H

#include "apr.h"
#include "apr_optional.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "PFBK": marks a segment written by this MPM. */
#define PFB_SHM_MAGIC 0x5046424bu
/** Bumped whenever the layout below changes. */
#define PFB_SHM_VERSION 4u
/** Each record starts on its own line, so writers of different records
 *  never share a cache line. */
#define PFB_CACHE_LINE 128
/** Room for a bucket's listener address, e.g. "[2001:db8::1]:8443". */
#define PFB_LISTENER_LEN 64
/** Accepted-connection samples kept per bucket, one per maintenance cycle
 *  (about a second): 11 samples span the last 10 seconds. */
#define PFB_RATE_SAMPLES 11

/** How the listener sockets are split into buckets. */
typedef enum {
    /** Buckets off: one bucket holds every Listen (stock prefork). */
    PFB_MODE_SINGLE = 0,
    /** Each Listen duplicated into N SO_REUSEPORT sockets, one per bucket. */
    PFB_MODE_REUSEPORT = 1,
    /** Buckets asked for but SO_REUSEPORT unusable: one bucket per Listen. */
    PFB_MODE_PER_LISTEN = 2
} pfb_mode_e;

/** How a new connection picks its bucket among a Listen's sockets
 *  (ListenBucketSteering). */
typedef enum {
    PFB_STEER_HASH = 0,         /**< the kernel's hash of the 4-tuple */
    PFB_STEER_CPU = 1,          /**< the CPU that took the connection */
    PFB_STEER_IDLE = 2,         /**< the hash's bucket, unless it has no
                                     idle child and another has one */
    PFB_STEER_LOCAL = 3         /**< the receiving CPU's bucket while it
                                     has an idle child, else one of its
                                     NUMA node's, else any with one */
} pfb_steer_e;

/** Why the bucket count is what it is. */
typedef enum {
    PFB_WHY_OFF = 0,            /**< neither directive set */
    PFB_WHY_RATIO = 1,          /**< usable CPUs / ListenCoresBucketsRatio */
    PFB_WHY_EXPLICIT = 2,       /**< ListenBuckets */
    PFB_WHY_NO_REUSEPORT = 3,   /**< asked for, kernel refused SO_REUSEPORT */
    PFB_WHY_CAPPED = 4,         /**< cut down to fit MaxRequestWorkers */
    PFB_WHY_DUP_FAILED = 5,     /**< a duplicate socket could not be bound */
    PFB_WHY_KEPT = 6,           /**< a graceful restart kept the count in
                                     force, the configuration asks for
                                     another */
    PFB_WHY_DEFAULT = 7,        /**< neither directive set, several
                                     Listens: one bucket each (before
                                     1.0; kept for its number) */
    PFB_WHY_ONE_PER_LISTEN = 8, /**< the ratio gives one socket per
                                     Listen: one bucket holds them all */
    PFB_WHY_NO_IDLE_STEERING = 9 /**< the ratio with idle or local
                                      steering, which the kernel refuses:
                                      one bucket holds every Listen */
} pfb_reason_e;

/** One bucket identity, padded to a whole number of cache lines. */
typedef struct {
    /** Connections accepted by this bucket's children since the server
     *  started, all generations, as of the last maintenance cycle. */
    apr_uint64_t accepted;
    /** Of those, the ones accepted by children that have exited. */
    apr_uint64_t retired;
    /** Odd while the parent moves an exited child's count from its slot
     *  into `retired`: a reader that sums `retired` and the slots reads
     *  it before and after, and reads again when it changed
     *  (pfb_retire_seq_begin(), pfb_retire_seq_changed()). */
    volatile apr_uint32_t retire_seq;
    apr_uint32_t children;      /**< current-generation children */
    apr_uint32_t idle;          /**< ready to accept */
    apr_uint32_t busy;          /**< serving a connection */
    apr_uint32_t starting;      /**< forked, not yet accepting */
    apr_uint32_t stopping;      /**< told to exit, or of an older generation */
    /** Connections waiting in the accept queue at the last cycle. */
    apr_uint32_t queue_depth;
    /** The accept queue's limit (the listen backlog in force). */
    apr_uint32_t backlog;
    /** Bucket number in the current generation, -1 if the identity is not
     *  in use now (a Listen removed; old children may still serve). */
    apr_int32_t position;
    apr_int32_t shard;          /**< shard of its Listen, 0 = the original */
    /** Index of the next sample to overwrite in the rings below (the
     *  parent keeps its own; this copy is for readers). */
    apr_uint32_t sample_next;
    /** Copies of accepted, one per maintenance cycle... */
    apr_uint64_t accepted_sample[PFB_RATE_SAMPLES];
    /** ...and when each was taken (apr_time_t, microseconds). */
    apr_int64_t sample_time[PFB_RATE_SAMPLES];
    /** NUL-terminated listener address, "host:port". */
    char listener[PFB_LISTENER_LEN];
    /** With idle (local) steering: connections the kernel program left
     *  in the bucket its hash (the receiving CPU) chose, and ones it moved
     *  here from a bucket with no idle child, since the layout was
     *  made. */
    apr_uint64_t steer_kept;
    apr_uint64_t steer_moved;
    /** With idle or local steering: the idle count the program reads
     *  (waiting children minus connections sent and not yet accepted). */
    apr_int64_t steer_idle;
} pfb_bucket_fields_t;

typedef union {
    pfb_bucket_fields_t f;
    char pad[((sizeof(pfb_bucket_fields_t) + PFB_CACHE_LINE - 1)
              / PFB_CACHE_LINE) * PFB_CACHE_LINE];
} pfb_bucket_t;

/** One scoreboard slot. */
typedef struct {
    /** Child: connections it has accepted (apr_atomic_inc64); the parent
     *  sets it to 0 when it forks a child into the slot. */
    volatile apr_uint64_t accepted;
    /** Child, idle steering: 1 while it counts itself waiting in
     *  accept(). */
    volatile apr_int32_t waiting;
    /** Parent: the bucket record of the child in this slot, -1 if none.
     *  A child that has exited keeps it (and its `accepted`) until the
     *  parent has moved its count into the record's `retired`. */
    apr_int32_t record;
    /** Parent: the child's pid, 0 if the slot is free. */
    apr_int32_t pid;
    /** Parent: the child's generation. */
    apr_int32_t generation;
    /** Parent: 1 once the child has been told to finish and exit. */
    apr_int32_t stopping;
    /** Child: how many closed connections its lingering thread still
     *  reads (the parent sets it to 0 when it forks a child into the
     *  slot). */
    volatile apr_int32_t lingering;
} pfb_slot_fields_t;

typedef union {
    pfb_slot_fields_t f;
    char pad[64];
} pfb_slot_t;

/** The segment header; written by the parent only. */
typedef struct {
    apr_uint32_t magic;         /**< PFB_SHM_MAGIC */
    apr_uint32_t version;       /**< PFB_SHM_VERSION */
    apr_uint32_t size;          /**< bytes in the whole segment */
    apr_uint32_t header_size;   /**< PFB_SHM_HEADER_SIZE */
    apr_uint32_t bucket_size;   /**< sizeof(pfb_bucket_t) */
    apr_uint32_t slot_size;     /**< sizeof(pfb_slot_t) */
    apr_uint32_t num_records;   /**< bucket records (fixed) */
    apr_uint32_t num_slots;     /**< slot records, ServerLimit (fixed) */
    apr_uint32_t num_buckets;   /**< buckets of the current generation */
    apr_uint32_t num_listeners; /**< Listen statements in force */
    apr_int32_t mode;           /**< pfb_mode_e */
    apr_int32_t reason;         /**< pfb_reason_e */
    apr_int32_t so_reuseport;   /**< 1 works, 0 refused, -1 not probed */
    apr_int32_t cpus_online;    /**< sysconf(_SC_NPROCESSORS_ONLN) */
    apr_int32_t cpus_affinity;  /**< CPUs in the process's affinity mask */
    apr_int32_t cpus_quota;     /**< cgroup CPU quota in CPUs, 0 = none */
    apr_int32_t cpus_usable;    /**< what the bucket count was based on */
    apr_int32_t ratio;          /**< ListenCoresBucketsRatio in force */
    apr_int32_t explicit_buckets; /**< ListenBuckets in force */
    apr_int32_t buckets_per_listen; /**< shards of each Listen */
    apr_int32_t generation;     /**< the server's generation */
    apr_int32_t max_workers;    /**< MaxRequestWorkers */
    /** Highest scoreboard slot ever used + 1: readers in a child must use
     *  this, not their own copy of the MPM's state from fork time. */
    apr_int32_t slots_used;
    apr_int32_t steer_wanted;   /**< pfb_steer_e asked for */
    apr_int32_t steer_active;   /**< pfb_steer_e in force */
    apr_int32_t cpu_affinity;   /**< BucketCPUAffinity in force */
    apr_int64_t started;        /**< apr_time_t of the first start */
    apr_int64_t updated;        /**< apr_time_t of the last cycle */
} pfb_shm_t;

/** Rounds @a n up to whole cache lines. */
#define PFB_LINES(n) \
    ((((apr_size_t)(n) + PFB_CACHE_LINE - 1) / PFB_CACHE_LINE) \
     * PFB_CACHE_LINE)

/** Header size rounded up to whole cache lines. */
#define PFB_SHM_HEADER_SIZE PFB_LINES(sizeof(pfb_shm_t))

/** Where each part of a segment starts, from its two fixed counts. */
typedef struct {
    apr_size_t table;           /**< apr_int32_t per record: bucket number
                                     to record */
    apr_size_t records;         /**< pfb_bucket_t per record */
    apr_size_t slots;           /**< pfb_slot_t per slot */
    apr_size_t size;            /**< the whole segment */
} pfb_layout_t;

static APR_INLINE void pfb_layout(int num_records, int num_slots,
                                  pfb_layout_t *out)
{
    out->table = PFB_SHM_HEADER_SIZE;
    out->records = out->table
                   + PFB_LINES(sizeof(apr_int32_t) * (apr_size_t)num_records);
    out->slots = out->records + sizeof(pfb_bucket_t) * (apr_size_t)num_records;
    out->size = out->slots + sizeof(pfb_slot_t) * (apr_size_t)num_slots;
}

/**
 * A reader's view of the segment.  Its counts are copies in the reader's
 * own memory, made by the MPM when it created the segment; they never
 * change for the segment's life, and every accessor below is bounded by
 * them rather than by anything stored in the segment.
 */
typedef struct {
    const pfb_shm_t *shm;       /**< the segment's first byte */
    apr_size_t size;            /**< bytes mapped */
    int num_records;
    int num_slots;
} pfb_segment_t;

/** Whether a segment was written by a compatible MPM: readers check this
 *  before reading anything past the header. */
static APR_INLINE int pfb_segment_usable(const pfb_segment_t *seg)
{
    pfb_layout_t layout;

    if (seg == NULL || seg->shm == NULL || seg->num_records < 1
        || seg->num_slots < 0) {
        return 0;
    }
    pfb_layout(seg->num_records, seg->num_slots, &layout);
    return layout.size <= seg->size && seg->shm->magic == PFB_SHM_MAGIC
           && seg->shm->version == PFB_SHM_VERSION
           && seg->shm->header_size == PFB_SHM_HEADER_SIZE
           && seg->shm->bucket_size == sizeof(pfb_bucket_t)
           && seg->shm->slot_size == sizeof(pfb_slot_t);
}

/** Buckets of the current generation, at most the records there are. */
static APR_INLINE int pfb_segment_num_buckets(const pfb_segment_t *seg)
{
    apr_uint32_t n = seg->shm->num_buckets;

    return n > (apr_uint32_t)seg->num_records ? seg->num_records : (int)n;
}

/** Slots ever used, at most the slots there are. */
static APR_INLINE int pfb_segment_slots_used(const pfb_segment_t *seg)
{
    apr_int32_t n = seg->shm->slots_used;

    if (n < 0) {
        return 0;
    }
    return n > seg->num_slots ? seg->num_slots : (int)n;
}

/** Record @a r, or NULL when out of range. */
static APR_INLINE const pfb_bucket_t *pfb_segment_record(
    const pfb_segment_t *seg, int r)
{
    pfb_layout_t layout;

    if (r < 0 || r >= seg->num_records) {
        return NULL;
    }
    pfb_layout(seg->num_records, seg->num_slots, &layout);
    return (const pfb_bucket_t *)((const char *)seg->shm + layout.records)
           + r;
}

/** The record bucket number @a b has in the bucket table, read once, or
 *  -1 when @a b or the entry is out of range.  Bounded by the segment's
 *  sizes only: a reader bounds @a b by the bucket count of its own copy
 *  of the header. */
static APR_INLINE int pfb_segment_table(const pfb_segment_t *seg, int b)
{
    const apr_int32_t *table;
    apr_int32_t r;

    if (b < 0 || b >= seg->num_records) {
        return -1;
    }
    table = (const apr_int32_t *)((const char *)seg->shm
                                  + PFB_SHM_HEADER_SIZE);
    r = table[b];
    return r >= 0 && r < seg->num_records ? (int)r : -1;
}

/** The record of bucket number @a b of the current generation, or NULL. */
static APR_INLINE const pfb_bucket_t *pfb_segment_bucket(
    const pfb_segment_t *seg, int b)
{
    if (b < 0 || b >= pfb_segment_num_buckets(seg)) {
        return NULL;
    }
    return pfb_segment_record(seg, pfb_segment_table(seg, b));
}

/** Slot @a slot, or NULL when out of range. */
static APR_INLINE const pfb_slot_t *pfb_segment_slot(
    const pfb_segment_t *seg, int slot)
{
    pfb_layout_t layout;

    if (slot < 0 || slot >= seg->num_slots) {
        return NULL;
    }
    pfb_layout(seg->num_records, seg->num_slots, &layout);
    return (const pfb_slot_t *)((const char *)seg->shm + layout.slots) + slot;
}

/**
 * The bucket number (in the current generation) of the child in slot
 * @a slot, or -1: no child there, or one whose bucket identity is not in
 * use any more.  This is the slot-to-bucket map; the scoreboard's
 * deprecated process_score.bucket field is not used.
 */
static APR_INLINE int pfb_segment_slot_bucket(const pfb_segment_t *seg,
                                              int slot)
{
    const pfb_slot_t *s = pfb_segment_slot(seg, slot);
    const pfb_bucket_t *rec;
    int position;

    if (s == NULL || s->f.pid == 0) {
        return -1;
    }
    rec = pfb_segment_record(seg, s->f.record);
    if (rec == NULL) {
        return -1;
    }
    position = rec->f.position;
    /* Only a bucket whose table entry points back at this record. */
    return pfb_segment_bucket(seg, position) == rec ? position : -1;
}

/** A reader's look at bucket record @a rec before it copies `retired`
 *  and the slots' counts: pass the value to pfb_retire_seq_changed()
 *  after them. */
static APR_INLINE apr_uint32_t pfb_retire_seq_begin(const pfb_bucket_t *rec)
{
    return __atomic_load_n(&rec->f.retire_seq, __ATOMIC_ACQUIRE);
}

/** Whether a count moved between a slot and @a rec's `retired` while the
 *  reader copied them (it then reads again): an exited child's count
 *  may have been in neither place, or in both. */
static APR_INLINE int pfb_retire_seq_changed(const pfb_bucket_t *rec,
                                             apr_uint32_t seen)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return (seen & 1u) != 0
           || __atomic_load_n(&rec->f.retire_seq, __ATOMIC_RELAXED) != seen;
}

/** a + b, or the largest value when that overflows: for sums of counters
 *  that children write (a child may write anything there). */
static APR_INLINE apr_uint64_t pfb_add_saturated(apr_uint64_t a,
                                                 apr_uint64_t b)
{
    return a > ~(apr_uint64_t)0 - b ? ~(apr_uint64_t)0 : a + b;
}

/** Display names, stable: they appear in ?auto, JSON and Prometheus. */
static APR_INLINE const char *pfb_mode_name(int mode)
{
    switch (mode) {
    case PFB_MODE_SINGLE:
        return "single";
    case PFB_MODE_REUSEPORT:
        return "reuseport";
    case PFB_MODE_PER_LISTEN:
        return "per-listen";
    default:
        return "unknown";
    }
}

static APR_INLINE const char *pfb_reason_name(int reason)
{
    switch (reason) {
    case PFB_WHY_OFF:
        return "off";
    case PFB_WHY_RATIO:
        return "ratio";
    case PFB_WHY_EXPLICIT:
        return "explicit";
    case PFB_WHY_NO_REUSEPORT:
        return "no-reuseport";
    case PFB_WHY_CAPPED:
        return "capped-by-maxrequestworkers";
    case PFB_WHY_DUP_FAILED:
        return "duplicate-failed";
    case PFB_WHY_KEPT:
        return "kept-over-graceful-restart";
    case PFB_WHY_DEFAULT:
        return "default-bucket-per-listen";
    case PFB_WHY_ONE_PER_LISTEN:
        return "ratio-one-per-listen";
    case PFB_WHY_NO_IDLE_STEERING:
        return "idle-steering-unavailable";
    default:
        return "unknown";
    }
}

/** "hash", "cpu", "idle", "local": also the values ListenBucketSteering
 *  takes. */
static APR_INLINE const char *pfb_steer_name(int steer)
{
    switch (steer) {
    case PFB_STEER_HASH:
        return "hash";
    case PFB_STEER_CPU:
        return "cpu";
    case PFB_STEER_IDLE:
        return "idle";
    case PFB_STEER_LOCAL:
        return "local";
    default:
        return "unknown";
    }
}

/**
 * Returns the MPM's view of its bucket segment, or NULL before the MPM has
 * created it.  Registered only by this MPM: with any other MPM,
 * APR_RETRIEVE_OPTIONAL_FN gives NULL, which means "bucket data
 * unavailable".
 */
APR_DECLARE_OPTIONAL_FN(const pfb_segment_t *, prefork_buckets_segment,
                        (void));

#ifdef __cplusplus
}
#endif

#endif /* PREFORK_BUCKETS_H */
