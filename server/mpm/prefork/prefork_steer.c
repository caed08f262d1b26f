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

/* ListenBucketSteering's pure parts; see prefork_steer.h. */

#include <string.h>
#include <strings.h>

#include "prefork_steer.h"

/* The instruction encodings are the kernel's ABI (Documentation/bpf in the
 * kernel tree, <linux/bpf_common.h>, <linux/bpf.h>, <linux/filter.h>).
 * They are spelled out here so that this file builds anywhere; the unit
 * tests compare every one with the kernel headers where those exist. */

/* Instruction classes. */
#define OP_LD       0x00
#define OP_LDX      0x01
#define OP_ST       0x02
#define OP_STX      0x03
#define OP_ALU      0x04
#define OP_JMP      0x05
#define OP_RET      0x06        /* classic only */
#define OP_ALU64    0x07        /* eBPF only */

/* Sizes and modes of loads and stores. */
#define OP_W        0x00
#define OP_DW       0x18
#define OP_IMM      0x00
#define OP_ABS      0x20
#define OP_MEM      0x60
#define OP_ATOMIC   0xc0

/* ALU operations. */
#define OP_ADD      0x00
#define OP_SUB      0x10
#define OP_MUL      0x20
#define OP_LSH      0x60
#define OP_RSH      0x70
#define OP_MOD      0x90
#define OP_MOV      0xb0

/* Jumps. */
#define OP_JA       0x00
#define OP_JEQ      0x10
#define OP_JGE      0x30
#define OP_JNE      0x50
#define OP_JSGT     0x60
#define OP_JSGE     0x70
#define OP_CALL     0x80
#define OP_EXIT     0x90
#define OP_JLT      0xa0

/* Operand source: an immediate or a register (classic: X). */
#define OP_K        0x00
#define OP_X        0x08
/* Classic return of the accumulator. */
#define OP_RET_A    0x10

/* Classic BPF ancillary loads: SKF_AD_OFF + SKF_AD_CPU / SKF_AD_RANDOM. */
#define CBPF_AD_OFF     (-0x1000)
#define CBPF_AD_CPU     36
#define CBPF_AD_RANDOM  56

/* eBPF registers. */
#define R0  0
#define R1  1
#define R2  2
#define R3  3
#define R4  4
#define R6  6
#define R7  7
#define R8  8
#define R9  9
#define R10 10

/* Helpers (enum bpf_func_id) and constants used by the idle program. */
#define HELPER_MAP_LOOKUP_ELEM      1
#define HELPER_GET_PRANDOM_U32      7
#define HELPER_SK_SELECT_REUSEPORT  82
#define PSEUDO_MAP_FD               1
#define SK_PASS                     1
/* offsetof(struct sk_reuseport_md, hash) */
#define MD_HASH_OFFSET              32
/* Stack slots: the 4-byte map key, and the best bucket seen so far with
 * its idle count (8 bytes each, aligned). */
#define KEY_SLOT                    (-4)
#define BEST_IDLE_SLOT              (-16)
#define BEST_BUCKET_SLOT            (-24)

int pf_steer_parse_mode(const char *arg, int *mode)
{
    int m;

    if (arg == NULL) {
        return -1;
    }
    for (m = PFB_STEER_HASH; m <= PFB_STEER_IDLE; m++) {
        if (strcasecmp(arg, pfb_steer_name(m)) == 0) {
            *mode = m;
            return 0;
        }
    }
    return -1;
}

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

int pf_steer_cpu_to_shard(const pf_cpu_run_t *runs, int num_runs, int cpu,
                          uint32_t random)
{
    int r;

    if (runs == NULL || num_runs < 1) {
        return -1;
    }
    for (r = num_runs - 1; r > 0; r--) {
        if (cpu >= runs[r].first_cpu) {
            break;
        }
    }
    return runs[r].first_bucket + (int)(random % (uint32_t)runs[r].span);
}

/* ------------------------------------------------------------------ */
/* Classic BPF: "cpu" steering                                         */

static pf_cbpf_insn_t cbpf_stmt(uint16_t code, uint32_t k)
{
    pf_cbpf_insn_t insn;

    insn.code = code;
    insn.jt = 0;
    insn.jf = 0;
    insn.k = k;
    return insn;
}

