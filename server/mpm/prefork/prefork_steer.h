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
 * @file  prefork_steer.h
 * @brief ListenBucketSteering as pure functions: which CPUs feed which
 *        bucket, the classic BPF program of "cpu" steering, the eBPF
 *        program of "idle" steering, and the idle-count bookkeeping.
 *
 * Nothing here calls the system: the programs are arrays of instructions
 * built from the layout and the map descriptors handed in, so the unit
 * tests check them instruction by instruction and the privileged tests
 * hand the very same arrays to the kernel's verifier.  prefork_os.c does
 * the bpf(2) and setsockopt() calls.
 *
 * The bucket of shard k of Listen l is l * N + k (N buckets per Listen),
 * and shard k is the k-th socket to join that Listen's SO_REUSEPORT group:
 * the original socket first, then the duplicates in order.  A classic BPF
 * program returns that position; the eBPF program names the socket through
 * a REUSEPORT_SOCKARRAY map keyed by bucket number.
 */

#ifndef PREFORK_STEER_H
#define PREFORK_STEER_H

#include <stddef.h>
#include <stdint.h>

#include "prefork_buckets.h"

/** Parses "hash", "cpu" or "idle" (any case) into a pfb_steer_e.
 *  @return 0, or -1 */
int pf_steer_parse_mode(const char *arg, int *mode);

/* ------------------------------------------------------------------ */
/* CPU layout                                                          */

/**
 * The usable CPUs (the affinity mask, ascending) are split evenly and in
 * order over the N buckets of a Listen.  With no more buckets than CPUs,
 * the CPU of rank j feeds bucket floor(j * N / m): bucket k gets a run of
 * neighbouring CPUs, which on a multi-socket host keeps it on one node.
 * With more buckets than CPUs, the CPU of rank j owns buckets
 * floor(j * N / m) up to floor((j + 1) * N / m) - 1 and a connection it
 * takes goes to one of them at random.  A CPU outside the mask (it may
 * still take interrupts) counts as the nearest mask CPU below it, or the
 * lowest one.
 */
typedef struct {
    int first_cpu;      /**< lowest CPU number of the run */
    int first_bucket;   /**< shard taken by CPUs of this run... */
    int span;           /**< ...and how many shards from there (>= 1) */
} pf_cpu_run_t;

/**
 * Builds the runs: consecutive CPU numbers that send connections to the
 * same shards merge into one run.
 * @param cpus The usable CPU numbers, ascending, no duplicates
 * @param num_cpus Entries in cpus (>= 1)
 * @param per_listen Buckets per Listen (>= 1)
 * @param runs Output, room for num_cpus entries
 * @return the number of runs, or -1 on bad input
 */
int pf_steer_cpu_runs(const int *cpus, int num_cpus, int per_listen,
                      pf_cpu_run_t *runs);

/**
 * The CPUs that serve shard @a shard: the children of every bucket with
 * that shard are pinned to them (BucketCPUAffinity on).
 * @param out Room for num_cpus entries
 * @return how many CPUs were written (>= 1 for a valid shard), -1 on bad
 *         input
 */
int pf_steer_shard_cpus(const int *cpus, int num_cpus, int per_listen,
                        int shard, int *out);

/**
 * The shard that a connection taken on CPU @a cpu goes to, as the classic
 * BPF program computes it, with @a random standing for the kernel's
 * random number where a CPU owns several shards.  For tests and the docs.
 */
int pf_steer_cpu_to_shard(const pf_cpu_run_t *runs, int num_runs, int cpu,
                          uint32_t random);

/* ------------------------------------------------------------------ */
/* Classic BPF: "cpu" steering                                         */

/** One classic BPF instruction, laid out as struct sock_filter. */
typedef struct {
    uint16_t code;
    uint8_t jt;
    uint8_t jf;
    uint32_t k;
} pf_cbpf_insn_t;

/** The kernel's limit on a classic BPF program (BPF_MAXINSNS). */
#define PF_CBPF_MAX_INSNS 4096

/** Instructions the CPU program needs at most for @a num_runs runs. */
#define PF_CBPF_CPU_INSNS(num_runs) (1 + 5 * (size_t)(num_runs))

