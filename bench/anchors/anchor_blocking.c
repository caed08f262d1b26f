/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Anchor server: processes blocking in accept() on one shared listening
 * socket, each serving one connection at a time, as a prefork child does
 * with a one-socket bucket, minus all of httpd: read the head, write the
 * suite's 100-byte response, no log.  Against anchor_epoll it prices a
 * process per connection; against this MPM's floor configuration, httpd's
 * core.
 *
 *   anchor_blocking PORT PROCESSES [MAX_REQUESTS_PER_CONNECTION [linger]]
 *
 * With "linger" it closes as httpd's ap_lingering_close() does: shutdown
 * for writing, then read until the client's end of file or 2 s of
 * silence (the cost item 3 of the performance issue removes), so the two
 * ways of closing can be compared with nothing else in between.
 */

#define _GNU_SOURCE
#include <poll.h>
#include <sys/wait.h>

#include "anchor.h"

#define HEAD_MAX 8192

static int max_requests = 100;
static int linger;

/* httpd's lingering close, blocking: for the comparison only. */
static void lingering_close(int fd)
{
    struct pollfd pfd;
    char sink[512];

    shutdown(fd, SHUT_WR);
    pfd.fd = fd;
    pfd.events = POLLIN;
    while (poll(&pfd, 1, 2000) > 0 && read(fd, sink, sizeof(sink)) > 0) {
        continue;
    }
}

/* Answers every request on one connection, then closes it. */
static void serve(int fd)
{
    char buf[HEAD_MAX];
    const char *start, *end;
    int used = 0, served = 0, close_wanted;
    ssize_t n;

    for (;;) {
        n = read(fd, buf + used, sizeof(buf) - (size_t)used);
        if (n <= 0 || (used += (int)n) == (int)sizeof(buf)) {
            break;
        }
        start = buf;
        while ((end = anchor_request_end(start, (size_t)(buf + used - start),
                                         &close_wanted)) != NULL) {
            if (close_wanted || ++served >= max_requests) {
                n = write(fd, anchor_close, sizeof(anchor_close) - 1);
                if (linger) {
                    lingering_close(fd);
                }
                close(fd);
                return;
            }
            n = write(fd, anchor_keep, sizeof(anchor_keep) - 1);
            start = end;
        }
        used -= (int)(start - buf);
        memmove(buf, start, (size_t)used);
    }
    close(fd);
}

static void worker(int lfd)
{
    int fd;

    anchor_worker_init();
    for (;;) {
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            serve(fd);
        }
        else if (errno != EINTR && errno != ECONNABORTED) {
            perror("accept4");
            _exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    struct in_addr addr;
    char shown[INET_ADDRSTRLEN];
    int port, processes, lfd, one = 1, i;

    if (argc < 3) {
        fprintf(stderr, "usage: %s [ADDRESS:]PORT PROCESSES [MAX_REQUESTS "
                "[linger]]\n", argv[0]);
        return 2;
    }
    port = anchor_where(argv[1], &addr);
    processes = atoi(argv[2]);
    if (argc > 3) {
        max_requests = atoi(argv[3]);
    }
    linger = argc > 4 && strcmp(argv[4], "linger") == 0;
    lfd = anchor_listen(&addr, port, 0);
    /* As httpd's AcceptFilter http data does on Linux: accept() returns
     * once the request is there, so the first read does not sleep. */
    setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof(one));
    for (i = 0; i < processes; i++) {
        if (fork() == 0) {
            worker(lfd);
        }
    }
    printf("anchor_blocking: %d processes on %s:%d%s\n", processes,
           inet_ntop(AF_INET, &addr, shown, sizeof(shown)), port,
           linger ? ", lingering close" : "");
    fflush(stdout);
    while (wait(NULL) > 0 || errno == EINTR) {
        continue;
    }
    return 0;
}
