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
 * The host's CPU topology as sysfs shows it, and the layout of a Listen's
 * buckets over it for "local" steering.  Reading takes the directory
 * under which "sys/" lies, so the unit tests point it at fake trees.  The
 * layout is a pure function of what was read and the usable CPUs: those
 * in node, package and core order, each node its share of the buckets, a
 * core's thread siblings in one bucket, and a CPU outside the mask given
 * a usable sibling's bucket, else its node's.  Plain C and stdio: no APR,
 * no logging, so the unit tests link it alone.  prefork_steering.c calls
 * it at each (re)start for local's CPU table and the children's pinning;
 * which CPUs are usable is prefork_cpus.c's.
 */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefork_topology.h"

/* The longest sysfs file read: a CPU list of thousands of CPUs is a few
 * hundred bytes; anything that fills this is garbage. */
#define FILE_ROOM 4096

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

/* One decimal number at *p, no sign, at most INT_MAX. */
static int parse_number(const char **p, int *value)
{
    long long v = 0;
    const char *s = *p;

    if (!isdigit((unsigned char)*s)) {
        return -1;
    }
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v > INT_MAX) {
            return -1;
        }
        s++;
    }
    *p = s;
    *value = (int)v;
    return 0;
}

/*
 * Parses a sysfs CPU list ("0-3,8,10-11", a trailing newline allowed; an
 * empty list is valid, as memory-only nodes have one).
 * @param member NULL, or room for @a room flags: member[c] is set to 1 for
 *        every listed CPU c below room
 * @param lowest Set to the lowest CPU listed, or -1 for none
 * @return the number of CPUs listed, or -1 for garbage
 */
static int pf_topo_parse_list(const char *text, unsigned char *member,
                              int room, int *lowest)
{
    const char *p = text;
    int count = 0, low = -1, a, b, c;

    if (text == NULL || lowest == NULL || (member != NULL && room < 0)) {
        return -1;
    }
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    while (*p != '\0' && *p != '\n') {
        if (parse_number(&p, &a) != 0) {
            return -1;
        }
        b = a;
        if (*p == '-') {
            p++;
            if (parse_number(&p, &b) != 0 || b < a) {
                return -1;
            }
        }
        if (*p == ',') {
            p++;
            if (*p == '\0' || *p == '\n') {
                return -1;
            }
        }
        else if (*p != '\0' && *p != '\n') {
            return -1;
        }
        if (low < 0 || a < low) {
            low = a;
        }
        if ((long long)count + (b - a) + 1 > INT_MAX) {
            return -1;
        }
        count += b - a + 1;
        for (c = a; member != NULL && c <= b && c < room; c++) {
            member[c] = 1;
        }
    }
    if (*p == '\n' && p[1] != '\0') {
        return -1;
    }
    *lowest = low;
    return count;
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */

/* Reads a small file whole into @a buf.  @return 0, or -1 (missing,
 * unreadable, or too long to be what sysfs writes there) */
static int read_small_file(const char *path, char *buf, size_t room)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (f == NULL) {
        return -1;
    }
    n = fread(buf, 1, room - 1, f);
    fclose(f);
    if (n == 0 || n >= room - 1) {
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

/* A file holding one integer (physical_package_id, core_id); -1 when
 * missing, garbage or negative. */
static int read_int_file(const char *path)
{
    char buf[64];
    const char *p = buf;
    int value;

    if (read_small_file(path, buf, sizeof(buf)) != 0
        || parse_number(&p, &value) != 0) {
        return -1;
    }
    while (*p == '\n' || *p == ' ') {
        p++;
    }
    return *p == '\0' ? value : -1;
}

/* @return whether the thread siblings were read */
static int read_cpu(const char *root, int cpu, pf_topo_cpu_t *out)
{
    char path[PATH_MAX], *buf;
    int lowest = -1, known = 0;

    snprintf(path, sizeof(path),
             "%s/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
             root, cpu);
    out->package = read_int_file(path);
    snprintf(path, sizeof(path),
             "%s/sys/devices/system/cpu/cpu%d/topology/core_id", root, cpu);
    out->core = read_int_file(path);
    out->core_key = cpu;
    snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/topology/"
             "thread_siblings_list", root, cpu);
    buf = malloc(FILE_ROOM);
    if (buf != NULL && read_small_file(path, buf, FILE_ROOM) == 0
        && pf_topo_parse_list(buf, NULL, 0, &lowest) > 0 && lowest >= 0
        && lowest <= cpu) {
        /* The lowest sibling names the core: the same for every thread
         * of it, and unique across packages, unlike core_id. */
        out->core_key = lowest;
        known = 1;
    }
    free(buf);
    return known;
}

/* A CPU whose siblings list was unreadable: its core is the lowest CPU
 * of the same package and core_id, when both are known. */
static void key_by_core_id(pf_topo_cpu_t *out, int cpu)
{
    int other;

    if (out[cpu].package < 0 || out[cpu].core < 0) {
        return;
    }
    for (other = 0; other < cpu; other++) {
        if (out[other].package == out[cpu].package
            && out[other].core == out[cpu].core) {
            out[cpu].core_key = out[other].core_key;
            return;
        }
    }
}

/* Whether @a name is "node" and a node number; sets *node. */
static int node_dir_name(const char *name, int *node)
{
    const char *p = name + 4;

    if (strncmp(name, "node", 4) != 0 || parse_number(&p, node) != 0
        || *p != '\0' || *node > PF_TOPO_MAX_NODE) {
        return 0;
    }
    return 1;
}

/* Sets the node of every CPU a node directory lists; a CPU two nodes
 * claim (garbage) keeps the lower.  @return the number of nodes that
 * list a CPU below num_cpus */
static int read_nodes(const char *root, pf_topo_cpu_t *out, int num_cpus,
                      unsigned char *member, char *buf)
{
    char path[PATH_MAX];
    struct dirent *entry;
    DIR *dir;
    int node, lowest, cpu, nodes = 0, listed;

    snprintf(path, sizeof(path), "%s/sys/devices/system/node", root);
    dir = opendir(path);
    if (dir == NULL) {
        return 0;
    }
    while ((entry = readdir(dir)) != NULL) {
        if (!node_dir_name(entry->d_name, &node)) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/sys/devices/system/node/%s/cpulist",
                 root, entry->d_name);
        memset(member, 0, (size_t)num_cpus);
        if (read_small_file(path, buf, FILE_ROOM) != 0
            || pf_topo_parse_list(buf, member, num_cpus, &lowest) < 0) {
            continue;
        }
        listed = 0;
        for (cpu = 0; cpu < num_cpus; cpu++) {
            if (member[cpu]) {
                listed = 1;
                if (out[cpu].node < 0 || node < out[cpu].node) {
                    out[cpu].node = node;
                }
            }
        }
        nodes += listed;
    }
    closedir(dir);
    return nodes;
}

