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

/* ListenBucketSteering's kernel programs (BPF_PROG_TYPE_SK_REUSEPORT),
 * compiled at build time with clang -target bpf and embedded in the MPM
 * as a bpftool skeleton; prefork_steering_kernel.c loads them with libbpf,
 * one copy per Listen.  Each is glue: read what the kernel hands it (the
 * connection's hash, the CPU), ask the rule in prefork_steering_rules.h,
 * and select the chosen bucket's socket through the socket map.
 *
 * Not a file of the MPM's own objects: httpd's in-tree build compiles
 * prefork*.c except *.bpf.c (config3.m4). */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "prefork_steering_rules.h"

/* The project's licence; the programs call no GPL-only helper. */
char LICENSE[] SEC("license") = "Apache-2.0";

/* The Listen this copy serves; set by the parent before loading, so the
 * verifier sees constants. */
const volatile pf_steer_listen_t pf_listen = { 0, 2, 1, 1 };

/* Every bucket's socket under its bucket number.  The parent makes the
 * map and keeps it for the server's life; the size given here is replaced
 * by the real map's when the parent hands it over. */
struct {
    __uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} pf_sockets SEC(".maps");

/* "idle": one value holding every bucket's pf_steer_bucket_t, mapped by
 * the parent and its children (BPF_F_MMAPABLE). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(pf_steer_bucket_t));
} pf_idle_table SEC(".maps");

/* "cpu" and "local": a pf_steer_cpu_entry_t per possible CPU. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, pf_steer_cpu_entry_t);
} pf_cpu_shards SEC(".maps");

/* The most shards of this Listen tried when the chosen one's key is
 * empty: the socket map lacks a socket for a moment while the parent
 * replaces one. */
#define PF_STEER_FALLBACK_TRIES 64

static __always_inline long try_shard(struct sk_reuseport_md *md,
                                      __u32 shard)
{
    __u32 bucket = pf_listen.first_bucket + shard;

    return bpf_sk_select_reuseport(md, &pf_sockets, &bucket, 0);
}

/* Hands the kernel the socket of shard @a shard of this Listen, or of the
 * next shard that has one.  Nothing outside the socket map is ever
 * chosen: with no socket there, the connection is dropped (the client
 * sends its SYN again) rather than left to the kernel's hash, which would
 * give a share to any socket that joined the group.  The same holds for
 * a connection the kernel hands over from a socket that stops listening
 * (the programs are loaded to choose for those too, where the kernel can).
 * @return 0 for the chosen shard, 1 for another, -1 for none */
static __always_inline int select_shard(struct sk_reuseport_md *md,
                                        __u32 shard)
{
    __u32 i, next;

    if (try_shard(md, shard) == 0) {
        return 0;
    }
    /* Unrolled: no loop for the verifier, so no kernel newer than the
     * programs' other needs (bounded loops came in 5.3). */
#pragma unroll
    for (i = 1; i < PF_STEER_FALLBACK_TRIES; i++) {
        if (i >= pf_listen.per_listen) {
            break;
        }
        next = shard + i;
        if (next >= pf_listen.per_listen) {
            next -= pf_listen.per_listen;
        }
        if (try_shard(md, next) == 0) {
            return 1;
        }
    }
    return -1;
}

static __always_inline int verdict(int selected)
{
    return selected < 0 ? SK_DROP : SK_PASS;
}

/* "hash": the kernel's own choice among this Listen's buckets, made
 * through the socket map, so only the MPM's sockets are chosen. */
SEC("sk_reuseport/migrate")
int pf_steer_hash(struct sk_reuseport_md *md)
{
    return verdict(select_shard(md, pf_steer_hash_shard(md->hash,
                                                        pf_listen.per_listen)));
}

/* "idle": pf_steer_idle_choose(), then the bookkeeping when the kernel
 * took the socket. */
SEC("sk_reuseport/migrate")
int pf_steer_idle(struct sk_reuseport_md *md)
{
    pf_steer_bucket_t *table;
    __u32 zero = 0, shard, moved;
    int selected;

    table = bpf_map_lookup_elem(&pf_idle_table, &zero);
    if (table == NULL) {
        return verdict(select_shard(md, pf_steer_hash_shard(
                                            md->hash, pf_listen.per_listen)));
    }
    shard = pf_steer_idle_choose(table, &pf_listen, md->hash,
                                 bpf_get_prandom_u32(), &moved);
    selected = select_shard(md, shard);
    if (selected == 0) {
        pf_steer_idle_account(table, &pf_listen, shard, moved);
    }
    return verdict(selected);
}

/* "cpu": the shard of the CPU that took the SYN. */
SEC("sk_reuseport/migrate")
int pf_steer_cpu(struct sk_reuseport_md *md)
{
    __u32 cpu = bpf_get_smp_processor_id();
    const pf_steer_cpu_entry_t *entry;

    entry = bpf_map_lookup_elem(&pf_cpu_shards, &cpu);
    return verdict(select_shard(md, pf_steer_cpu_choose(
                                        entry, pf_listen.per_listen,
                                        md->hash, bpf_get_prandom_u32())));
}

/* "local": the receiving CPU's shard while it has an idle child, else one
 * of its node's, else any with one (pf_steer_local_choose()), with the
 * idle program's bookkeeping. */
SEC("sk_reuseport/migrate")
int pf_steer_local(struct sk_reuseport_md *md)
{
    __u32 cpu = bpf_get_smp_processor_id(), zero = 0, shard, moved;
    const pf_steer_cpu_entry_t *entry;
    pf_steer_bucket_t *table;
    int selected;

    table = bpf_map_lookup_elem(&pf_idle_table, &zero);
    if (table == NULL) {
        return verdict(select_shard(md, pf_steer_hash_shard(
                                            md->hash, pf_listen.per_listen)));
    }
    entry = bpf_map_lookup_elem(&pf_cpu_shards, &cpu);
    shard = pf_steer_local_choose(table, &pf_listen, entry, md->hash,
                                  bpf_get_prandom_u32(), &moved);
    selected = select_shard(md, shard);
    if (selected == 0) {
        pf_steer_idle_account(table, &pf_listen, shard, moved);
    }
    return verdict(selected);
}
