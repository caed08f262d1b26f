/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * steering/prefork_topology.c, for "local" steering (locality that can
 * borrow): the CPU topology read from fake sysfs trees, among them two
 * packages whose CPU numbers interleave, and the layout of buckets over
 * it.  The program's choice of bucket over that layout is the steering
 * rules' (test_prefork_steering_rules.c).
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/steering/prefork_topology.c"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "steering/prefork_steering_rules.h"

/* ------------------------------------------------------------------ */
/* CPU lists                                                           */

typedef struct {
    const char *text;
    int count;          /* -1: garbage */
    int lowest;
    const char *members;    /* '1' for each member below 12 */
} list_row_t;

static const list_row_t list_rows[] = {
    { "0-3\n", 4, 0, "111100000000" },
    { "0,2,4,6\n", 4, 0, "101010100000" },
    { "8-11,1", 5, 1, "010000001111" },
    { "5", 1, 5, "000001000000" },
    { "\n", 0, -1, "000000000000" },
    { "", 0, -1, "000000000000" },
    { "0-2,40-41\n", 5, 0, "111000000000" },
    { "3-1\n", -1, 0, NULL },
    { "zz\n", -1, 0, NULL },
    { "1,,2", -1, 0, NULL },
    { "1,", -1, 0, NULL },
    { "-1", -1, 0, NULL },
    { "1-", -1, 0, NULL },
    { "0-3\n4", -1, 0, NULL },
    { "99999999999", -1, 0, NULL },
    { "1 2", -1, 0, NULL },
};

