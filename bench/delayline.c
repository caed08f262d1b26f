/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * A delay line between the rig's two network namespaces, for kernels
 * built without netem (sch_netem): a TUN device in each namespace, and
 * this process between them, which passes every IP packet the server
 * sends to the generator after --delay-ms, and every packet the generator
 * sends to the server at once.  Both ends run the kernel's own TCP, so a
 * response stays unacknowledged for the delay, as it would for a client
 * on another network, and the server's socket calls see exactly that.
 *
 *   delayline --server-ns NAME --client-ns NAME --server-if IF
 *       --client-if IF --delay-ms D
 *
 * It creates the two devices (IFF_TUN, no packet information) inside the
 * named namespaces (/var/run/netns/NAME), prints "ready" once both exist
 * (the caller gives them addresses and brings them up), and forwards
 * until SIGTERM or SIGINT, when it prints one JSON line: the packets
 * passed each way, the most that waited at once, and how late the
 * delayed ones left (µs past their due time, at the 99th percentile and
 * the most).  Packets leave in the order they came.  Needs root.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define PACKET_MAX      2048
/* Packets waiting at once: a second's worth at 60 000 packets a second
 * with 5 ms of delay would be 300. */
#define QUEUE_SLOTS     65536
#define LATE_BUCKETS    10000   /* µs: lateness histogram, 1 µs wide */

typedef struct {
    uint64_t due_ns;
    uint16_t len;
    unsigned char data[PACKET_MAX];
} packet_t;

static volatile sig_atomic_t stopping;
static packet_t *queue;
static size_t head, count, most_waiting;
static unsigned long late[LATE_BUCKETS + 1];

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void on_stop(int sig)
{
    (void)sig;
    stopping = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A TUN device called `name` in the namespace at `ns_path`; the calling
 * thread goes back to its own namespace afterwards. */
static int open_tun(const char *ns_path, const char *name)
{
    struct ifreq ifr;
    int home, there, fd;

    home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    there = open(ns_path, O_RDONLY | O_CLOEXEC);
    if (home < 0 || there < 0 || setns(there, CLONE_NEWNET)) {
        die(ns_path);
    }
    fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        die("/dev/net/tun");
    }
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        die("TUNSETIFF");
    }
    if (setns(home, CLONE_NEWNET)) {
        die("setns back");
    }
    close(home);
    close(there);
    return fd;
}

static void arm(int tfd)
{
    struct itimerspec when;
    uint64_t due;

    memset(&when, 0, sizeof(when));
    if (count > 0) {
        due = queue[head].due_ns;
        when.it_value.tv_sec = (time_t)(due / 1000000000ULL);
        when.it_value.tv_nsec = (long)(due % 1000000000ULL);
        if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) {
            when.it_value.tv_nsec = 1;
        }
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &when, NULL);
}

/* Sends every queued packet that is due; returns how many. */
static unsigned long release(int to)
{
    uint64_t now = now_ns(), us;
    unsigned long sent = 0;
    packet_t *p;

    while (count > 0 && queue[head].due_ns <= now) {
        p = &queue[head];
        us = (now - p->due_ns) / 1000;
        late[us < LATE_BUCKETS ? us : LATE_BUCKETS]++;
        if (write(to, p->data, p->len) < 0 && errno != EAGAIN) {
            /* The device went down: the run is over. */
        }
        head = (head + 1) % QUEUE_SLOTS;
        count--;
        sent++;
    }
    return sent;
}

static unsigned long late_percentile(double q, unsigned long total)
{
    unsigned long seen = 0, i;

    for (i = 0; i <= LATE_BUCKETS; i++) {
        seen += late[i];
        if (total && seen >= (unsigned long)(q * (double)total)) {
            return i;
        }
    }
    return LATE_BUCKETS;
}