static pf_cbpf_insn_t cbpf_jump(uint16_t code, uint32_t k, uint8_t jt,
                                uint8_t jf)
{
    pf_cbpf_insn_t insn = cbpf_stmt(code, k);

    insn.jt = jt;
    insn.jf = jf;
    return insn;
}

/* The instructions that send a connection to run @a run's shards. */
static int cbpf_run_return(const pf_cpu_run_t *run, pf_cbpf_insn_t *out)
{
    if (run->span == 1) {
        out[0] = cbpf_stmt(OP_RET | OP_K, (uint32_t)run->first_bucket);
        return 1;
    }
    /* A CPU owning several shards spreads its connections over them. */
    out[0] = cbpf_stmt(OP_LD | OP_W | OP_ABS,
                       (uint32_t)(CBPF_AD_OFF + CBPF_AD_RANDOM));
    out[1] = cbpf_stmt(OP_ALU | OP_MOD | OP_K, (uint32_t)run->span);
    out[2] = cbpf_stmt(OP_ALU | OP_ADD | OP_K, (uint32_t)run->first_bucket);
    out[3] = cbpf_stmt(OP_RET | OP_RET_A, 0);
    return 4;
}

int pf_steer_build_cpu_program(const pf_cpu_run_t *runs, int num_runs,
                               pf_cbpf_insn_t *out)
{
    int r, n = 0, len;

    if (runs == NULL || num_runs < 1 || out == NULL
        || PF_CBPF_CPU_INSNS(num_runs) > PF_CBPF_MAX_INSNS) {
        return -1;
    }
    /* A = the CPU that received the SYN. */
    out[n++] = cbpf_stmt(OP_LD | OP_W | OP_ABS,
                         (uint32_t)(CBPF_AD_OFF + CBPF_AD_CPU));
    /* Runs from the highest CPU down: the first run whose lowest CPU is
     * at or below A is A's.  Every jump skips one run's return block, at
     * most 4 instructions, so the 8-bit offsets never overflow. */
    for (r = num_runs - 1; r > 0; r--) {
        pf_cbpf_insn_t block[4];

        len = cbpf_run_return(&runs[r], block);
        out[n++] = cbpf_jump(OP_JMP | OP_JGE | OP_K,
                             (uint32_t)runs[r].first_cpu, 0, (uint8_t)len);
        memcpy(&out[n], block, (size_t)len * sizeof(*block));
        n += len;
    }
    /* CPUs below every other run: run 0. */
    n += cbpf_run_return(&runs[0], &out[n]);
    return n;
}

/* ------------------------------------------------------------------ */
/* eBPF: "idle" steering                                               */

/* The program under construction, with labels for forward jumps: a jump
 * is written with its label number in .off and patched by resolve(). */
#define MAX_LABELS (3 * PF_STEER_MAX_PROBES + 8)
#define MAX_FIXUPS (8 * PF_STEER_MAX_PROBES + 16)

typedef struct {
    pf_ebpf_insn_t *insn;
    int len;
    int room;
    int failed;
    int label_at[MAX_LABELS];
    int fixup_insn[MAX_FIXUPS];
    int fixup_label[MAX_FIXUPS];
    int fixups;
} ebpf_builder_t;

static void emit(ebpf_builder_t *b, uint8_t code, int dst, int src,
                 int16_t off, int32_t imm)
{
    pf_ebpf_insn_t *insn;

    if (b->len >= b->room) {
        b->failed = 1;
        return;
    }
    insn = &b->insn[b->len++];
    insn->code = code;
    insn->regs = (uint8_t)((dst & 0x0f) | ((src & 0x0f) << 4));
    insn->off = off;
    insn->imm = imm;
}

/* dst = src */
static void mov64_reg(ebpf_builder_t *b, int dst, int src)
{
    emit(b, OP_ALU64 | OP_MOV | OP_X, dst, src, 0, 0);
}

/* dst <op>= src, 64 bits */
static void alu64_reg(ebpf_builder_t *b, uint8_t op, int dst, int src)
{
    emit(b, OP_ALU64 | op | OP_X, dst, src, 0, 0);
}