START_TEST(test_cpu_lists_parse_or_are_refused)
{
    const list_row_t *row = &list_rows[_i];
    unsigned char member[12];
    int lowest = 77, count, c;

    memset(member, 0, sizeof(member));
    count = pf_topo_parse_list(row->text, member, 12, &lowest);
    ck_assert_msg(count == row->count, "'%s': %d, expected %d", row->text,
                  count, row->count);
    if (row->count < 0) {
        return;
    }
    ck_assert_int_eq(lowest, row->lowest);
    for (c = 0; c < 12; c++) {
        ck_assert_msg(member[c] == (row->members[c] == '1'),
                      "'%s': CPU %d", row->text, c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fake sysfs trees                                                    */

#define TREE_CPUS 8

/* One fake host: per CPU its package, core_id and siblings file contents
 * (NULL: no file), and its nodes' cpulist files (NULL: no node
 * directory at all). */
typedef struct {
    const char *label;
    int num_cpus;
    const char *package[TREE_CPUS];
    const char *core[TREE_CPUS];
    const char *siblings[TREE_CPUS];
    const char *nodes[4];       /* cpulist of node0..node3; NULL ends */
    int no_node_dir;
    /* Expected: pf_topo_read()'s result, and per CPU */
    int nodes_read;
    int node[TREE_CPUS];
    int pkg[TREE_CPUS];
    int core_key[TREE_CPUS];
    /* Expected layout of all CPUs usable, 2 and 4 buckets per Listen:
     * the first shard of each CPU (a core owns two of four shards when
     * there are two cores). */
    int shard2[TREE_CPUS];
    int shard4[TREE_CPUS];
} tree_row_t;

static const tree_row_t tree_rows[] = {
    /* One package, four cores, no SMT: the plain case. */
    { "plain, one node", 4,
      { "0", "0", "0", "0" }, { "0", "1", "2", "3" },
      { "0", "1", "2", "3" }, { "0-3\n" }, 0,
      1, { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 0, 1, 2, 3 },
      { 0, 0, 1, 1 }, { 0, 1, 2, 3 } },
    /* Two packages numbered alternately (even CPUs on node 0, odd on
     * node 1), each core's SMT sibling four numbers up: CPUs 0 and 4 are
     * one core of package 0, 1 and 5 one core of package 1. */
    { "two packages, interleaved, SMT", 8,
      { "0", "1", "0", "1", "0", "1", "0", "1" },
      { "0", "0", "1", "1", "0", "0", "1", "1" },
      { "0,4", "1,5", "2,6", "3,7", "0,4", "1,5", "2,6", "3,7" },
      { "0,2,4,6\n", "1,3,5,7\n" }, 0,
      2, { 0, 1, 0, 1, 0, 1, 0, 1 }, { 0, 1, 0, 1, 0, 1, 0, 1 },
      { 0, 1, 2, 3, 0, 1, 2, 3 },
      { 0, 1, 0, 1, 0, 1, 0, 1 }, { 0, 2, 1, 3, 0, 2, 1, 3 } },
    /* Two packages numbered alternately, no SMT. */
    { "two packages, interleaved", 4,
      { "0", "1", "0", "1" }, { "0", "0", "1", "1" },
      { "0", "1", "2", "3" }, { "0,2", "1,3" }, 0,
      2, { 0, 1, 0, 1 }, { 0, 1, 0, 1 }, { 0, 1, 2, 3 },
      { 0, 1, 0, 1 }, { 0, 2, 1, 3 } },
    /* A kernel without NUMA shows no node directory: one node. */
    { "no node directory", 4,
      { "0", "0", "0", "0" }, { "0", "0", "1", "1" },
      { "0-1", "0-1", "2-3", "2-3" }, { NULL }, 1,
      0, { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 2, 2 },
      { 0, 0, 1, 1 }, { 0, 0, 2, 2 } },
    /* Garbage: node 1's list, CPU 1's package and siblings, CPU 2's
     * core_id and siblings (its siblings name a CPU above it); CPU 3's
     * siblings are missing and no CPU below it has its package and
     * core_id.  Each is then its own core, and CPUs no node lists go on
     * the lowest listed node; an unknown package orders first. */
    { "garbage files", 4,
      { "0", "x", "0", "0" }, { "0", "1", "-3", "2" },
      { "0", "1,,", "3", NULL }, { "0-1\n", "2-3zz" }, 0,
      1, { 0, 0, 0, 0 }, { 0, -1, 0, 0 }, { 0, 1, 2, 3 },
      { 0, 0, 1, 1 }, { 1, 0, 2, 3 } },
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void make_dirs(char *path)
{
    char *slash;

    for (slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    mkdir(path, 0755);
}

/* Writes @a row's tree under a new directory; returns it. */
static char *make_tree(const tree_row_t *row)
{
    static char root[64];
    char path[256];
    int cpu, node;

    strcpy(root, "/tmp/pfb-topo-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    for (cpu = 0; cpu < row->num_cpus; cpu++) {
        snprintf(path, sizeof(path),
                 "%s/sys/devices/system/cpu/cpu%d/topology", root, cpu);
        make_dirs(path);
        snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
                 "topology/physical_package_id", root, cpu);
        write_file(path, row->package[cpu]);
        snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
                 "topology/core_id", root, cpu);
        write_file(path, row->core[cpu]);
        if (row->siblings[cpu] != NULL) {
            snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/"
                     "topology/thread_siblings_list", root, cpu);
            write_file(path, row->siblings[cpu]);
        }
    }
    for (node = 0; !row->no_node_dir && node < 4 && row->nodes[node];
         node++) {
        snprintf(path, sizeof(path), "%s/sys/devices/system/node/node%d",
                 root, node);
        make_dirs(path);
        strcat(path, "/cpulist");
        write_file(path, row->nodes[node]);
    }
    if (!row->no_node_dir) {
        /* Entries that are no node: skipped. */
        snprintf(path, sizeof(path), "%s/sys/devices/system/node/power",
                 root);
        make_dirs(path);
        snprintf(path, sizeof(path), "%s/sys/devices/system/node/has_cpu",
                 root);
        write_file(path, "0-7\n");
    }
    return root;
}

static void remove_tree(const char *root)
{
    char command[128];

    snprintf(command, sizeof(command), "rm -rf '%s'", root);
    ck_assert_int_eq(system(command), 0);
}

START_TEST(test_fake_sysfs_trees_read_and_lay_out)
{
    const tree_row_t *row = &tree_rows[_i];
    pf_topo_cpu_t topo[TREE_CPUS];
    pf_steer_cpu_entry_t table[TREE_CPUS];
    int cpus[TREE_CPUS], cpu, nodes, per_listen;
    char *root = make_tree(row);

    nodes = pf_topo_read(root, topo, row->num_cpus);
    remove_tree(root);
    ck_assert_msg(nodes == row->nodes_read, "%s: %d nodes read",
                  row->label, nodes);
    for (cpu = 0; cpu < row->num_cpus; cpu++) {
        cpus[cpu] = cpu;
        ck_assert_msg(topo[cpu].node == row->node[cpu], "%s: CPU %d node %d",
                      row->label, cpu, topo[cpu].node);
        ck_assert_msg(topo[cpu].package == row->pkg[cpu],
                      "%s: CPU %d package %d", row->label, cpu,
                      topo[cpu].package);
        ck_assert_msg(topo[cpu].core_key == row->core_key[cpu],
                      "%s: CPU %d core %d", row->label, cpu,
                      topo[cpu].core_key);
    }
    for (per_listen = 2; per_listen <= 4; per_listen += 2) {
        const int *want = per_listen == 2 ? row->shard2 : row->shard4;

        ck_assert_int_eq(pf_topo_layout(topo, row->num_cpus, cpus,
                                        row->num_cpus, per_listen, table), 0);
        for (cpu = 0; cpu < row->num_cpus; cpu++) {
            ck_assert_msg((int)table[cpu].first_shard == want[cpu]
                              && table[cpu].span >= 1,
                          "%s, %d buckets: CPU %d to shard %u (span %u), "
                          "expected %d", row->label, per_listen, cpu,
                          table[cpu].first_shard, table[cpu].span, want[cpu]);
        }
    }
}
END_TEST

/* The interleaved host's node ranges, and its CPUs outside the mask. */
START_TEST(test_interleaved_nodes_get_their_own_shards)
{
    const tree_row_t *row = &tree_rows[1];
    pf_topo_cpu_t topo[TREE_CPUS];
    pf_steer_cpu_entry_t table[TREE_CPUS];
    int all[] = { 0, 1, 2, 3, 4, 5, 6, 7 }, some[] = { 0, 1, 3 };
    int out[TREE_CPUS], cpu, n;
    char *root = make_tree(row);

    ck_assert_int_eq(pf_topo_read(root, topo, TREE_CPUS), 2);
    remove_tree(root);
    ck_assert_int_eq(pf_topo_nodes(topo, TREE_CPUS, all, 8), 2);
    ck_assert_int_eq(pf_topo_layout(topo, TREE_CPUS, all, 8, 4, table), 0);
    for (cpu = 0; cpu < TREE_CPUS; cpu++) {
        ck_assert_uint_eq(table[cpu].node_first, cpu % 2 == 0 ? 0 : 2);
        ck_assert_uint_eq(table[cpu].node_span, 2);
    }
    /* Shard 2 is fed by the core of CPUs 1 and 5, on node 1. */
    n = pf_topo_shard_cpus(table, TREE_CPUS, all, 8, 2, out);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 5);

    /* Only CPUs 0, 1 and 3 usable: node 0 has one CPU, node 1 two; three
     * shards go one to node 0, two to node 1.  Outside the mask, CPUs 5
     * and 7 count as their siblings 1 and 3; CPUs 2 and 6, whose core has
     * no usable CPU, as the first of their node, CPU 0. */
    ck_assert_int_eq(pf_topo_layout(topo, TREE_CPUS, some, 3, 3, table), 0);
    ck_assert_uint_eq(table[0].first_shard, 0);
    ck_assert_uint_eq(table[0].node_span, 1);
    ck_assert_uint_eq(table[1].first_shard, 1);
    ck_assert_uint_eq(table[3].first_shard, 2);
    ck_assert_uint_eq(table[3].node_first, 1);
    ck_assert_uint_eq(table[3].node_span, 2);
    ck_assert_uint_eq(table[2].first_shard, table[0].first_shard);
    ck_assert_uint_eq(table[5].first_shard, table[1].first_shard);
    ck_assert_uint_eq(table[7].first_shard, table[3].first_shard);
    ck_assert_uint_eq(table[6].first_shard, table[0].first_shard);
    ck_assert_uint_eq(table[6].node_first, 0);
}
END_TEST

/* Layouts of random topologies: every entry fits the Listen and holds its
 * own shards inside its node's; with at least as many shards as nodes, a
 * shard's CPUs are all on one node and every shard is fed; thread
 * siblings always share their shards. */
START_TEST(test_layout_properties)
{
    pf_topo_cpu_t topo[64];
    pf_steer_cpu_entry_t table[64];
    int cpus[64], out[64];
    unsigned char usable[64];
    int round;

    srand(23);
    for (round = 0; round < 500; round++) {
        int entries = 1 + rand() % 64, nodes = 1 + rand() % 4;
        int per_listen = 1 + rand() % 20, m = 0, cpu, k, j, n, seen;
        int interleave = rand() % 2, smt = 1 + rand() % 2;

        for (cpu = 0; cpu < entries; cpu++) {
            topo[cpu].node = interleave ? cpu % nodes
                                        : cpu * nodes / entries;
            topo[cpu].package = topo[cpu].node;
            topo[cpu].core = cpu / smt;
            /* SMT siblings half the range apart, as many hosts number
             * them. */
            topo[cpu].core_key = smt == 2 && cpu >= (entries + 1) / 2
                                     ? cpu - (entries + 1) / 2
                                     : cpu;
            if (topo[topo[cpu].core_key].node != topo[cpu].node) {
                topo[cpu].core_key = cpu;
            }
            usable[cpu] = rand() % 4 != 0;
            if (usable[cpu]) {
                cpus[m++] = cpu;
            }
        }
        if (m == 0) {
            cpus[m++] = entries - 1;
            usable[entries - 1] = 1;
        }
        ck_assert_int_eq(pf_topo_layout(topo, entries, cpus, m, per_listen,
                                        table), 0);
        for (cpu = 0; cpu < entries; cpu++) {
            const pf_steer_cpu_entry_t *e = &table[cpu];

            ck_assert_uint_ge(e->span, 1);
            ck_assert_uint_le(e->first_shard + e->span, per_listen);
            ck_assert_uint_le(e->node_first, e->first_shard);
            ck_assert_uint_le(e->first_shard + e->span,
                              e->node_first + e->node_span);
            if (topo[cpu].core_key != cpu && usable[topo[cpu].core_key]) {
                ck_assert_uint_eq(e->first_shard,
                                  table[topo[cpu].core_key].first_shard);
            }
        }
        if (per_listen < pf_topo_nodes(topo, entries, cpus, m)) {
            continue;
        }
        for (k = 0; k < per_listen; k++) {
            n = pf_topo_shard_cpus(table, entries, cpus, m, k, out);
            ck_assert_msg(n >= 1, "shard %d of %d has no CPU", k,
                          per_listen);
            seen = n > 0 ? topo[out[0]].node : -1;
            for (j = 1; j < n; j++) {
                ck_assert_msg(topo[out[j]].node == seen, "shard %d of %d "
                              "spans nodes %d and %d", k, per_listen, seen,
                              topo[out[j]].node);
            }
        }
    }
}
END_TEST

START_TEST(test_layout_rejects_bad_input)
{
    pf_topo_cpu_t topo[4] = { { 0, 0, 0, 0 }, { 0, 0, 1, 1 },
                              { 0, 0, 2, 2 }, { 0, 0, 3, 3 } };
    pf_steer_cpu_entry_t table[4];
    int good[] = { 0, 1 }, unsorted[] = { 1, 0 }, beyond[] = { 0, 4 };
    int out[4];

    ck_assert_int_eq(pf_topo_layout(topo, 4, good, 2, 2, table), 0);
    ck_assert_int_eq(pf_topo_layout(topo, 4, unsorted, 2, 2, table), -1);
    ck_assert_int_eq(pf_topo_layout(topo, 4, beyond, 2, 2, table), -1);
    ck_assert_int_eq(pf_topo_layout(topo, 4, good, 0, 2, table), -1);
    ck_assert_int_eq(pf_topo_layout(topo, 4, good, 2, 0, table), -1);
    ck_assert_int_eq(pf_topo_layout(NULL, 4, good, 2, 2, table), -1);
    ck_assert_int_eq(pf_topo_layout(topo, 4, good, 2, 2, NULL), -1);
    ck_assert_int_eq(pf_topo_shard_cpus(table, 4, beyond, 2, 0, out), -1);
    ck_assert_int_eq(pf_topo_read(NULL, topo, 4), -1);
    ck_assert_int_eq(pf_topo_read("/nonexistent", topo, 0), -1);
    /* A root with nothing under it: every CPU its own core, one node. */
    ck_assert_int_eq(pf_topo_read("/nonexistent", topo, 4), 0);
    ck_assert_int_eq(topo[3].core_key, 3);
    ck_assert_int_eq(topo[3].node, 0);
    ck_assert_int_eq(topo[3].package, -1);
}
END_TEST

Suite *topology_suite(void)
{
    Suite *s = suite_create("topology");
    TCase *tc = tcase_create("sysfs");

    tcase_add_loop_test(tc, test_cpu_lists_parse_or_are_refused, 0,
                        (int)(sizeof(list_rows) / sizeof(list_rows[0])));
    tcase_add_loop_test(tc, test_fake_sysfs_trees_read_and_lay_out, 0,
                        (int)(sizeof(tree_rows) / sizeof(tree_rows[0])));
    tcase_add_test(tc, test_interleaved_nodes_get_their_own_shards);
    suite_add_tcase(s, tc);

    tc = tcase_create("layout");
    tcase_add_test(tc, test_layout_properties);
    tcase_add_test(tc, test_layout_rejects_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
