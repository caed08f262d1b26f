/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The load suite's open-loop HTTP generator: requests at a fixed rate,
 * each on a new connection (Connection: close), free of coordinated
 * omission.  Request i is due at start + i / rate whether or not earlier
 * ones have finished; its latency runs from the time it was *due*, so a
 * server that stalls is charged for every request it made wait.  A
 * schedule of SECONDS:RATE phases gives on/off bursts.
 *
 *   openloop --url http://127.0.0.1:8080/x --schedule 10:5000 \
 *       --hist FILE [--timeout 10] [--max-outstanding 4000]
 *
 * One thread, non-blocking sockets on one epoll set, and a timerfd armed
 * at the next due time, so requests leave within microseconds of their
 * schedule (how late is measured and reported: send_lag_p99).  It prints
 * one JSON object: sent, ok, the responses completed within the schedule
 * and their rate (what a fixed-rate run achieved), errors by kind, the
 * send lag; every latency goes to --hist as "<µs> <requests>" lines, the
 * suite's histogram format (stats.py).
 *
 * Targets: 127.0.0.0/8 and ::1, or any address when the generator runs in
 * a network namespace the suite created (netns.py: it reaches the server
 * through the suite's veth pair only).
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_PHASES 64
#define MAX_ERROR_KINDS 32
#define EVENTS_PER_WAIT 256
/* Expired requests are looked for this often (ns). */
#define EXPIRY_PERIOD_NS 100000000ULL

typedef struct {
    double seconds;
    double rate;
} phase_t;

typedef struct {
    int fd;                     /* -1: free */
    int sending;                /* connecting, the request not yet sent */
    uint64_t due_ns;
    uint64_t started_ns;
    char head[16];              /* the first bytes of the response */
    size_t head_len;
} request_t;

typedef struct {
    char kind[32];
    unsigned long count;
} error_count_t;

/* A growing array of 32-bit values (latencies or lags in µs). */
typedef struct {
    uint32_t *values;
    size_t count;
    size_t room;
} samples_t;

typedef struct {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char request[512];
    size_t request_len;
    uint64_t timeout_ns;
    size_t max_outstanding;
    request_t *slots;           /* indexed by descriptor */
    size_t nslots;
    size_t open;
    int epfd;
    unsigned long sent;
    unsigned long ok;
    unsigned long ok_in_schedule;
    uint64_t schedule_end_ns;
    error_count_t errors[MAX_ERROR_KINDS];
    size_t nerrors;
    samples_t latencies;
    samples_t lags;
} engine_t;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "openloop: %s\n", what);
    exit(2);
}

static void samples_add(samples_t *s, uint64_t value_ns)
{
    uint64_t us = (value_ns + 500) / 1000;

    if (s->count == s->room) {
        s->room = s->room ? s->room * 2 : 65536;
        s->values = realloc(s->values, s->room * sizeof(*s->values));
        if (s->values == NULL) {
            die("out of memory");
        }
    }
    s->values[s->count++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0-100) of sorted values, in µs. */
static uint32_t percentile(const samples_t *s, double p)
{
    size_t rank;

    if (s->count == 0) {
        return 0;
    }
    rank = (size_t)(p / 100.0 * (double)s->count + 0.999999);
    if (rank < 1) {
        rank = 1;
    }
    if (rank > s->count) {
        rank = s->count;
    }
    return s->values[rank - 1];
}

static void count_error(engine_t *e, const char *kind)
{
    size_t i;

    for (i = 0; i < e->nerrors; i++) {
        if (strcmp(e->errors[i].kind, kind) == 0) {
            e->errors[i].count++;
            return;
        }
    }
    if (e->nerrors < MAX_ERROR_KINDS) {
        snprintf(e->errors[e->nerrors].kind, sizeof(e->errors[0].kind), "%s",
                 kind);
        e->errors[e->nerrors++].count = 1;
    }
}

/* The suite's names: refused and reset, else the errno's own name
 * (EADDRNOTAVAIL, EMFILE ... which validity.py looks for). */
static void count_errno(engine_t *e, int err)
{
    const char *name;

    if (err == ECONNREFUSED) {
        count_error(e, "refused");
        return;
    }
    if (err == ECONNRESET) {
        count_error(e, "reset");
        return;
    }
    name = strerrorname_np(err);
    count_error(e, name ? name : "errno_unknown");
}

static void finish(engine_t *e, request_t *r, const char *error_kind)
{
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, r->fd, NULL);
    close(r->fd);
    r->fd = -1;
    e->open--;
    if (error_kind) {
        count_error(e, error_kind);
    }
}

