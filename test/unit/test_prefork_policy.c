/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Bucket count from CPUs, ratio, explicit count, affinity and quota; the
 * cgroup cpu.max parser; how limits are shared among buckets.
 */

#include <string.h>

#include "unit.h"
#include "prefork_unit.h"
#include "prefork_policy.h"
#include "prefork_buckets.h"

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

START_TEST(cpu_max_parses_quota_and_max)
{
    ck_assert_int_eq(pf_parse_cpu_max("max 100000\n"), 0);
    ck_assert_int_eq(pf_parse_cpu_max("200000 100000\n"), 2);
    ck_assert_int_eq(pf_parse_cpu_max("150000 100000"), 2);
    ck_assert_int_eq(pf_parse_cpu_max("50000 100000"), 1);
    ck_assert_int_eq(pf_parse_cpu_max("6400000 100000"), 64);
}
END_TEST

START_TEST(cpu_max_refuses_garbage)
{
    ck_assert_int_eq(pf_parse_cpu_max(NULL), -1);
    ck_assert_int_eq(pf_parse_cpu_max(""), -1);
    ck_assert_int_eq(pf_parse_cpu_max("maximum"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("100000"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("100000 0"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("-5 100000"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("abc 100000"), -1);
}
END_TEST

START_TEST(usable_cpus_honours_affinity_and_quota)
{
    /* A container limited to 2 CPUs on a 64-CPU host gets 2. */
    ck_assert_int_eq(pf_usable_cpus(64, 64, 2), 2);
    ck_assert_int_eq(pf_usable_cpus(64, 8, 0), 8);
    ck_assert_int_eq(pf_usable_cpus(64, 8, 16), 8);
    ck_assert_int_eq(pf_usable_cpus(64, 0, 0), 64);
    ck_assert_int_eq(pf_usable_cpus(0, 0, 0), 1);
    /* A quota larger than the machine does not add CPUs. */
    ck_assert_int_eq(pf_usable_cpus(4, 4, 32), 4);
}
END_TEST

START_TEST(quota_container_gets_quota_buckets)
{
    pf_plan_in_t in;
    pf_bucket_plan_t plan;

    memset(&in, 0, sizeof(in));
    in.usable_cpus = pf_usable_cpus(64, 64, pf_parse_cpu_max("200000 100000"));
    in.ratio = 1;
    in.reuseport_ok = 1;
    in.num_listeners = 1;
    in.max_workers = 256;
    in.min_spare_servers = 5;
    in.steering_usable = 1;
    pf_plan_buckets(&in, &plan, NULL);
    ck_assert_int_eq(plan.num_buckets, 2);
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

Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *count = tcase_create("Bucket count");
    TCase *cpus = tcase_create("Usable CPUs");
    TCase *share = tcase_create("Shares");

    tcase_add_loop_test(count, plan_buckets_follows_table, 0,
                        (int)(sizeof(plan_rows) / sizeof(plan_rows[0])));
    tcase_add_test(count, quota_container_gets_quota_buckets);
    tcase_add_test(count, ratio_never_outgrows_the_spare_pool);
    tcase_add_test(count, warm_limit_follows_the_steering);
    tcase_add_test(cpus, cpu_max_parses_quota_and_max);
    tcase_add_test(cpus, cpu_max_refuses_garbage);
    tcase_add_test(cpus, usable_cpus_honours_affinity_and_quota);
    tcase_add_test(share, shares_add_up_to_the_total);
    tcase_add_test(share, spare_shares_keep_one_idle_per_bucket);
    tcase_set_timeout(count, 10);
    tcase_set_timeout(cpus, 10);
    tcase_set_timeout(share, 10);
    suite_add_tcase(s, count);
    suite_add_tcase(s, cpus);
    suite_add_tcase(s, share);
    return s;
}
