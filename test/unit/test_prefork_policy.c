/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * prefork_policy.c, the MPM's decisions as pure functions: the bucket
 * count from CPUs, ratio, explicit count and steering, and how limits are
 * shared among buckets; what a start or restart keeps
 * (pf_plan_generation); per-bucket idle-server maintenance.  Also the
 * saturating sum of child-written counters (include/prefork_buckets.h,
 * which the status module shares).
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/prefork_policy.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "prefork_buckets.h"

/* ------------------------------------------------------------------ */
/* Bucket count and shares                                             */

typedef struct {
    const char *label;
    int cpus, ratio, explicit_buckets, reuseport, listeners, max_workers;
    int min_spare, steering;
    int mode, reason, per_listen, total;
    int warm_limit, capped, starved;
    int steering_refused;       /* the kernel or the build refuses it */
} plan_row_t;

#define HASH PFB_STEER_HASH
#define CPU PFB_STEER_CPU
#define IDLE PFB_STEER_IDLE
#define LOCAL PFB_STEER_LOCAL
#define UNSET PF_BUCKETS_UNSET

static const plan_row_t plan_rows[] = {
    /* Neither directive: httpd's arrangement, whatever the Listens. */
    { "one Listen by default: one bucket", 64, 0, UNSET, 1, 1, 150, 5, HASH,
      PFB_MODE_SINGLE, PFB_WHY_OFF, 1, 1, 0, 0, 0, 0 },
    { "several Listens by default: one bucket polled under the mutex", 64, 0,
      UNSET, 1, 4, 150, 5, HASH, PFB_MODE_SINGLE, PFB_WHY_OFF, 1, 1, 0, 0,
      0, 0 },
    { "the default needs no SO_REUSEPORT", 64, 0, UNSET, 0, 2, 150, 5, HASH,
      PFB_MODE_SINGLE, PFB_WHY_OFF, 1, 1, 0, 0, 0, 0 },
    { "default with more Listens than MaxRequestWorkers: one bucket", 4, 0,
      UNSET, 1, 3, 2, 5, HASH, PFB_MODE_SINGLE, PFB_WHY_OFF, 1, 1, 0, 0, 0, 0 },
    { "ListenBuckets 0 keeps one bucket for one Listen", 64, 0, 0, 1, 1, 150,
      5, HASH, PFB_MODE_SINGLE, PFB_WHY_OFF, 1, 1, 0, 0, 0, 0 },
    { "ListenBuckets 0 keeps every Listen in one bucket (httpd's way)", 64,
      0, 0, 1, 4, 150, 5, HASH, PFB_MODE_SINGLE, PFB_WHY_OFF, 1, 1, 0, 0, 0, 0 },
    { "ListenBuckets 0 follows a ratio", 4, 2, 0, 1, 1, 150, 5, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 2, 2, 5, 0, 0, 0 },
    { "ratio 1 on 2 CPUs", 2, 1, 0, 1, 1, 150, 5, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 2, 2, 5, 0, 0, 0 },
    { "ratio 8 on 64 CPUs, spare pool of 8", 64, 8, 0, 1, 1, 150, 8, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 8, 8, 8, 0, 0, 0 },
    { "ratio above the CPU count: one bucket, as in httpd", 2, 4, 0, 1, 1,
      150, 5, HASH, PFB_MODE_SINGLE, PFB_WHY_ONE_PER_LISTEN, 1, 1, 5, 0, 0, 0 },
    { "ratio 1 on one CPU, four Listens: one bucket polled under the mutex",
      1, 1, 0, 1, 4, 150, 5, IDLE, PFB_MODE_SINGLE, PFB_WHY_ONE_PER_LISTEN,
      1, 1, 0, 0, 0, 0 },
    { "ratio 1 on 2 CPUs, idle", 2, 1, 0, 1, 1, 150, 5, IDLE,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 2, 2, 0, 0, 0, 0 },
    { "ratio 1 on 2 CPUs, idle, four Listens", 2, 1, 0, 1, 4, 150, 5, IDLE,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 2, 8, 0, 0, 0, 0 },
    { "ListenBuckets 1 keeps a bucket per Listen", 2, 0, 1, 1, 4, 150, 5,
      HASH, PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 1, 4, 5, 0, 0, 0 },
    { "ratio rounds down", 10, 4, 0, 1, 1, 150, 5, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 2, 2, 5, 0, 0, 0 },
    { "explicit count ignores CPUs", 2, 0, 4, 1, 1, 150, 5, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 4, 4, 5, 0, 0, 0 },
    { "explicit wins over ratio", 64, 1, 3, 1, 1, 150, 5, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 3, 3, 5, 0, 0, 0 },
    { "two Listens double the buckets", 4, 1, 0, 1, 2, 150, 8, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 4, 8, 8, 0, 0, 0 },
    { "no SO_REUSEPORT: one per Listen", 64, 1, 0, 0, 2, 150, 5, HASH,
      PFB_MODE_PER_LISTEN, PFB_WHY_NO_REUSEPORT, 1, 2, 0, 0, 0, 0 },
    { "no SO_REUSEPORT with explicit count", 2, 0, 4, 0, 1, 150, 5, HASH,
      PFB_MODE_PER_LISTEN, PFB_WHY_NO_REUSEPORT, 1, 1, 0, 0, 0, 0 },
    { "capped by MaxRequestWorkers", 256, 1, 0, 1, 1, 150, 500, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_CAPPED, 150, 150, 500, 0, 0, 0 },
    { "capped per Listen", 64, 1, 0, 1, 2, 100, 500, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_CAPPED, 50, 100, 500, 0, 0, 0 },
    { "too many Listens for MaxRequestWorkers", 4, 0, 4, 1, 3, 2, 5, HASH,
      PFB_MODE_SINGLE, PFB_WHY_CAPPED, 1, 1, 5, 0, 0, 0 },
    { "unknown CPU count counts as one", 0, 1, 0, 1, 1, 150, 5, HASH,
      PFB_MODE_SINGLE, PFB_WHY_ONE_PER_LISTEN, 1, 1, 5, 0, 0, 0 },
    /* Warm buckets: the ratio's count never exceeds MinSpareServers under
     * hash or cpu steering. */
    { "Debian's pool on 16 CPUs, ratio 1, hash: capped to 5", 16, 1, 0, 1,
      1, 150, 5, HASH, PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 5, 5, 5, 1, 0, 0 },
    { "Debian's pool on 16 CPUs, ratio 1, cpu: capped to 5", 16, 1, 0, 1, 1,
      150, 5, CPU, PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 5, 5, 5, 1, 0, 0 },
    { "idle steering shares the pool: no cap", 16, 1, 0, 1, 1, 150, 5, IDLE,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 16, 16, 0, 0, 0, 0 },
    { "two Listens share the cap", 16, 1, 0, 1, 2, 150, 5, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 2, 4, 5, 1, 0, 0 },
    { "more Listens than the cap: one bucket holds them all", 16, 1, 0, 1,
      8, 150, 5, HASH, PFB_MODE_SINGLE, PFB_WHY_ONE_PER_LISTEN, 1, 1, 5, 1,
      0, 0 },
    { "a spare pool as large as the count: no cap", 16, 1, 0, 1, 1, 150, 16,
      HASH, PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 16, 16, 16, 0, 0, 0 },
    { "MinSpareServers 0 counts as 1", 16, 1, 0, 1, 1, 150, 0, HASH,
      PFB_MODE_SINGLE, PFB_WHY_ONE_PER_LISTEN, 1, 1, 1, 1, 0, 0 },
    { "warm cap, then MaxRequestWorkers", 16, 1, 0, 1, 1, 4, 10, HASH,
      PFB_MODE_REUSEPORT, PFB_WHY_CAPPED, 4, 4, 10, 1, 0, 0 },
    /* An explicit count is kept, and flagged when it starves buckets. */
    { "ListenBuckets 16 with Debian's pool, hash: kept, starved", 2, 0, 16,
      1, 1, 150, 5, HASH, PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 16, 16, 5, 0,
      1, 0 },
    { "ListenBuckets 16 with Debian's pool, idle: kept, warm", 2, 0, 16, 1,
      1, 150, 5, IDLE, PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 16, 16, 0, 0,
      0, 0 },
    { "ListenBuckets 4 over two Listens with MinSpareServers 5: starved", 2,
      0, 4, 1, 2, 150, 5, HASH, PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 4, 8,
      5, 0, 1, 0 },
    { "ListenBuckets within MinSpareServers: warm", 2, 0, 5, 1, 1, 150, 5,
      HASH, PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 5, 5, 5, 0, 0, 0 },
    { "explicit cut by MaxRequestWorkers to within the pool: warm", 2, 0, 16,
      1, 1, 4, 5, HASH, PFB_MODE_REUSEPORT, PFB_WHY_CAPPED, 4, 4, 5, 0, 0, 0 },
    { "no SO_REUSEPORT: nothing to keep warm", 2, 0, 16, 0, 1, 150, 5, HASH,
      PFB_MODE_PER_LISTEN, PFB_WHY_NO_REUSEPORT, 1, 1, 0, 0, 0, 0 },
    /* The ratio with idle steering where idle cannot run: not hash's
     * per-bucket pools, but httpd's one bucket. */
    { "ratio, idle refused: one bucket", 16, 1, 0, 1, 1, 150, 5, IDLE,
      PFB_MODE_SINGLE, PFB_WHY_NO_IDLE_STEERING, 1, 1, 0, 0, 0, 1 },
    { "ratio, idle refused, four Listens: one bucket", 2, 1, 0, 1, 4, 150, 5,
      IDLE, PFB_MODE_SINGLE, PFB_WHY_NO_IDLE_STEERING, 1, 1, 0, 0, 0, 1 },
    { "ratio, idle refused, no SO_REUSEPORT either: one per Listen", 2, 1,
      0, 0, 2, 150, 5, IDLE, PFB_MODE_PER_LISTEN, PFB_WHY_NO_REUSEPORT, 1, 2,
      0, 0, 0, 1 },
    { "ListenBuckets 8, idle refused: kept, under hash, starved", 2, 0, 8,
      1, 1, 150, 5, IDLE, PFB_MODE_REUSEPORT, PFB_WHY_EXPLICIT, 8, 8, 5, 0,
      1, 1 },
    { "local steering shares the pool too: no cap", 16, 1, 0, 1, 1, 150, 5,
      LOCAL, PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 16, 16, 0, 0, 0, 0 },
    { "ratio, local refused: one bucket", 16, 1, 0, 1, 2, 150, 5, LOCAL,
      PFB_MODE_SINGLE, PFB_WHY_NO_IDLE_STEERING, 1, 1, 0, 0, 0, 1 },
    { "ratio, cpu refused: hash's cap", 16, 1, 0, 1, 1, 150, 5, CPU,
      PFB_MODE_REUSEPORT, PFB_WHY_RATIO, 5, 5, 5, 1, 0, 1 },
};