static void start_request(engine_t *e, uint64_t due, uint64_t now)
{
    struct epoll_event ev;
    request_t *r;
    int fd;

    samples_add(&e->lags, now > due ? now - due : 0);
    if (e->open >= e->max_outstanding) {
        /* Beyond the generator's own limit: counted, never hidden. */
        count_error(e, "generator_limit");
        return;
    }
    e->sent++;
    fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        count_errno(e, errno);
        return;
    }
    if ((size_t)fd >= e->nslots) {
        close(fd);
        count_error(e, "generator_limit");
        return;
    }
    if (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) != 0
        && errno != EINPROGRESS) {
        count_errno(e, errno);
        close(fd);
        return;
    }
    r = &e->slots[fd];
    r->fd = fd;
    r->sending = 1;
    r->due_ns = due;
    r->started_ns = now;
    r->head_len = 0;
    ev.events = EPOLLOUT;
    ev.data.fd = fd;
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        die("epoll_ctl");
    }
    e->open++;
}

static void response_done(engine_t *e, request_t *r, uint64_t now)
{
    char status[8] = "";
    char kind[32];
    const char *space = memchr(r->head, ' ', r->head_len);

    if (space && (size_t)(space - r->head) + 4 <= r->head_len) {
        memcpy(status, space + 1, 3);
    }
    if (strcmp(status, "200") == 0) {
        e->ok++;
        if (now <= e->schedule_end_ns) {
            e->ok_in_schedule++;
        }
        samples_add(&e->latencies, now - r->due_ns);
        finish(e, r, NULL);
        return;
    }
    if (status[0]) {
        snprintf(kind, sizeof(kind), "status_%s", status);
        finish(e, r, kind);
        return;
    }
    finish(e, r, "empty");
}

static void handle_ready(engine_t *e, request_t *r, uint64_t now)
{
    struct epoll_event ev;
    char buf[16384];
    int err = 0;
    socklen_t len = sizeof(err);
    ssize_t n;

    if (r->sending) {
        if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
        if (err) {
            count_errno(e, err);
            finish(e, r, NULL);
            return;
        }
        n = send(r->fd, e->request, e->request_len, MSG_NOSIGNAL);
        if (n != (ssize_t)e->request_len) {
            if (n < 0) {
                count_errno(e, errno);
                finish(e, r, NULL);
            }
            else {
                finish(e, r, "short_send");
            }
            return;
        }
        r->sending = 0;
        ev.events = EPOLLIN;
        ev.data.fd = r->fd;
        epoll_ctl(e->epfd, EPOLL_CTL_MOD, r->fd, &ev);
        return;
    }
    for (;;) {
        n = recv(r->fd, buf, sizeof(buf), 0);
        if (n > 0) {
            if (r->head_len < sizeof(r->head)) {
                size_t take = sizeof(r->head) - r->head_len;

                if ((size_t)n < take) {
                    take = (size_t)n;
                }
                memcpy(r->head + r->head_len, buf, take);
                r->head_len += take;
            }
            continue;
        }
        if (n == 0) {
            response_done(e, r, now);
            return;
        }
        if (errno == EAGAIN || errno == EINTR) {
            return;
        }
        count_errno(e, errno);
        finish(e, r, NULL);
        return;
    }
}

static void expire(engine_t *e, uint64_t now)
{
    size_t fd;

    for (fd = 0; fd < e->nslots && e->open; fd++) {
        if (e->slots[fd].fd >= 0
            && now - e->slots[fd].started_ns > e->timeout_ns) {
            finish(e, &e->slots[fd], "timeout");
        }
    }
}

static void arm(int tfd, uint64_t at_ns)
{
    struct itimerspec its;

    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec = (time_t)(at_ns / 1000000000ULL);
    its.it_value.tv_nsec = (long)(at_ns % 1000000000ULL);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) {
        its.it_value.tv_nsec = 1;
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The schedule: phases of SECONDS:RATE, comma-separated. */
static size_t parse_schedule(const char *text, phase_t *phases)
{
    size_t n = 0;
    const char *p = text;
    char *end;

    while (*p) {
        if (n == MAX_PHASES) {
            die("too many phases in --schedule");
        }
        phases[n].seconds = strtod(p, &end);
        if (end == p || *end != ':' || phases[n].seconds < 0) {
            die("--schedule takes SECONDS:RATE[,SECONDS:RATE...]");
        }
        p = end + 1;
        phases[n].rate = strtod(p, &end);
        if (end == p || phases[n].rate < 0 || (*end && *end != ',')) {
            die("--schedule takes SECONDS:RATE[,SECONDS:RATE...]");
        }
        n++;
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        die("--schedule is empty");
    }
    return n;
}

/* Whether this process runs in a network namespace the load suite made
 * (netns.py names them pfb-..., and `ip netns add` keeps each under
 * /var/run/netns), where any target is one of the suite's own. */
static int in_suite_netns(void)
{
    struct stat mine, theirs;
    struct dirent *entry;
    char path[300];
    DIR *dir;
    int found = 0;

    if (stat("/proc/self/ns/net", &mine) != 0
        || (dir = opendir("/var/run/netns")) == NULL) {
        return 0;
    }
    while (!found && (entry = readdir(dir)) != NULL) {
        if (strncmp(entry->d_name, "pfb-", 4) != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/var/run/netns/%s", entry->d_name);
        found = stat(path, &theirs) == 0 && theirs.st_ino == mine.st_ino
                && theirs.st_dev == mine.st_dev;
    }
    closedir(dir);
    return found;
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

        return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

        return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr);
    }
    return 0;
}

