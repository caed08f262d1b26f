/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The idle and local steering rules over plain counts: an array of idle
 * counts in, a shard out.  The MPM never calls these (the kernel programs
 * run the rules on the table in shared memory), so they are not in the
 * module: the steering rules' unit tests link this file, and
 * build/libpfpolicy.so is built with it so that the scale model runs the
 * rules the kernel programs are compiled from, with the same table of cases
 * (idle_steering_cases.txt) as the unit tests.
 */

#include <stdlib.h>

#include "steer_pick.h"

/* The table and constants the programs see, for one Listen of @a per_listen
 * buckets with the given idle counts (the pick functions' common part);
 * NULL on bad input or no memory.  The caller frees the table. */
static pf_steer_bucket_t *pick_table(const int64_t *idle, int per_listen,
                                     pf_steer_listen_t *listen)
{
    pf_steer_bucket_t *table;
    int b;

    if (idle == NULL || per_listen < 2 || per_listen > PF_STEER_MAX_RECORDS) {
        return NULL;
    }
    table = calloc((size_t)per_listen, sizeof(*table));
    if (table == NULL) {
        return NULL;
    }
    for (b = 0; b < per_listen; b++) {
        table[b].idle = idle[b];
    }
    listen->first_bucket = 0;
    listen->per_listen = (pf_u32)per_listen;
    listen->probes = (pf_u32)pf_steer_idle_probes(per_listen);
    listen->capacity = (pf_u32)per_listen;
    return table;
}

int pf_steer_idle_pick(const int64_t *idle, int per_listen, uint32_t hash,
                       uint32_t random, int *moved)
{
    pf_steer_bucket_t *table;
    pf_steer_listen_t listen;
    pf_u32 shard, was_moved;

    if (moved == NULL
        || (table = pick_table(idle, per_listen, &listen)) == NULL) {
        return -1;
    }
    shard = pf_steer_idle_choose(table, &listen, hash, random, &was_moved);
    free(table);
    *moved = (int)was_moved;
    return (int)shard;
}

int pf_steer_local_pick(const int64_t *idle, int per_listen,
                        const pf_steer_cpu_entry_t *entry, uint32_t hash,
                        uint32_t random, int *moved)
{
    pf_steer_bucket_t *table;
    pf_steer_listen_t listen;
    pf_u32 shard, was_moved;

    if (moved == NULL
        || (table = pick_table(idle, per_listen, &listen)) == NULL) {
        return -1;
    }
    shard = pf_steer_local_choose(table, &listen, entry, hash, random,
                                  &was_moved);
    free(table);
    *moved = (int)was_moved;
    return (int)shard;
}