int pf_topo_read(const char *root, pf_topo_cpu_t *out, int num_cpus)
{
    unsigned char *member;
    char *buf;
    int cpu, nodes, lowest_node = -1;

    if (root == NULL || out == NULL || num_cpus < 1) {
        return -1;
    }
    for (cpu = 0; cpu < num_cpus; cpu++) {
        out[cpu].node = -1;
        if (!read_cpu(root, cpu, &out[cpu])) {
            key_by_core_id(out, cpu);
        }
    }
    member = malloc((size_t)num_cpus);
    buf = malloc(FILE_ROOM);
    nodes = member != NULL && buf != NULL
                ? read_nodes(root, out, num_cpus, member, buf)
                : 0;
    free(member);
    free(buf);
    for (cpu = 0; cpu < num_cpus; cpu++) {
        if (out[cpu].node >= 0
            && (lowest_node < 0 || out[cpu].node < lowest_node)) {
            lowest_node = out[cpu].node;
        }
    }
    for (cpu = 0; cpu < num_cpus; cpu++) {
        if (out[cpu].node < 0) {
            out[cpu].node = lowest_node >= 0 ? lowest_node : 0;
        }
    }
    return nodes;
}

/* ------------------------------------------------------------------ */
/* Layout                                                              */

/* A usable CPU with the keys it is ordered by. */
typedef struct {
    int node;
    int package;
    int core_key;
    int cpu;
} placed_t;

static int compare_placed(const void *pa, const void *pb)
{
    const placed_t *a = pa, *b = pb;

    if (a->node != b->node) {
        return a->node < b->node ? -1 : 1;
    }
    if (a->package != b->package) {
        return a->package < b->package ? -1 : 1;
    }
    if (a->core_key != b->core_key) {
        /* Siblings share their key, so they end up side by side. */
        return a->core_key < b->core_key ? -1 : 1;
    }
    return a->cpu < b->cpu ? -1 : a->cpu > b->cpu;
}

