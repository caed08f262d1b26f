/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * ListenBucketSteering: the CPU-to-bucket layout, the classic BPF program
 * of "cpu" steering (run through a small interpreter against the layout),
 * the eBPF program of "idle" steering (run through a small eBPF
 * interpreter with stand-ins for the three helpers it calls), the encoding
 * of both against the kernel's headers, and the idle-count bookkeeping.
 * The kernel itself loads and runs both programs in steer_kernel_suite().
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "prefork_steer.h"

#include <stddef.h>
#include <linux/bpf.h>
#include <linux/filter.h>

/* The kernel's classic BPF interpreter, for the instructions the cpu
 * program uses, with the receiving CPU and the random number handed in:
 * the program's output for every CPU is checked against the layout.
 * Returns the program's return value, or -1 on an instruction it does not
 * know or a jump out of range. */
static long run_cpu_program(const pf_cbpf_insn_t *prog, int len,
                            uint32_t cpu, uint32_t random)
{
    uint32_t a = 0;
    int pc = 0;

    while (pc >= 0 && pc < len) {
        const pf_cbpf_insn_t *insn = &prog[pc];

        switch (insn->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            if (insn->k == (uint32_t)(SKF_AD_OFF + SKF_AD_CPU)) {
                a = cpu;
            }
            else if (insn->k == (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)) {
                a = random;
            }
            else {
                return -1;
            }
            pc++;
            break;
        case BPF_ALU | BPF_MOD | BPF_K:
            if (insn->k == 0) {
                return -1;
            }
            a %= insn->k;
            pc++;
            break;
        case BPF_ALU | BPF_ADD | BPF_K:
            a += insn->k;
            pc++;
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += 1 + (a >= insn->k ? insn->jt : insn->jf);
            break;
        case BPF_RET | BPF_K:
            return (long)insn->k;
        case BPF_RET | BPF_A:
            return (long)a;
        default:
            return -1;
        }
    }
    return -1;
}

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
    int out[4];

    ck_assert_int_eq(pf_steer_cpu_runs(unsorted, 2, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(dup, 2, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(negative, 1, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(ok, 0, 2, runs), -1);
    ck_assert_int_eq(pf_steer_cpu_runs(ok, 2, 0, runs), -1);
    ck_assert_int_eq(pf_steer_shard_cpus(ok, 2, 2, 2, out), -1);
    ck_assert_int_eq(pf_steer_shard_cpus(ok, 2, 2, -1, out), -1);
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
/* Classic BPF                                                         */

START_TEST(test_cpu_program_matches_layout)
{
    int cpus[128];
    pf_cpu_run_t runs[128];
    pf_cbpf_insn_t prog[PF_CBPF_CPU_INSNS(128)];
    int round;

    srand(11);
    for (round = 0; round < 400; round++) {
        int m = 0, cpu, per_listen = 1 + rand() % 300, nruns, len;

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
        len = pf_steer_build_cpu_program(runs, nruns, prog);
        ck_assert_int_ge(len, 1);
        ck_assert_int_le(len, (int)PF_CBPF_CPU_INSNS(nruns));
        for (cpu = 0; cpu < 140; cpu++) {
            uint32_t rnd = (uint32_t)rand();
            long got = run_cpu_program(prog, len, (uint32_t)cpu, rnd);
            int want = pf_steer_cpu_to_shard(runs, nruns, cpu, rnd);

            ck_assert_msg(got == want, "cpu %d: program %ld, layout %d", cpu,
                          got, want);
            ck_assert_int_ge(got, 0);
            ck_assert_int_lt(got, per_listen);
        }
    }
}
END_TEST

/* A connection taken on a mask CPU goes to a shard whose children are
 * pinned to that CPU: the point of BucketCPUAffinity. */
START_TEST(test_cpu_program_keeps_connections_local)
{
    int cpus[] = { 0, 1, 4, 5, 6, 9 };
    int m = 6, per_listen, k, j, n, out[8];
    pf_cpu_run_t runs[8];
    pf_cbpf_insn_t prog[PF_CBPF_CPU_INSNS(8)];
    uint32_t rnd;

    for (per_listen = 1; per_listen <= 13; per_listen++) {
        int nruns = pf_steer_cpu_runs(cpus, m, per_listen, runs);
        int len = pf_steer_build_cpu_program(runs, nruns, prog);

        for (j = 0; j < m; j++) {
            for (rnd = 0; rnd < 20; rnd++) {
                int found = 0;

                k = (int)run_cpu_program(prog, len, (uint32_t)cpus[j],
                                         rnd);
                n = pf_steer_shard_cpus(cpus, m, per_listen, k, out);
                while (n-- > 0) {
                    found |= out[n] == cpus[j];
                }
                ck_assert_msg(found, "cpu %d sent to shard %d of %d, whose "
                              "children are not pinned there", cpus[j], k,
                              per_listen);
            }
        }
    }
}
END_TEST

START_TEST(test_cpu_program_size_limit)
{
    static pf_cpu_run_t runs[1000];
    static pf_cbpf_insn_t prog[PF_CBPF_CPU_INSNS(1000)];
    int r;

    for (r = 0; r < 1000; r++) {
        runs[r].first_cpu = r;
        runs[r].first_bucket = r;
        runs[r].span = 2;
    }
    /* 1 + 5 * 819 = 4096: the most the kernel takes. */
    ck_assert_int_eq(pf_steer_build_cpu_program(runs, 819, prog), 4095);
    ck_assert_int_eq(pf_steer_build_cpu_program(runs, 820, prog), -1);
}
END_TEST

#ifdef __linux__
START_TEST(test_encodings_match_kernel_headers)
{
    pf_cpu_run_t runs[2] = { { 0, 0, 1 }, { 1, 1, 3 } };
    pf_cbpf_insn_t prog[PF_CBPF_CPU_INSNS(2)];
    int len = pf_steer_build_cpu_program(runs, 2, prog);

    ck_assert_uint_eq(sizeof(pf_cbpf_insn_t), sizeof(struct sock_filter));
    ck_assert_uint_eq(offsetof(pf_cbpf_insn_t, k),
                      offsetof(struct sock_filter, k));
    ck_assert_uint_eq(sizeof(pf_ebpf_insn_t), sizeof(struct bpf_insn));
    ck_assert_uint_eq(offsetof(pf_ebpf_insn_t, imm),
                      offsetof(struct bpf_insn, imm));
    ck_assert_uint_eq(offsetof(struct sk_reuseport_md, hash), 32);
    ck_assert_int_eq(BPF_FUNC_map_lookup_elem, 1);
    ck_assert_int_eq(BPF_FUNC_get_prandom_u32, 7);
    ck_assert_int_eq(BPF_FUNC_sk_select_reuseport, 82);
    ck_assert_int_eq(SK_PASS, 1);
    ck_assert_int_eq(BPF_PSEUDO_MAP_FD, 1);
    /* ld cpu; jge #1; ld random; mod #3; add #1; ret a; ret #0 */
    ck_assert_int_eq(len, 7);
    ck_assert_uint_eq(prog[0].code, BPF_LD | BPF_W | BPF_ABS);
    ck_assert_uint_eq(prog[0].k, (uint32_t)(SKF_AD_OFF + SKF_AD_CPU));
    ck_assert_uint_eq(prog[1].code, BPF_JMP | BPF_JGE | BPF_K);
    ck_assert_uint_eq(prog[1].jf, 4);
    ck_assert_uint_eq(prog[2].k, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM));
    ck_assert_uint_eq(prog[3].code, BPF_ALU | BPF_MOD | BPF_K);
    ck_assert_uint_eq(prog[4].code, BPF_ALU | BPF_ADD | BPF_K);
    ck_assert_uint_eq(prog[5].code, BPF_RET | BPF_A);
    ck_assert_uint_eq(prog[6].code, BPF_RET | BPF_K);
    ck_assert_uint_eq(sizeof(pf_steer_bucket_t) % 64, 0);
    ck_assert_uint_eq(offsetof(pf_steer_bucket_t, idle), PF_STEER_IDLE_OFFSET);
    ck_assert_uint_eq(offsetof(pf_steer_bucket_t, kept), PF_STEER_KEPT_OFFSET);
    ck_assert_uint_eq(offsetof(pf_steer_bucket_t, moved),
                      PF_STEER_MOVED_OFFSET);
}
END_TEST
#endif

/* ------------------------------------------------------------------ */
/* eBPF: an interpreter for the instructions the idle program uses     */

#define FAKE_STATS_FD 41
#define FAKE_SOCKS_FD 42

typedef struct {
    pf_steer_bucket_t *stats;   /* indexed by bucket */
    int num_buckets;
    uint32_t hash;              /* the connection's 4-tuple hash */
    uint32_t random;            /* what bpf_get_prandom_u32() returns */
    int selected;               /* bucket passed to sk_select_reuseport */
    int select_fails;           /* make sk_select_reuseport fail */
    long steps;
} ebpf_vm_t;

/* Runs the program; returns r0 at exit, or -1 on anything unexpected. */
static long run_idle_program(const pf_ebpf_insn_t *prog, int len,
                             ebpf_vm_t *vm)
{
    uint64_t r[11];
    uint64_t stack[64];
    uint32_t md[16];            /* stands in for struct sk_reuseport_md */
    int pc = 0;

    memset(r, 0, sizeof(r));
    memset(stack, 0, sizeof(stack));
    memset(md, 0, sizeof(md));
    md[8] = vm->hash;           /* byte offset 32 */
    r[1] = (uint64_t)(uintptr_t)md;
    r[10] = (uint64_t)(uintptr_t)&stack[64];
    vm->selected = -1;
    vm->steps = 0;
    while (pc >= 0 && pc < len) {
        const pf_ebpf_insn_t *in = &prog[pc];
        int dst = in->regs & 0x0f, src = in->regs >> 4;
        uint64_t imm = (uint64_t)(int64_t)in->imm;
        int jump = 0;

        if (++vm->steps > 10000) {
            return -1;
        }
        switch (in->code) {
        case 0x07 | 0xb0 | 0x08:        /* mov64 reg */
            r[dst] = r[src];
            break;
        case 0x07 | 0xb0:               /* mov64 imm */
            r[dst] = imm;
            break;
        case 0x04 | 0xb0 | 0x08:        /* mov32 reg */
            r[dst] = (uint32_t)r[src];
            break;
        case 0x07 | 0x00 | 0x08:        /* add reg */
            r[dst] += r[src];
            break;
        case 0x07 | 0x00:               /* add imm */
            r[dst] += imm;
            break;
        case 0x07 | 0x10:               /* sub imm */
            r[dst] -= imm;
            break;
        case 0x07 | 0x20:               /* mul imm */
            r[dst] *= imm;
            break;
        case 0x07 | 0x70:               /* rsh imm */
            r[dst] >>= in->imm;
            break;
        case 0x01 | 0x00 | 0x60:        /* ldx u32 */
            r[dst] = *(uint32_t *)(uintptr_t)(r[src] + (uint64_t)in->off);
            break;
        case 0x01 | 0x18 | 0x60:        /* ldx u64 */
            r[dst] = *(uint64_t *)(uintptr_t)(r[src] + (uint64_t)in->off);
            break;
        case 0x03 | 0x00 | 0x60:        /* stx u32 */
            *(uint32_t *)(uintptr_t)(r[dst] + (uint64_t)in->off) =
                (uint32_t)r[src];
            break;
        case 0x03 | 0x18 | 0x60:        /* stx u64 */
            *(uint64_t *)(uintptr_t)(r[dst] + (uint64_t)in->off) = r[src];
            break;
        case 0x03 | 0x18 | 0xc0:        /* atomic add u64 */
            if (in->imm != 0) {
                return -1;
            }
            *(uint64_t *)(uintptr_t)(r[dst] + (uint64_t)in->off) += r[src];
            break;
        case 0x00 | 0x18 | 0x00:        /* ld_imm64: a map descriptor */
            if (src != 1 || pc + 1 >= len) {
                return -1;
            }
            r[dst] = (uint64_t)in->imm;
            pc++;
            break;
        case 0x05 | 0x80: {             /* call */
            uint32_t key;

            switch (in->imm) {
            case 1:
                if (r[1] != FAKE_STATS_FD) {
                    return -1;
                }
                key = *(uint32_t *)(uintptr_t)r[2];
                r[0] = key < (uint32_t)vm->num_buckets
                           ? (uint64_t)(uintptr_t)&vm->stats[key]
                           : 0;
                break;
            case 7:
                r[0] = vm->random;
                break;
            case 82:
                if (r[2] != FAKE_SOCKS_FD || r[4] != 0) {
                    return -1;
                }
                key = *(uint32_t *)(uintptr_t)r[3];
                if (vm->select_fails) {
                    r[0] = (uint64_t)-2;
                }
                else {
                    vm->selected = (int)key;
                    r[0] = 0;
                }
                break;
            default:
                return -1;
            }
            r[1] = r[2] = r[3] = r[4] = r[5] = 0xdeadbeef; /* clobbered */
            break;
        }
        case 0x05 | 0x90:               /* exit */
            return (long)r[0];
        case 0x05 | 0x00:               /* ja */
            jump = 1;
            break;
        case 0x05 | 0x10:               /* jeq imm */
            jump = r[dst] == imm;
            break;
        case 0x05 | 0x10 | 0x08:        /* jeq reg */
            jump = r[dst] == r[src];
            break;
        case 0x05 | 0x50 | 0x08:        /* jne reg */
            jump = r[dst] != r[src];
            break;
        case 0x05 | 0x70 | 0x08:        /* jsge reg */
            jump = (int64_t)r[dst] >= (int64_t)r[src];
            break;
        case 0x05 | 0x50:               /* jne imm */
            jump = r[dst] != imm;
            break;
        case 0x05 | 0x60:               /* jsgt imm */
            jump = (int64_t)r[dst] > (int64_t)imm;
            break;
        case 0x05 | 0xa0:               /* jlt imm */
            jump = r[dst] < imm;
            break;
        default:
            return -1;
        }
        if (jump && in->off < 0) {
            return -1;                  /* no backward jumps */
        }
        pc += 1 + (jump ? in->off : 0);
    }
    return -1;
}

static int build_idle(int first_bucket, int per_listen, pf_ebpf_insn_t *prog)
{
    pf_idle_program_t spec;

    spec.stats_map_fd = FAKE_STATS_FD;
    spec.socks_map_fd = FAKE_SOCKS_FD;
    spec.first_bucket = first_bucket;
    spec.per_listen = per_listen;
    spec.probes = pf_steer_idle_probes(per_listen);
    return pf_steer_build_idle_program(&spec, prog, PF_EBPF_IDLE_MAX_INSNS);
}

/* The hash that the kernel's reciprocal scaling maps to shard h of n. */
static uint32_t hash_for_shard(int h, int n)
{
    return (uint32_t)((((uint64_t)h << 32) + ((1ull << 32) / 2)) / (uint64_t)n);
}

START_TEST(test_idle_program_keeps_when_idle)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[8];
    ebpf_vm_t vm;
    int len = build_idle(4, 4, prog), h;

    ck_assert_int_gt(len, 0);
    for (h = 0; h < 4; h++) {
        memset(stats, 0, sizeof(stats));
        stats[4 + h].idle = 2;
        memset(&vm, 0, sizeof(vm));
        vm.stats = stats;
        vm.num_buckets = 8;
        vm.hash = hash_for_shard(h, 4);
        ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
        ck_assert_int_eq(vm.selected, 4 + h);
        ck_assert_int_eq(stats[4 + h].idle, 1);
        ck_assert_uint_eq(stats[4 + h].kept, 1);
        ck_assert_uint_eq(stats[4 + h].moved, 0);
    }
}
END_TEST

START_TEST(test_idle_program_moves_to_idle_bucket)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[4];
    ebpf_vm_t vm;
    int len = build_idle(0, 4, prog), h, idle_one;
    uint32_t rnd;

    for (h = 0; h < 4; h++) {
        for (idle_one = 0; idle_one < 4; idle_one++) {
            if (idle_one == h) {
                continue;
            }
            for (rnd = 0; rnd < 4; rnd++) {
                memset(stats, 0, sizeof(stats));
                stats[h].idle = -3;     /* three queued already */
                stats[idle_one].idle = 1;
                memset(&vm, 0, sizeof(vm));
                vm.stats = stats;
                vm.num_buckets = 4;
                vm.hash = hash_for_shard(h, 4);
                vm.random = rnd * 0x40000000u;
                ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
                ck_assert_msg(vm.selected == idle_one, "hash %d, idle %d, "
                              "random start %u: chose %d", h, idle_one, rnd,
                              vm.selected);
                ck_assert_int_eq(stats[idle_one].idle, 0);
                ck_assert_uint_eq(stats[idle_one].moved, 1);
                ck_assert_uint_eq(stats[idle_one].kept, 0);
                ck_assert_int_eq(stats[h].idle, -3);
            }
        }
    }
}
END_TEST