/* dst = imm */
static void mov64_imm(ebpf_builder_t *b, int dst, int32_t imm)
{
    emit(b, OP_ALU64 | OP_MOV | OP_K, dst, 0, 0, imm);
}

/* dst = (u32)src: the upper half cleared */
static void mov32_reg(ebpf_builder_t *b, int dst, int src)
{
    emit(b, OP_ALU | OP_MOV | OP_X, dst, src, 0, 0);
}

/* dst <op>= imm, 64 bits */
static void alu64_imm(ebpf_builder_t *b, uint8_t op, int dst, int32_t imm)
{
    emit(b, OP_ALU64 | op | OP_K, dst, 0, 0, imm);
}

/* dst = *(u32 *)(src + off) */
static void load_u32(ebpf_builder_t *b, int dst, int src, int16_t off)
{
    emit(b, OP_LDX | OP_W | OP_MEM, dst, src, off, 0);
}

/* dst = *(u64 *)(src + off) */
static void load_u64(ebpf_builder_t *b, int dst, int src, int16_t off)
{
    emit(b, OP_LDX | OP_DW | OP_MEM, dst, src, off, 0);
}

/* *(u32 *)(dst + off) = src */
static void store_u32(ebpf_builder_t *b, int dst, int16_t off, int src)
{
    emit(b, OP_STX | OP_W | OP_MEM, dst, src, off, 0);
}

/* *(u64 *)(dst + off) = src */
static void store_u64(ebpf_builder_t *b, int dst, int16_t off, int src)
{
    emit(b, OP_STX | OP_DW | OP_MEM, dst, src, off, 0);
}

/* lock *(u64 *)(dst + off) += src */
static void atomic_add_u64(ebpf_builder_t *b, int dst, int16_t off, int src)
{
    emit(b, OP_STX | OP_DW | OP_ATOMIC, dst, src, off, OP_ADD);
}

/* dst = the map whose descriptor is fd (a two-slot instruction) */
static void load_map_fd(ebpf_builder_t *b, int dst, int fd)
{
    emit(b, OP_LD | OP_DW | OP_IMM, dst, PSEUDO_MAP_FD, 0, fd);
    emit(b, 0, 0, 0, 0, 0);
}

static void call_helper(ebpf_builder_t *b, int32_t helper)
{
    emit(b, OP_JMP | OP_CALL, 0, 0, 0, helper);
}

static void exit_program(ebpf_builder_t *b)
{
    emit(b, OP_JMP | OP_EXIT, 0, 0, 0, 0);
}

static void place_label(ebpf_builder_t *b, int label)
{
    b->label_at[label] = b->len;
}

/* if (dst <op> imm) goto label */
static void jump_imm(ebpf_builder_t *b, uint8_t op, int dst, int32_t imm,
                     int label)
{
    if (b->fixups >= MAX_FIXUPS) {
        b->failed = 1;
        return;
    }
    b->fixup_insn[b->fixups] = b->len;
    b->fixup_label[b->fixups] = label;
    b->fixups++;
    emit(b, OP_JMP | op | OP_K, dst, 0, 0, imm);
}

/* if (dst <op> src) goto label */
static void jump_reg(ebpf_builder_t *b, uint8_t op, int dst, int src,
                     int label)
{
    jump_imm(b, op, dst, 0, label);
    if (!b->failed) {
        b->insn[b->len - 1].code = OP_JMP | op | OP_X;
        b->insn[b->len - 1].regs =
            (uint8_t)((dst & 0x0f) | ((src & 0x0f) << 4));
    }
}

static void goto_label(ebpf_builder_t *b, int label)
{
    jump_imm(b, OP_JA, 0, 0, label);
}

static void resolve(ebpf_builder_t *b)
{
    int i, at, target;

    for (i = 0; i < b->fixups; i++) {
        at = b->fixup_insn[i];
        target = b->label_at[b->fixup_label[i]];
        if (target <= at || target - at - 1 > 32767) {
            b->failed = 1;      /* forward jumps only, and in range */
            return;
        }
        b->insn[at].off = (int16_t)(target - at - 1);
    }
}