/**
 * Writes the program that returns the shard of the receiving CPU:
 *
 *     ld  cpu                      ; A = CPU that took the SYN
 *     jge #first_cpu[r], 0, len    ; for each run r, highest first:
 *     <run r's return>             ;   CPUs at or above it go there
 *     ...
 *     <run 0's return>             ; the rest (CPUs below every run)
 *
 * where a run's return is "ret #first_bucket" or, for a CPU owning span
 * shards, "ld random; mod #span; add #first_bucket; ret a".
 * @param out Room for PF_CBPF_CPU_INSNS(num_runs) instructions
 * @return the instruction count, or -1 if the program would pass the
 *         kernel's limit
 */
int pf_steer_build_cpu_program(const pf_cpu_run_t *runs, int num_runs,
                               pf_cbpf_insn_t *out);

/* ------------------------------------------------------------------ */
/* eBPF: "idle" steering                                               */

/**
 * Per-bucket record in the mmap-able array map shared by the program, the
 * children and the parent; one cache line each, so buckets do not share
 * lines.
 */
typedef struct {
    /** Children waiting in accept() minus connections sent here and not
     *  accepted yet.  A child adds one before it waits and takes it back
     *  only if it leaves without a connection; the program takes one for
     *  every connection it sends to the bucket. */
    volatile int64_t idle;
    /** Connections the program left in the bucket the hash chose. */
    volatile uint64_t kept;
    /** Connections the program moved here from a bucket with no idle
     *  child. */
    volatile uint64_t moved;
    uint64_t reserved[5];
} pf_steer_bucket_t;

#define PF_STEER_IDLE_OFFSET 0
#define PF_STEER_KEPT_OFFSET 8
#define PF_STEER_MOVED_OFFSET 16

/** Buckets the program looks at after the hash's bucket, at most. */
#define PF_STEER_MAX_PROBES 16

/** One eBPF instruction, laid out as struct bpf_insn. */
typedef struct {
    uint8_t code;
    uint8_t regs;       /**< dst in the low nibble, src in the high one */
    int16_t off;
    int32_t imm;
} pf_ebpf_insn_t;

/** Room the idle program needs at most. */
#define PF_EBPF_IDLE_MAX_INSNS 512

/** What the idle program is built for: one Listen's buckets. */
typedef struct {
    int stats_map_fd;   /**< the array of pf_steer_bucket_t */
    int socks_map_fd;   /**< the REUSEPORT_SOCKARRAY, keyed by bucket */
    int first_bucket;   /**< bucket of shard 0 of this Listen */
    int per_listen;     /**< shards of this Listen (2 or more) */
    int probes;         /**< buckets tried after the hash's (1..16) */
} pf_idle_program_t;

/** How many buckets the program tries after the hash's: all the others
 *  up to PF_STEER_MAX_PROBES. */
int pf_steer_idle_probes(int per_listen);

/**
 * Writes the program (see the comments in prefork_steer.c, block by
 * block): shard h = the kernel's choice from the connection's hash; if
 * bucket h has an idle child, keep it there; otherwise probe up to
 * @a probes other buckets from a random start and move the connection to
 * the first with an idle child; if none has one, send it to the probed
 * bucket with the highest count (the shortest queue for its children),
 * keeping it at h on a tie.  The chosen bucket's idle count drops by one
 * and its kept or moved counter rises.
 * @return the instruction count, or -1 on bad input
 */
int pf_steer_build_idle_program(const pf_idle_program_t *spec,
                                pf_ebpf_insn_t *out, int room);

/* ------------------------------------------------------------------ */
/* Idle-count bookkeeping                                              */

/**
 * What a bucket's idle count should read: the children counted as waiting
 * in accept() minus the connections queued for them.
 */
long pf_steer_idle_truth(long waiting, long queued);

/**
 * The parent compares each bucket's idle count with the truth once per
 * maintenance cycle.  The two are read at slightly different moments, so
 * under load a difference may be a race rather than drift (a handshake the
 * program counted that never completed, a child killed between its two
 * steps).  A correction is made only when two cycles in a row see a
 * difference of the same sign, and then by the smaller of the two, so a
 * race never pushes the count further off.
 * @param advertised The count as read now
 * @param truth pf_steer_idle_truth() now
 * @param pending In/out: the difference seen at the previous cycle
 * @return the amount to add to the count now (0 for none)
 */
long pf_steer_idle_correction(long advertised, long truth, long *pending);

#endif /* PREFORK_STEER_H */