START_TEST(test_idle_program_queues_at_hash_when_all_busy)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[40];
    ebpf_vm_t vm;
    int len = build_idle(8, 32, prog), i;

    memset(stats, 0, sizeof(stats));
    memset(&vm, 0, sizeof(vm));
    vm.stats = stats;
    vm.num_buckets = 40;
    vm.hash = hash_for_shard(5, 32);
    vm.random = 0x12345678u;
    stats[0].idle = 9;          /* another Listen's bucket: never looked at */
    ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
    ck_assert_int_eq(vm.selected, 8 + 5);
    ck_assert_int_eq(stats[8 + 5].idle, -1);
    ck_assert_uint_eq(stats[8 + 5].kept, 1);
    for (i = 0; i < 40; i++) {
        if (i != 13) {
            ck_assert_uint_eq(stats[i].kept + stats[i].moved, 0);
        }
    }
}
END_TEST

/* No bucket has an idle child: the connection joins the shortest queue
 * among the probed buckets (the highest count), and stays with the hash's
 * bucket on a tie. */
START_TEST(test_idle_program_joins_shortest_queue)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[4];
    ebpf_vm_t vm;
    int len = build_idle(0, 4, prog);

    memset(stats, 0, sizeof(stats));
    stats[0].idle = -5;
    stats[1].idle = -3;
    stats[2].idle = -1;
    stats[3].idle = -4;
    memset(&vm, 0, sizeof(vm));
    vm.stats = stats;
    vm.num_buckets = 4;
    vm.hash = hash_for_shard(0, 4);
    vm.random = 0x9abcdef0u;
    ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
    ck_assert_int_eq(vm.selected, 2);
    ck_assert_int_eq(stats[2].idle, -2);
    ck_assert_uint_eq(stats[2].moved, 1);
    /* A tie with the hash's bucket: it stays there. */
    stats[0].idle = -2;
    ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
    ck_assert_int_eq(vm.selected, 0);
    ck_assert_uint_eq(stats[0].kept, 1);
    ck_assert_int_eq(stats[0].idle, -3);
}
END_TEST

