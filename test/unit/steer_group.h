/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * A reuseport group of listening sockets on loopback with a socket map and
 * the steering programs loaded as the MPM loads them: what the kernel
 * tests of steering/prefork_steering_kernel.c and
 * steering/prefork_steering_map.c run their connections against.
 */

#ifndef PREFORK_STEER_GROUP_H
#define PREFORK_STEER_GROUP_H

#include <netinet/in.h>

#include "apr_network_io.h"
#include "apr_pools.h"

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
void steer_group_open(steer_group_t *g, int n, int outsider);

void steer_group_close(steer_group_t *g);

/* Loads @a mode's program for a Listen of @a per_listen buckets from
 * @a first, as the MPM does, and attaches it to the group if one is
 * given. */
int steer_group_load(steer_group_t *g, int mode, int first, int per_listen,
                     int map_fd, int idle_fd, int capacity, int cpu_fd);

#endif /* PREFORK_STEER_GROUP_H */
