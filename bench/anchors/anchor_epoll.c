/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Anchor server: an event loop per CPU, each on its own SO_REUSEPORT
 * socket, as nginx runs with `reuseport` and a worker per CPU, minus
 * everything nginx does per request beyond reading the head and writing
 * the suite's 100-byte response.  The cheapest a server of connections
 * can be on this kernel: the floor under the suite's other servers.
 *
 *   anchor_epoll PORT WORKERS [MAX_REQUESTS_PER_CONNECTION [pin]]
 *
 * Worker i is pinned to the i-th CPU of the affinity mask with "pin".
 * Keep-alive is honoured up to MAX_REQUESTS_PER_CONNECTION (default 100)
 * requests, the last answered with Connection: close.  Closing is
 * immediate, with no lingering.
 */

#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "anchor.h"

#define HEAD_MAX 8192

typedef struct {
    int used;                   /* bytes of a request head in buf */
    int served;                 /* requests answered on the connection */
    char buf[HEAD_MAX];
} conn_t;

static conn_t **conns;          /* by descriptor */
static int max_fds;
static int max_requests = 100;

static void finish(int epfd, int fd)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    free(conns[fd]);
    conns[fd] = NULL;
}

/* Reads what the client sent and answers every complete request in it;
 * closes the connection when it is done. */
static void serve(int epfd, int fd)
{
    conn_t *c = conns[fd];
    const char *start, *end;
    ssize_t n;
    int close_wanted, last;

    for (;;) {
        n = read(fd, c->buf + c->used, sizeof(c->buf) - (size_t)c->used);
        if (n < 0 && errno == EAGAIN) {
            return;
        }
        if (n <= 0 || (c->used += (int)n) == (int)sizeof(c->buf)) {
            finish(epfd, fd);   /* closed, failed, or a head too long */
            return;
        }
        start = c->buf;
        while ((end = anchor_request_end(start, (size_t)(c->buf + c->used
                                                         - start),
                                         &close_wanted)) != NULL) {
            last = close_wanted || ++c->served >= max_requests;
            if (last) {
                n = write(fd, anchor_close, sizeof(anchor_close) - 1);
                finish(epfd, fd);
                return;
            }
            n = write(fd, anchor_keep, sizeof(anchor_keep) - 1);
            start = end;
        }
        c->used -= (int)(start - c->buf);
        memmove(c->buf, start, (size_t)c->used);
    }
}

static void worker(const struct in_addr *addr, int port, int cpu)
{
    struct epoll_event ev, events[256];
    cpu_set_t one;
    int lfd, epfd, n, i, fd;

    anchor_worker_init();
    if (cpu >= 0) {
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof(one), &one);
    }
    lfd = anchor_listen(addr, port, 1);
    fcntl(lfd, F_SETFL, O_NONBLOCK);    /* accept until EAGAIN */
    epfd = epoll_create1(EPOLL_CLOEXEC);
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        n = epoll_wait(epfd, events, 256, -1);
        for (i = 0; i < n; i++) {
            if (events[i].data.fd != lfd) {
                serve(epfd, events[i].data.fd);
                continue;
            }
            while ((fd = accept4(lfd, NULL, NULL,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                if (fd >= max_fds
                    || (conns[fd] = calloc(1, sizeof(conn_t))) == NULL) {
                    close(fd);
                    continue;
                }
                ev.events = EPOLLIN;
                ev.data.fd = fd;
                epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
                /* The request has usually arrived with the handshake. */
                serve(epfd, fd);
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    struct in_addr addr;
    char shown[INET_ADDRSTRLEN];
    cpu_set_t mask;
    int port, workers, pin, i, cpu, nth;

    if (argc < 3) {
        fprintf(stderr, "usage: %s [ADDRESS:]PORT WORKERS [MAX_REQUESTS "
                "[pin]]\n", argv[0]);
        return 2;
    }
    port = anchor_where(argv[1], &addr);
    workers = atoi(argv[2]);
    if (argc > 3) {
        max_requests = atoi(argv[3]);
    }
    pin = argc > 4 && strcmp(argv[4], "pin") == 0;
    getrlimit(RLIMIT_NOFILE, &rl);
    max_fds = (int)rl.rlim_cur;
    conns = calloc((size_t)max_fds, sizeof(*conns));
    sched_getaffinity(0, sizeof(mask), &mask);
    for (i = 0, cpu = -1, nth = 0; i < workers; i++) {
        if (pin) {
            /* The next CPU of the mask, round the mask again if needed. */
            do {
                cpu = (cpu + 1) % CPU_SETSIZE;
            } while (!CPU_ISSET(cpu, &mask) && ++nth < 4 * CPU_SETSIZE);
        }
        if (fork() == 0) {
            worker(&addr, port, pin ? cpu : -1);
        }
    }
    printf("anchor_epoll: %d workers on %s:%d\n", workers,
           inet_ntop(AF_INET, &addr, shown, sizeof(shown)), port);
    fflush(stdout);
    while (wait(NULL) > 0 || errno == EINTR) {
        continue;
    }
    return 0;
}