/* With more than 16 other buckets only 16 are probed; an idle bucket
 * outside the window is not found, one inside is. */
START_TEST(test_idle_program_probe_window)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[64];
    ebpf_vm_t vm;
    int len = build_idle(0, 64, prog);

    ck_assert_int_gt(len, 0);
    memset(stats, 0, sizeof(stats));
    memset(&vm, 0, sizeof(vm));
    vm.stats = stats;
    vm.num_buckets = 64;
    vm.hash = hash_for_shard(0, 64);
    vm.random = hash_for_shard(9, 63);      /* probes 10..25 */
    stats[26].idle = 1;
    ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
    ck_assert_int_eq(vm.selected, 0);
    stats[25].idle = 1;
    ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
    ck_assert_int_eq(vm.selected, 25);
}
END_TEST

START_TEST(test_idle_program_select_failure_counts_nothing)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[2];
    ebpf_vm_t vm;
    int len = build_idle(0, 2, prog);

    memset(stats, 0, sizeof(stats));
    stats[1].idle = 1;
    memset(&vm, 0, sizeof(vm));
    vm.stats = stats;
    vm.num_buckets = 2;
    vm.select_fails = 1;
    ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);  /* SK_PASS */
    ck_assert_int_eq(stats[1].idle, 1);
    ck_assert_uint_eq(stats[0].kept + stats[1].moved, 0);
}
END_TEST

