/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * buckets/prefork_plan.c, the bucket set's plan: the bucket count from
 * CPUs, ratio, explicit count and steering, within what the spare pool
 * keeps warm and MaxRequestWorkers; what a start or restart keeps
 * (pf_plan_generation), bucket by identity; the fallback of one bucket per
 * Listen.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/buckets/prefork_plan.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "prefork_buckets.h"

/* ------------------------------------------------------------------ */
/* Bucket count                                                        */

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
    pf_plan_warm_t warm;

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
                    pf_plan_warm_t warm;
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
                    if (pf_maintenance_shared_pool(steer)) {
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
    ck_assert(pf_maintenance_shared_pool(PFB_STEER_IDLE));
    ck_assert(pf_maintenance_shared_pool(PFB_STEER_LOCAL));
    ck_assert(!pf_maintenance_shared_pool(PFB_STEER_HASH));
    ck_assert(!pf_maintenance_shared_pool(PFB_STEER_CPU));
    ck_assert_int_eq(pf_warm_bucket_limit(0, PFB_STEER_HASH), 1);
    ck_assert_int_eq(pf_warm_bucket_limit(200000, PFB_STEER_HASH), 200000);
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
    pf_plan_generation_in_t in;
    pf_plan_generation_out_t out;
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
    ck_assert_int_le(pf_plan_room(&in), ROOM);
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
    pf_plan_generation_in_t in;
    pf_plan_generation_out_t out;
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

Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *count = tcase_create("Bucket count");
    TCase *restarts = tcase_create("restarts");

    tcase_add_loop_test(count, plan_buckets_follows_table, 0,
                        (int)(sizeof(plan_rows) / sizeof(plan_rows[0])));
    tcase_add_test(count, ratio_never_outgrows_the_spare_pool);
    tcase_add_test(count, warm_limit_follows_the_steering);

    tcase_add_loop_test(restarts, plan_generation_follows_table, 0,
                        (int)(sizeof(generation_rows)
                              / sizeof(generation_rows[0])));
    tcase_add_test(restarts, plan_generation_refuses_bad_input);
    tcase_add_test(restarts, per_listen_fallback_is_one_bucket_per_listen);

    tcase_set_timeout(count, 10);
    suite_add_tcase(s, count);
    suite_add_tcase(s, restarts);
    return s;
}
