/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * ListenBucketSteering's rules (steering/prefork_steering_rules.h and .c):
 * the very functions the kernel programs are compiled from, run here as
 * ordinary C.  The CPU-to-bucket layout and the cpu program's table, the
 * hash program's choice, the idle program's choice (a table of cases the
 * scale model checks too, and properties over random counts, hostile ones
 * included), its bookkeeping against a simulated pool, the local
 * program's choice, and the parent's drift correction.  The kernel itself
 * loads and runs the programs in test_prefork_steering_kernel.c.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/steering/prefork_steering_rules.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ap_config.h"

#include "unit.h"
#include "steer_pick.h"
#include "prefork_buckets.h"

/* ------------------------------------------------------------------ */
/* Layout                                                              */

typedef struct {
    const char *label;
    int cpus[8];
    int num_cpus;
    int per_listen;
    int num_runs;
    pf_cpu_run_t runs[8];
} runs_row_t;

static const runs_row_t runs_rows[] = {
    { "a bucket per CPU", { 0, 1 }, 2, 2, 2, { { 0, 0, 1 }, { 1, 1, 1 } } },
    { "two CPUs per bucket", { 0, 1, 2, 3 }, 4, 2, 2,
      { { 0, 0, 1 }, { 2, 1, 1 } } },
    { "two buckets per CPU", { 0, 1 }, 2, 4, 2, { { 0, 0, 2 }, { 1, 2, 2 } } },
    { "holes in the mask", { 2, 3, 5, 7 }, 4, 2, 2,
      { { 2, 0, 1 }, { 5, 1, 1 } } },
    { "uneven: 3 CPUs, 2 buckets", { 0, 1, 2 }, 3, 2, 2,
      { { 0, 0, 1 }, { 2, 1, 1 } } },
    { "uneven: 2 CPUs, 3 buckets", { 0, 1 }, 2, 3, 2,
      { { 0, 0, 1 }, { 1, 1, 2 } } },
    { "one bucket", { 0, 1, 2, 3 }, 4, 1, 1, { { 0, 0, 1 } } },
    { "one CPU, four buckets", { 5 }, 1, 4, 1, { { 5, 0, 4 } } },
};

START_TEST(test_cpu_runs_table)
{
    const runs_row_t *row = &runs_rows[_i];
    pf_cpu_run_t runs[8];
    int n, r;

    n = pf_steer_cpu_runs(row->cpus, row->num_cpus, row->per_listen, runs);
    ck_assert_msg(n == row->num_runs, "%s: %d runs, expected %d", row->label,
                  n, row->num_runs);
    for (r = 0; r < n; r++) {
        ck_assert_msg(runs[r].first_cpu == row->runs[r].first_cpu
                          && runs[r].first_bucket == row->runs[r].first_bucket
                          && runs[r].span == row->runs[r].span,
                      "%s: run %d is (%d, %d, %d), expected (%d, %d, %d)",
                      row->label, r, runs[r].first_cpu, runs[r].first_bucket,
                      runs[r].span, row->runs[r].first_cpu,
                      row->runs[r].first_bucket, row->runs[r].span);
    }
}
END_TEST

