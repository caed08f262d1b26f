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
 * The ready channel's socket calls: the datagram pair, opened with
 * SO_PASSCRED on the parent's end and the children's send buffer sized
 * for the reports asked for (past the system's maximum where the parent
 * may); a child's one report, which waits for room rather than be lost;
 * and the parent's read, which takes each sender's pid from the kernel's
 * credentials and nothing from the datagram.  It knows nothing of slots:
 * the children table (prefork_children.c) opens it, sizes it from
 * ServerLimit, keeps its ends and marks who reported.  libc and APR's
 * types only, so the unit tests drive it with real processes.
 */

#include "apr.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "prefork_ready.h"

/* What one report costs the sending socket's buffer: the kernel charges
 * a datagram's whole allocation (about 770 bytes for five bytes of data
 * on Linux 6.x, where the default buffer of 208 KiB holds 277 reports);
 * a round kilobyte leaves a margin. */
#define REPORT_COST 1024

/* How long a waiting child sleeps in poll() between tries: the parent
 * reads reports whenever it waits for children. */
#define WAIT_SLICE_MS 100

/* The kernel doubles what is asked and reports the doubled size. */
static int buffer_room(int fd)
{
    int size = 0;
    socklen_t len = sizeof(size);

    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) != 0) {
        return 0;
    }
    return size / REPORT_COST;
}

apr_status_t pf_ready_open(int fds[2], int reports, int *room)
{
    int pair[2], on = 1, size;
    long long want = (long long)reports * REPORT_COST / 2;
    apr_status_t why;

    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) != 0) {
        return errno;
    }
    if (setsockopt(pair[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
        why = errno;            /* before close() may change it */
        close(pair[0]);
        close(pair[1]);
        return why;
    }
    /* Both ends block: every call on them says MSG_DONTWAIT, and a child
     * that finds no room waits in poll(). */
    size = want > INT_MAX / 2 ? INT_MAX / 2 : (int)want;
#ifdef SO_SNDBUFFORCE
    /* Past the system's maximum (net.core.wmem_max): the parent is root. */
    if (setsockopt(pair[1], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size))
        != 0)
#endif
    {
        setsockopt(pair[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    }
    fds[0] = pair[0];
    fds[1] = pair[1];
    *room = buffer_room(pair[1]);
    return APR_SUCCESS;
}

apr_status_t pf_ready_report(int fd, apr_interval_time_t patience)
{
    apr_interval_time_t waited = 0;
    struct pollfd pfd;

    for (;;) {
        if (send(fd, "ready", 5, MSG_DONTWAIT | MSG_NOSIGNAL) == 5) {
            return APR_SUCCESS;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
            return errno;
        }
        if (waited >= patience) {
            return APR_TIMEUP;
        }
        pfd.fd = fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        (void)poll(&pfd, 1, WAIT_SLICE_MS);
        waited += apr_time_from_msec(WAIT_SLICE_MS);
    }
}

int pf_ready_read(int fd, int most, void (*ready)(void *baton, pid_t pid),
                  void *baton)
{
    int n;

    for (n = 0; fd >= 0 && n < most; n++) {
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(struct ucred))];
        } control;
        struct msghdr msg;
        struct cmsghdr *cmsg;
        struct iovec iov;
        struct ucred cred;
        char data[16];

        memset(&msg, 0, sizeof(msg));
        iov.iov_base = data;
        iov.iov_len = sizeof(data);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        if (recvmsg(fd, &msg, MSG_DONTWAIT) < 0) {
            break;
        }
        for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
             cmsg = CMSG_NXTHDR(&msg, cmsg)) {
            if (cmsg->cmsg_level == SOL_SOCKET
                && cmsg->cmsg_type == SCM_CREDENTIALS
                && cmsg->cmsg_len == CMSG_LEN(sizeof(cred))) {
                memcpy(&cred, CMSG_DATA(cmsg), sizeof(cred));
                ready(baton, cred.pid);
            }
        }
    }
    return n;
}