static int valid_input(const pf_topo_cpu_t *topo, int entries,
                       const int *cpus, int num_cpus)
{
    int i;

    if (topo == NULL || cpus == NULL || entries < 1 || num_cpus < 1) {
        return 0;
    }
    for (i = 0; i < num_cpus; i++) {
        if (cpus[i] < 0 || cpus[i] >= entries
            || (i > 0 && cpus[i] <= cpus[i - 1])) {
            return 0;
        }
    }
    return 1;
}

/* The usable CPUs in node, package and core order (a core by its lowest
 * sibling: core_id repeats across packages and may be garbage). */
static placed_t *place(const pf_topo_cpu_t *topo, const int *cpus,
                       int num_cpus)
{
    placed_t *placed = malloc(sizeof(*placed) * (size_t)num_cpus);
    int i;

    if (placed == NULL) {
        return NULL;
    }
    for (i = 0; i < num_cpus; i++) {
        const pf_topo_cpu_t *t = &topo[cpus[i]];

        placed[i].node = t->node;
        placed[i].package = t->package;
        placed[i].core_key = t->core_key;
        placed[i].cpu = cpus[i];
    }
    qsort(placed, (size_t)num_cpus, sizeof(*placed), compare_placed);
    return placed;
}

int pf_topo_nodes(const pf_topo_cpu_t *topo, int entries, const int *cpus,
                  int num_cpus)
{
    placed_t *placed;
    int i, nodes = 0;

    if (!valid_input(topo, entries, cpus, num_cpus)) {
        return -1;
    }
    placed = place(topo, cpus, num_cpus);
    if (placed == NULL) {
        return -1;
    }
    for (i = 0; i < num_cpus; i++) {
        nodes += i == 0 || placed[i].node != placed[i - 1].node;
    }
    free(placed);
    return nodes;
}

/* One node's part of the usable CPUs: placed[start ... start + cpus - 1],
 * in cores, and the shards it gets. */
typedef struct {
    int node;
    int start;
    int cpus;
    int cores;
    int first_shard;
    int shards;
} node_part_t;

/* Shards for each node, in proportion to its CPUs, at least one each:
 * one each first, the rest by share, and what rounding leaves to the
 * nodes with the most CPUs per shard. */
static void share_shards(node_part_t *parts, int nodes, int per_listen,
                         int num_cpus)
{
    int k, given = 0, spare = per_listen - nodes, best;

    for (k = 0; k < nodes; k++) {
        parts[k].shards = 1 + (int)((long long)parts[k].cpus * spare
                                    / num_cpus);
        given += parts[k].shards;
    }
    while (given < per_listen) {
        best = 0;
        for (k = 1; k < nodes; k++) {
            if ((long long)parts[k].cpus * parts[best].shards
                > (long long)parts[best].cpus * parts[k].shards) {
                best = k;
            }
        }
        parts[best].shards++;
        given++;
    }
    for (k = 0; k < nodes; k++) {
        parts[k].first_shard = k == 0 ? 0 : parts[k - 1].first_shard
                                                 + parts[k - 1].shards;
    }
}

/* Splits the nodes' parts out of the ordered CPUs. */
static int split_nodes(const placed_t *placed, int num_cpus,
                       node_part_t *parts)
{
    int i, n = 0;

    for (i = 0; i < num_cpus; i++) {
        if (i == 0 || placed[i].node != placed[i - 1].node) {
            parts[n].node = placed[i].node;
            parts[n].start = i;
            parts[n].cpus = 0;
            parts[n].cores = 0;
            n++;
        }
        parts[n - 1].cpus++;
        if (i == parts[n - 1].start
            || placed[i].core_key != placed[i - 1].core_key
            || placed[i].package != placed[i - 1].package) {
            parts[n - 1].cores++;
        }
    }
    return n;
}

/* The entries of one node's usable CPUs: core of rank j of m over the
 * node's b shards, as "cpu" splits CPUs (a run of shards per core when
 * there are more shards than cores). */
static void lay_out_node(const placed_t *placed, const node_part_t *part,
                         pf_steer_cpu_entry_t *table)
{
    int i, j = -1, lo = 0, hi = 0;
    long long m = part->cores, b = part->shards;

    for (i = part->start; i < part->start + part->cpus; i++) {
        if (i == part->start || placed[i].core_key != placed[i - 1].core_key
            || placed[i].package != placed[i - 1].package) {
            j++;
            lo = (int)(j * b / m);
            hi = (int)((j + 1) * b / m);
            if (hi <= lo) {
                hi = lo + 1;
            }
        }
        table[placed[i].cpu].first_shard = (pf_u32)(part->first_shard + lo);
        table[placed[i].cpu].span = (pf_u32)(hi - lo);
        table[placed[i].cpu].node_first = (pf_u32)part->first_shard;
        table[placed[i].cpu].node_span = (pf_u32)part->shards;
    }
}

