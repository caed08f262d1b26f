/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * steering/prefork_steering_kernel.c: the steering programs against the
 * running kernel (root only; the runner leaves this suite out, and says
 * so, for other users).  The verifier accepts every program of
 * prefork_steering.bpf.c for Listens of 2 to 300 buckets, loaded through
 * libbpf as the MPM loads them, and on a real SO_REUSEPORT group on
 * loopback they send connections where the rules say: idle to the one
 * idle bucket, or spread by the hash when all are idle; cpu to the
 * connecting CPU's bucket; hash over every bucket; and none of them ever
 * to a socket that joined the group from outside.  And the socket maps:
 * when the guard replaces a bucket socket, the connections queued on the
 * old one reach the new one, both where steering's program chooses the
 * socket through the map and where a handover's program does it on a
 * group that has none.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/steering/prefork_steering_kernel.c"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "ap_config.h"
#include "apr_general.h"
#include "apr_portable.h"

#include "unit.h"
#include "prefork_buckets.h"
#include "steering/prefork_cpus.h"
#include "guard/prefork_sockguard.h"

#ifdef HAVE_BPF_STEERING

/* ------------------------------------------------------------------ */
/* A reuseport group of listening sockets on loopback with a socket map
 * and the steering programs loaded as the MPM loads them: what the tests
 * run their connections against.  Check's asserts stop the test that
 * called in on any failure. */

#define STEER_GROUP_MAX 8
#define STEER_MAP_CAPACITY 16

typedef struct {
    apr_pool_t *pool;
    int fds[STEER_GROUP_MAX];
    apr_socket_t *socks[STEER_GROUP_MAX];
    int n;                      /* sockets in the group */
    int outsider;               /* the position of one not in the map, or
                                   -1 */
    struct sockaddr_in addr;
    int map_fd;                 /* the socket map: bucket -> socket */
} steer_group_t;

/* n listening sockets on one loopback port, in one reuseport group, in
 * order; with an outsider at position @a outsider (-1 for none), which
 * joins the group but not the map.  The others go into a socket map under
 * their bucket numbers. */
