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
 * ListenBucketSteering's rules that only user space runs, beside those
 * prefork_steering_rules.h shares with the kernel's programs: the split
 * of the affinity mask's CPUs over a Listen's buckets, how many buckets
 * idle steering probes, and the idle counts' bookkeeping (saturating
 * arithmetic on what children wrote, and the drift correction, made only
 * when two cycles in a row see it).  Pure: no system call, no global
 * state.  prefork_steering.c calls it; the unit tests, and the scale
 * model through build/libpfpolicy.so, also get pick functions over plain
 * counts.
 */
#include "ap_config.h"

#include <string.h>
#include <strings.h>

#include "prefork_buckets.h"
#include "prefork_steering_rules.h"

/* ------------------------------------------------------------------ */
/* CPU layout                                                          */

static int valid_cpu_list(const int *cpus, int num_cpus)
{
    int i;

    if (cpus == NULL || num_cpus < 1) {
        return 0;
    }
    for (i = 0; i < num_cpus; i++) {
        if (cpus[i] < 0 || (i > 0 && cpus[i] <= cpus[i - 1])) {
            return 0;
        }
    }
    return 1;
}

/* First shard of the CPU of rank j, and how many it owns. */
static void rank_shards(int j, int num_cpus, int per_listen, int *first,
                        int *span)
{
    long long lo = (long long)j * per_listen / num_cpus;
    long long hi = (long long)(j + 1) * per_listen / num_cpus;

    *first = (int)lo;
    *span = hi - lo > 1 ? (int)(hi - lo) : 1;
}

int pf_steer_cpu_runs(const int *cpus, int num_cpus, int per_listen,
                      pf_cpu_run_t *runs)
{
    int j, n = 0, first, span;

    if (!valid_cpu_list(cpus, num_cpus) || per_listen < 1 || runs == NULL) {
        return -1;
    }
    for (j = 0; j < num_cpus; j++) {
        rank_shards(j, num_cpus, per_listen, &first, &span);
        if (n > 0 && runs[n - 1].first_bucket == first
            && runs[n - 1].span == span) {
            continue;           /* same shards as the CPU below: one run */
        }
        runs[n].first_cpu = cpus[j];
        runs[n].first_bucket = first;
        runs[n].span = span;
        n++;
    }
    return n;
}

int pf_steer_cpu_table(const pf_cpu_run_t *runs, int num_runs,
                       pf_steer_cpu_entry_t *table, int entries)
{
    int cpu, r = 0;

    if (runs == NULL || num_runs < 1 || table == NULL || entries < 0) {
        return -1;
    }
    for (cpu = 0; cpu < entries; cpu++) {
        /* The run of the highest first CPU at or below this one; CPUs
         * below every run count as the lowest run's. */
        while (r + 1 < num_runs && runs[r + 1].first_cpu <= cpu) {
            r++;
        }
        table[cpu].first_shard = (pf_u32)runs[r].first_bucket;
        table[cpu].span = (pf_u32)runs[r].span;
        table[cpu].node_first = 0;
        table[cpu].node_span = 0;
    }
    return 0;
}

int pf_steer_shard_cpus(const int *cpus, int num_cpus, int per_listen,
                        int shard, int *out)
{
    int j, n = 0, first, span;

    if (!valid_cpu_list(cpus, num_cpus) || per_listen < 1 || shard < 0
        || shard >= per_listen || out == NULL) {
        return -1;
    }
    for (j = 0; j < num_cpus; j++) {
        rank_shards(j, num_cpus, per_listen, &first, &span);
        if (shard >= first && shard < first + span) {
            out[n++] = cpus[j];
        }
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* "idle"                                                              */

int pf_steer_idle_probes(int per_listen)
{
    if (per_listen < 2) {
        return 0;
    }
    return per_listen - 1 < PF_STEER_MAX_PROBES ? per_listen - 1
                                                : PF_STEER_MAX_PROBES;
}

/* ------------------------------------------------------------------ */
/* Idle-count bookkeeping                                              */

/* a - b, held at INT64_MAX / INT64_MIN instead of overflowing: for
 * arithmetic on what a child wrote. */
static int64_t pf_steer_sat_sub(int64_t a, int64_t b)
{
    if (b < 0 && a > INT64_MAX + b) {
        return INT64_MAX;
    }
    if (b > 0 && a < INT64_MIN + b) {
        return INT64_MIN;
    }
    return a - b;
}

int64_t pf_steer_idle_truth(int64_t waiting, int64_t queued)
{
    return pf_steer_sat_sub(waiting, queued);
}

int64_t pf_steer_idle_correction(int64_t advertised, int64_t truth,
                                 int64_t *pending)
{
    int64_t now = pf_steer_sat_sub(truth, advertised);
    int64_t before = *pending;
    int64_t fix;

    *pending = now;
    if (now == 0 || before == 0 || (now > 0) != (before > 0)) {
        return 0;
    }
    /* Same sign twice: the smaller of the two is drift for sure. */
    if (now > 0) {
        fix = now < before ? now : before;
    }
    else {
        fix = now > before ? now : before;
    }
    *pending = 0;
    return fix;
}

int pf_steer_new_cycle(int64_t now, int64_t *last)
{
    if (*last != 0 && now >= *last
        && now - *last < PF_STEER_CYCLE_SPACING) {
        return 0;
    }
    *last = now;
    return 1;
}