int main(int argc, char **argv)
{
    const char *server_ns = NULL, *client_ns = NULL;
    const char *server_if = NULL, *client_if = NULL;
    char path_s[256], path_c[256];
    struct epoll_event ev, events[8];
    unsigned long to_server = 0, to_client = 0, max_late = 0, i;
    uint64_t delay_ns = 0, expirations;
    double delay_ms = -1;
    int fd_s, fd_c, tfd, ep, n, k;
    ssize_t len;
    packet_t *p;

    for (k = 1; k + 1 < argc; k += 2) {
        if (!strcmp(argv[k], "--server-ns")) {
            server_ns = argv[k + 1];
        }
        else if (!strcmp(argv[k], "--client-ns")) {
            client_ns = argv[k + 1];
        }
        else if (!strcmp(argv[k], "--server-if")) {
            server_if = argv[k + 1];
        }
        else if (!strcmp(argv[k], "--client-if")) {
            client_if = argv[k + 1];
        }
        else if (!strcmp(argv[k], "--delay-ms")) {
            delay_ms = atof(argv[k + 1]);
        }
    }
    if (k != argc || !server_ns || !client_ns || !server_if || !client_if
        || delay_ms < 0 || delay_ms > 10000) {
        fprintf(stderr, "usage: delayline --server-ns NAME --client-ns NAME "
                "--server-if IF --client-if IF --delay-ms D\n");
        return 2;
    }
    delay_ns = (uint64_t)(delay_ms * 1e6);
    queue = calloc(QUEUE_SLOTS, sizeof(*queue));
    if (queue == NULL) {
        die("calloc");
    }
    snprintf(path_s, sizeof(path_s), "/var/run/netns/%s", server_ns);
    snprintf(path_c, sizeof(path_c), "/var/run/netns/%s", client_ns);
    fd_s = open_tun(path_s, server_if);
    fd_c = open_tun(path_c, client_if);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (tfd < 0 || ep < 0) {
        die("timerfd/epoll");
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.fd = fd_s;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd_s, &ev);
    ev.data.fd = fd_c;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd_c, &ev);
    ev.data.fd = tfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    printf("ready\n");
    fflush(stdout);
    while (!stopping) {
        n = epoll_wait(ep, events, 8, 1000);
        for (k = 0; k < n; k++) {
            if (events[k].data.fd == fd_c) {
                /* Generator to server: at once. */
                unsigned char buf[PACKET_MAX];

                while ((len = read(fd_c, buf, sizeof(buf))) > 0) {
                    if (write(fd_s, buf, (size_t)len) > 0) {
                        to_server++;
                    }
                }
            }
            else if (events[k].data.fd == fd_s) {
                /* Server to generator: after the delay, in order. */
                for (;;) {
                    if (count == QUEUE_SLOTS) {
                        release(fd_c);
                        if (count == QUEUE_SLOTS) {
                            break;      /* full: the kernel holds them */
                        }
                    }
                    p = &queue[(head + count) % QUEUE_SLOTS];
                    len = read(fd_s, p->data, sizeof(p->data));
                    if (len <= 0) {
                        break;
                    }
                    p->len = (uint16_t)len;
                    p->due_ns = now_ns() + delay_ns;
                    count++;
                    if (count > most_waiting) {
                        most_waiting = count;
                    }
                }
                to_client += release(fd_c);
                arm(tfd);
            }
            else if (events[k].data.fd == tfd) {
                if (read(tfd, &expirations, sizeof(expirations)) < 0) {
                    /* not yet: the next epoll_wait says */
                }
                to_client += release(fd_c);
                arm(tfd);
            }
        }
    }
    for (i = LATE_BUCKETS + 1; i-- > 0;) {
        if (late[i]) {
            max_late = i;
            break;
        }
    }
    printf("{\"delay_ms\": %g, \"to_server\": %lu, \"to_client\": %lu, "
           "\"most_waiting\": %zu, \"late_us_p99\": %lu, "
           "\"late_us_max\": %lu%s}\n", delay_ms, to_server, to_client,
           most_waiting, late_percentile(0.99, to_client), max_late,
           max_late >= LATE_BUCKETS ? ", \"late_max_at_least\": true" : "");
    return 0;
}