static void steer_group_open(steer_group_t *g, int n, int outsider)
{
    socklen_t len = sizeof(g->addr);
    int one = 1, k, bucket;
    apr_status_t rv;

    memset(g, 0, sizeof(*g));
    ck_assert_int_le(n, STEER_GROUP_MAX);
    ck_assert_int_eq(apr_pool_create(&g->pool, NULL), APR_SUCCESS);
    g->n = n;
    g->outsider = outsider;
    g->addr.sin_family = AF_INET;
    g->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (k = 0; k < n; k++) {
        g->fds[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(g->fds[k], 0);
        ck_assert_int_eq(setsockopt(g->fds[k], SOL_SOCKET, SO_REUSEPORT, &one,
                                    sizeof(one)), 0);
        ck_assert_msg(bind(g->fds[k], (struct sockaddr *)&g->addr,
                           sizeof(g->addr)) == 0, "bind: %s", strerror(errno));
        if (k == 0) {
            ck_assert_int_eq(getsockname(g->fds[0],
                                         (struct sockaddr *)&g->addr, &len),
                             0);
        }
        ck_assert_int_eq(listen(g->fds[k], 64), 0);
        fcntl(g->fds[k], F_SETFL, O_NONBLOCK);
        ck_assert_int_eq(apr_os_sock_put(&g->socks[k], &g->fds[k], g->pool),
                         APR_SUCCESS);
    }
    rv = pf_steer_kernel_socket_map(STEER_MAP_CAPACITY, &g->map_fd);
    ck_assert_msg(rv == APR_SUCCESS, "socket map: %s", strerror(rv));
    for (k = 0, bucket = 0; k < n; k++) {
        if (k == outsider) {
            continue;
        }
        rv = pf_steer_kernel_put_socket(g->map_fd, bucket++, g->socks[k]);
        ck_assert_msg(rv == APR_SUCCESS, "socket %d into map: %s", k,
                      strerror(rv));
    }
}

static void steer_group_close(steer_group_t *g)
{
    int k;

    for (k = 0; k < g->n; k++) {
        close(g->fds[k]);
    }
    pf_steer_kernel_close(g->map_fd);
    apr_pool_destroy(g->pool);
}

/* Loads @a mode's program for a Listen of @a per_listen buckets from
 * @a first, as the MPM does, and attaches it to the group if one is
 * given. */
static int steer_group_load(steer_group_t *g, int mode, int first,
                            int per_listen, int map_fd, int idle_fd,
                            int capacity, int cpu_fd)
{
    pf_steer_program_t spec;
    char line[512];
    int prog_fd = -1, hands_over = 0;
    apr_status_t rv;

    memset(&spec, 0, sizeof(spec));
    spec.mode = mode;
    spec.listen.first_bucket = (pf_u32)first;
    spec.listen.per_listen = (pf_u32)per_listen;
    spec.listen.probes = (pf_u32)pf_steer_idle_probes(per_listen);
    spec.listen.capacity = (pf_u32)capacity;
    spec.socks_fd = map_fd;
    spec.idle_fd = idle_fd;
    spec.cpu_fd = cpu_fd;
    rv = pf_steer_kernel_load(&spec, &prog_fd, &hands_over, line,
                              sizeof(line));
    ck_assert_msg(rv == APR_SUCCESS, "the kernel refused the %s program "
                  "for %d buckets from %d (%s): %s", pfb_steer_name(mode),
                  per_listen, first, strerror(rv), line);
    if (g != NULL) {
        rv = pf_steer_kernel_attach(g->socks[0], prog_fd);
        ck_assert_msg(rv == APR_SUCCESS, "SO_ATTACH_REUSEPORT_EBPF: %s",
                      strerror(rv));
    }
    return prog_fd;
}


/* The bucket of group position k: positions after the outsider's are one
 * bucket lower; the outsider's is -2. */
static int bucket_of(const steer_group_t *g, int k)
{
    if (g->outsider < 0 || k < g->outsider) {
        return k;
    }
    return k == g->outsider ? -2 : k - 1;
}

/* Connects once and says which bucket got the connection (-2 for the
 * outsider, -1 if none did). */
static int connect_and_find(steer_group_t *g)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), k, got = -1;
    int tries;

    ck_assert_int_ge(c, 0);
    ck_assert_msg(connect(c, (struct sockaddr *)&g->addr, sizeof(g->addr))
                      == 0, "connect: %s", strerror(errno));
    for (tries = 0; tries < 2000 && got == -1; tries++) {
        for (k = 0; k < g->n; k++) {
            int a = accept(g->fds[k], NULL, NULL);

            if (a >= 0) {
                close(a);
                got = bucket_of(g, k);
                break;
            }
        }
        if (got == -1) {
            usleep(1000);
        }
    }
    close(c);
    return got;
}

/* The cpu table of this process's affinity mask, for @a per_listen. */
static int cpu_map(int per_listen, int *cpus, int *m)
{
    pf_cpu_run_t runs[256];
    pf_steer_cpu_entry_t table[1024];
    int nruns, entries = pf_steer_kernel_possible_cpus(), fd = -1;
    apr_status_t rv;

    *m = pf_cpus_affinity(cpus, 256);
    ck_assert_int_ge(*m, 1);
    ck_assert_int_ge(entries, cpus[*m - 1] + 1);
    ck_assert_int_le(entries, 1024);
    nruns = pf_steer_cpu_runs(cpus, *m, per_listen, runs);
    ck_assert_int_eq(pf_steer_cpu_table(runs, nruns, table, entries), 0);
    rv = pf_steer_kernel_cpu_map(table, entries, &fd);
    ck_assert_msg(rv == APR_SUCCESS, "cpu map: %s", strerror(rv));
    return fd;
}

/* Every program, every size of Listen, at the start of the table and
 * further in: the verifier accepts them all. */