START_TEST(test_idle_program_shape)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_idle_program_t spec;
    int n, len, i, maps;

    for (n = 2; n <= 300; n++) {
        len = build_idle(3 * n, n, prog);
        ck_assert_int_gt(len, 0);
        ck_assert_int_le(len, PF_EBPF_IDLE_MAX_INSNS);
        ck_assert_uint_eq(prog[len - 1].code, 0x05 | 0x90);  /* exit */
        for (i = 0, maps = 0; i < len; i++) {
            if ((prog[i].code & 0x07) == 0x05 && prog[i].code != (0x05 | 0x80)
                && prog[i].code != (0x05 | 0x90)) {
                ck_assert_int_ge(prog[i].off, 0);
                ck_assert_int_lt(i + 1 + prog[i].off, len);
            }
            if (prog[i].code == (0x00 | 0x18 | 0x00)) {
                ck_assert(prog[i].imm == FAKE_STATS_FD
                          || prog[i].imm == FAKE_SOCKS_FD);
                maps++;
                i++;
            }
        }
        /* home lookup, each probe, select, bookkeeping */
        ck_assert_int_eq(maps, 3 + pf_steer_idle_probes(n));
    }
    spec.stats_map_fd = 1;
    spec.socks_map_fd = 2;
    spec.first_bucket = 0;
    spec.per_listen = 1;
    spec.probes = 1;
    ck_assert_int_eq(pf_steer_build_idle_program(&spec, prog, 512), -1);
    spec.per_listen = 4;
    spec.probes = 4;
    ck_assert_int_eq(pf_steer_build_idle_program(&spec, prog, 512), -1);
    spec.probes = 3;
    ck_assert_int_eq(pf_steer_build_idle_program(&spec, prog, 10), -1);
    ck_assert_int_gt(pf_steer_build_idle_program(&spec, prog, 512), 0);
    ck_assert_int_eq(pf_steer_idle_probes(1), 0);
    ck_assert_int_eq(pf_steer_idle_probes(4), 3);
    ck_assert_int_eq(pf_steer_idle_probes(200), PF_STEER_MAX_PROBES);
}
END_TEST