START_TEST(test_cpu_runs_reject_bad_input)
{
    int unsorted[] = { 3, 1 };
    int dup[] = { 1, 1 };
    int negative[] = { -1 };
    int ok[] = { 0, 1 };
    pf_cpu_run_t runs[4];
    pf_steer_cpu_entry_t table[4];
    int out[4];

    ck_assert_int_eq(pf_steer_cpu_runs(unsorted, 2, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(dup, 2, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(negative, 1, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(ok, 0, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(ok, 2, 0, runs), -1);
    ck_assert_int_eq(pf_steer_shard_cpus(ok, 2, 2, 2, out), -1);
    ck_assert_int_eq(pf_steer_shard_cpus(ok, 2, 2, -1, out), -1);
    ck_assert_int_eq(pf_steer_cpu_table(runs, 0, table, 4), -1);
    ck_assert_int_eq(pf_steer_cpu_table(NULL, 1, table, 4), -1);
}
END_TEST

/* Random masks and bucket counts: every shard has CPUs, a mask CPU feeds
 * only shards it is pinned for, and the shares are even. */
START_TEST(test_shard_cpus_cover_everything)
{
    int cpus[128], out[128], owner_count[128];
    int round;

    srand(7);
    for (round = 0; round < 400; round++) {
        int m = 0, cpu, n, k, j, per_listen = 1 + rand() % 40;
        int fewest = 1 << 30, most = 0;

        for (cpu = 0; cpu < 128; cpu++) {
            if (rand() % 3 == 0) {
                cpus[m++] = cpu;
            }
        }
        if (m == 0) {
            cpus[m++] = rand() % 128;
        }
        memset(owner_count, 0, sizeof(owner_count));
        for (k = 0; k < per_listen; k++) {
            n = pf_steer_shard_cpus(cpus, m, per_listen, k, out);
            ck_assert_msg(n >= 1, "shard %d of %d over %d CPUs has no CPU",
                          k, per_listen, m);
            if (n < fewest) {
                fewest = n;
            }
            if (n > most) {
                most = n;
            }
            for (j = 0; j < n; j++) {
                int rank;

                for (rank = 0; rank < m && cpus[rank] != out[j]; rank++) {
                }
                ck_assert_int_lt(rank, m);
                owner_count[rank]++;
            }
        }
        for (j = 0; j < m; j++) {
            /* Each CPU is pinned for as many shards as it feeds. */
            ck_assert_int_ge(owner_count[j], 1);
        }
        if (per_listen <= m) {
            /* CPUs split over shards: sizes differ by at most one. */
            ck_assert_int_le(most - fewest, 1);
        }
        else {
            ck_assert_int_eq(most, 1);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* "cpu"                                                               */

/* The layout's own answer for a connection taken on @a cpu: the run of
 * the highest first CPU at or below it (below every run: the first run),
 * and one of its shards at random. */
static int layout_shard(const pf_cpu_run_t *runs, int num_runs, int cpu,
                        uint32_t random)
{
    int r;

    for (r = num_runs - 1; r > 0 && cpu < runs[r].first_cpu; r--) {
    }
    return runs[r].first_bucket + (int)(random % (uint32_t)runs[r].span);
}

/* The cpu program's rule over its table, for every CPU of random masks
 * (CPUs outside the mask too), against the layout. */
START_TEST(test_cpu_rule_matches_layout)
{
    int cpus[128];
    pf_cpu_run_t runs[128];
    pf_steer_cpu_entry_t table[140];
    int round;

    srand(11);
    for (round = 0; round < 400; round++) {
        int m = 0, cpu, per_listen = 1 + rand() % 300, nruns;

        for (cpu = 0; cpu < 128; cpu++) {
            if (rand() % 2 == 0) {
                cpus[m++] = cpu;
            }
        }
        if (m == 0) {
            cpus[m++] = 3;
        }
        nruns = pf_steer_cpu_runs(cpus, m, per_listen, runs);
        ck_assert_int_ge(nruns, 1);
        ck_assert_int_eq(pf_steer_cpu_table(runs, nruns, table, 140), 0);
        for (cpu = 0; cpu < 140; cpu++) {
            uint32_t rnd = (uint32_t)rand(), hash = (uint32_t)rand();
            pf_u32 got = pf_steer_cpu_choose(&table[cpu], (pf_u32)per_listen,
                                             hash, rnd);

            ck_assert_msg((int)got == layout_shard(runs, nruns, cpu, rnd),
                          "cpu %d: rule %u, layout %d", cpu, got,
                          layout_shard(runs, nruns, cpu, rnd));
            ck_assert_int_lt(got, per_listen);
        }
    }
}
END_TEST

/* A connection taken on a mask CPU goes to a shard whose children are
 * pinned to that CPU: the point of BucketCPUAffinity. */
START_TEST(test_cpu_rule_keeps_connections_local)
{
    int cpus[] = { 0, 1, 4, 5, 6, 9 };
    int m = 6, per_listen, k, j, n, out[8];
    pf_cpu_run_t runs[8];
    pf_steer_cpu_entry_t table[10];
    uint32_t rnd;

    for (per_listen = 1; per_listen <= 13; per_listen++) {
        int nruns = pf_steer_cpu_runs(cpus, m, per_listen, runs);

        ck_assert_int_eq(pf_steer_cpu_table(runs, nruns, table, 10), 0);
        for (j = 0; j < m; j++) {
            for (rnd = 0; rnd < 20; rnd++) {
                int found = 0;

                k = (int)pf_steer_cpu_choose(&table[cpus[j]],
                                             (pf_u32)per_listen, 0, rnd);
                n = pf_steer_shard_cpus(cpus, m, per_listen, k, out);
                while (n-- > 0) {
                    found |= out[n] == cpus[j];
                }
                ck_assert_msg(found, "%d buckets: a connection from CPU %d "
                              "went to shard %d, whose children run "
                              "elsewhere", per_listen, cpus[j], k);
            }
        }
    }
}
END_TEST

/* A CPU the table has no entry for, or an entry that does not fit the
 * Listen, goes by the hash: always a shard of the Listen. */
START_TEST(test_cpu_rule_without_an_entry_goes_by_hash)
{
    pf_steer_cpu_entry_t bad[] = { { 0, 0, 0, 0 }, { 4, 1, 0, 0 },
                                   { 2, 3, 0, 0 }, { 0xffffffffu, 2, 0, 0 },
                                   { 1, 0xffffffffu, 0, 0 } };
    uint32_t hash;
    size_t i;

    for (hash = 0; hash < 0xf0000000u; hash += 0x0fffffffu) {
        ck_assert_uint_eq(pf_steer_cpu_choose(NULL, 4, hash, 7),
                          pf_steer_hash_shard(hash, 4));
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            ck_assert_uint_eq(pf_steer_cpu_choose(&bad[i], 4, hash, 7),
                              pf_steer_hash_shard(hash, 4));
        }
    }
    ck_assert_uint_eq(pf_steer_cpu_choose(NULL, 0, 1, 1), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* "hash"                                                              */

/* The kernel's reciprocal scaling: every shard gets an equal slice of the
 * hash space, in order, as with no program. */
START_TEST(test_hash_shard_is_the_kernels_scaling)
{
    pf_u32 n;

    for (n = 1; n <= 300; n++) {
        pf_u32 k;

        ck_assert_uint_eq(pf_steer_hash_shard(0, n), 0);
        ck_assert_uint_eq(pf_steer_hash_shard(0xffffffffu, n), n - 1);
        for (k = 0; k < n; k++) {
            /* The first hash of slice k. */
            uint64_t first = (((uint64_t)k << 32) + n - 1) / n;

            ck_assert_uint_eq(pf_steer_hash_shard((pf_u32)first, n), k);
            if (first > 0) {
                ck_assert_uint_eq(pf_steer_hash_shard((pf_u32)(first - 1),
                                                      n), k - 1);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* "idle"                                                              */

#define CASES_MAX_BUCKETS 64

typedef struct {
    char label[160];
    int n;
    uint32_t hash, random;
    int64_t idle[CASES_MAX_BUCKETS];
    int shard, moved;
} idle_case_t;

/* Reads one case of test/unit/idle_steering_cases.txt.  @return 1 for a
 * case, 0 for a comment or a blank line */
static int parse_idle_case(char *line, idle_case_t *c)
{
    char *field[5], *p = line, *end;
    int f, b;

    if (line[0] == '#' || line[0] == '\n') {
        return 0;
    }
    for (f = 0; f < 5; f++) {
        field[f] = p;
        p = strchr(p, '|');
        ck_assert_msg(p != NULL || f == 4, "too few fields: %s", line);
        if (p) {
            *p++ = '\0';
        }
    }
    snprintf(c->label, sizeof(c->label), "%s", field[0]);
    c->n = (int)strtol(field[1], &end, 10);
    ck_assert_int_ge(c->n, 2);
    ck_assert_int_le(c->n, CASES_MAX_BUCKETS);
    c->hash = (uint32_t)strtoul(field[2], &end, 0);
    c->random = (uint32_t)strtoul(end, &end, 0);
    for (b = 0, p = field[3]; b < c->n; b++) {
        c->idle[b] = (int64_t)strtoll(p, &end, 10);
        ck_assert_msg(end != p, "%s: %d counts for %d buckets", c->label, b,
                      c->n);
        p = end;
    }
    c->shard = (int)strtol(field[4], &end, 10);
    c->moved = (int)strtol(end, &end, 10);
    return 1;
}

/* The same table the scale model checks through ctypes. */
START_TEST(test_idle_rule_table_of_cases)
{
    char line[2048];
    idle_case_t c;
    int rows = 0, moved, got;
    const char *path = getenv("PFB_IDLE_CASES");
    FILE *cases = fopen(path ? path : "test/unit/idle_steering_cases.txt",
                        "r");

    ck_assert_msg(cases != NULL, "test/unit/idle_steering_cases.txt missing");
    while (fgets(line, sizeof(line), cases)) {
        if (!parse_idle_case(line, &c)) {
            continue;
        }
        got = pf_steer_idle_pick(c.idle, c.n, c.hash, c.random, &moved);
        ck_assert_msg(got == c.shard && moved == c.moved,
                      "%s: bucket %d moved %d, expected %d moved %d", c.label,
                      got, moved, c.shard, c.moved);
        rows++;
    }
    fclose(cases);
    ck_assert_int_ge(rows, 10);
}
END_TEST

/* A Listen's program reads only its own records: with the buckets of the
 * Listen before it all idle, a busy Listen stays busy. */
START_TEST(test_idle_rule_reads_only_its_listen)
{
    pf_steer_bucket_t table[32];
    pf_steer_listen_t listen = { 8, 8, 7, 32 };
    pf_u32 moved, shard, hash;
    int b;

    memset(table, 0, sizeof(table));
    for (b = 0; b < 32; b++) {
        table[b].idle = b < 8 || b >= 16 ? 50 : -1;
    }
    for (hash = 0; hash < 0xf0000000u; hash += 0x0fffffffu) {
        shard = pf_steer_idle_choose(table, &listen, hash, hash * 7u, &moved);
        ck_assert_uint_eq(shard, pf_steer_hash_shard(hash, 8));
        ck_assert_uint_eq(moved, 0);
    }
    /* One idle bucket of its own is found from every hash. */
    table[8 + 5].idle = 1;
    for (hash = 0; hash < 0xf0000000u; hash += 0x0fffffffu) {
        shard = pf_steer_idle_choose(table, &listen, hash, hash * 7u, &moved);
        ck_assert_uint_eq(shard, 5);
    }
}
END_TEST

/* Records missing from the table (a table smaller than the Listen, or a
 * Listen past its end) are never read: the connection stays where the
 * hash put it. */
START_TEST(test_idle_rule_never_reads_past_the_table)
{
    pf_steer_bucket_t table[4];
    pf_steer_listen_t past = { 4, 4, 3, 4 }, short_table = { 0, 8, 7, 4 };
    pf_u32 moved, hash;

    memset(table, 0, sizeof(table));
    table[1].idle = 1;
    for (hash = 0; hash < 0xf0000000u; hash += 0x0fffffffu) {
        ck_assert_uint_eq(pf_steer_idle_choose(table, &past, hash, 3,
                                               &moved),
                          pf_steer_hash_shard(hash, 4));
        ck_assert_uint_eq(moved, 0);
        ck_assert_uint_lt(pf_steer_idle_choose(table, &short_table, hash, 3,
                                               &moved), 8);
    }
    pf_steer_idle_account(table, &past, 1, 0);
    ck_assert_int_eq(table[1].idle, 1);
    ck_assert_uint_eq(table[1].kept + table[1].moved, 0);
}
END_TEST

/* Random counts, hostile extremes among them: the choice is always a
 * bucket of the Listen, never a busy one while a probed bucket is idle,
 * and with an idle bucket at the hash's it stays there. */
START_TEST(test_idle_rule_properties)
{
    static const int64_t extremes[] = { INT64_MIN, INT64_MIN + 1, -1, 0, 1,
                                        INT64_MAX - 1, INT64_MAX };
    int64_t idle[40];
    int round;

    srand(5);
    for (round = 0; round < 20000; round++) {
        int n = 2 + rand() % 38, b, shard, moved, home, any;
        uint32_t hash = (uint32_t)rand() * 2654435761u;
        uint32_t random = (uint32_t)rand() * 40503u;

        for (b = 0; b < n; b++) {
            idle[b] = rand() % 4 == 0
                          ? extremes[rand() % 7]
                          : (int64_t)(rand() % 7) - 4;
        }
        shard = pf_steer_idle_pick(idle, n, hash, random, &moved);
        home = (int)pf_steer_hash_shard(hash, (pf_u32)n);
        ck_assert_int_ge(shard, 0);
        ck_assert_int_lt(shard, n);
        ck_assert_int_eq(moved, shard != home);
        if (idle[home] > 0) {
            ck_assert_int_eq(shard, home);
            continue;
        }
        for (b = 0, any = 0; b < n; b++) {
            any |= idle[b] > 0;
        }
        if (any && n - 1 <= PF_STEER_MAX_PROBES) {
            /* Every other bucket is probed: an idle one is found. */
            ck_assert_msg(idle[shard] > 0, "sent to bucket %d (count %lld) "
                          "with another idle", shard,
                          (long long)idle[shard]);
        }
        if (!any) {
            ck_assert(idle[shard] >= idle[home]);
        }
    }
    ck_assert_int_eq(pf_steer_idle_pick(idle, 1, 0, 0, &round), -1);
    ck_assert_int_eq(pf_steer_idle_probes(1), 0);
    ck_assert_int_eq(pf_steer_idle_probes(4), 3);
    ck_assert_int_eq(pf_steer_idle_probes(200), PF_STEER_MAX_PROBES);
}
END_TEST

/* Many connections through the rule and its bookkeeping against a
 * simulated pool: with children counting themselves in and out, the count
 * always equals waiting children minus queued connections, and no
 * connection goes to a bucket with nobody idle while another has. */
START_TEST(test_idle_bookkeeping_simulation)
{
    pf_steer_bucket_t table[4];
    pf_steer_listen_t listen = { 0, 4, 3, 4 };
    int waiting[4] = { 2, 2, 2, 2 }, queued[4] = { 0 };
    int step, b, any_idle;
    pf_u32 moved;

    memset(table, 0, sizeof(table));
    for (b = 0; b < 4; b++) {
        table[b].idle = waiting[b];
    }
    srand(3);
    for (step = 0; step < 5000; step++) {
        if (rand() % 2) {
            /* A connection arrives. */
            any_idle = 0;
            for (b = 0; b < 4; b++) {
                any_idle |= waiting[b] - queued[b] > 0;
            }
            b = (int)pf_steer_idle_choose(table, &listen,
                                          (uint32_t)rand() * 2654435761u,
                                          (uint32_t)rand() * 40503u, &moved);
            pf_steer_idle_account(table, &listen, (pf_u32)b, moved);
            if (any_idle) {
                ck_assert_msg(waiting[b] - queued[b] > 0, "sent to bucket %d "
                              "with no idle child while another had one", b);
            }
            if (waiting[b] > 0) {
                waiting[b]--;   /* a waiting child takes it at once */
            }
            else {
                queued[b]++;
            }
        }
        else {
            /* A busy child finishes and waits again (or takes a queued
             * connection at once). */
            b = rand() % 4;
            if (queued[b] > 0) {
                queued[b]--;
            }
            else if (waiting[b] < 2) {
                waiting[b]++;
            }
            else {
                continue;
            }
            table[b].idle++;
        }
        for (b = 0; b < 4; b++) {
            ck_assert_int_eq(table[b].idle,
                             pf_steer_idle_truth(waiting[b], queued[b]));
        }
    }
    for (b = 0; b < 4; b++) {
        ck_assert_uint_gt(table[b].kept, 0);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* "local"                                                             */

/* Four shards; the receiving CPU's own is shard 0 (or 3), its node holds
 * shards 0-1 (2-3). */
typedef struct {
    const char *label;
    pf_steer_cpu_entry_t entry;
    int64_t idle[4];
    unsigned allowed;   /* bit k: shard k is a right answer */
    int moved;
} local_row_t;

static const pf_steer_cpu_entry_t NODE0 = { 0, 1, 0, 2 };
static const pf_steer_cpu_entry_t NODE1 = { 3, 1, 2, 2 };

static const local_row_t local_rows[] = {
    { "own bucket idle", NODE0, { 1, 0, 0, 0 }, 1u << 0, 0 },
    { "own bucket idle, others too", NODE0, { 2, 5, 5, 5 }, 1u << 0, 0 },
    { "own busy, same node idle", NODE0, { 0, 1, 0, 0 }, 1u << 1, 1 },
    { "own busy, same node and other node idle", NODE0, { -2, 1, 3, 3 },
      1u << 1, 1 },
    { "own busy, only the other node idle", NODE0, { 0, 0, 0, 1 }, 1u << 3,
      1 },
    { "own busy, the other node's two idle", NODE0, { 0, -1, 1, 1 },
      (1u << 2) | (1u << 3), 1 },
    { "none idle: the CPU's own", NODE0, { 0, 0, 0, 0 }, 1u << 0, 0 },
    { "none idle, queues: the CPU's own", NODE0, { -5, -1, -1, -9 },
      1u << 0, 0 },
    { "node 1: own idle", NODE1, { 1, 1, 1, 1 }, 1u << 3, 0 },
    { "node 1: own busy, same node idle", NODE1, { 1, 1, 1, 0 }, 1u << 2,
      1 },
    { "node 1: only the other node idle", NODE1, { 0, 4, 0, 0 }, 1u << 1,
      1 },
    { "node 1: none idle", NODE1, { 0, 0, 0, -3 }, 1u << 3, 0 },
    { "hostile counts", NODE0, { INT64_MIN, 0, INT64_MAX, 0 }, 1u << 2, 1 },
    { "an entry whose node misses its own shard: no node to prefer",
      { 0, 1, 2, 2 }, { 0, 0, 1, 0 }, 1u << 2, 1 },
};

START_TEST(test_local_rule_table_of_cases)
{
    const local_row_t *row = &local_rows[_i];
    uint32_t random;
    int shard, moved;

    for (random = 0; random < 4000000000u; random += 99999989u) {
        shard = pf_steer_local_pick(row->idle, 4, &row->entry, 0x12345678u,
                                    random, &moved);
        ck_assert_msg(shard >= 0 && (row->allowed >> shard) & 1u,
                      "%s: shard %d (random %u)", row->label, shard, random);
        ck_assert_msg(moved == row->moved, "%s: moved %d", row->label, moved);
    }
}
END_TEST

/* Random Listens of up to 17 shards (every shard probed): home while it
 * has an idle child, else an idle one of its node, else an idle one of
 * another node, else home; never outside the Listen. */
START_TEST(test_local_rule_properties)
{
    int64_t idle[17];
    int round;

    srand(31);
    for (round = 0; round < 20000; round++) {
        int n = 2 + rand() % 16, k, shard, moved, home_idle, node_idle = 0;
        int other_idle = 0, home;
        pf_steer_cpu_entry_t e;

        e.node_first = (pf_u32)(rand() % n);
        e.node_span = 1 + (pf_u32)(rand() % (n - (int)e.node_first));
        e.first_shard = e.node_first + (pf_u32)(rand() % (int)e.node_span);
        e.span = 1;
        home = (int)e.first_shard;
        for (k = 0; k < n; k++) {
            idle[k] = rand() % 3 - 1;
            if (k != home && idle[k] > 0) {
                if ((pf_u32)k >= e.node_first
                    && (pf_u32)k < e.node_first + e.node_span) {
                    node_idle = 1;
                }
                else {
                    other_idle = 1;
                }
            }
        }
        home_idle = idle[home] > 0;
        shard = pf_steer_local_pick(idle, n, &e, (uint32_t)rand(),
                                    (uint32_t)rand(), &moved);
        ck_assert_int_ge(shard, 0);
        ck_assert_int_lt(shard, n);
        if (home_idle || (!node_idle && !other_idle)) {
            ck_assert_int_eq(shard, home);
            ck_assert_int_eq(moved, 0);
        }
        else {
            ck_assert(idle[shard] > 0);
            ck_assert_int_eq(moved, 1);
            ck_assert_int_eq((pf_u32)shard >= e.node_first
                                 && (pf_u32)shard
                                        < e.node_first + e.node_span,
                             node_idle);
        }
    }
}
END_TEST

/* No entry for the CPU, or one that does not fit: the hash picks home. */
START_TEST(test_local_rule_without_an_entry)
{
    int64_t idle[4] = { 1, 1, 1, 1 };
    pf_steer_cpu_entry_t bad = { 9, 1, 0, 4 };
    int moved;
    uint32_t hash;

    for (hash = 0; hash < 0xf0000000u; hash += 0x0fffffffu) {
        ck_assert_int_eq(pf_steer_local_pick(idle, 4, NULL, hash, 5, &moved),
                         (int)pf_steer_hash_shard(hash, 4));
        ck_assert_int_eq(pf_steer_local_pick(idle, 4, &bad, hash, 5, &moved),
                         (int)pf_steer_hash_shard(hash, 4));
        ck_assert_int_eq(moved, 0);
    }
    ck_assert_int_eq(pf_steer_local_pick(idle, 1, NULL, 0, 0, &moved), -1);
    ck_assert_int_eq(pf_steer_local_pick(NULL, 4, NULL, 0, 0, &moved), -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The parent's arithmetic on what children write                      */

START_TEST(test_saturating_arithmetic)
{
    ck_assert(pf_steer_sat_sub(1, 2) == -1);
    ck_assert(pf_steer_sat_sub(0, INT64_MIN) == INT64_MAX);
    ck_assert(pf_steer_sat_sub(-2, INT64_MAX) == INT64_MIN);
    ck_assert(pf_steer_sat_sub(INT64_MIN, 1) == INT64_MIN);
    ck_assert(pf_steer_sat_sub(INT64_MAX, -1) == INT64_MAX);
    ck_assert(pf_steer_sat_sub(-1, INT64_MIN) == INT64_MAX);
    ck_assert(pf_steer_idle_truth(3, 5) == -2);
}
END_TEST

START_TEST(test_idle_correction)
{
    int64_t pending = 0;

    /* A single difference is not acted on. */
    ck_assert(pf_steer_idle_correction(3, 2, &pending) == 0);
    ck_assert(pending == -1);
    /* Seen again: corrected. */
    ck_assert(pf_steer_idle_correction(3, 2, &pending) == -1);
    ck_assert(pending == 0);
    /* Signs differ: a race, no correction. */
    ck_assert(pf_steer_idle_correction(0, 2, &pending) == 0);
    ck_assert(pf_steer_idle_correction(2, 0, &pending) == 0);
    ck_assert(pending == -2);
    /* Same sign, different sizes: the smaller one. */
    ck_assert(pf_steer_idle_correction(5, 0, &pending) == -2);
    pending = 0;
    ck_assert(pf_steer_idle_correction(0, 4, &pending) == 0);
    ck_assert(pf_steer_idle_correction(0, 1, &pending) == 1);
    /* No difference resets the watch. */
    pending = 3;
    ck_assert(pf_steer_idle_correction(1, 1, &pending) == 0);
    ck_assert(pending == 0);
}
END_TEST

/* Whatever a child wrote into its count (issue 21, finding 8: LONG_MIN
 * made "truth - advertised" overflow), the correction is defined and
 * brings the count back to the truth when added with the kernel's
 * wrapping add. */
START_TEST(test_idle_correction_of_hostile_counts)
{
    static const int64_t hostile[] = { INT64_MIN, INT64_MIN + 1, INT64_MAX,
                                       INT64_MAX - 1, -1000000, 1000000 };
    static const int64_t truths[] = { -300, -1, 0, 1, 8, 300 };
    size_t i, j;

    for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
        for (j = 0; j < sizeof(truths) / sizeof(truths[0]); j++) {
            int64_t pending = 0, fix;
            uint64_t count = (uint64_t)hostile[i];

            ck_assert(pf_steer_idle_correction(hostile[i], truths[j],
                                               &pending) == 0);
            ck_assert(pending != 0);
            fix = pf_steer_idle_correction(hostile[i], truths[j], &pending);
            ck_assert(fix != 0);
            count += (uint64_t)fix;
            /* Saturation may leave it short of the truth (by at most
             * one, at the extremes); a third cycle finishes it. */
            if ((int64_t)count != truths[j]) {
                fix = pf_steer_idle_correction((int64_t)count, truths[j],
                                               &pending);
                fix = pf_steer_idle_correction((int64_t)count, truths[j],
                                               &pending);
                count += (uint64_t)fix;
            }
            ck_assert_msg((int64_t)count == truths[j], "count %lld, truth "
                          "%lld: corrected to %lld", (long long)hostile[i],
                          (long long)truths[j], (long long)(int64_t)count);
        }
    }
}
END_TEST

/* The guard's "two cycles in a row" counts cycles: observations closer
 * than half a maintenance interval (a drain polling every 50 ms, a
 * restart right after a cycle) are one cycle. */
START_TEST(test_cycles_not_calls)
{
    int64_t last = 0;

    ck_assert_int_eq(pf_steer_new_cycle(5000000, &last), 1);
    ck_assert(last == 5000000);
    ck_assert_int_eq(pf_steer_new_cycle(5050000, &last), 0);
    ck_assert_int_eq(pf_steer_new_cycle(5499999, &last), 0);
    ck_assert(last == 5000000);
    ck_assert_int_eq(pf_steer_new_cycle(5500000, &last), 1);
    ck_assert_int_eq(pf_steer_new_cycle(6500000, &last), 1);
    /* A clock that went back starts again. */
    ck_assert_int_eq(pf_steer_new_cycle(1000, &last), 1);
    ck_assert(last == 1000);
}
END_TEST

Suite *steering_rules_suite(void)
{
    Suite *s = suite_create("steering-rules");
    TCase *tc = tcase_create("layout");

    tcase_add_loop_test(tc, test_cpu_runs_table, 0,
                        (int)(sizeof(runs_rows) / sizeof(runs_rows[0])));
    tcase_add_test(tc, test_cpu_runs_reject_bad_input);
    tcase_add_test(tc, test_shard_cpus_cover_everything);
    suite_add_tcase(s, tc);

    tc = tcase_create("cpu");
    tcase_add_test(tc, test_cpu_rule_matches_layout);
    tcase_add_test(tc, test_cpu_rule_keeps_connections_local);
    tcase_add_test(tc, test_cpu_rule_without_an_entry_goes_by_hash);
    suite_add_tcase(s, tc);

    tc = tcase_create("hash");
    tcase_add_test(tc, test_hash_shard_is_the_kernels_scaling);
    suite_add_tcase(s, tc);

    tc = tcase_create("idle");
    tcase_add_test(tc, test_idle_rule_table_of_cases);
    tcase_add_test(tc, test_idle_rule_reads_only_its_listen);
    tcase_add_test(tc, test_idle_rule_never_reads_past_the_table);
    tcase_add_test(tc, test_idle_rule_properties);
    tcase_add_test(tc, test_idle_bookkeeping_simulation);
    suite_add_tcase(s, tc);

    tc = tcase_create("local");
    tcase_add_loop_test(tc, test_local_rule_table_of_cases, 0,
                        (int)(sizeof(local_rows) / sizeof(local_rows[0])));
    tcase_add_test(tc, test_local_rule_properties);
    tcase_add_test(tc, test_local_rule_without_an_entry);
    suite_add_tcase(s, tc);

    tc = tcase_create("correction");
    tcase_add_test(tc, test_saturating_arithmetic);
    tcase_add_test(tc, test_idle_correction);
    tcase_add_test(tc, test_idle_correction_of_hostile_counts);
    tcase_add_test(tc, test_cycles_not_calls);
    suite_add_tcase(s, tc);
    return s;
}