START_TEST(plan_buckets_follows_table)
{
    const plan_row_t *row = &plan_rows[_i];
    pf_plan_in_t in;
    pf_bucket_plan_t plan;
    pf_warm_t warm;

    memset(&in, 0, sizeof(in));
    in.usable_cpus = row->cpus;
    in.ratio = row->ratio;
    in.explicit_buckets = row->explicit_buckets;
    in.reuseport_ok = row->reuseport;
    in.num_listeners = row->listeners;
    in.max_workers = row->max_workers;
    in.min_spare_servers = row->min_spare;
    in.steering = row->steering;
    in.steering_usable = !row->steering_refused;
    pf_plan_buckets(&in, &plan, &warm);
    ck_assert_msg(plan.mode == row->mode, "%s: mode %d", row->label,
                  plan.mode);
    ck_assert_msg(plan.reason == row->reason, "%s: reason %d", row->label,
                  plan.reason);
    ck_assert_msg(plan.buckets_per_listen == row->per_listen,
                  "%s: per listen %d", row->label, plan.buckets_per_listen);
    ck_assert_msg(plan.num_buckets == row->total, "%s: total %d", row->label,
                  plan.num_buckets);
    ck_assert_msg(plan.num_buckets <= row->max_workers || row->max_workers < 1,
                  "%s: more buckets than MaxRequestWorkers", row->label);
    ck_assert_msg(warm.limit == row->warm_limit, "%s: warm limit %d",
                  row->label, warm.limit);
    ck_assert_msg(warm.capped == row->capped, "%s: capped %d", row->label,
                  warm.capped);
    ck_assert_msg(warm.starved == row->starved, "%s: starved %d", row->label,
                  warm.starved);
}
END_TEST

