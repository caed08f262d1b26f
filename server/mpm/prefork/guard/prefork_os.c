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
 * Thin operating-system glue for the MPM's listening sockets: the
 * SO_REUSEPORT probe on two loopback sockets, a duplicate listener on the
 * original's address with the options connections inherit, an accept
 * queue's length and limit from TCP_INFO, and the socket filter that
 * refuses new handshakes at a graceful stop.  Each is one step with errno
 * as its status and a fallback where the system lacks the feature
 * (APR_ENOTIMPL, or "no" from the probe); nothing here logs or decides.
 * The bucket set opens its duplicates here and the guard its
 * replacements; the generation's observation reads the queues, and
 * prefork_sockguard.c refuses new handshakes.
 */

/* In an httpd source tree configure's results (HAVE_SO_REUSEPORT...) are
 * in ap_config_auto.h; the standalone build passes them with -D. */
#include "ap_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#ifdef __linux__
#include <linux/filter.h>
#endif

#include "apr_portable.h"
#include "apr_strings.h"

#include "prefork_os.h"

int pf_os_probe_reuseport(apr_status_t *status, const char **why)
{
#if defined(HAVE_SO_REUSEPORT) && defined(__linux__)
    int fds[2] = { -1, -1 };
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int one = 1;
    int i, ok = 0;

    *status = APR_SUCCESS;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (i = 0; i < 2; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0) {
            *why = "socket()";
            goto done;
        }
        if (setsockopt(fds[i], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
            *why = "setsockopt(SO_REUSEPORT)";
            goto done;
        }
        /* The second socket binds to the port the kernel gave the first:
         * only a kernel that groups reuseport sockets lets it. */
        if (bind(fds[i], (struct sockaddr *)&sin, sizeof(sin))) {
            *why = i ? "bind() of a second socket to the same port" : "bind()";
            goto done;
        }
        if (i == 0 && getsockname(fds[0], (struct sockaddr *)&sin, &len)) {
            *why = "getsockname()";
            goto done;
        }
    }
    ok = 1;
done:
    if (!ok) {
        *status = errno;
    }
    for (i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return ok;
#else
    *status = APR_ENOTIMPL;
    *why = "SO_REUSEPORT with load balancing (Linux 3.9 or later)";
    return 0;
#endif
}

/* setsockopt() on an APR socket, with errno as the status. */
static apr_status_t set_socket_option(apr_socket_t *sd, int level, int name,
                                      const void *value, socklen_t len)
{
    apr_os_sock_t fd;

    apr_os_sock_get(&fd, sd);
    if (setsockopt(fd, level, name, value, len)) {
        return errno;
    }
    return APR_SUCCESS;
}

apr_status_t pf_os_set_reuseport(apr_socket_t *sd)
{
#ifdef HAVE_SO_REUSEPORT
    int one = 1;

    return set_socket_option(sd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
#else
    (void)sd;
    return APR_ENOTIMPL;
#endif
}

/* Copies an int socket option when the original has it; quietly skips
 * options the original's family does not carry. */
static apr_status_t copy_int_option(int from, int to, int level, int name)
{
    int value = 0;
    socklen_t len = sizeof(value);

    if (getsockopt(from, level, name, &value, &len)) {
        return APR_SUCCESS;
    }
    if (setsockopt(to, level, name, &value, sizeof(value))) {
        return errno;
    }
    return APR_SUCCESS;
}

apr_status_t pf_os_duplicate_listener(apr_socket_t **out, apr_socket_t *orig,
                                      apr_sockaddr_t *bind_addr, int backlog,
                                      const pf_sockopts_t *options,
                                      apr_pool_t *p)
{
    apr_os_sock_t from, fd;
    apr_os_sock_info_t info;
    apr_status_t rv = APR_SUCCESS;
    apr_int32_t nodelay = 0;
    pf_sockopts_t now;
    pf_sockopt_set_t changed, failed;
    int one = 1;

    apr_os_sock_get(&from, orig);
    if (options == NULL) {
        pf_sockopts_record(from, &now);
        options = &now;
    }
    fd = socket(bind_addr->family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) {
        return errno;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))) {
        rv = errno;
    }
#ifdef HAVE_SO_REUSEPORT
    if (rv == APR_SUCCESS
        && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
        rv = errno;
    }
#else
    rv = APR_ENOTIMPL;
#endif
    /* Every option connections inherit; a buffer size the kernel chose is
     * left to the kernel, since setting one turns off its autotuning for
     * every connection accepted from the socket. */
    if (rv == APR_SUCCESS) {
        pf_sockopts_repair(fd, options, &changed, &failed);
        if (!pf_sockopt_set_empty(&failed)) {
            rv = APR_EINVAL;    /* an option the kernel would not take */
        }
    }
#ifdef IP_FREEBIND
    if (rv == APR_SUCCESS) {
        rv = copy_int_option(from, fd, IPPROTO_IP, IP_FREEBIND);
    }
#endif
#if APR_HAVE_IPV6
    if (rv == APR_SUCCESS && bind_addr->family == AF_INET6) {
        rv = copy_int_option(from, fd, IPPROTO_IPV6, IPV6_V6ONLY);
    }
#endif
    if (rv == APR_SUCCESS
        && bind(fd, (struct sockaddr *)&bind_addr->sa, bind_addr->salen)) {
        rv = errno;
    }
    if (rv == APR_SUCCESS && listen(fd, backlog)) {
        rv = errno;
    }
    if (rv != APR_SUCCESS) {
        close(fd);
        return rv;
    }

    memset(&info, 0, sizeof(info));
    info.os_sock = &fd;
    info.local = (struct sockaddr *)&bind_addr->sa;
    info.remote = NULL;
    info.family = bind_addr->family;
    info.type = SOCK_STREAM;
    info.protocol = IPPROTO_TCP;
    *out = NULL;
    rv = apr_os_sock_make(out, &info, p);
    if (rv != APR_SUCCESS) {
        close(fd);
        return rv;
    }
    /* The kernel option was copied above, and connections inherit it.
     * APR records its own options per socket, and marks a connection as
     * having TCP_NODELAY only when its listener is marked: unmarked, core
     * would set it again with a setsockopt() for every connection. */
    if (apr_socket_opt_get(orig, APR_TCP_NODELAY, &nodelay) == APR_SUCCESS
        && nodelay) {
        rv = apr_socket_opt_set(*out, APR_TCP_NODELAY, 1);
    }
    return rv;
}

