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
 *        that report on it (mod_bucket_status).
 *
 * The MPM keeps one shared-memory segment for the life of the server.  It
 * starts with a header (magic, version, size), followed by one cache-line
 * sized record per listener bucket and one connection counter per
 * scoreboard slot.  A reader fetches the segment through the optional
 * function below; when another MPM runs, the function is not registered and
 * the reader reports that bucket data is unavailable.
 *
 * Writers: the parent writes the header and the per-bucket child counts,
 * queue depth and rate samples once per maintenance cycle; children only
 * add to their bucket's and their slot's accepted-connection counters, with
 * apr_atomic_add64().  Readers copy what they need into locals once and
 * never take a lock.
 */

#ifndef PREFORK_BUCKETS_H
#define PREFORK_BUCKETS_H

#include "apr.h"
#include "apr_optional.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Tag for this project's log messages: the same shape as httpd's APLOGNO,
 * with the project's own prefix so that it never collides with httpd's
 * catalogue.  The next free number is in docs/log-message-tags/next-number.
 */
#define PFBLOGNO(n) "PFB" #n ": "

/** "PFBK": marks a segment written by this MPM. */
#define PFB_SHM_MAGIC 0x5046424bu
/** Bumped whenever the layout below changes. */
#define PFB_SHM_VERSION 2u
/** Each bucket record starts on its own line, so children of different
 *  buckets never write to the same cache line. */
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

/** How a new connection picks its bucket (ListenBucketSteering). */
typedef enum {
    PFB_STEER_HASH = 0,         /**< the kernel's hash of the 4-tuple */
    PFB_STEER_CPU = 1,          /**< the CPU that took the connection */
    PFB_STEER_IDLE = 2          /**< the hash's bucket, unless it has no
                                     idle child and another has one */
} pfb_steer_e;

/** Why the bucket count is what it is. */
typedef enum {
    PFB_WHY_OFF = 0,            /**< neither directive set */
    PFB_WHY_RATIO = 1,          /**< usable CPUs / ListenCoresBucketsRatio */
    PFB_WHY_EXPLICIT = 2,       /**< ListenBuckets */
    PFB_WHY_NO_REUSEPORT = 3,   /**< asked for, kernel refused SO_REUSEPORT */
    PFB_WHY_CAPPED = 4,         /**< cut down to fit MaxRequestWorkers */
    PFB_WHY_DUP_FAILED = 5,     /**< a duplicate socket could not be bound */
    PFB_WHY_KEPT = 6            /**< graceful restart kept the old count */
} pfb_reason_e;

/** One listener bucket, padded to a whole number of cache lines. */
typedef struct {
    /** Connections accepted by this bucket's children (atomic add). */
    volatile apr_uint64_t accepted;
    /** Parent: current-generation children in this bucket. */
    apr_uint32_t children;
    apr_uint32_t idle;          /**< ready to accept */
    apr_uint32_t busy;          /**< serving a connection */
    apr_uint32_t starting;      /**< forked, not yet accepting */
    apr_uint32_t stopping;      /**< told to exit, or of an older generation */
    /** Parent: connections waiting in the accept queue at the last cycle. */
    apr_uint32_t queue_depth;
    /** Parent: the accept queue's limit (the listen backlog in force). */
    apr_uint32_t backlog;
    /** Parent: index of the next sample to overwrite in the rings below. */
    apr_uint32_t sample_next;
    /** Parent: copies of accepted, one per maintenance cycle... */
    apr_uint64_t accepted_sample[PFB_RATE_SAMPLES];
    /** ...and when each was taken (apr_time_t, microseconds). */
    apr_int64_t sample_time[PFB_RATE_SAMPLES];
    /** NUL-terminated listener address, "host:port". */
    char listener[PFB_LISTENER_LEN];
    /** Parent, with idle steering: connections the kernel program left in
     *  the bucket its hash chose, and ones it moved here from a bucket
     *  with no idle child, since start (copied once per cycle). */
    apr_uint64_t steer_kept;
    apr_uint64_t steer_moved;
    /** Parent, with idle steering: the idle count the program reads
     *  (waiting children minus connections sent and not yet accepted). */
    apr_int64_t steer_idle;
} pfb_bucket_fields_t;

typedef union {
    pfb_bucket_fields_t f;
    char pad[((sizeof(pfb_bucket_fields_t) + PFB_CACHE_LINE - 1)
              / PFB_CACHE_LINE) * PFB_CACHE_LINE];
} pfb_bucket_t;