/* A property over the ratio's inputs: under hash or cpu steering the count
 * never exceeds the spare pool, unless the Listens alone do; and it never
 * drops below one bucket per Listen. */
START_TEST(ratio_never_outgrows_the_spare_pool)
{
    int cpus, min_spare, listeners, steer;

    for (cpus = 1; cpus <= 80; cpus += 3) {
        for (min_spare = 0; min_spare <= 40; min_spare += 3) {
            for (listeners = 1; listeners <= 5; listeners++) {
                for (steer = PFB_STEER_HASH; steer <= PFB_STEER_LOCAL;
                     steer++) {
                    pf_plan_in_t in;
                    pf_bucket_plan_t plan;
                    pf_warm_t warm;
                    int floor = min_spare > 1 ? min_spare : 1;

                    memset(&in, 0, sizeof(in));
                    in.usable_cpus = cpus;
                    in.ratio = 1;
                    in.explicit_buckets = UNSET;
                    in.reuseport_ok = 1;
                    in.num_listeners = listeners;
                    in.max_workers = 150;
                    in.min_spare_servers = min_spare;
                    in.steering = steer;
                    in.steering_usable = 1;
                    pf_plan_buckets(&in, &plan, &warm);
                    ck_assert_int_ge(plan.buckets_per_listen, 1);
                    /* Never a bucket per Listen from the ratio. */
                    ck_assert(plan.mode != PFB_MODE_REUSEPORT
                              || plan.buckets_per_listen >= 2);
                    ck_assert_int_eq(warm.starved, 0);
                    if (pf_steering_shares_pool(steer)) {
                        ck_assert_int_eq(plan.buckets_per_listen,
                                         cpus * listeners <= 150
                                             ? cpus
                                             : 150 / listeners);
                        continue;
                    }
                    if (listeners <= floor) {
                        ck_assert_int_le(plan.num_buckets, floor);
                    }
                    ck_assert_int_eq(warm.capped,
                                     cpus * listeners > floor);
                }
            }
        }
    }
}
END_TEST

START_TEST(warm_limit_follows_the_steering)
{
    ck_assert_int_eq(pf_warm_bucket_limit(5, PFB_STEER_HASH), 5);
    ck_assert_int_eq(pf_warm_bucket_limit(5, PFB_STEER_CPU), 5);
    ck_assert_int_eq(pf_warm_bucket_limit(5, PFB_STEER_IDLE), 0);
    ck_assert_int_eq(pf_warm_bucket_limit(5, PFB_STEER_LOCAL), 0);
    ck_assert(pf_steering_shares_pool(PFB_STEER_IDLE));
    ck_assert(pf_steering_shares_pool(PFB_STEER_LOCAL));
    ck_assert(!pf_steering_shares_pool(PFB_STEER_HASH));
    ck_assert(!pf_steering_shares_pool(PFB_STEER_CPU));
    ck_assert_int_eq(pf_warm_bucket_limit(0, PFB_STEER_HASH), 1);
    ck_assert_int_eq(pf_warm_bucket_limit(200000, PFB_STEER_HASH), 200000);
}
END_TEST

START_TEST(shares_add_up_to_the_total)
{
    int totals[] = { 0, 1, 5, 10, 64, 999 };
    int counts[] = { 1, 2, 3, 4, 7, 64, 1000 };
    unsigned t, c;

    for (t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
        for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            int b, sum = 0, lo = 1 << 30, hi = 0;

            for (b = 0; b < counts[c]; b++) {
                int share = pf_share(totals[t], counts[c], b);

                sum += share;
                lo = share < lo ? share : lo;
                hi = share > hi ? share : hi;
            }
            ck_assert_int_eq(sum, totals[t]);
            ck_assert_int_le(hi - lo, 1);
        }
    }
}
END_TEST