apr_status_t pf_os_listener_queue(apr_socket_t *sd, int *queued, int *limit)
{
#if defined(HAVE_TCP_INFO) && defined(__linux__)
    apr_os_sock_t fd;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    apr_os_sock_get(&fd, sd);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len)) {
        return errno;
    }
    /* On a listening socket Linux reports the accept queue's current
     * length in tcpi_unacked and its limit in tcpi_sacked. */
    *queued = (int)ti.tcpi_unacked;
    *limit = (int)ti.tcpi_sacked;
    return APR_SUCCESS;
#else
    (void)sd;
    *queued = 0;
    *limit = 0;
    return APR_ENOTIMPL;
#endif
}

apr_status_t pf_os_refuse_new_connections(apr_socket_t *sd)
{
#if defined(__linux__) && defined(SO_ATTACH_FILTER)
    /* A listener's filter sees each packet from its TCP header on, byte
     * 13 holding the flags.  Only a SYN without ACK (a new handshake) is
     * dropped: the final ACK of a handshake already answered must pass,
     * or that connection never reaches the accept queue the drain
     * empties, and is reset when the socket closes. */
    static struct sock_filter drop_syn[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),         /* SYN, ACK */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 0, 1),   /* SYN alone */
        BPF_STMT(BPF_RET | BPF_K, 0),                      /* drop */
        BPF_STMT(BPF_RET | BPF_K, 0xffffffff)              /* keep */
    };
    struct sock_fprog prog;

    prog.len = sizeof(drop_syn) / sizeof(drop_syn[0]);
    prog.filter = drop_syn;
    return set_socket_option(sd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
                             sizeof(prog));
#else
    (void)sd;
    return APR_ENOTIMPL;
#endif
}