START_TEST(test_kernel_verifies_every_program)
{
    static const int sizes[] = { 2, 3, 4, 16, 17, 18, 64, 300 };
    static const int modes[] = { PFB_STEER_HASH, PFB_STEER_IDLE,
                                 PFB_STEER_CPU, PFB_STEER_LOCAL };
    int cpus[256], m, socks_fd, idle_fd, cpu_fd, i, j, first;
    pf_steer_bucket_t *table;
    size_t len;
    apr_status_t rv;

    rv = pf_steer_kernel_socket_map(1024, &socks_fd);
    ck_assert_msg(rv == APR_SUCCESS, "socket map: %s", strerror(rv));
    rv = pf_steer_kernel_idle_table(1024, &idle_fd, &table, &len);
    ck_assert_msg(rv == APR_SUCCESS, "idle table: %s", strerror(rv));
    for (i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++) {
        cpu_fd = cpu_map(sizes[i], cpus, &m);
        for (j = 0; j < (int)(sizeof(modes) / sizeof(modes[0])); j++) {
            for (first = 0; first <= 2 * sizes[i]; first += 2 * sizes[i]) {
                pf_steer_kernel_close(
                    steer_group_load(NULL, modes[j], first, sizes[i], socks_fd,
                                     modes[j] == PFB_STEER_IDLE
                                             || modes[j] == PFB_STEER_LOCAL
                                         ? idle_fd
                                         : -1,
                                     1024,
                                     modes[j] == PFB_STEER_CPU
                                             || modes[j] == PFB_STEER_LOCAL
                                         ? cpu_fd
                                         : -1));
            }
        }
        pf_steer_kernel_close(cpu_fd);
    }
    pf_steer_kernel_unmap(table, len);
    pf_steer_kernel_close(idle_fd);
    pf_steer_kernel_close(socks_fd);
}
END_TEST

START_TEST(test_kernel_socket_map_steps)
{
    steer_group_t g;
    apr_uint64_t cookie = 0, held = 0;

    steer_group_open(&g, 2, -1);
    ck_assert_int_eq(pf_steer_kernel_cookie(g.socks[1], &cookie),
                     APR_SUCCESS);
    ck_assert_int_eq(pf_steer_kernel_socket_at(g.map_fd, 1, &held),
                     APR_SUCCESS);
    ck_assert(held == cookie && cookie != 0);
    ck_assert_int_eq(pf_steer_kernel_socket_at(g.map_fd, 5, &held), ENOENT);
    /* A socket is in one map under one key at a time. */
    ck_assert_int_ne(pf_steer_kernel_put_socket(g.map_fd, 5, g.socks[1]),
                     APR_SUCCESS);
    ck_assert_int_eq(pf_steer_kernel_clear_socket(g.map_fd, 1), APR_SUCCESS);
    ck_assert_int_eq(pf_steer_kernel_clear_socket(g.map_fd, 1), APR_SUCCESS);
    ck_assert_int_eq(pf_steer_kernel_socket_at(g.map_fd, 1, &held), ENOENT);
    ck_assert_int_eq(pf_steer_kernel_put_socket(g.map_fd, 5, g.socks[1]),
                     APR_SUCCESS);
    steer_group_close(&g);
}
END_TEST

/* idle on a real group of four buckets and an outsider. */
START_TEST(test_kernel_runs_idle_program)
{
    pf_steer_bucket_t *stats = NULL;
    size_t stats_len = 0;
    int idle_fd = -1, prog_fd, k, i, got, seen[4] = { 0, 0, 0, 0 };
    steer_group_t g;
    apr_status_t rv;

    steer_group_open(&g, 5, 2);
    rv = pf_steer_kernel_idle_table(STEER_MAP_CAPACITY, &idle_fd, &stats,
                                    &stats_len);
    ck_assert_msg(rv == APR_SUCCESS, "idle table: %s", strerror(rv));
    prog_fd = steer_group_load(&g, PFB_STEER_IDLE, 0, 4, g.map_fd, idle_fd,
                               STEER_MAP_CAPACITY, -1);

    /* Only bucket 2 has idle children: everything goes there, whatever
     * the hash says. */
    stats[2].idle = 100;
    for (i = 0; i < 24; i++) {
        got = connect_and_find(&g);
        ck_assert_msg(got == 2, "connection %d went to bucket %d", i, got);
    }
    ck_assert_int_eq(stats[2].idle, 100 - 24);
    ck_assert_uint_eq(stats[2].kept + stats[2].moved, 24);
    ck_assert_uint_gt(stats[2].moved, 0);
    for (k = 0; k < 4; k++) {
        if (k != 2) {
            ck_assert_uint_eq(stats[k].kept + stats[k].moved, 0);
        }
    }

    /* Every bucket idle: the program keeps the kernel's hash, and the
     * connections spread over all four, none to the outsider. */
    for (k = 0; k < 4; k++) {
        stats[k].idle = 1000;
        stats[k].kept = stats[k].moved = 0;
    }
    for (i = 0; i < 200; i++) {
        got = connect_and_find(&g);
        ck_assert_msg(got >= 0, "connection %d went to %s", i,
                      got == -2 ? "the outsider" : "nobody");
        seen[got]++;
    }
    for (k = 0; k < 4; k++) {
        ck_assert_msg(seen[k] > 10, "bucket %d got %d of 200", k, seen[k]);
        ck_assert_uint_eq(stats[k].kept, (unsigned)seen[k]);
        ck_assert_uint_eq(stats[k].moved, 0);
    }

    ck_assert_int_eq(pf_steer_kernel_detach(g.socks[1]), APR_SUCCESS);
    pf_steer_kernel_close(prog_fd);
    pf_steer_kernel_unmap(stats, stats_len);
    pf_steer_kernel_close(idle_fd);
    steer_group_close(&g);
}
END_TEST

