/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * What the load suite's two anchor servers share: the one response they
 * give (the suite's 100-byte static file, with the headers a client
 * needs), the request framing, and the listening socket.  The anchors are
 * the physical limit the suite measures httpd and nginx against: nothing
 * is done per request but read, parse the end of the head, write.
 */

#ifndef ANCHOR_H
#define ANCHOR_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* The suite's static file: 100 bytes (STATIC_BODY in suite.py). */
#define ANCHOR_BODY "static file of one hundred bytes for the load suite " \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
#define ANCHOR_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" \
    "Content-Length: 100\r\n"

static const char anchor_keep[] = ANCHOR_HEAD "\r\n" ANCHOR_BODY;
static const char anchor_close[] = ANCHOR_HEAD "Connection: close\r\n\r\n"
    ANCHOR_BODY;

/* Where a complete request head ends in buf (just past its blank line),
 * or NULL; *close_wanted is set when it asks for Connection: close. */
static inline const char *anchor_request_end(const char *buf, size_t len,
                                             int *close_wanted)
{
    const char *end = memmem(buf, len, "\r\n\r\n", 4);

    if (end == NULL) {
        return NULL;
    }
    *close_wanted = memmem(buf, (size_t)(end - buf), "onnection: close",
                           16) != NULL
                    || memmem(buf, (size_t)(end - buf), "HTTP/1.0", 8)
                       != NULL;
    return end + 4;
}

/* The address and port to listen on, from "PORT" (127.0.0.1) or
 * "ADDRESS:PORT" (an IPv4 address: the rig's server namespace); exits on
 * anything else. */
static inline int anchor_where(const char *arg, struct in_addr *addr)
{
    char host[INET_ADDRSTRLEN];
    const char *colon = strrchr(arg, ':');
    int port;

    addr->s_addr = htonl(INADDR_LOOPBACK);
    if (colon != NULL) {
        if ((size_t)(colon - arg) >= sizeof(host)) {
            fprintf(stderr, "anchor: bad address in %s\n", arg);
            exit(2);
        }
        memcpy(host, arg, (size_t)(colon - arg));
        host[colon - arg] = '\0';
        if (inet_pton(AF_INET, host, addr) != 1) {
            fprintf(stderr, "anchor: bad address in %s\n", arg);
            exit(2);
        }
        arg = colon + 1;
    }
    port = atoi(arg);
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "anchor: bad port in %s\n", arg);
        exit(2);
    }
    return port;
}

/* A listening TCP socket on addr:port, SO_REUSEPORT when asked. */
static inline int anchor_listen(const struct in_addr *addr, int port,
                                int reuseport)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;

    if (fd < 0) {
        perror("socket");
        exit(1);
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport
        && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
        perror("SO_REUSEPORT");
        exit(1);
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)port);
    sin.sin_addr = *addr;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 4096)) {
        perror("bind/listen");
        exit(1);
    }
    return fd;
}

/* A worker dies with the anchor's main process. */
static inline void anchor_worker_init(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
}

#endif /* ANCHOR_H */