/* http://HOST:PORT/PATH -> the address and the request bytes. */
static void parse_url(engine_t *e, const char *url)
{
    char host[256], port[16] = "80";
    const char *p, *path, *colon;
    struct addrinfo hints, *res;
    size_t hlen;

    if (strncmp(url, "http://", 7) != 0) {
        die("--url must start with http://");
    }
    p = url + 7;
    path = strchr(p, '/');
    if (path == NULL) {
        path = "/";
        hlen = strlen(p);
    }
    else {
        hlen = (size_t)(path - p);
    }
    if (hlen == 0 || hlen >= sizeof(host)) {
        die("--url has no host");
    }
    memcpy(host, p, hlen);
    host[hlen] = '\0';
    if (host[0] == '[') {
        char *close_bracket = strchr(host, ']');

        if (close_bracket == NULL) {
            die("--url: unterminated [");
        }
        if (close_bracket[1] == ':') {
            snprintf(port, sizeof(port), "%s", close_bracket + 2);
        }
        *close_bracket = '\0';
        memmove(host, host + 1, strlen(host));
    }
    else if ((colon = strrchr(host, ':')) != NULL) {
        snprintf(port, sizeof(port), "%s", colon + 1);
        host[colon - host] = '\0';
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        die("--url: the host must be a numeric address and the port a "
            "number");
    }
    memcpy(&e->addr, res->ai_addr, res->ai_addrlen);
    e->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    if (!is_loopback(&e->addr) && !in_suite_netns()) {
        die("only loopback targets, or any target from a network namespace "
            "of the suite's own");
    }
    e->request_len = (size_t)snprintf(
        e->request, sizeof(e->request),
        "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path,
        host);
    if (e->request_len >= sizeof(e->request)) {
        die("--url is too long");
    }
}

static void write_histogram(const char *path, samples_t *lat)
{
    FILE *f = fopen(path, "w");
    size_t i = 0;

    if (f == NULL) {
        die("cannot write --hist");
    }
    while (i < lat->count) {
        size_t j = i;

        while (j < lat->count && lat->values[j] == lat->values[i]) {
            j++;
        }
        fprintf(f, "%u %zu\n", lat->values[i], j - i);
        i = j;
    }
    fclose(f);
}

static void print_result(engine_t *e, double schedule_s, double offered,
                         double elapsed_s)
{
    size_t i;

    printf("{\"sent\": %lu, \"ok\": %lu, \"ok_in_schedule\": %lu, "
           "\"offered_rate\": %.1f, \"schedule_s\": %.3f, "
           "\"rate\": %.1f, \"elapsed_s\": %.3f, "
           "\"send_lag_p99\": %.3f, \"send_lag_max\": %.3f, \"errors\": {",
           e->sent, e->ok, e->ok_in_schedule, offered, schedule_s,
           schedule_s > 0 ? (double)e->ok_in_schedule / schedule_s : 0.0,
           elapsed_s, percentile(&e->lags, 99) / 1000.0,
           e->lags.count ? e->lags.values[e->lags.count - 1] / 1000.0 : 0.0);
    for (i = 0; i < e->nerrors; i++) {
        printf("%s\"%s\": %lu", i ? ", " : "", e->errors[i].kind,
               e->errors[i].count);
    }
    printf("}}\n");
}