START_TEST(spare_shares_keep_one_idle_per_bucket)
{
    int b;

    /* MinSpareServers 5 over 4 buckets: 2, 1, 1, 1. */
    ck_assert_int_eq(pf_bucket_min_spare(5, 4, 0), 2);
    ck_assert_int_eq(pf_bucket_min_spare(5, 4, 3), 1);
    /* MaxSpareServers 10 over 4 buckets: 3, 3, 2, 2. */
    ck_assert_int_eq(pf_bucket_max_spare(5, 10, 4, 0), 3);
    ck_assert_int_eq(pf_bucket_max_spare(5, 10, 4, 3), 2);
    /* 64 buckets: every bucket keeps one idle child and may hold two. */
    for (b = 0; b < 64; b++) {
        ck_assert_int_eq(pf_bucket_min_spare(5, 64, b), 1);
        ck_assert_int_eq(pf_bucket_max_spare(5, 10, 64, b), 2);
        ck_assert_int_ge(pf_bucket_start(5, 64, b), 1);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Generations                                                         */

#define MAX_ROW 8
/* Room for pf_plan_generation()'s output arrays. */
#define ROOM 32

typedef struct {
    const char *label;
    int how;
    int has_previous;
    pf_bucket_plan_t previous;
    pf_bucket_plan_t wanted;
    const char *listeners[MAX_ROW];     /* new configuration, NULL-ended */
    pf_identity_t old[MAX_ROW];         /* the generation so far */
    int num_old;
    int old_children[MAX_ROW];
    int max_workers, start_servers;
    /* Expected: */
    pf_bucket_plan_t plan;
    int change_deferred;
    const char *bucket_listener[MAX_ROW];
    int bucket_shard[MAX_ROW];
    int from_old[MAX_ROW];
    int target[MAX_ROW];
    int old_survives[MAX_ROW];
} generation_row_t;

#define A "10.0.0.1:80"
#define B "10.0.0.1:443"
#define C "[::1]:8080"

#define REUSE(n, per, why) { PFB_MODE_REUSEPORT, why, per, n }
#define SINGLE(why) { PFB_MODE_SINGLE, why, 1, 1 }

static const generation_row_t generation_rows[] = {
    { "first start: every bucket new",
      PF_START_FIRST, 0, { 0, 0, 0, 0 }, REUSE(4, 2, PFB_WHY_EXPLICIT),
      { A, B }, { { NULL, 0 } }, 0, { 0 }, 16, 8,
      REUSE(4, 2, PFB_WHY_EXPLICIT), 0,
      { A, A, B, B }, { 0, 1, 0, 1 }, { -1, -1, -1, -1 }, { 2, 2, 2, 2 },
      { 0 } },
    { "graceful, same configuration: every bucket continues",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 2, PFB_WHY_EXPLICIT),
      { A, B }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 1, 5, 0, 2 }, 16, 8,
      REUSE(4, 2, PFB_WHY_EXPLICIT), 0,
      { A, A, B, B }, { 0, 1, 0, 1 }, { 0, 1, 2, 3 }, { 2, 5, 2, 2 },
      { 1, 1, 1, 1 } },
    { "graceful, a Listen added in front: the others keep theirs",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(6, 2, PFB_WHY_EXPLICIT),
      { C, A, B }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 3, 3, 3, 3 }, 16, 6,
      REUSE(6, 2, PFB_WHY_EXPLICIT), 0,
      { C, C, A, A, B, B }, { 0, 1, 0, 1, 0, 1 },
      { -1, -1, 0, 1, 2, 3 }, { 1, 1, 3, 3, 3, 3 }, { 1, 1, 1, 1 } },
    { "graceful, a Listen removed: its sockets close",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(2, 2, PFB_WHY_EXPLICIT),
      { B }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 2, 2, 2, 2 }, 16, 4,
      REUSE(2, 2, PFB_WHY_EXPLICIT), 0,
      { B, B }, { 0, 1 }, { 2, 3 }, { 2, 2 }, { 0, 0, 1, 1 } },
    { "graceful, Listens reordered: identities, not positions",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 2, PFB_WHY_EXPLICIT),
      { B, A }, { { A, 0 }, { A, 1 }, { B, 0 }, { B, 1 } }, 4,
      { 1, 2, 3, 4 }, 16, 4,
      REUSE(4, 2, PFB_WHY_EXPLICIT), 0,
      { B, B, A, A }, { 0, 1, 0, 1 }, { 2, 3, 0, 1 }, { 3, 4, 1, 2 },
      { 1, 1, 1, 1 } },
    { "graceful keeps the count in force; the new one waits",
      PF_RESTART_GRACEFUL, 1, REUSE(2, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 4, PFB_WHY_EXPLICIT),
      { A }, { { A, 0 }, { A, 1 } }, 2, { 1, 1 }, 16, 2,
      REUSE(2, 2, PFB_WHY_KEPT), 1,
      { A, A }, { 0, 1 }, { 0, 1 }, { 1, 1 }, { 1, 1 } },
    { "graceful keeps single mode although buckets are asked for",
      PF_RESTART_GRACEFUL, 1, SINGLE(PFB_WHY_OFF),
      REUSE(2, 2, PFB_WHY_RATIO),
      { A, B }, { { NULL, 0 } }, 1, { 3 }, 16, 5,
      SINGLE(PFB_WHY_KEPT), 1,
      { NULL }, { 0 }, { 0 }, { 5 }, { 1 } },
    { "full restart takes the new count, keeping shards that remain",
      PF_RESTART_FULL, 1, REUSE(2, 2, PFB_WHY_EXPLICIT),
      REUSE(4, 4, PFB_WHY_EXPLICIT),
      { A }, { { A, 0 }, { A, 1 } }, 2, { 0, 0 }, 16, 4,
      REUSE(4, 4, PFB_WHY_EXPLICIT), 0,
      { A, A, A, A }, { 0, 1, 2, 3 }, { 0, 1, -1, -1 }, { 1, 1, 1, 1 },
      { 1, 1 } },
    { "full restart from buckets to single",
      PF_RESTART_FULL, 1, REUSE(2, 2, PFB_WHY_EXPLICIT), SINGLE(PFB_WHY_OFF),
      { A }, { { A, 0 }, { A, 1 } }, 2, { 0, 0 }, 16, 5,
      SINGLE(PFB_WHY_OFF), 0,
      { NULL }, { 0 }, { -1 }, { 5 }, { 0, 0 } },
    { "graceful, Listens added past MaxRequestWorkers: capped",
      PF_RESTART_GRACEFUL, 1, REUSE(4, 4, PFB_WHY_EXPLICIT),
      REUSE(8, 4, PFB_WHY_EXPLICIT),
      { A, B, C }, { { A, 0 }, { A, 1 }, { A, 2 }, { A, 3 } }, 4,
      { 1, 1, 1, 1 }, 6, 3,
      REUSE(6, 2, PFB_WHY_CAPPED), 0,
      { A, A, B, B, C, C }, { 0, 1, 0, 1, 0, 1 },
      { 0, 1, -1, -1, -1, -1 }, { 1, 1, 1, 1, 1, 1 }, { 1, 1, 0, 0 } },
};