/* Many connections through the program against a simulated pool: with
 * children counting themselves in and out, no connection is sent to a
 * bucket with nobody idle while another bucket has someone idle. */
START_TEST(test_idle_bookkeeping_simulation)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_steer_bucket_t stats[4];
    int waiting[4] = { 2, 2, 2, 2 }, queued[4] = { 0 };
    ebpf_vm_t vm;
    int len = build_idle(0, 4, prog), step, b, any_idle;

    memset(stats, 0, sizeof(stats));
    for (b = 0; b < 4; b++) {
        stats[b].idle = waiting[b];
    }
    srand(3);
    for (step = 0; step < 5000; step++) {
        if (rand() % 2) {
            /* A connection arrives. */
            memset(&vm, 0, sizeof(vm));
            vm.stats = stats;
            vm.num_buckets = 4;
            vm.hash = (uint32_t)rand() * 2654435761u;
            vm.random = (uint32_t)rand() * 40503u;
            any_idle = 0;
            for (b = 0; b < 4; b++) {
                any_idle |= waiting[b] - queued[b] > 0;
            }
            ck_assert_int_eq(run_idle_program(prog, len, &vm), 1);
            b = vm.selected;
            ck_assert_int_ge(b, 0);
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
            stats[b].idle++;
        }
        for (b = 0; b < 4; b++) {
            ck_assert_int_eq(stats[b].idle,
                             pf_steer_idle_truth(waiting[b], queued[b]));
        }
    }
}
END_TEST