/** The segment header; written by the parent only. */
typedef struct {
    apr_uint32_t magic;         /**< PFB_SHM_MAGIC */
    apr_uint32_t version;       /**< PFB_SHM_VERSION */
    apr_uint32_t size;          /**< bytes in the whole segment */
    apr_uint32_t bucket_size;   /**< sizeof(pfb_bucket_t) */
    apr_uint32_t header_size;   /**< sizeof(pfb_shm_t), rounded to a line */
    apr_uint32_t num_buckets;   /**< bucket records that follow */
    apr_uint32_t num_slots;     /**< slot counters after the buckets */
    apr_uint32_t num_listeners; /**< Listen statements in force */
    apr_int32_t mode;           /**< pfb_mode_e */
    apr_int32_t reason;         /**< pfb_reason_e */
    apr_int32_t so_reuseport;   /**< 1 works, 0 refused, -1 not probed */
    apr_int32_t cpus_online;    /**< sysconf(_SC_NPROCESSORS_ONLN) */
    apr_int32_t cpus_affinity;  /**< CPUs in the process's affinity mask */
    apr_int32_t cpus_quota;     /**< cgroup cpu.max in CPUs, 0 = no quota */
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
    apr_int32_t steer_reserved;
    apr_int64_t started;        /**< apr_time_t of the first start */
    apr_int64_t updated;        /**< apr_time_t of the last cycle */
} pfb_shm_t;

/** Header size rounded up to whole cache lines. */
#define PFB_SHM_HEADER_SIZE \
    (((sizeof(pfb_shm_t) + PFB_CACHE_LINE - 1) / PFB_CACHE_LINE) \
     * PFB_CACHE_LINE)

/**
 * Bytes needed for a segment with the given number of buckets and slots.
 * @param num_buckets Bucket records
 * @param num_slots Scoreboard slots (ServerLimit)
 */
static APR_INLINE apr_size_t pfb_shm_size(int num_buckets, int num_slots)
{
    return PFB_SHM_HEADER_SIZE + (apr_size_t)num_buckets * sizeof(pfb_bucket_t)
           + (apr_size_t)num_slots * sizeof(apr_uint64_t);
}

/**
 * Whether a segment was written by a compatible MPM: readers must check this
 * before touching anything past the header.
 */
static APR_INLINE int pfb_shm_usable(const pfb_shm_t *shm)
{
    return shm != NULL && shm->magic == PFB_SHM_MAGIC
           && shm->version == PFB_SHM_VERSION
           && shm->bucket_size == sizeof(pfb_bucket_t)
           && shm->header_size == PFB_SHM_HEADER_SIZE
           && shm->size >= pfb_shm_size((int)shm->num_buckets,
                                        (int)shm->num_slots);
}

/** The record of bucket @a b (0 <= b < num_buckets). */
static APR_INLINE pfb_bucket_t *pfb_shm_bucket(const pfb_shm_t *shm, int b)
{
    return (pfb_bucket_t *)((char *)shm + PFB_SHM_HEADER_SIZE)
           + b;
}

/** The accepted-connection counter of scoreboard slot @a slot, reset by the
 *  parent when it forks a child into that slot. */
static APR_INLINE volatile apr_uint64_t *pfb_shm_slot_accepted(
    const pfb_shm_t *shm, int slot)
{
    return (volatile apr_uint64_t *)((char *)shm + PFB_SHM_HEADER_SIZE
                                     + (apr_size_t)shm->num_buckets
                                           * sizeof(pfb_bucket_t))
           + slot;
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
    default:
        return "unknown";
    }
}

static APR_INLINE const char *pfb_steer_name(int steer)
{
    switch (steer) {
    case PFB_STEER_HASH:
        return "hash";
    case PFB_STEER_CPU:
        return "cpu";
    case PFB_STEER_IDLE:
        return "idle";
    default:
        return "unknown";
    }
}

/**
 * Returns the MPM's bucket segment, or NULL before the MPM has created it.
 * Registered only by this MPM: with any other MPM, APR_RETRIEVE_OPTIONAL_FN
 * gives NULL, which means "bucket data unavailable".
 */
APR_DECLARE_OPTIONAL_FN(const pfb_shm_t *, prefork_buckets_shm, (void));

#ifdef __cplusplus
}
#endif

#endif /* PREFORK_BUCKETS_H */