/* hash spreads over every bucket of the map and gives an outsider
 * nothing; with the program detached, the kernel's own hash does give it
 * a share (the control: the test above can fail). */
START_TEST(test_kernel_runs_hash_program)
{
    int prog_fd, k, i, got, seen[4], outsider;
    steer_group_t g;

    steer_group_open(&g, 5, 2);
    prog_fd = steer_group_load(&g, PFB_STEER_HASH, 0, 4, g.map_fd, -1,
                               STEER_MAP_CAPACITY, -1);
    memset(seen, 0, sizeof(seen));
    for (i = 0; i < 200; i++) {
        got = connect_and_find(&g);
        ck_assert_msg(got >= 0, "connection %d went to %s", i,
                      got == -2 ? "the outsider" : "nobody");
        seen[got]++;
    }
    for (k = 0; k < 4; k++) {
        ck_assert_msg(seen[k] > 10, "bucket %d got %d of 200", k, seen[k]);
    }
    ck_assert_int_eq(pf_steer_kernel_detach(g.socks[0]), APR_SUCCESS);
    for (i = 0, outsider = 0; i < 200; i++) {
        outsider += connect_and_find(&g) == -2;
    }
    ck_assert_int_gt(outsider, 0);
    pf_steer_kernel_close(prog_fd);
    steer_group_close(&g);
}
END_TEST

/* A key left empty (a bucket socket being replaced) sends its
 * connections to the next shard with a socket, never to the kernel's
 * hash, which would give the outsider a share; with every key empty,
 * nothing is chosen and the SYN is dropped. */
START_TEST(test_kernel_never_falls_back_to_the_kernels_hash)
{
    int prog_fd, i, got, seen[4], c, k, a, tries, taken = 0;
    steer_group_t g;

    steer_group_open(&g, 5, 2);
    prog_fd = steer_group_load(&g, PFB_STEER_HASH, 0, 4, g.map_fd, -1,
                               STEER_MAP_CAPACITY, -1);
    ck_assert_int_eq(pf_steer_kernel_clear_socket(g.map_fd, 1), APR_SUCCESS);
    ck_assert_int_eq(pf_steer_kernel_clear_socket(g.map_fd, 3), APR_SUCCESS);
    memset(seen, 0, sizeof(seen));
    for (i = 0; i < 100; i++) {
        got = connect_and_find(&g);
        ck_assert_msg(got == 0 || got == 2, "connection %d went to %d", i,
                      got);
        seen[got]++;
    }
    ck_assert_int_gt(seen[0], 0);
    ck_assert_int_gt(seen[2], 0);
    for (k = 0; k < 4; k++) {
        pf_steer_kernel_clear_socket(g.map_fd, k);
    }
    c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    connect(c, (struct sockaddr *)&g.addr, sizeof(g.addr));
    for (tries = 0; tries < 100; tries++) {
        for (k = 0; k < g.n; k++) {
            if ((a = accept(g.fds[k], NULL, NULL)) >= 0) {
                close(a);
                taken++;
            }
        }
        usleep(2000);
    }
    ck_assert_int_eq(taken, 0);
    close(c);
    pf_steer_kernel_close(prog_fd);
    steer_group_close(&g);
}
END_TEST

/* cpu on a real group: a connection made from CPU c lands in the shard
 * the layout gives c, through the map, with an outsider in the group at
 * the position the classic program used to return for shard 2. */