START_TEST(test_idle_correction)
{
    long pending = 0;

    /* A single difference is not acted on. */
    ck_assert_int_eq(pf_steer_idle_correction(3, 2, &pending), 0);
    ck_assert_int_eq(pending, -1);
    /* Seen again: corrected. */
    ck_assert_int_eq(pf_steer_idle_correction(3, 2, &pending), -1);
    ck_assert_int_eq(pending, 0);
    /* Signs differ: a race, no correction. */
    ck_assert_int_eq(pf_steer_idle_correction(0, 2, &pending), 0);
    ck_assert_int_eq(pf_steer_idle_correction(2, 0, &pending), 0);
    ck_assert_int_eq(pending, -2);
    /* Same sign, different sizes: the smaller one. */
    ck_assert_int_eq(pf_steer_idle_correction(5, 0, &pending), -2);
    pending = 0;
    ck_assert_int_eq(pf_steer_idle_correction(0, 4, &pending), 0);
    ck_assert_int_eq(pf_steer_idle_correction(0, 1, &pending), 1);
    /* No difference resets the watch. */
    pending = 3;
    ck_assert_int_eq(pf_steer_idle_correction(1, 1, &pending), 0);
    ck_assert_int_eq(pending, 0);
    ck_assert_int_eq(pf_steer_idle_truth(3, 5), -2);
}
END_TEST