/* r0 = &stats[bucket in reg + first_bucket], or 0; clobbers r1-r5. */
static void lookup_stats(ebpf_builder_t *b, const pf_idle_program_t *spec,
                         int bucket_reg)
{
    mov64_reg(b, R1, bucket_reg);
    alu64_imm(b, OP_ADD, R1, spec->first_bucket);
    store_u32(b, R10, KEY_SLOT, R1);
    mov64_reg(b, R2, R10);
    alu64_imm(b, OP_ADD, R2, KEY_SLOT);
    load_map_fd(b, R1, spec->stats_map_fd);
    call_helper(b, HELPER_MAP_LOOKUP_ELEM);
}

int pf_steer_idle_probes(int per_listen)
{
    if (per_listen < 2) {
        return 0;
    }
    return per_listen - 1 < PF_STEER_MAX_PROBES ? per_listen - 1
                                                : PF_STEER_MAX_PROBES;
}

enum {
    L_KEEP,         /* send to the hash's bucket (r7) */
    L_MOVE,         /* send to the probed bucket (r9) */
    L_SELECT,       /* r7 = bucket, r8 = 0 kept / 1 moved */
    L_COUNT_MOVED,
    L_PASS,
    L_PROBE         /* three per probe: past each wrap-around, next */
};

int pf_steer_build_idle_program(const pf_idle_program_t *spec,
                                pf_ebpf_insn_t *out, int room)
{
    ebpf_builder_t b;
    int i;

    if (spec == NULL || out == NULL || spec->per_listen < 2
        || spec->first_bucket < 0 || spec->probes < 1
        || spec->probes > PF_STEER_MAX_PROBES
        || spec->probes > spec->per_listen - 1) {
        return -1;
    }
    memset(&b, 0, sizeof(b));
    b.insn = out;
    b.room = room;

    /* Block 1, the kernel's own choice: h = (hash * N) >> 32, the same
     * reciprocal scaling the kernel applies when no program is attached,
     * so with idle children everywhere nothing changes.  r6 keeps the
     * context for the select call, r7 keeps h. */
    mov64_reg(&b, R6, R1);
    load_u32(&b, R7, R6, MD_HASH_OFFSET);
    alu64_imm(&b, OP_MUL, R7, spec->per_listen);
    alu64_imm(&b, OP_RSH, R7, 32);

    /* Block 2: bucket h has an idle child (count > 0): keep it there.
     * Otherwise h is the best bucket so far: its count and number go to
     * the stack (BEST_IDLE_SLOT, BEST_BUCKET_SLOT). */
    lookup_stats(&b, spec, R7);
    jump_imm(&b, OP_JEQ, R0, 0, L_KEEP);
    load_u64(&b, R1, R0, PF_STEER_IDLE_OFFSET);
    jump_imm(&b, OP_JSGT, R1, 0, L_KEEP);
    store_u64(&b, R10, BEST_IDLE_SLOT, R1);
    store_u64(&b, R10, BEST_BUCKET_SLOT, R7);

    /* Block 3: a random start among the N - 1 other buckets,
     * r8 = (rand * (N - 1)) >> 32, so that overflow from one bucket
     * spreads over all the others instead of piling onto its neighbour. */
    call_helper(&b, HELPER_GET_PRANDOM_U32);
    mov32_reg(&b, R8, R0);
    alu64_imm(&b, OP_MUL, R8, spec->per_listen - 1);
    alu64_imm(&b, OP_RSH, R8, 32);

    /* Block 4, unrolled probes: the i-th other bucket after the start,
     * r9 = h + 1 + ((r8 + i) mod (N - 1)), taken mod N, which never
     * lands on h and visits each other bucket once.  The first with an
     * idle child takes the connection; meanwhile the bucket with the
     * highest count, that is the shortest queue for its children, is
     * remembered. */
    for (i = 0; i < spec->probes; i++) {
        int wrapped = L_PROBE + 3 * i, in_range = L_PROBE + 3 * i + 1;
        int next = L_PROBE + 3 * i + 2;

        mov64_reg(&b, R9, R8);
        alu64_imm(&b, OP_ADD, R9, i);
        jump_imm(&b, OP_JLT, R9, spec->per_listen - 1, wrapped);
        alu64_imm(&b, OP_SUB, R9, spec->per_listen - 1);
        place_label(&b, wrapped);
        alu64_reg(&b, OP_ADD, R9, R7);
        alu64_imm(&b, OP_ADD, R9, 1);
        jump_imm(&b, OP_JLT, R9, spec->per_listen, in_range);
        alu64_imm(&b, OP_SUB, R9, spec->per_listen);
        place_label(&b, in_range);
        lookup_stats(&b, spec, R9);
        jump_imm(&b, OP_JEQ, R0, 0, L_KEEP);
        load_u64(&b, R1, R0, PF_STEER_IDLE_OFFSET);
        jump_imm(&b, OP_JSGT, R1, 0, L_MOVE);
        load_u64(&b, R2, R10, BEST_IDLE_SLOT);
        jump_reg(&b, OP_JSGE, R2, R1, next);
        store_u64(&b, R10, BEST_IDLE_SLOT, R1);
        store_u64(&b, R10, BEST_BUCKET_SLOT, R9);
        place_label(&b, next);
    }

    /* Block 5, no bucket has an idle child: join the shortest queue.
     * The hash's bucket keeps the connection unless a probed bucket's
     * count is strictly higher (ties stay where the kernel put them). */
    load_u64(&b, R9, R10, BEST_BUCKET_SLOT);
    jump_reg(&b, OP_JNE, R9, R7, L_MOVE);

    /* Block 6, keep: target r7, counted as kept. */
    place_label(&b, L_KEEP);
    mov64_imm(&b, R8, 0);
    goto_label(&b, L_SELECT);

    /* Block 7, move: target r9, counted as moved. */
    place_label(&b, L_MOVE);
    mov64_reg(&b, R7, R9);
    mov64_imm(&b, R8, 1);

    /* Block 8: hand the socket of bucket r7 to the kernel.  If that
     * fails (the map lost the socket), returning SK_PASS with nothing
     * selected makes the kernel fall back to its hash. */
    place_label(&b, L_SELECT);
    mov64_reg(&b, R1, R7);
    alu64_imm(&b, OP_ADD, R1, spec->first_bucket);
    store_u32(&b, R10, KEY_SLOT, R1);
    mov64_reg(&b, R1, R6);
    load_map_fd(&b, R2, spec->socks_map_fd);
    mov64_reg(&b, R3, R10);
    alu64_imm(&b, OP_ADD, R3, KEY_SLOT);
    mov64_imm(&b, R4, 0);
    call_helper(&b, HELPER_SK_SELECT_REUSEPORT);
    jump_imm(&b, OP_JNE, R0, 0, L_PASS);

    /* Block 9, bookkeeping: the bucket has one waiting child less (or one
     * more queued connection), and one more kept or moved connection. */
    lookup_stats(&b, spec, R7);
    jump_imm(&b, OP_JEQ, R0, 0, L_PASS);
    mov64_imm(&b, R1, -1);
    atomic_add_u64(&b, R0, PF_STEER_IDLE_OFFSET, R1);
    mov64_imm(&b, R1, 1);
    jump_imm(&b, OP_JNE, R8, 0, L_COUNT_MOVED);
    atomic_add_u64(&b, R0, PF_STEER_KEPT_OFFSET, R1);
    goto_label(&b, L_PASS);
    place_label(&b, L_COUNT_MOVED);
    atomic_add_u64(&b, R0, PF_STEER_MOVED_OFFSET, R1);

    /* Block 10: SK_PASS, with the socket chosen above (if any). */
    place_label(&b, L_PASS);
    mov64_imm(&b, R0, SK_PASS);
    exit_program(&b);

    resolve(&b);
    return b.failed ? -1 : b.len;
}

/* ------------------------------------------------------------------ */
/* Idle-count bookkeeping                                              */

long pf_steer_idle_truth(long waiting, long queued)
{
    return waiting - queued;
}

long pf_steer_idle_correction(long advertised, long truth, long *pending)
{
    long now = truth - advertised;
    long before = *pending;
    long fix;

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
