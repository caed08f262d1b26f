/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The kernel tests' reuseport group (steer_group.h).  Check's asserts
 * stop the test that called in on any failure.
 */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include "apr_portable.h"

#include "unit.h"
#include "steer_group.h"
#include "prefork_buckets.h"
#include "steering/prefork_steering_kernel.h"

void steer_group_open(steer_group_t *g, int n, int outsider)
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

void steer_group_close(steer_group_t *g)
{
    int k;

    for (k = 0; k < g->n; k++) {
        close(g->fds[k]);
    }
    pf_steer_kernel_close(g->map_fd);
    apr_pool_destroy(g->pool);
}

int steer_group_load(steer_group_t *g, int mode, int first, int per_listen,
                     int map_fd, int idle_fd, int capacity, int cpu_fd)
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
