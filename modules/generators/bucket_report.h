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
 * @file  bucket_report.h
 * @brief mod_bucket_status's pure part: a snapshot of bucket state, the
 *        balance figures computed from it, the query-string parser and the
 *        HTML, ?auto, JSON and Prometheus formatters.
 *
 * Nothing here touches httpd, the scoreboard or shared memory: the module
 * copies what it needs into a bs_snapshot_t once, and everything else is a
 * function of that copy, so unit tests drive it with made-up snapshots.
 */

#ifndef BUCKET_REPORT_H
#define BUCKET_REPORT_H

#include <stddef.h>

/** This module's version: httpd_bucket_build_info's "version" label and
 *  the JSON's "version".  The unit tests hold it equal to configure's. */
#define BS_VERSION "0.1.0"

/** The JSON document's "schema_version": raised whenever a field is
 *  renamed, removed or changes meaning (added fields keep it). */
#define BS_JSON_SCHEMA_VERSION 1

/** Balance of a set of counts (accepted connections per bucket or per
 *  child).  With no traffic, or one element, everything counts as even:
 *  max/mean = min/mean = 1, CV = 0, Jain = 1. */
typedef struct {
    int n;                      /**< how many buckets or children */
    unsigned long long total;   /**< sum of the counts */
    double mean;
    double max_over_mean;
    double min_over_mean;
    double cv;                  /**< population standard deviation / mean */
    double jain;                /**< (sum x)^2 / (n * sum x^2), 1/n..1 */
} bs_balance_t;

void bs_compute_balance(const unsigned long long *counts, int n,
                        bs_balance_t *out);

/** One bucket, as copied from shared memory. */
typedef struct {
    int id;
    char listener[64];
    unsigned children, idle, busy, starting, stopping;
    unsigned long long accepted;
    unsigned long long accepted_10s;
    unsigned queue_depth, backlog;
    /* Idle steering only (steering "idle" in force): */
    unsigned long long steer_kept;  /**< left where the hash sent them */
    unsigned long long steer_moved; /**< moved in from a bucket with no
                                         idle child */
    long long steer_idle;           /**< idle count the program reads */
} bs_bucket_t;

/** One live child, from the scoreboard and its slot counter. */
typedef struct {
    int slot;
    long pid;
    int bucket;
    unsigned long long accepted;
} bs_child_t;

/** Why there is no bucket data (bs_snapshot_t.available 0). */
typedef enum {
    /** The running MPM is another one (Debian's prefork, event...): the
     *  admin switched back, as intended. */
    BS_UNAVAILABLE_OTHER_MPM = 0,
    /** This MPM runs, but its segment has a layout this module does not
     *  read: the two come from different builds. */
    BS_UNAVAILABLE_INCOMPATIBLE = 1
} bs_unavailable_e;

typedef struct {
    int available;              /**< 0: no bucket data (see unavailable) */
    bs_unavailable_e unavailable; /**< why, when available is 0 */
    const char *mpm_name;       /**< the running MPM, for "unavailable" */
    /** httpd's banner as ServerTokens shapes it: "Apache" under Prod,
     *  "Apache/2.4.62 (Debian)" under Full. */
    const char *server_version;
    const char *mode;           /**< "reuseport", "per-listen", "single" */
    const char *reason;         /**< how the count was derived */
    const char *steering;       /**< ListenBucketSteering in force */
    const char *steering_wanted;/**< as configured (differs on fallback) */
    int cpu_affinity;           /**< BucketCPUAffinity */
    int so_reuseport;           /**< 1, 0, or -1 not probed */
    int cpus_online, cpus_affinity, cpus_quota, cpus_usable;
    int ratio, explicit_buckets, buckets_per_listen, num_listeners;
    int generation;
    int max_workers;            /**< MaxRequestWorkers in force */
    int server_limit;           /**< ServerLimit in force */
    double uptime;              /**< seconds since the first start */
    double start_time;          /**< the first start, Unix seconds */
    int num_buckets;
    bs_bucket_t *buckets;
    int num_children;
    bs_child_t *children;
    bs_balance_t over_buckets;  /**< of accepted, over buckets */
    bs_balance_t over_children; /**< of accepted, over live children */
} bs_snapshot_t;

