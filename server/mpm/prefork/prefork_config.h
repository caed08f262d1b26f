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
 * @file  prefork_config.h
 * @brief The MPM's directives: their values, the strict parse of each,
 *        and the corrections httpd's prefork makes, as pure functions.
 *
 * Nothing here calls the system, touches httpd globals or allocates, so
 * the unit tests feed it every value.  prefork_directives.c registers the
 * directives, keeps the one pf_config_t for the configuration being read
 * and logs what check_config corrected once the error log is open.
 */

#ifndef PREFORK_CONFIG_H
#define PREFORK_CONFIG_H

#include <stddef.h>

/** Largest ServerLimit (and so the most children or buckets) accepted. */
#define PF_MAX_SERVER_LIMIT 200000

/** ListenBuckets not given at all (as opposed to ListenBuckets 0). */
#define PF_BUCKETS_UNSET (-1)

typedef enum {
    PF_PARSE_OK = 0,
    PF_PARSE_EMPTY,             /**< nothing given */
    PF_PARSE_NOT_A_NUMBER,      /**< not a plain decimal integer */
    PF_PARSE_OUT_OF_RANGE       /**< a number, but outside [min, max] */
} pf_parse_e;

/** A value that httpd's prefork accepts and corrects, and how. */
typedef enum {
    PF_FIX_SERVER_LIMIT_ABOVE_CAP,  /**< ServerLimit > PF_MAX_SERVER_LIMIT */
    PF_FIX_SERVER_LIMIT_BELOW_ONE,  /**< ServerLimit 0 */
    PF_FIX_SERVER_LIMIT_RESTART,    /**< changed by a restart: kept */
    PF_FIX_WORKERS_ABOVE_LIMIT,     /**< MaxRequestWorkers > ServerLimit */
    PF_FIX_WORKERS_BELOW_ONE,       /**< MaxRequestWorkers 0 */
    PF_FIX_START_BELOW_ONE,         /**< StartServers 0 */
    PF_FIX_START_ABOVE_WORKERS,     /**< StartServers > MaxRequestWorkers */
    PF_FIX_MIN_SPARE_BELOW_ONE,     /**< MinSpareServers 0 */
    PF_FIX_MAX_SPARE_NOT_ABOVE_MIN, /**< MaxSpareServers <= MinSpareServers */
    PF_FIX_RATIO_WITH_EXPLICIT,     /**< both bucket directives: the
                                         ratio is ignored */
    PF_FIX_KINDS
} pf_fix_e;

/** The pool's directives, as configured and then as in force. */
typedef struct {
    int server_limit;
    int max_workers;        /**< MaxRequestWorkers */
    int start_servers;
    int min_spare_servers;
    int max_spare_servers;
    int ratio;              /**< ListenCoresBucketsRatio */
    int explicit_buckets;   /**< ListenBuckets, or PF_BUCKETS_UNSET */
} pf_pool_config_t;

/** One correction: which, the value configured and the value used. */
typedef struct {
    int kind;               /**< pf_fix_e */
    int given;
    int used;
} pf_fix_t;

/**
 * Corrects the values httpd 2.4's prefork corrects, as it does, in its
 * order: ServerLimit into [1, PF_MAX_SERVER_LIMIT] and kept across
 * restarts; MaxRequestWorkers into [1, ServerLimit]; StartServers and
 * MinSpareServers at least 1.  Beyond httpd's own checks, which make the
 * same changes silently at run time: StartServers at most
 * MaxRequestWorkers, and MaxSpareServers above MinSpareServers.  Both
 * bucket directives set: ListenBuckets wins.  MinSpareServers and
 * MaxSpareServers above PF_MAX_SERVER_LIMIT are cut to it without a
 * correction, since no more children than that can exist.
 *
 * @param cfg Read and corrected in place
 * @param first_server_limit ServerLimit in force since the server started,
 *        0 at the first start
 * @param fixes Room for PF_FIX_KINDS corrections, written in order
 * @return the number of corrections written
 */
int pf_correct_pool_config(pf_pool_config_t *cfg, int first_server_limit,
                           pf_fix_t *fixes);

/** Every directive of the MPM, as configured and then as in force. */
typedef struct {
    pf_pool_config_t pool;      /**< the pool's and the buckets' counts */
    int steering;               /**< ListenBucketSteering (pfb_steer_e) */
    int cpu_affinity;           /**< BucketCPUAffinity */
    int syscall_filter;         /**< ChildSyscallFilter */
    /** What check_config corrected (pf_correct_pool_config()), for the
     *  log once it is open. */
    pf_fix_t fixes[PF_FIX_KINDS];
    int num_fixes;
} pf_config_t;

/**
 * An integer directive's value: a whole decimal number (optional sign and
 * surrounding blanks) in [@a min, @a max]; "8x", "0x10", "1e3", "" and
 * values that overflow are refused.
 * @param out Set to the value when it is accepted
 * @param buf Room for the message
 * @return NULL, or the admin-facing message in @a buf: "<directive>:
 *         '<arg>' is not a whole number; expected an integer from <min>
 *         to <max>" (or "is empty", "is out of range")
 */
const char *pf_config_int(const char *directive, const char *arg,
                          long long min, long long max, int *out, char *buf,
                          size_t len);

/**
 * ListenBucketSteering's value: "hash", "cpu", "idle" or "local" (any
 * case), refused when this build cannot run it (cpu, idle and local need
 * the BPF programs, which configure compiles in where it finds clang,
 * libbpf and bpftool).
 * @param mode Set to the pfb_steer_e when it is accepted
 * @return NULL, or the admin-facing message in @a buf
 */
const char *pf_config_steering(const char *directive, const char *arg,
                               int *mode, char *buf, size_t len);

#endif /* PREFORK_CONFIG_H */
