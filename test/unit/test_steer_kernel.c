/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The steering programs against the running kernel (root only; the runner
 * leaves this suite out, and says so, for other users): the verifier
 * accepts the idle program, the cpu program attaches, and both send
 * connections where they should on a real SO_REUSEPORT group on loopback.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "apr_general.h"
#include "apr_portable.h"

#include "unit.h"
#include "prefork_steer.h"
#include "prefork_os.h"

#define GROUP_MAX 8

typedef struct {
    apr_pool_t *pool;
    int fds[GROUP_MAX];
    apr_socket_t *socks[GROUP_MAX];
    int n;
    struct sockaddr_in addr;
} group_t;

/* n listening sockets on one loopback port, in one reuseport group, in
 * order: socket k is position k of the group. */
static void open_group(group_t *g, int n)
{
    socklen_t len = sizeof(g->addr);
    int one = 1, k;

    memset(g, 0, sizeof(*g));
    ck_assert_int_eq(apr_pool_create(&g->pool, NULL), APR_SUCCESS);
    g->n = n;
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
}

static void close_group(group_t *g)
{
    int k;

    for (k = 0; k < g->n; k++) {
        close(g->fds[k]);
    }
    apr_pool_destroy(g->pool);
}

/* Connects once and says which socket of the group got the connection
 * (-1 if none did). */
static int connect_and_find(group_t *g)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), k, got = -1;
    int tries;

    ck_assert_int_ge(c, 0);
    ck_assert_msg(connect(c, (struct sockaddr *)&g->addr, sizeof(g->addr))
                      == 0, "connect: %s", strerror(errno));
    for (tries = 0; tries < 200 && got < 0; tries++) {
        for (k = 0; k < g->n; k++) {
            int a = accept(g->fds[k], NULL, NULL);

            if (a >= 0) {
                close(a);
                got = k;
                break;
            }
        }
        if (got < 0) {
            usleep(1000);
        }
    }
    close(c);
    return got;
}

START_TEST(test_kernel_runs_idle_program)
{
    pf_ebpf_insn_t prog[PF_EBPF_IDLE_MAX_INSNS];
    pf_idle_program_t spec;
    pf_steer_bucket_t *stats = NULL;
    size_t stats_len = 0;
    int stats_fd = -1, socks_fd = -1, prog_fd = -1, len, k, i, got;
    char log[8192];
    group_t g;
    apr_status_t rv;

    open_group(&g, 4);
    rv = pf_os_bpf_create_stats_map(4, &stats_fd, &stats, &stats_len);
    ck_assert_msg(rv == APR_SUCCESS, "stats map: %s", strerror(rv));
    ck_assert_msg(pf_os_bpf_create_socket_map(4, &socks_fd) == APR_SUCCESS,
                  "socket map: %s", strerror(errno));
    for (k = 0; k < 4; k++) {
        rv = pf_os_bpf_set_socket(socks_fd, k, g.socks[k]);
        ck_assert_msg(rv == APR_SUCCESS, "socket %d into map: %s", k,
                      strerror(rv));
    }
    spec.stats_map_fd = stats_fd;
    spec.socks_map_fd = socks_fd;
    spec.first_bucket = 0;
    spec.per_listen = 4;
    spec.probes = pf_steer_idle_probes(4);
    len = pf_steer_build_idle_program(&spec, prog, PF_EBPF_IDLE_MAX_INSNS);
    ck_assert_int_gt(len, 0);
    rv = pf_os_bpf_load_idle_program(prog, len, &prog_fd, log, sizeof(log));
    ck_assert_msg(rv == APR_SUCCESS, "the verifier refused the idle program "
                  "(%s): %s", strerror(rv), log);
    rv = pf_os_attach_idle_program(g.socks[0], prog_fd);
    ck_assert_msg(rv == APR_SUCCESS, "SO_ATTACH_REUSEPORT_EBPF: %s",
                  strerror(rv));

    /* Only bucket 2 has idle children: everything goes there, whatever
     * the hash says. */
    stats[2].idle = 100;
    for (i = 0; i < 24; i++) {
        got = connect_and_find(&g);
        ck_assert_msg(got == 2, "connection %d went to socket %d", i, got);
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
     * connections spread over all four. */
    for (k = 0; k < 4; k++) {
        stats[k].idle = 1000;
        stats[k].kept = stats[k].moved = 0;
    }
    {
        int seen[4] = { 0, 0, 0, 0 };

        for (i = 0; i < 200; i++) {
            got = connect_and_find(&g);
            ck_assert_int_ge(got, 0);
            seen[got]++;
        }
        for (k = 0; k < 4; k++) {
            ck_assert_msg(seen[k] > 10, "socket %d got %d of 200", k,
                          seen[k]);
            ck_assert_uint_eq(stats[k].kept, (unsigned)seen[k]);
            ck_assert_uint_eq(stats[k].moved, 0);
        }
    }

    ck_assert_int_eq(pf_os_detach_steering(g.socks[1]), APR_SUCCESS);
    pf_os_bpf_close(prog_fd);
    pf_os_bpf_close(socks_fd);
    pf_os_bpf_unmap(stats, stats_len);
    pf_os_bpf_close(stats_fd);
    close_group(&g);
}
END_TEST

/* The cpu program on a real group: a connection made from CPU c lands in
 * the shard the layout gives c. */
START_TEST(test_kernel_runs_cpu_program)
{
    int cpus[256], out[256];
    pf_cpu_run_t runs[256];
    pf_cbpf_insn_t prog[PF_CBPF_CPU_INSNS(256)];
    int m, nruns, len, j, i, got, per_listen;
    group_t g;
    apr_status_t rv;

    m = pf_os_affinity_cpus(cpus, 256);
    ck_assert_int_ge(m, 1);
    for (per_listen = 2; per_listen <= 4; per_listen += 2) {
        open_group(&g, per_listen);
        nruns = pf_steer_cpu_runs(cpus, m, per_listen, runs);
        len = pf_steer_build_cpu_program(runs, nruns, prog);
        ck_assert_int_gt(len, 0);
        rv = pf_os_attach_cpu_program(g.socks[0], prog, len);
        ck_assert_msg(rv == APR_SUCCESS, "SO_ATTACH_REUSEPORT_CBPF: %s",
                      strerror(rv));
        for (j = 0; j < m && j < 8; j++) {
            ck_assert_int_eq(pf_os_pin_to_cpus(&cpus[j], 1), APR_SUCCESS);
            for (i = 0; i < 10; i++) {
                int n, found = 0;

                got = connect_and_find(&g);
                ck_assert_int_ge(got, 0);
                n = pf_steer_shard_cpus(cpus, m, per_listen, got, out);
                while (n-- > 0) {
                    found |= out[n] == cpus[j];
                }
                ck_assert_msg(found, "connection from CPU %d went to shard "
                              "%d of %d, not one of that CPU's", cpus[j], got,
                              per_listen);
            }
        }
        ck_assert_int_eq(pf_os_pin_to_cpus(cpus, m), APR_SUCCESS);
        ck_assert_int_eq(pf_os_detach_steering(g.socks[0]), APR_SUCCESS);
        close_group(&g);
    }
}
END_TEST

Suite *steer_kernel_suite(void)
{
    Suite *s = suite_create("steer-kernel");
    TCase *tc = tcase_create("kernel");

    apr_initialize();
    tcase_add_test(tc, test_kernel_runs_idle_program);
    tcase_add_test(tc, test_kernel_runs_cpu_program);
    suite_add_tcase(s, tc);
    return s;
}