/** Fills over_buckets and over_children from the bucket and child lists. */
void bs_snapshot_balance(bs_snapshot_t *snap);

/**
 * Why the steering in force differs from the steering asked for:
 * "none" (it does not differ), "one-bucket-per-listen" (there is nothing
 * to choose between, so hash is all there is: not a fault) or "refused"
 * (the kernel or the privileges refused the program: the error log's
 * warning says which step).  The ratio with idle or local steering that
 * the kernel refuses runs one bucket for every Listen
 * (idle-steering-unavailable): refused too, since the buckets asked for
 * are gone because of it.
 */
const char *bs_steering_fallback(const bs_snapshot_t *snap);

/**
 * Connections accepted in the last @a window microseconds, from a ring of
 * (count, time) samples taken once per maintenance cycle: the current
 * count minus the oldest sample no older than the window (or the oldest
 * sample there is, while the server is younger than the window).
 */
unsigned long long bs_recent_accepted(unsigned long long accepted_now,
                                      const unsigned long long *samples,
                                      const long long *times, int nsamples,
                                      long long now, long long window);

/* ------------------------------------------------------------------ */
/* Query string                                                        */

typedef enum {
    BS_FORMAT_HTML = 0,
    BS_FORMAT_AUTO,
    BS_FORMAT_JSON,
    BS_FORMAT_PROMETHEUS
} bs_format_e;

typedef struct {
    bs_format_e format;
    int refresh;                /**< seconds, 0 = none (HTML only) */
} bs_query_t;

/** Longest refresh accepted, in seconds. */
#define BS_MAX_REFRESH 86400

/**
 * Parses the handler's query string: empty, or '&'-separated words from
 * "auto", "json", "prometheus" (at most one of them) and "refresh=N"
 * (1 to BS_MAX_REFRESH).  With "prometheus", any other word is ignored:
 * a scrape configuration may add parameters of its own.  Otherwise
 * anything else is refused.
 * @param query NUL-terminated, may be NULL
 * @return 0 and *out filled, or -1 with a static reason in *error
 */
int bs_parse_query(const char *query, bs_query_t *out, const char **error);

/* ------------------------------------------------------------------ */
/* Output                                                              */

/** A growable text buffer; formatters append to it. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed;                 /**< an allocation failed */
} bs_buf_t;

void bs_buf_init(bs_buf_t *buf);
void bs_buf_free(bs_buf_t *buf);
void bs_buf_printf(bs_buf_t *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Writes @a s into @a buf, escaped for HTML text and attributes. */
void bs_buf_html(bs_buf_t *buf, const char *s);
/** Writes @a s as a JSON string, quotes included. */
void bs_buf_json_string(bs_buf_t *buf, const char *s);
/** Writes @a s escaped as a Prometheus label value (no quotes). */
void bs_buf_prom_label(bs_buf_t *buf, const char *s);

/** The full page: summary, a table of buckets, an SVG bar chart. */
void bs_format_html_page(bs_buf_t *buf, const bs_snapshot_t *snap,
                         int refresh);
/** The "Listener buckets" section inside mod_status's page. */
void bs_format_html_section(bs_buf_t *buf, const bs_snapshot_t *snap);
/** mod_status ?auto lines: "Name: value", one figure a line. */
void bs_format_auto(bs_buf_t *buf, const bs_snapshot_t *snap);
void bs_format_json(bs_buf_t *buf, const bs_snapshot_t *snap);
/** Prometheus text exposition format 0.0.4. */
void bs_format_prometheus(bs_buf_t *buf, const bs_snapshot_t *snap);

#endif /* BUCKET_REPORT_H */
