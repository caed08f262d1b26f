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
 * @file  prefork_steering_kernel.h
 * @brief ListenBucketSteering's kernel objects: the maps made with
 *        libbpf, the programs of prefork_steering.bpf.c loaded from the
 *        skeleton bpftool made of them at build time, the socket options
 *        that attach and detach them; and, built on those steps, the
 *        socket maps the programs choose from (the generation's, and a
 *        handover's).
 *
 * Every call is one step the caller can name in a log line, and returns
 * the kernel's errno as an apr_status_t.  In a build without the programs
 * (configure found no clang, libbpf or bpftool) every step but detaching
 * returns APR_ENOTIMPL.  Nothing here logs: libbpf's own messages are
 * kept from stderr (which is the error log) and the verifier's last line
 * is handed back.  prefork_steering.c is the caller of the steps, and of
 * the socket maps below.
 *
 * A program attached to a reuseport group chooses a socket of its map for
 * each new connection, and, where Linux can (5.14), for each connection
 * queued on a socket of the group that stops listening: the connection
 * is handed over instead of reset.  The bucket set replaces a bucket
 * socket that way (at every restart, and when a holder it cannot trust
 * keeps a copy): the new socket joins the old one's group, takes its key
 * in the map, and the old one stops listening.  Where no steering program
 * is on the group (one bucket, ListenBucketSteering's program refused),
 * pf_steer_handover() puts one there.
 *
 * prefork_steering.c keeps the generation's map (pf_steer_map_*()); the
 * guard (prefork_sockguard.c), through the calls steering hands it, asks
 * whether a handover can be made, and makes one.
 */

#ifndef PREFORK_STEERING_KERNEL_H
#define PREFORK_STEERING_KERNEL_H

#include "apr_network_io.h"
#include "apr_pools.h"

#include "prefork_generation.h"
#include "prefork_steering_rules.h"

/** Whether this build has the programs. */
int pf_steer_kernel_built(void);

/**
 * Makes the idle table: a one-element BPF_F_MMAPABLE array whose value is
 * @a records pf_steer_bucket_t, mapped shared and zero-filled, so that
 * children inherit the mapping across fork() and update it without a
 * system call.
 */
apr_status_t pf_steer_kernel_idle_table(int records, int *fd,
                                        pf_steer_bucket_t **table,
                                        size_t *len);

/** Makes a REUSEPORT_SOCKARRAY with room for @a entries sockets (8-byte
 *  values, so that a lookup gives the socket's cookie). */
apr_status_t pf_steer_kernel_socket_map(int entries, int *fd);

/** Makes the CPU table of the cpu and local programs, @a entries (the
 *  possible CPUs) long, filled from @a table. */
apr_status_t pf_steer_kernel_cpu_map(const pf_steer_cpu_entry_t *table,
                                     int entries, int *fd);

/** The kernel's possible CPUs (the cpu table's length), or -1. */
int pf_steer_kernel_possible_cpus(void);

/** The cookie of the socket a socket map holds under @a key.
 *  @return APR_SUCCESS, APR_ENOENT for none, or the error */
apr_status_t pf_steer_kernel_socket_at(int map_fd, int key,
                                       apr_uint64_t *cookie);

/** A socket's cookie (SO_COOKIE), which the kernel never reuses. */
apr_status_t pf_steer_kernel_cookie(apr_socket_t *sd, apr_uint64_t *cookie);

/** Puts listening socket @a sd under @a key (a socket can be in one such
 *  map, under one key, at a time). */
apr_status_t pf_steer_kernel_put_socket(int map_fd, int key,
                                        apr_socket_t *sd);

/** Empties @a key; APR_SUCCESS also when it held nothing. */
apr_status_t pf_steer_kernel_clear_socket(int map_fd, int key);

/** What to load: one program of prefork_steering.bpf.c for one Listen. */
typedef struct {
    int mode;                   /**< pfb_steer_e: which program */
    pf_steer_listen_t listen;   /**< its constants */
    int socks_fd;               /**< the socket map (every program) */
    int idle_fd;                /**< the idle table, or -1 */
    int cpu_fd;                 /**< the CPU table, or -1 */
} pf_steer_program_t;

/**
 * Loads the program through libbpf: the skeleton opened, the constants
 * set, the maps handed over, the verifier run.  It is loaded to choose
 * also where the connections of a socket of its group that stops
 * listening go (BPF_SK_REUSEPORT_SELECT_OR_MIGRATE, Linux 5.14); where
 * the kernel refuses that, to choose for new connections only.
 * @param prog_fd The program's descriptor (the caller closes it)
 * @param hands_over Set to whether it chooses for handed-over connections
 * @param log Set to the verifier's or libbpf's last line on a refusal
 */
apr_status_t pf_steer_kernel_load(const pf_steer_program_t *spec,
                                  int *prog_fd, int *hands_over, char *log,
                                  size_t log_len);

/** Attaches a loaded program to the reuseport group of @a sd
 *  (SO_ATTACH_REUSEPORT_EBPF), replacing whatever the group had. */
apr_status_t pf_steer_kernel_attach(apr_socket_t *sd, int prog_fd);

/** Removes whatever program the group has (SO_DETACH_REUSEPORT_BPF,
 *  Linux 5.8): back to the kernel's hash.  APR_SUCCESS also when none was
 *  attached. */
apr_status_t pf_steer_kernel_detach(apr_socket_t *sd);

/** Closes a map's or a program's descriptor (ignores -1). */
void pf_steer_kernel_close(int fd);

/** Unmaps what pf_steer_kernel_idle_table() mapped (ignores NULL). */
void pf_steer_kernel_unmap(pf_steer_bucket_t *table, size_t len);

/* ------------------------------------------------------------------ */
/* The socket maps: the generation's, and a handover's                 */

/** A socket map of the server's life, grown by doubling. */
typedef struct {
    apr_pool_t *pool;           /**< outlives generations */
    int fd;                     /**< -1: not made yet */
    int capacity;
    apr_uint64_t *wanted_cookie;    /**< scratch, capacity long */
    apr_uint64_t *held_cookie;      /**< scratch, capacity long */
} pf_steer_map_t;

/** An empty map description (no map made). */
void pf_steer_map_init(pf_steer_map_t *m, apr_pool_t *pool);

/**
 * Makes the map, or a larger one with room for @a needed buckets; the old
 * one is emptied first, so that its sockets can go into the new one (a
 * socket can be in one such map at a time).
 * @param step Set to what failed
 */
apr_status_t pf_steer_map_ensure(pf_steer_map_t *m, int needed,
                                 const char **step);

/**
 * Makes the map hold exactly each bucket's socket of @a gen under its
 * bucket number.  A key that holds the right socket is left alone, so a
 * cycle with nothing to mend changes nothing; a key that holds another
 * socket gets the right one in one update, so that no connection meets
 * an empty key (the programs drop a connection whose Listen has no socket
 * in the map, which the client sees refused); only a socket that moves to
 * another key leaves its old key empty for a moment.
 * @param changed Set to the number of keys filled again
 * @param bad Set to the first bucket whose socket would not go in and
 *            listens (one that does not is the guard's to put right,
 *            which refills the map then)
 */
apr_status_t pf_steer_map_sync(pf_steer_map_t *m, const pf_generation_t *gen,
                               int *changed, int *bad);

/** Closes the map's descriptor (a child has no use for it). */
void pf_steer_map_close(pf_steer_map_t *m);

/**
 * Whether this kernel hands a closing socket's connections to the one a
 * program chooses (BPF_SK_REUSEPORT_SELECT_OR_MIGRATE, Linux 5.14), found
 * by loading the handover's program once per server.
 * @param why Set to what failed, when it did
 */
int pf_steer_can_hand_over(char *why, apr_size_t why_len);

/**
 * Stops @a old_fd listening with its queued connections, and handshakes
 * in flight, handed to @a fresh, a socket in its reuseport group that no
 * steering program serves: the hash program on a map of one socket,
 * @a fresh, is attached to the group.  A handshake in flight on @a old_fd
 * is handed over when the client's last packet of it comes, a round trip
 * or more later, and only while the group has the program: with
 * @a stays (@a fresh is its Listen's only socket) the program stays on
 * the group, choosing @a fresh, until something replaces it; otherwise
 * (other sockets of the Listen would get nothing) it is detached at once
 * and those handshakes are reset.
 * @return APR_SUCCESS when handed over; otherwise @a old_fd is left
 *         listening, for the caller to stop (its queue is then reset)
 */
apr_status_t pf_steer_handover(apr_socket_t *fresh, int old_fd, int stays);

#endif /* PREFORK_STEERING_KERNEL_H */