START_TEST(test_parse_mode)
{
    int mode = -1;

    ck_assert_int_eq(pf_steer_parse_mode("hash", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_HASH);
    ck_assert_int_eq(pf_steer_parse_mode("CPU", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_CPU);
    ck_assert_int_eq(pf_steer_parse_mode("Idle", &mode), 0);
    ck_assert_int_eq(mode, PFB_STEER_IDLE);
    ck_assert_int_eq(pf_steer_parse_mode("idle ", &mode), -1);
    ck_assert_int_eq(pf_steer_parse_mode("", &mode), -1);
    ck_assert_int_eq(pf_steer_parse_mode("random", &mode), -1);
    ck_assert_int_eq(pf_steer_parse_mode(NULL, &mode), -1);
    ck_assert_str_eq(pfb_steer_name(PFB_STEER_IDLE), "idle");
    ck_assert_str_eq(pfb_steer_name(9), "unknown");
}
END_TEST

Suite *steer_suite(void)
{
    Suite *s = suite_create("steer");
    TCase *tc = tcase_create("layout");

    tcase_add_loop_test(tc, test_cpu_runs_table, 0,
                        (int)(sizeof(runs_rows) / sizeof(runs_rows[0])));
    tcase_add_test(tc, test_cpu_runs_reject_bad_input);
    tcase_add_test(tc, test_shard_cpus_cover_everything);
    tcase_add_test(tc, test_parse_mode);
    suite_add_tcase(s, tc);

    tc = tcase_create("cbpf");
    tcase_add_test(tc, test_cpu_program_matches_layout);
    tcase_add_test(tc, test_cpu_program_keeps_connections_local);
    tcase_add_test(tc, test_cpu_program_size_limit);
#ifdef __linux__
    tcase_add_test(tc, test_encodings_match_kernel_headers);
#endif
    suite_add_tcase(s, tc);

    tc = tcase_create("ebpf");
    tcase_add_test(tc, test_idle_program_keeps_when_idle);
    tcase_add_test(tc, test_idle_program_moves_to_idle_bucket);
    tcase_add_test(tc, test_idle_program_queues_at_hash_when_all_busy);
    tcase_add_test(tc, test_idle_program_probe_window);
    tcase_add_test(tc, test_idle_program_joins_shortest_queue);
    tcase_add_test(tc, test_idle_program_select_failure_counts_nothing);
    tcase_add_test(tc, test_idle_program_shape);
    tcase_add_test(tc, test_idle_bookkeeping_simulation);
    tcase_add_test(tc, test_idle_correction);
    suite_add_tcase(s, tc);
    return s;
}