static int count_listeners(const generation_row_t *row)
{
    int n = 0;

    while (n < MAX_ROW && row->listeners[n]) {
        n++;
    }
    return n;
}

static int same_text(const char *a, const char *b)
{
    return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

START_TEST(plan_generation_follows_table)
{
    const generation_row_t *row = &generation_rows[_i];
    pf_generation_in_t in;
    pf_generation_out_t out;
    pf_identity_t bucket[ROOM];
    int listener[ROOM], from_old[ROOM], target[ROOM];
    int old_survives[ROOM];
    int nb, b;

    memset(&in, 0, sizeof(in));
    in.how = row->how;
    in.wanted = row->wanted;
    in.previous = row->has_previous ? &row->previous : NULL;
    in.num_listeners = count_listeners(row);
    in.listeners = row->listeners;
    in.max_workers = row->max_workers;
    in.start_servers = row->start_servers;
    in.num_old = row->num_old;
    in.old = row->old;
    in.old_children = row->old_children;
    ck_assert_int_le(pf_generation_room(&in), ROOM);
    out.bucket = bucket;
    out.listener = listener;
    out.from_old = from_old;
    out.target = target;
    out.old_survives = old_survives;

    nb = pf_plan_generation(&in, &out);
    ck_assert_msg(nb == row->plan.num_buckets, "%s: %d buckets", row->label,
                  nb);
    ck_assert_msg(out.plan.mode == row->plan.mode
                      && out.plan.buckets_per_listen
                             == row->plan.buckets_per_listen
                      && out.plan.num_buckets == row->plan.num_buckets,
                  "%s: plan %d/%d/%d", row->label, out.plan.mode,
                  out.plan.buckets_per_listen, out.plan.num_buckets);
    ck_assert_msg(out.plan.reason == row->plan.reason, "%s: reason %s",
                  row->label, pfb_reason_name(out.plan.reason));
    ck_assert_msg(out.change_deferred == row->change_deferred,
                  "%s: change deferred %d", row->label, out.change_deferred);
    for (b = 0; b < nb; b++) {
        ck_assert_msg(same_text(bucket[b].listener, row->bucket_listener[b])
                          && bucket[b].shard == row->bucket_shard[b],
                      "%s: bucket %d is %s#%d", row->label, b,
                      bucket[b].listener ? bucket[b].listener : "(all)",
                      bucket[b].shard);
        ck_assert_msg(from_old[b] == row->from_old[b],
                      "%s: bucket %d continues %d", row->label, b,
                      from_old[b]);
        ck_assert_msg(target[b] == row->target[b], "%s: bucket %d target %d",
                      row->label, b, target[b]);
    }
    for (b = 0; b < row->num_old; b++) {
        ck_assert_msg(old_survives[b] == row->old_survives[b],
                      "%s: old bucket %d survives %d", row->label, b,
                      old_survives[b]);
    }
}
END_TEST

START_TEST(plan_generation_refuses_bad_input)
{
    pf_generation_in_t in;
    pf_generation_out_t out;
    pf_identity_t bucket[4];
    int ints[4][4];
    const char *none[] = { NULL };

    memset(&in, 0, sizeof(in));
    out.bucket = bucket;
    out.listener = ints[0];
    out.from_old = ints[1];
    out.target = ints[2];
    out.old_survives = ints[3];
    in.wanted.mode = PFB_MODE_SINGLE;
    in.wanted.buckets_per_listen = in.wanted.num_buckets = 1;
    in.listeners = none;
    in.num_listeners = 0;
    ck_assert_int_eq(pf_plan_generation(&in, &out), -1);
    in.num_listeners = 1;
    in.num_old = 2;                     /* old buckets, but no identities */
    ck_assert_int_eq(pf_plan_generation(&in, &out), -1);
}
END_TEST

START_TEST(per_listen_fallback_is_one_bucket_per_listen)
{
    pf_bucket_plan_t plan;

    pf_plan_per_listen_fallback(3, &plan);
    ck_assert_int_eq(plan.mode, PFB_MODE_PER_LISTEN);
    ck_assert_int_eq(plan.reason, PFB_WHY_DUP_FAILED);
    ck_assert_int_eq(plan.buckets_per_listen, 1);
    ck_assert_int_eq(plan.num_buckets, 3);
}
END_TEST

START_TEST(old_generation_counts_as_idle_children)
{
    pf_bucket_state_t state[3] = { { 2, 1, 0 }, { 0, 0, 4 }, { 1, 0, 0 } };
    int old[3] = { 3, 2, 0 };

    pf_count_old_generation(state, old, 3);
    ck_assert_int_eq(state[0].children, 5);
    ck_assert_int_eq(state[0].idle, 4);
    ck_assert_int_eq(state[1].children, 2);
    ck_assert_int_eq(state[1].idle, 2);
    ck_assert_int_eq(state[1].queued, 4);
    ck_assert_int_eq(state[2].children, 1);
    ck_assert_int_eq(state[2].idle, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Maintenance                                                         */

#define MAX_TEST_BUCKETS 1000

static pf_bucket_state_t state[MAX_TEST_BUCKETS];
static pf_bucket_action_t action[MAX_TEST_BUCKETS];
static pf_rank_t scratch[MAX_TEST_BUCKETS];
static int rate[MAX_TEST_BUCKETS];
static pf_decision_summary_t summary;

static pf_limits_t limits_under(int nb, int min, int max, int workers,
                                int steering)
{
    pf_limits_t lim;

    pf_limits_init(&lim, nb, min, max, workers, steering);
    return lim;
}

static pf_limits_t limits(int nb, int min, int max, int workers)
{
    return limits_under(nb, min, max, workers, PFB_STEER_HASH);
}

/* The pfb_steer_e a case names after its limits ("idle"), or hash. */
static int case_steering(const char *text)
{
    while (*text == ' ') {
        text++;
    }
    if (strncmp(text, "idle", 4) == 0) {
        return PFB_STEER_IDLE;
    }
    if (strncmp(text, "local", 5) == 0) {
        return PFB_STEER_LOCAL;
    }
    if (strncmp(text, "cpu", 3) == 0) {
        return PFB_STEER_CPU;
    }
    return PFB_STEER_HASH;
}

static void reset(int nb)
{
    int b;

    memset(state, 0, sizeof(state));
    memset(action, 0, sizeof(action));
    for (b = 0; b < nb; b++) {
        rate[b] = 1;
    }
}

static void set_bucket(int b, int children, int idle, int queued)
{
    state[b].children = children;
    state[b].idle = idle;
    state[b].queued = queued;
}

static int occupied(int nb)
{
    int b, sum = 0;

    for (b = 0; b < nb; b++) {
        sum += state[b].children;
    }
    return sum;
}

START_TEST(steady_state_does_nothing)
{
    pf_limits_t lim = limits(4, 5, 10, 150);

    reset(4);
    /* min shares 2,1,1,1; max shares 3,3,2,2 */
    set_bucket(0, 3, 2, 0);
    set_bucket(1, 2, 1, 0);
    set_bucket(2, 4, 2, 0);
    set_bucket(3, 1, 1, 0);
    pf_decide_maintenance(&lim, state, occupied(4), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(summary.spawned, 0);
    ck_assert_int_eq(summary.killed, 0);
    ck_assert_int_eq(rate[0], 1);
}
END_TEST

START_TEST(deficit_spawns_with_doubling_ramp)
{
    pf_limits_t lim = limits(1, 20, 40, 150);
    int cycle, expected = 1;

    reset(1);
    set_bucket(0, 1, 0, 0);
    for (cycle = 0; cycle < 4; cycle++) {
        pf_decide_maintenance(&lim, state, occupied(1), rate, action,
                              scratch, &summary);
        ck_assert_int_eq(action[0].spawn, expected);
        /* Pretend they are all still busy: the deficit stays. */
        state[0].children += action[0].spawn;
        expected *= 2;
    }
    ck_assert_int_eq(rate[0], 16);
}
END_TEST

START_TEST(ramp_stops_at_max_spawn_rate)
{
    pf_limits_t lim = limits(1, 1000, 2000, 100000);
    int cycle;

    reset(1);
    set_bucket(0, 1, 0, 0);
    for (cycle = 0; cycle < 12; cycle++) {
        pf_decide_maintenance(&lim, state, occupied(1), rate, action,
                              scratch, &summary);
        ck_assert_int_le(action[0].spawn, PF_MAX_SPAWN_RATE);
    }
    ck_assert_int_eq(rate[0], PF_MAX_SPAWN_RATE);
    ck_assert_int_eq(action[0].spawn, PF_MAX_SPAWN_RATE);
}
END_TEST

START_TEST(ramp_falls_back_when_satisfied)
{
    pf_limits_t lim = limits(1, 2, 10, 150);

    reset(1);
    rate[0] = 16;
    set_bucket(0, 5, 3, 0);
    pf_decide_maintenance(&lim, state, occupied(1), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(rate[0], 1);
}
END_TEST

START_TEST(surplus_idle_retires_one_per_cycle)
{
    pf_limits_t lim = limits(2, 2, 4, 150);

    reset(2);
    set_bucket(0, 10, 9, 0);    /* max share 2: one goes */
    set_bucket(1, 2, 2, 0);     /* within its max share of 2 ... */
    pf_decide_maintenance(&lim, state, occupied(2), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(action[0].kill, 1);
    /* ... but the server holds 10 idle children over MaxSpareServers 4,
     * so the server-wide trim takes one down to its minimum of 1. */
    ck_assert_int_eq(action[1].kill, 1);
    ck_assert_int_eq(summary.killed, 2);
}
END_TEST

START_TEST(stranded_bucket_gets_a_child_first)
{
    /* One free slot: the bucket with no child wins over a deficit. */
    pf_limits_t lim = limits(3, 6, 12, 10);

    reset(3);
    rate[0] = 8;
    set_bucket(0, 5, 0, 0);
    set_bucket(1, 4, 0, 0);
    set_bucket(2, 0, 0, 0);
    pf_decide_maintenance(&lim, state, 9, rate, action, scratch, &summary);
    ck_assert_int_eq(action[2].spawn, 1);
    ck_assert_int_eq(action[0].spawn + action[1].spawn, 0);
    ck_assert_int_eq(summary.at_max_workers, 1);
}
END_TEST

START_TEST(queued_bucket_goes_before_idle_deficit)
{
    pf_limits_t lim = limits(2, 4, 8, 12);

    reset(2);
    set_bucket(0, 5, 0, 0);     /* deficit 2, nothing queued */
    set_bucket(1, 5, 0, 7);     /* deficit 2 and 7 queued */
    rate[0] = rate[1] = 8;
    pf_decide_maintenance(&lim, state, 10, rate, action, scratch, &summary);
    ck_assert_int_eq(action[1].spawn, 2);
    ck_assert_int_eq(action[0].spawn, 0);
}
END_TEST

START_TEST(queue_with_no_idle_child_drives_spawning)
{
    pf_limits_t lim = limits(1, 1, 2, 150);

    reset(1);
    rate[0] = 4;
    set_bucket(0, 3, 0, 10);    /* every child busy, 10 connections wait */
    pf_decide_maintenance(&lim, state, occupied(1), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(action[0].spawn, 4);
    ck_assert_int_eq(action[0].kill, 0);
    ck_assert_int_eq(rate[0], 8);
}
END_TEST

START_TEST(momentary_queue_beside_idle_children_is_not_load)
{
    /* Regression: reacting to a queue seen at one instant while children
     * were idle grew the pool to MaxRequestWorkers under light load. */
    pf_limits_t lim = limits(1, 1, 4, 150);

    reset(1);
    set_bucket(0, 3, 2, 5);
    pf_decide_maintenance(&lim, state, occupied(1), rate, action, scratch,
                          &summary);
    ck_assert_int_eq(action[0].spawn, 0);
    ck_assert_int_eq(rate[0], 1);
}
END_TEST

START_TEST(spawns_never_exceed_max_request_workers)
{
    pf_limits_t lim = limits(8, 64, 128, 20);
    int b;

    reset(8);
    for (b = 0; b < 8; b++) {
        set_bucket(b, 2, 0, 3);
        rate[b] = 32;
    }
    pf_decide_maintenance(&lim, state, 16, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.spawned, 4);
    ck_assert_int_eq(summary.at_max_workers, 1);
    pf_decide_maintenance(&lim, state, 25, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.spawned, 0);
}
END_TEST

START_TEST(many_buckets_have_no_builtin_limit)
{
    /* 1000 buckets, none with a child: all of them get one this cycle. */
    pf_limits_t lim = limits(1000, 5, 10, 5000);
    int b;

    reset(1000);
    pf_decide_maintenance(&lim, state, 0, rate, action, scratch, &summary);
    for (b = 0; b < 1000; b++) {
        ck_assert_int_ge(action[b].spawn, 1);
    }
    ck_assert_int_eq(summary.spawned, 1000);
}
END_TEST

START_TEST(at_the_limit_an_idle_child_makes_room_for_a_starved_bucket)
{
    /* 8 workers, all alive (a share of 2 each): bucket 0 has one child,
     * busy, and 3 connections queued; bucket 3 holds 3 children, two of
     * them idle, and nothing queued. */
    pf_limits_t lim = limits(4, 1, 8, 8);

    reset(4);
    set_bucket(0, 1, 0, 3);
    set_bucket(1, 2, 0, 0);
    set_bucket(2, 2, 1, 0);
    set_bucket(3, 3, 2, 0);
    pf_decide_maintenance(&lim, state, 8, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.at_max_workers, 1);
    ck_assert_int_eq(summary.rebalanced, 1);
    ck_assert_int_eq(action[3].kill, 1);
    ck_assert_int_eq(action[0].kill + action[1].kill + action[2].kill, 0);
    ck_assert_int_eq(summary.spawned, 0);
}
END_TEST

START_TEST(rebalancing_never_takes_a_bucket_last_child)
{
    pf_limits_t lim = limits(3, 1, 8, 4);

    reset(3);
    set_bucket(0, 2, 0, 5);     /* starved */
    set_bucket(1, 1, 1, 0);     /* its only child: not a donor */
    set_bucket(2, 1, 1, 0);
    pf_decide_maintenance(&lim, state, 4, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.rebalanced, 0);
    ck_assert_int_eq(action[1].kill + action[2].kill, 0);
}
END_TEST

START_TEST(no_churn_when_every_bucket_holds_its_share)
{
    /* Evenly hashed load at the cap: a momentary queue in one bucket must
     * not pull children from the others (the scale model showed p99
     * tripling when it did).  MaxSpareServers 16 keeps surplus kills out. */
    pf_limits_t lim = limits(4, 1, 16, 16);

    reset(4);
    set_bucket(0, 4, 0, 2);
    set_bucket(1, 4, 3, 0);
    set_bucket(2, 4, 2, 0);
    set_bucket(3, 4, 1, 0);
    pf_decide_maintenance(&lim, state, 16, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.rebalanced, 0);
    ck_assert_int_eq(action[1].kill + action[2].kill + action[3].kill, 0);
}
END_TEST

START_TEST(no_rebalancing_below_the_limit)
{
    pf_limits_t lim = limits(2, 1, 8, 100);

    reset(2);
    set_bucket(0, 2, 0, 3);
    set_bucket(1, 5, 5, 0);
    pf_decide_maintenance(&lim, state, 7, rate, action, scratch, &summary);
    ck_assert_int_eq(summary.rebalanced, 0);
    ck_assert_int_gt(action[0].spawn, 0);
}
END_TEST

START_TEST(respawn_now_only_for_an_empty_bucket)
{
    ck_assert_int_eq(pf_bucket_needs_respawn_now(0, 0, 3, 10), 1);
    ck_assert_int_eq(pf_bucket_needs_respawn_now(1, 0, 3, 10), 0);
    ck_assert_int_eq(pf_bucket_needs_respawn_now(0, 1, 3, 10), 0);
    ck_assert_int_eq(pf_bucket_needs_respawn_now(0, 0, 10, 10), 0);
}
END_TEST

/* Reads the next whole number from *text; returns -1 when there is none. */
static int next_int(char **text, int *value)
{
    char *end;
    long v = strtol(*text, &end, 10);

    if (end == *text) {
        return -1;
    }
    *value = (int)v;
    *text = end;
    return 0;
}

/* The shared table: the scale model checks the same rows through ctypes,
 * so the model and the MPM cannot come to disagree unnoticed. */
START_TEST(shared_cases_hold)
{
    const char *path = getenv("PFB_MAINTENANCE_CASES");
    char line[1024], *field[7], *p;
    int rows = 0, nb, mn, mx, workers, steering, occ, b, f, want, v;
    FILE *cases;

    cases = fopen(path ? path : "test/unit/maintenance_cases.txt", "r");
    ck_assert_msg(cases != NULL, "test/unit/maintenance_cases.txt missing");
    while (fgets(line, sizeof(line), cases)) {
        if (line[0] == '#' || line[0] == '\n') {
            continue;
        }
        for (f = 0, p = line; f < 7 && p; f++) {
            field[f] = p;
            p = strchr(p, '|');
            if (p) {
                *p++ = '\0';
            }
        }
        ck_assert_msg(f == 7, "malformed case: %s", field[0]);
        p = field[1];
        ck_assert(next_int(&p, &nb) == 0 && next_int(&p, &mn) == 0
                  && next_int(&p, &mx) == 0 && next_int(&p, &workers) == 0);
        steering = case_steering(p);
        ck_assert_int_le(nb, MAX_TEST_BUCKETS);
        p = field[2];
        ck_assert(next_int(&p, &occ) == 0);
        reset(nb);
        p = field[3];
        ck_assert(next_int(&p, &rate[0]) == 0);
        for (b = 0, p = field[4]; b < nb; b++) {
            ck_assert(next_int(&p, &state[b].children) == 0
                      && next_int(&p, &state[b].idle) == 0
                      && next_int(&p, &state[b].queued) == 0);
        }
        {
            pf_limits_t lim = limits_under(nb, mn, mx, workers, steering);

            pf_decide_maintenance(&lim, state, occ, rate, action, scratch,
                                  &summary);
        }
        for (b = 0, p = field[5]; b < nb; b++) {
            ck_assert(next_int(&p, &want) == 0);
            ck_assert_msg(action[b].spawn == want, "%s: bucket %d spawns %d",
                          field[0], b, action[b].spawn);
            ck_assert(next_int(&p, &want) == 0);
            ck_assert_msg(action[b].kill == want, "%s: bucket %d kills %d",
                          field[0], b, action[b].kill);
        }
        p = field[6];
        ck_assert(next_int(&p, &v) == 0);
        ck_assert_msg(rate[0] == v, "%s: ramp %d", field[0], rate[0]);
        rows++;
    }
    fclose(cases);
    ck_assert_int_ge(rows, 10);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Saturating sums                                                     */

START_TEST(sums_of_child_counters_saturate)
{
    static const struct {
        unsigned long long a, b, want;
    } cases[] = {
        { 0, 0, 0 },
        { 1, 2, 3 },
        { ~0ULL, 0, ~0ULL },
        { ~0ULL, 1, ~0ULL },
        { ~0ULL - 1, 1, ~0ULL },
        { ~0ULL - 1, 2, ~0ULL },
        { 1ULL << 63, 1ULL << 63, ~0ULL },
        { (1ULL << 63) - 1, 1ULL << 63, ~0ULL },
        { 0, ~0ULL, ~0ULL },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(pfb_add_saturated(cases[i].a, cases[i].b)
                          == cases[i].want,
                      "case %zu", i);
    }
}
END_TEST

Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *count = tcase_create("Bucket count");
    TCase *share = tcase_create("Shares");
    TCase *restarts = tcase_create("restarts");
    TCase *spawn = tcase_create("Spawn");
    TCase *kill = tcase_create("Kill");
    TCase *limit = tcase_create("Limits");
    TCase *sums = tcase_create("sums");

    tcase_add_loop_test(count, plan_buckets_follows_table, 0,
                        (int)(sizeof(plan_rows) / sizeof(plan_rows[0])));
    tcase_add_test(count, ratio_never_outgrows_the_spare_pool);
    tcase_add_test(count, warm_limit_follows_the_steering);
    tcase_add_test(share, shares_add_up_to_the_total);
    tcase_add_test(share, spare_shares_keep_one_idle_per_bucket);

    tcase_add_loop_test(restarts, plan_generation_follows_table, 0,
                        (int)(sizeof(generation_rows)
                              / sizeof(generation_rows[0])));
    tcase_add_test(restarts, plan_generation_refuses_bad_input);
    tcase_add_test(restarts, per_listen_fallback_is_one_bucket_per_listen);
    tcase_add_test(restarts, old_generation_counts_as_idle_children);

    tcase_add_test(spawn, steady_state_does_nothing);
    tcase_add_test(spawn, deficit_spawns_with_doubling_ramp);
    tcase_add_test(spawn, ramp_stops_at_max_spawn_rate);
    tcase_add_test(spawn, ramp_falls_back_when_satisfied);
    tcase_add_test(spawn, queue_with_no_idle_child_drives_spawning);
    tcase_add_test(spawn, momentary_queue_beside_idle_children_is_not_load);
    tcase_add_test(kill, surplus_idle_retires_one_per_cycle);
    tcase_add_test(limit, stranded_bucket_gets_a_child_first);
    tcase_add_test(limit, queued_bucket_goes_before_idle_deficit);
    tcase_add_test(limit, spawns_never_exceed_max_request_workers);
    tcase_add_test(limit, many_buckets_have_no_builtin_limit);
    tcase_add_test(limit, respawn_now_only_for_an_empty_bucket);
    tcase_add_test(limit,
                   at_the_limit_an_idle_child_makes_room_for_a_starved_bucket);
    tcase_add_test(limit, rebalancing_never_takes_a_bucket_last_child);
    tcase_add_test(limit, no_rebalancing_below_the_limit);
    tcase_add_test(limit, no_churn_when_every_bucket_holds_its_share);
    tcase_add_test(limit, shared_cases_hold);

    tcase_add_test(sums, sums_of_child_counters_saturate);

    tcase_set_timeout(count, 10);
    tcase_set_timeout(share, 10);
    tcase_set_timeout(spawn, 10);
    tcase_set_timeout(kill, 10);
    tcase_set_timeout(limit, 10);
    suite_add_tcase(s, count);
    suite_add_tcase(s, share);
    suite_add_tcase(s, restarts);
    suite_add_tcase(s, spawn);
    suite_add_tcase(s, kill);
    suite_add_tcase(s, limit);
    suite_add_tcase(s, sums);
    return s;
}