START_TEST(test_kernel_runs_cpu_program)
{
    int cpus[256], out[256];
    int m, j, i, got, per_listen, cpu_fd, prog_fd;
    steer_group_t g;

    for (per_listen = 2; per_listen <= 4; per_listen += 2) {
        steer_group_open(&g, per_listen + 1, per_listen);
        cpu_fd = cpu_map(per_listen, cpus, &m);
        prog_fd = steer_group_load(&g, PFB_STEER_CPU, 0, per_listen,
                                   g.map_fd, -1, STEER_MAP_CAPACITY, cpu_fd);
        for (j = 0; j < m && j < 8; j++) {
            ck_assert_int_eq(pf_cpus_pin(&cpus[j], 1), APR_SUCCESS);
            for (i = 0; i < 10; i++) {
                int n, found = 0;

                got = connect_and_find(&g);
                ck_assert_msg(got >= 0, "a connection from CPU %d went to "
                              "%s", cpus[j],
                              got == -2 ? "the outsider" : "nobody");
                n = pf_steer_shard_cpus(cpus, m, per_listen, got, out);
                while (n-- > 0) {
                    found |= out[n] == cpus[j];
                }
                ck_assert_msg(found, "connection from CPU %d went to shard "
                              "%d of %d, not one of that CPU's", cpus[j], got,
                              per_listen);
            }
        }
        ck_assert_int_eq(pf_cpus_pin(cpus, m), APR_SUCCESS);
        ck_assert_int_eq(pf_steer_kernel_detach(g.socks[0]), APR_SUCCESS);
        pf_steer_kernel_close(prog_fd);
        pf_steer_kernel_close(cpu_fd);
        steer_group_close(&g);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The socket maps                                                     */


/* Connections queued on a socket that stops listening go to the socket
 * the group's program chooses, where the kernel can (5.14): the guard's
 * replacement of a bucket socket loses nothing.  Both ways: steering's
 * own program with the new socket under the old one's key, and a
 * handover's program on a group that has none. */
START_TEST(test_kernel_hands_a_closing_sockets_queue_over)
{
    char why[256];
    int prog_fd, clients[6], i, got, fd, one = 1, way;
    apr_socket_t *fresh = NULL;
    steer_group_t g;

    if (!pf_steer_can_hand_over(why, sizeof(why))) {
        printf("steering-map: no handover on this kernel (%s)\n", why);
        return;
    }
    for (way = 0; way < 2; way++) {
        steer_group_open(&g, 1, -1);
        prog_fd = -1;
        if (way == 0) {
            prog_fd = steer_group_load(&g, PFB_STEER_HASH, 0, 1, g.map_fd,
                                       -1, STEER_MAP_CAPACITY, -1);
        }
        for (i = 0; i < 6; i++) {
            clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            ck_assert_int_eq(connect(clients[i], (struct sockaddr *)&g.addr,
                                     sizeof(g.addr)), 0);
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&g.addr, sizeof(g.addr)),
                         0);
        ck_assert_int_eq(listen(fd, 64), 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        ck_assert_int_eq(apr_os_sock_put(&fresh, &fd, g.pool), APR_SUCCESS);
        if (way == 0) {
            ck_assert_int_eq(pf_steer_kernel_put_socket(g.map_fd, 0, fresh),
                             APR_SUCCESS);
            ck_assert_int_eq(shutdown(g.fds[0], SHUT_RDWR), 0);
        }
        else {
            ck_assert_int_eq(pf_steer_handover(fresh, g.fds[0], 0),
                             APR_SUCCESS);
        }
        for (i = 0, got = 0; i < 6; i++) {
            int a = accept(fd, NULL, NULL);

            if (a >= 0) {
                got++;
                close(a);
            }
        }
        ck_assert_msg(got == 6, "way %d: %d of 6 handed over", way, got);
        for (i = 0; i < 6; i++) {
            close(clients[i]);
        }
        close(fd);
        fresh = NULL;
        pf_steer_kernel_close(prog_fd);
        steer_group_close(&g);
    }
}
END_TEST

/* A handshake in flight on the old socket is handed over when its last
 * packet comes, which takes a round trip on a real network, and only if
 * the group still has the program then: where the new socket is its
 * Listen's only one, the handover's program stays on the group.  Seen
 * from outside: a socket that joins the group afterwards gets nothing
 * while the program stays, and its hash share once it is detached. */
START_TEST(test_kernel_handover_program_stays_with_one_socket)
{
    char why[256];
    int stays, i, fd, out, one = 1, taken[2] = { 0, 0 };
    apr_socket_t *fresh = NULL;
    steer_group_t g;

    if (!pf_steer_can_hand_over(why, sizeof(why))) {
        printf("steering-map: no handover on this kernel (%s)\n", why);
        return;
    }
    for (stays = 0; stays < 2; stays++) {
        steer_group_open(&g, 1, -1);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&g.addr, sizeof(g.addr)),
                         0);
        ck_assert_int_eq(listen(fd, 64), 0);
        ck_assert_int_eq(apr_os_sock_put(&fresh, &fd, g.pool), APR_SUCCESS);
        ck_assert_int_eq(pf_steer_handover(fresh, g.fds[0], stays),
                         APR_SUCCESS);
        out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(out, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ck_assert_int_eq(bind(out, (struct sockaddr *)&g.addr,
                              sizeof(g.addr)), 0);
        ck_assert_int_eq(listen(out, 64), 0);
        fcntl(out, F_SETFL, O_NONBLOCK);
        for (i = 0; i < 40; i++) {
            int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), a;

            ck_assert_int_eq(connect(c, (struct sockaddr *)&g.addr,
                                     sizeof(g.addr)), 0);
            if ((a = accept(out, NULL, NULL)) >= 0) {
                taken[stays]++;
                close(a);
            }
            close(c);
        }
        close(out);
        close(fd);
        fresh = NULL;
        steer_group_close(&g);
    }
    ck_assert_msg(taken[1] == 0, "the outsider took %d of 40 with the "
                  "program on the group", taken[1]);
    /* Detached, the kernel's hash gives it about half (none of 40: one
     * chance in 2^40). */
    ck_assert_msg(taken[0] > 0, "the outsider took none of 40 with the "
                  "program detached");
}
END_TEST