/* Fewer shards than nodes: node of rank k shares shard k * N / K. */
static void lay_out_shared(const placed_t *placed, const node_part_t *parts,
                           int nodes, int per_listen,
                           pf_steer_cpu_entry_t *table)
{
    int k, i;
    pf_u32 shard;

    for (k = 0; k < nodes; k++) {
        shard = (pf_u32)((long long)k * per_listen / nodes);
        for (i = parts[k].start; i < parts[k].start + parts[k].cpus; i++) {
            table[placed[i].cpu].first_shard = shard;
            table[placed[i].cpu].span = 1;
            table[placed[i].cpu].node_first = shard;
            table[placed[i].cpu].node_span = 1;
        }
    }
}

/* Whether @a cpu is among the usable ones (ascending). */
static int usable(const int *cpus, int num_cpus, int cpu)
{
    int lo = 0, hi = num_cpus, mid;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (cpus[mid] < cpu) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo < num_cpus && cpus[lo] == cpu;
}

/* CPUs outside the usable ones: their usable thread sibling's, else the
 * first usable CPU of their node, else the nearest usable CPU below, else
 * the lowest. */
static void fill_unusable(const pf_topo_cpu_t *topo, int entries,
                          const int *cpus, int num_cpus,
                          const placed_t *placed, const node_part_t *parts,
                          int nodes, pf_steer_cpu_entry_t *table)
{
    int cpu, k, i = 0, from;

    for (cpu = 0; cpu < entries; cpu++) {
        while (i < num_cpus && cpus[i] < cpu) {
            i++;
        }
        if (i < num_cpus && cpus[i] == cpu) {
            continue;
        }
        from = i > 0 ? cpus[i - 1] : cpus[0];
        for (k = 0; k < nodes; k++) {
            if (parts[k].node == topo[cpu].node) {
                from = placed[parts[k].start].cpu;
                break;
            }
        }
        if (topo[cpu].core_key >= 0 && topo[cpu].core_key < entries
            && topo[cpu].core_key != cpu
            && usable(cpus, num_cpus, topo[cpu].core_key)
            && topo[topo[cpu].core_key].node == topo[cpu].node) {
            from = topo[cpu].core_key;
        }
        table[cpu] = table[from];
    }
}

int pf_topo_layout(const pf_topo_cpu_t *topo, int entries, const int *cpus,
                   int num_cpus, int per_listen, pf_steer_cpu_entry_t *table)
{
    placed_t *placed;
    node_part_t *parts;
    int nodes, k;

    if (!valid_input(topo, entries, cpus, num_cpus) || per_listen < 1
        || table == NULL) {
        return -1;
    }
    placed = place(topo, cpus, num_cpus);
    parts = malloc(sizeof(*parts) * (size_t)num_cpus);
    if (placed == NULL || parts == NULL) {
        free(placed);
        free(parts);
        return -1;
    }
    nodes = split_nodes(placed, num_cpus, parts);
    if (per_listen >= nodes) {
        share_shards(parts, nodes, per_listen, num_cpus);
        for (k = 0; k < nodes; k++) {
            lay_out_node(placed, &parts[k], table);
        }
    }
    else {
        lay_out_shared(placed, parts, nodes, per_listen, table);
    }
    fill_unusable(topo, entries, cpus, num_cpus, placed, parts, nodes, table);
    free(placed);
    free(parts);
    return 0;
}

int pf_topo_shard_cpus(const pf_steer_cpu_entry_t *table, int entries,
                       const int *cpus, int num_cpus, int shard, int *out)
{
    const pf_steer_cpu_entry_t *e;
    int i, n = 0;

    if (table == NULL || cpus == NULL || out == NULL || num_cpus < 1
        || shard < 0) {
        return -1;
    }
    for (i = 0; i < num_cpus; i++) {
        if (cpus[i] < 0 || cpus[i] >= entries) {
            return -1;
        }
        e = &table[cpus[i]];
        if ((pf_u32)shard >= e->first_shard
            && (pf_u32)shard - e->first_shard < e->span) {
            out[n++] = cpus[i];
        }
    }
    return n;
}