int main(int argc, char **argv)
{
    engine_t e;
    phase_t phases[MAX_PHASES];
    size_t nphases = 0, phase = 0, i;
    const char *url = NULL, *hist = NULL, *schedule = NULL;
    double timeout_s = 10.0, schedule_s = 0.0, offered = 0.0;
    unsigned long in_phase = 0;
    uint64_t start, phase_start, next_due = 0, now, next_expiry;
    int tfd, have_due;
    struct rlimit rl;
    struct epoll_event ev, events[EVENTS_PER_WAIT];

    memset(&e, 0, sizeof(e));
    e.max_outstanding = 4000;
    for (i = 1; i < (size_t)argc; i++) {
        if (i + 1 >= (size_t)argc) {
            die("usage: openloop --url URL --schedule S:R[,S:R...] "
                "--hist FILE [--timeout S] [--max-outstanding N]");
        }
        if (strcmp(argv[i], "--url") == 0) {
            url = argv[++i];
        }
        else if (strcmp(argv[i], "--schedule") == 0) {
            schedule = argv[++i];
        }
        else if (strcmp(argv[i], "--hist") == 0) {
            hist = argv[++i];
        }
        else if (strcmp(argv[i], "--timeout") == 0) {
            timeout_s = atof(argv[++i]);
        }
        else if (strcmp(argv[i], "--max-outstanding") == 0) {
            e.max_outstanding = (size_t)strtoul(argv[++i], NULL, 10);
        }
        else {
            die("unknown option (--url, --schedule, --hist, --timeout, "
                "--max-outstanding)");
        }
    }
    if (url == NULL || schedule == NULL || hist == NULL) {
        die("--url, --schedule and --hist are required");
    }
    parse_url(&e, url);
    nphases = parse_schedule(schedule, phases);
    for (i = 0; i < nphases; i++) {
        schedule_s += phases[i].seconds;
        offered += phases[i].seconds * phases[i].rate;
    }
    offered = schedule_s > 0 ? offered / schedule_s : 0.0;
    e.timeout_ns = (uint64_t)(timeout_s * 1e9);

    /* A descriptor per outstanding request, and a few more. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    e.nslots = e.max_outstanding + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < e.nslots) {
        e.nslots = rl.rlim_cur;
    }
    e.slots = calloc(e.nslots, sizeof(*e.slots));
    if (e.slots == NULL) {
        die("out of memory");
    }
    for (i = 0; i < e.nslots; i++) {
        e.slots[i].fd = -1;
    }
    e.epfd = epoll_create1(EPOLL_CLOEXEC);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (e.epfd < 0 || tfd < 0) {
        die("epoll_create1/timerfd_create");
    }
    ev.events = EPOLLIN;
    ev.data.fd = -1;
    epoll_ctl(e.epfd, EPOLL_CTL_ADD, tfd, &ev);

    start = now_ns();
    e.schedule_end_ns = start + (uint64_t)(schedule_s * 1e9);
    phase_start = start;
    next_expiry = start + EXPIRY_PERIOD_NS;
    have_due = 1;
    for (;;) {
        int n, k;

        now = now_ns();
        /* Every request due by now leaves now, phase after phase. */
        while (have_due) {
            if (phase == nphases) {
                have_due = 0;
                break;
            }
            if ((double)in_phase >= phases[phase].seconds * phases[phase].rate) {
                phase_start += (uint64_t)(phases[phase].seconds * 1e9);
                phase++;
                in_phase = 0;
                continue;
            }
            next_due = phase_start
                       + (uint64_t)((double)in_phase / phases[phase].rate
                                    * 1e9);
            if (next_due > now) {
                break;
            }
            start_request(&e, next_due, now);
            in_phase++;
        }
        if (now >= next_expiry) {
            expire(&e, now);
            next_expiry = now + EXPIRY_PERIOD_NS;
        }
        if (!have_due
            && (e.open == 0 || now > e.schedule_end_ns + e.timeout_ns
                                     + 1000000000ULL)) {
            break;
        }
        arm(tfd, have_due && next_due < next_expiry ? next_due : next_expiry);
        n = epoll_wait(e.epfd, events, EVENTS_PER_WAIT, -1);
        if (n < 0 && errno != EINTR) {
            die("epoll_wait");
        }
        now = now_ns();
        for (k = 0; k < n; k++) {
            if (events[k].data.fd < 0) {
                uint64_t expirations;

                if (read(tfd, &expirations, sizeof(expirations)) < 0) {
                    /* Nothing to read: a wake-up that raced the re-arm. */
                }
                continue;
            }
            if (e.slots[events[k].data.fd].fd >= 0) {
                handle_ready(&e, &e.slots[events[k].data.fd], now);
            }
        }
    }
    for (i = 0; i < e.nslots; i++) {
        if (e.slots[i].fd >= 0) {
            finish(&e, &e.slots[i], "timeout");
        }
    }
    qsort(e.latencies.values, e.latencies.count, sizeof(uint32_t),
          compare_u32);
    qsort(e.lags.values, e.lags.count, sizeof(uint32_t), compare_u32);
    write_histogram(hist, &e.latencies);
    print_result(&e, schedule_s, offered, (double)(now_ns() - start) / 1e9);
    return 0;
}