Suite *steering_kernel_suite(void)
{
    Suite *s = suite_create("steering-kernel");
    TCase *tc = tcase_create("kernel");

    apr_initialize();
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kernel_verifies_every_program);
    tcase_add_test(tc, test_kernel_socket_map_steps);
    tcase_add_test(tc, test_kernel_runs_idle_program);
    tcase_add_test(tc, test_kernel_runs_hash_program);
    tcase_add_test(tc, test_kernel_never_falls_back_to_the_kernels_hash);
    tcase_add_test(tc, test_kernel_runs_cpu_program);
    suite_add_tcase(s, tc);
    return s;
}

#else /* !HAVE_BPF_STEERING */

/* A build without the programs: every step says so, and detaching (a
 * socket option) still works. */
START_TEST(test_kernel_steps_refuse_without_programs)
{
    pf_steer_program_t spec;
    char line[16] = "x";
    int fd = -1, hands_over = 1;

    memset(&spec, 0, sizeof(spec));
    ck_assert_int_eq(pf_steer_kernel_built(), 0);
    ck_assert_int_eq(pf_steer_kernel_socket_map(16, &fd), APR_ENOTIMPL);
    ck_assert_int_eq(pf_steer_kernel_load(&spec, &fd, &hands_over, line,
                                          sizeof(line)),
                     APR_ENOTIMPL);
    ck_assert_int_eq(hands_over, 0);
    ck_assert_str_eq(line, "");
}
END_TEST

Suite *steering_kernel_suite(void)
{
    Suite *s = suite_create("steering-kernel");
    TCase *tc = tcase_create("kernel");

    tcase_add_test(tc, test_kernel_steps_refuse_without_programs);
    suite_add_tcase(s, tc);
    return s;
}

#endif /* HAVE_BPF_STEERING */

Suite *steering_map_suite(void)
{
    Suite *s = suite_create("steering-map");
    TCase *tc = tcase_create("kernel");

#ifdef HAVE_BPF_STEERING
    apr_initialize();
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kernel_hands_a_closing_sockets_queue_over);
    tcase_add_test(tc, test_kernel_handover_program_stays_with_one_socket);
#endif
    suite_add_tcase(s, tc);
    return s;
}
