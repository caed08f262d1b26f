/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Which waiting process takes the next connection: the kernel's wake-up
 * order for the ways a pool of processes can wait for connections on
 * shared listening sockets, measured as counts, so that a busy machine
 * does not move them.
 *
 *   wakeorder --mode MODE [--children N] [--connections K]
 *       [--concurrency C] [--listeners L] [--park-set S]
 *
 * N processes wait on L loopback listeners in one of these ways:
 *
 *   accept      each blocks in accept() (L = 1): an exclusive waiter on
 *               the listener's queue, added at its tail; the kernel wakes
 *               the head, the process that has waited longest (FIFO);
 *   mutex       (L >= 1) httpd's several-Listen arrangement: a
 *               process-shared mutex, then poll() over the listeners and
 *               accept() on a ready one;
 *   shared-lt   one epoll instance, made before fork and shared, holding
 *               the listeners level-triggered; each process waits in
 *               epoll_wait(), then accept()s.  ep_poll() adds a waiter at
 *               the head of the instance's queue: last in, first out;
 *   shared-oneshot  the same with EPOLLONESHOT: the woken process
 *               accept()s and arms the listener again (EPOLL_CTL_MOD),
 *               which hands a connection still queued to the next waiter;
 *   exclusive   an epoll instance per process, the listeners added with
 *               EPOLLEXCLUSIVE: each process has an exclusive entry on
 *               every listener's queue, in the order they registered, and
 *               a connection wakes the first whose process is waiting;
 *   park        S processes block in accept(); the others wait on a futex
 *               word of their own, on a stack in shared memory; the one
 *               that leaves the set empty wakes the top of the stack, the
 *               most recently parked (a lazy refill).
 *
 * A client in this process opens K connections, C at a time (closed
 * loop: each sends 4 bytes, reads the answer, closes), after every
 * process waits.  Each process records which accept it made (one counter
 * for all), its system calls on the way to a connection, and its
 * voluntary context switches there (getrusage, around the wait and the
 * accept: a process that sleeps once per connection switches once).  It
 * prints one JSON object: the reuse distance of each accept (how many
 * accepts ago its process last accepted: the second half's median, 90th
 * percentile, and the share above 64, "cold"), how many processes ever
 * accepted, the wake-ups (voluntary switches) and system calls per
 * accept, and the accept()s that blocked after a wake-up reported a
 * connection (another process had taken it).
 *
 * Only 127.0.0.1; needs no privilege.  A test program: it measures the
 * kernel, it is no server.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN    4096
#define MAX_LISTENERS   8
#define MAX_ACCEPTS     (1 << 20)
#define COLD_REUSE      64
#define EVENTS          256
/* The client gives up when no connection finishes for this long. */
#define STALL_MS        3000
/* A parked process looks again this often, as the design asks. */
#define PARK_TIMEOUT_S  1

typedef enum {
    MODE_ACCEPT, MODE_MUTEX, MODE_SHARED_LT, MODE_SHARED_ONESHOT,
    MODE_EXCLUSIVE, MODE_PARK
} mode_e;

static const char *const mode_names[] = {
    "accept", "mutex", "shared-lt", "shared-oneshot", "exclusive", "park"
};

typedef struct {
    long accepts;
    long syscalls;              /* on the way to a connection */
    long switches;              /* voluntary, on the way to a connection */
    long blocked_accepts;       /* accept() slept after a reported event */
    long registered_rank;       /* exclusive: order of registration */
} child_stats_t;

typedef struct {
    atomic_uint seq;            /* accepts so far, all processes */
    atomic_int ready;           /* processes that reached their first wait */
    atomic_int registered;      /* exclusive: registrations so far */
    pthread_mutex_t mutex;      /* mutex mode */
    /* park mode, under park_lock */
    atomic_int park_lock;
    int accepting;
    int park_top;
    int park_stack[MAX_CHILDREN];
    atomic_int park_word[MAX_CHILDREN];
    child_stats_t stats[MAX_CHILDREN];
    int log[MAX_ACCEPTS];       /* process of each accept, in order */
} shared_t;

typedef struct {
    mode_e mode;
    int children;
    long connections;
    int concurrency;
    int listeners;
    int park_set;
    int hostile;                /* hostile_e: what process 0 does */
} options_t;

/* What a hostile process 0 does instead of serving. */
typedef enum {
    HOSTILE_NONE,
    HOSTILE_HOARD,      /* an epoll of its own with the listener added
                         * EPOLLEXCLUSIVE | EPOLLET, after every other
                         * process registered: it sleeps in epoll_wait()
                         * and never accepts */
    HOSTILE_DEL,        /* shared modes: EPOLL_CTL_DEL of the listener from
                         * the shared instance, then sleeps */
    HOSTILE_DUPADD,     /* shared modes: the listener added again to the
                         * shared instance under another descriptor
                         * number, level-triggered, then sleeps */
    HOSTILE_TAKE,       /* shared modes: waits on the shared instance like
                         * the others, but never accepts or arms again */
    HOSTILE_HOARD_FIRST, /* hoard, registered before the others: the
                         * oldest registration, as a hoarder becomes once
                         * the processes before it have been replaced */
    HOSTILE_TAKE_TOP    /* take, re-entering epoll_wait() every
                         * millisecond (a timer signal), so that it waits
                         * on top of the LIFO */
} hostile_e;

static const char *const hostile_names[] = {
    "none", "hoard", "del", "dupadd", "take", "hoard-first", "take-top"
};

static void ignore_signal(int sig)
{
    (void)sig;
}

static shared_t *sh;
static int listen_fd[MAX_LISTENERS];
static struct sockaddr_in listen_addr[MAX_LISTENERS];
static int shared_epfd = -1;

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static long voluntary_switches(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_nvcsw;
}

static long futex(atomic_int *word, int op, int value,
                  const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

static void park_lock(void)
{
    int expected = 0;

    while (!atomic_compare_exchange_weak(&sh->park_lock, &expected, 1)) {
        expected = 0;
        sched_yield();
    }
}

static void park_unlock(void)
{
    atomic_store(&sh->park_lock, 0);
}

/* accept() on one listener, counting a sleep in it as a blocked accept
 * (the wait before it said a connection was there). */
static int accept_counted(int me, int fd, int after_event)
{
    long before = after_event ? voluntary_switches() : 0;
    int c;

    do {
        c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    } while (c < 0 && errno == EINTR);
    sh->stats[me].syscalls++;
    if (after_event && voluntary_switches() > before) {
        sh->stats[me].blocked_accepts++;
    }
    return c;
}

/* The listener a wait reported, in turn when several are. */
static int pick(const struct epoll_event *ev, int n, int *turn)
{
    int i, best = -1, pos;

    for (i = 0; i < n; i++) {
        pos = (int)ev[i].data.u32;
        if (best < 0 || ((pos - *turn + MAX_LISTENERS) % MAX_LISTENERS)
                        < ((best - *turn + MAX_LISTENERS) % MAX_LISTENERS)) {
            best = pos;
        }
    }
    *turn = (best + 1) % MAX_LISTENERS;
    return best;
}

static int wait_mutex(int me, const options_t *o, int *turn)
{
    struct pollfd pfd[MAX_LISTENERS];
    int i, n, c = -1, pos, best = -1;

    pthread_mutex_lock(&sh->mutex);
    sh->stats[me].syscalls++;   /* the lock's futex, when contended */
    for (;;) {
        for (i = 0; i < o->listeners; i++) {
            pfd[i].fd = listen_fd[i];
            pfd[i].events = POLLIN;
            pfd[i].revents = 0;
        }
        n = poll(pfd, (nfds_t)o->listeners, -1);
        sh->stats[me].syscalls++;
        if (n > 0) {
            break;
        }
    }
    for (i = 0; i < o->listeners; i++) {
        pos = (i - *turn + o->listeners) % o->listeners;
        if ((pfd[i].revents & POLLIN)
            && (best < 0 || pos < (best - *turn + o->listeners)
                                  % o->listeners)) {
            best = i;
        }
    }
    *turn = (best + 1) % o->listeners;
    c = accept_counted(me, listen_fd[best], 1);
    pthread_mutex_unlock(&sh->mutex);
    sh->stats[me].syscalls++;
    return c;
}

static int wait_epoll(int me, int epfd, const options_t *o, int *turn)
{
    struct epoll_event ev[MAX_LISTENERS];
    int n, which, c;

    /* EPOLLONESHOT disarms every listener it reports: one at a time, so
     * that the one taken is the one armed again. */
    do {
        n = epoll_wait(epfd, ev, o->mode == MODE_SHARED_ONESHOT ? 1
                                                               : o->listeners,
                       -1);
        sh->stats[me].syscalls++;
    } while (n <= 0);
    which = pick(ev, n, turn);
    c = accept_counted(me, listen_fd[which], 1);
    if (o->mode == MODE_SHARED_ONESHOT) {
        struct epoll_event arm;

        memset(&arm, 0, sizeof(arm));
        arm.events = EPOLLIN | EPOLLONESHOT;
        arm.data.u32 = (uint32_t)which;
        epoll_ctl(epfd, EPOLL_CTL_MOD, listen_fd[which], &arm);
        sh->stats[me].syscalls++;
    }
    return c;
}

static int wait_park(int me, const options_t *o)
{
    struct timespec timeout = { PARK_TIMEOUT_S, 0 };
    int called = 0, c, wake = -1, i;

    for (;;) {
        park_lock();
        if (called || sh->accepting < o->park_set) {
            sh->accepting++;
            park_unlock();
            break;
        }
        atomic_store(&sh->park_word[me], 0);
        sh->park_stack[sh->park_top++] = me;
        park_unlock();
        futex(&sh->park_word[me], FUTEX_WAIT, 0, &timeout);
        sh->stats[me].syscalls++;
        park_lock();
        if (atomic_load(&sh->park_word[me]) == 1) {
            called = 1;         /* popped by the one that emptied the set */
        }
        else {
            for (i = 0; i < sh->park_top; i++) {
                if (sh->park_stack[i] == me) {
                    memmove(&sh->park_stack[i], &sh->park_stack[i + 1],
                            sizeof(int) * (size_t)(sh->park_top - i - 1));
                    sh->park_top--;
                    break;
                }
            }
        }
        park_unlock();
    }
    c = accept_counted(me, listen_fd[0], 0);
    park_lock();
    sh->accepting--;
    if (sh->accepting == 0 && sh->park_top > 0) {
        wake = sh->park_stack[--sh->park_top];
        atomic_store(&sh->park_word[wake], 1);
    }
    park_unlock();
    if (wake >= 0) {
        futex(&sh->park_word[wake], FUTEX_WAKE, 1, NULL);
        sh->stats[me].syscalls++;
    }
    return c;
}

static void serve(int c)
{
    char buf[64];
    ssize_t n;

    do {
        n = read(c, buf, sizeof(buf));
    } while (n < 0 && errno == EINTR);
    if (n > 0 && write(c, "ok\n", 3) < 0) {
        /* the client is gone: nothing to do */
    }
    close(c);
}

static void hostile_main(const options_t *o)
{
    struct epoll_event ev;
    int epfd, copy;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    switch (o->hostile) {
    case HOSTILE_HOARD:
    case HOSTILE_HOARD_FIRST:
        while (o->hostile == HOSTILE_HOARD && o->mode == MODE_EXCLUSIVE
               && atomic_load(&sh->registered) < o->children - 1) {
            usleep(1000);
        }
        epfd = epoll_create1(EPOLL_CLOEXEC);
        ev.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLET;
        if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd[0], &ev)) {
            die("hostile epoll");
        }
        atomic_fetch_add(&sh->ready, 1);
        for (;;) {
            epoll_wait(epfd, &ev, 1, -1);
        }
    case HOSTILE_DEL:
        epoll_ctl(shared_epfd, EPOLL_CTL_DEL, listen_fd[0], NULL);
        break;
    case HOSTILE_DUPADD:
        copy = dup(listen_fd[0]);
        if (copy < 0 || epoll_ctl(shared_epfd, EPOLL_CTL_ADD, copy, &ev)) {
            die("hostile dup add");
        }
        break;
    case HOSTILE_TAKE_TOP:
        {
            struct sigaction sa;
            struct itimerval every;

            memset(&sa, 0, sizeof(sa));
            sa.sa_handler = ignore_signal;
            sigaction(SIGALRM, &sa, NULL);
            memset(&every, 0, sizeof(every));
            every.it_interval.tv_usec = 1000;
            every.it_value.tv_usec = 1000;
            setitimer(ITIMER_REAL, &every, NULL);
        }
        /* fall through */
    case HOSTILE_TAKE:
        atomic_fetch_add(&sh->ready, 1);
        for (;;) {
            epoll_wait(shared_epfd, &ev, 1, -1);
        }
    default:
        break;
    }
    atomic_fetch_add(&sh->ready, 1);
    for (;;) {
        pause();
    }
}

static void child_main(int me, const options_t *o)
{
    struct epoll_event ev;
    int epfd = -1, turn = 0, i, c;
    long before;
    unsigned seq;

    if (me == 0 && o->hostile != HOSTILE_NONE) {
        hostile_main(o);
    }
    if (o->mode == MODE_EXCLUSIVE) {
        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (epfd < 0) {
            die("epoll_create1");
        }
        for (i = 0; i < o->listeners; i++) {
            memset(&ev, 0, sizeof(ev));
            ev.events = EPOLLIN | EPOLLEXCLUSIVE;
            ev.data.u32 = (uint32_t)i;
            if (epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd[i], &ev)) {
                die("epoll_ctl EPOLLEXCLUSIVE");
            }
        }
        sh->stats[me].registered_rank = atomic_fetch_add(&sh->registered, 1);
    }
    else if (o->mode == MODE_SHARED_LT || o->mode == MODE_SHARED_ONESHOT) {
        epfd = shared_epfd;
    }
    atomic_fetch_add(&sh->ready, 1);
    for (;;) {
        before = voluntary_switches();
        switch (o->mode) {
        case MODE_ACCEPT:
            c = accept_counted(me, listen_fd[0], 0);
            break;
        case MODE_MUTEX:
            c = wait_mutex(me, o, &turn);
            break;
        case MODE_PARK:
            c = wait_park(me, o);
            break;
        default:
            c = wait_epoll(me, epfd, o, &turn);
            break;
        }
        sh->stats[me].switches += voluntary_switches() - before;
        if (c < 0) {
            continue;
        }
        seq = atomic_fetch_add(&sh->seq, 1);
        if (seq < MAX_ACCEPTS) {
            sh->log[seq] = me;
        }
        sh->stats[me].accepts++;
        serve(c);
    }
}

/* Every process asleep (state S) in its first wait. */
static int all_sleeping(const pid_t *pids, int n)
{
    char path[64], buf[512], *p;
    FILE *f;
    int i, ok;

    for (i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pids[i]);
        f = fopen(path, "r");
        if (f == NULL) {
            return 0;
        }
        ok = fgets(buf, sizeof(buf), f) != NULL;
        fclose(f);
        p = ok ? strrchr(buf, ')') : NULL;
        if (p == NULL || p[1] != ' ' || p[2] != 'S') {
            return 0;
        }
    }
    return 1;
}

typedef struct {
    int fd;
    int sent;
} client_conn_t;

static void client_start(int ep, client_conn_t *cc, long n, int listeners)
{
    struct epoll_event ev;
    int lst = (int)(n % listeners);

    cc->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (cc->fd < 0) {
        die("socket");
    }
    cc->sent = 0;
    if (connect(cc->fd, (struct sockaddr *)&listen_addr[lst],
                sizeof(listen_addr[lst])) < 0 && errno != EINPROGRESS) {
        die("connect");
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLOUT | EPOLLIN;
    ev.data.ptr = cc;
    epoll_ctl(ep, EPOLL_CTL_ADD, cc->fd, &ev);
}

/* Closed loop: `concurrency` connections at a time, spread over the
 * listeners in turn, until `total` have been answered. */
static long run_client(const options_t *o)
{
    struct epoll_event ev[EVENTS], mod;
    client_conn_t *conns;
    long started = 0, done = 0;
    int ep, i, n;
    char buf[64];
    ssize_t got;

    conns = calloc((size_t)o->concurrency, sizeof(*conns));
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || ep < 0) {
        die("client");
    }
    for (i = 0; i < o->concurrency && started < o->connections; i++) {
        client_start(ep, &conns[i], started, o->listeners);
        started++;
    }
    while (done < o->connections) {
        n = epoll_wait(ep, ev, EVENTS, STALL_MS);
        if (n <= 0) {
            break;              /* stalled: reported */
        }
        for (i = 0; i < n; i++) {
            client_conn_t *cc = ev[i].data.ptr;

            if (!cc->sent && (ev[i].events & EPOLLOUT)) {
                if (write(cc->fd, "GET\n", 4) != 4) {
                    die("client write");
                }
                cc->sent = 1;
                memset(&mod, 0, sizeof(mod));
                mod.events = EPOLLIN;
                mod.data.ptr = cc;
                epoll_ctl(ep, EPOLL_CTL_MOD, cc->fd, &mod);
                continue;
            }
            if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                got = read(cc->fd, buf, sizeof(buf));
                if (got > 0) {
                    continue;
                }
                if (got < 0 && errno == EAGAIN) {
                    continue;
                }
                close(cc->fd);
                done++;
                if (started < o->connections) {
                    client_start(ep, cc, started, o->listeners);
                    started++;
                }
            }
        }
    }
    for (i = 0; i < o->concurrency; i++) {
        if (conns[i].fd > 0) {
            close(conns[i].fd);
        }
    }
    close(ep);
    free(conns);
    return done;
}

static int compare_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void report(const options_t *o, long answered)
{
    long accepts = 0, syscalls = 0, switches = 0, blocked = 0;
    long n = (long)atomic_load(&sh->seq), i, half, used = 0, cold = 0;
    int *last, *dist, nd = 0, rank_max = 0, served_max_rank = -1;

    if (n > MAX_ACCEPTS) {
        n = MAX_ACCEPTS;
    }
    last = malloc(sizeof(int) * MAX_CHILDREN);
    dist = malloc(sizeof(int) * (size_t)(n + 1));
    if (last == NULL || dist == NULL) {
        die("malloc");
    }
    for (i = 0; i < MAX_CHILDREN; i++) {
        last[i] = -1;
    }
    half = n / 2;
    for (i = 0; i < n; i++) {
        int me = sh->log[i];

        if (last[me] >= 0 && i >= half) {
            dist[nd++] = (int)(i - last[me]);
        }
        last[me] = (int)i;
    }
    for (i = 0; i < o->children; i++) {
        accepts += sh->stats[i].accepts;
        syscalls += sh->stats[i].syscalls;
        switches += sh->stats[i].switches;
        blocked += sh->stats[i].blocked_accepts;
        if (sh->stats[i].accepts > 0) {
            used++;
            if (sh->stats[i].registered_rank > served_max_rank) {
                served_max_rank = (int)sh->stats[i].registered_rank;
            }
        }
        if (sh->stats[i].registered_rank > rank_max) {
            rank_max = (int)sh->stats[i].registered_rank;
        }
    }
    qsort(dist, (size_t)nd, sizeof(int), compare_int);
    for (i = 0; i < nd; i++) {
        cold += dist[i] > COLD_REUSE;
    }
    printf("{\"mode\": \"%s\", \"children\": %d, \"listeners\": %d, "
           "\"concurrency\": %d, \"accepts\": %ld, \"children_used\": %ld, "
           "\"reuse_median\": %d, \"reuse_p90\": %d, \"cold_share\": %.4f, "
           "\"wakeups_per_accept\": %.4f, \"syscalls_per_accept\": %.4f, "
           "\"blocked_accepts\": %ld",
           mode_names[o->mode], o->children, o->listeners, o->concurrency,
           accepts, used, nd ? dist[nd / 2] : -1,
           nd ? dist[(nd * 9) / 10] : -1,
           nd ? (double)cold / nd : 0.0,
           accepts ? (double)switches / accepts : 0.0,
           accepts ? (double)syscalls / accepts : 0.0, blocked);
    if (answered < o->connections) {
        printf(", \"stalled_after\": %ld", answered);
    }
    if (o->hostile != HOSTILE_NONE) {
        printf(", \"hostile\": \"%s\"", hostile_names[o->hostile]);
    }
    if (o->mode == MODE_PARK) {
        printf(", \"park_set\": %d", o->park_set);
    }
    if (o->mode == MODE_EXCLUSIVE) {
        printf(", \"highest_rank_served\": %d", served_max_rank);
    }
    printf("}\n");
    free(last);
    free(dist);
}

static void make_listeners(const options_t *o)
{
    struct epoll_event ev;
    socklen_t len;
    int i, one = 1;

    for (i = 0; i < o->listeners; i++) {
        listen_fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd[i] < 0) {
            die("socket");
        }
        setsockopt(listen_fd[i], SOL_SOCKET, SO_REUSEADDR, &one,
                   sizeof(one));
        memset(&listen_addr[i], 0, sizeof(listen_addr[i]));
        listen_addr[i].sin_family = AF_INET;
        listen_addr[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(listen_fd[i], (struct sockaddr *)&listen_addr[i],
                 sizeof(listen_addr[i])) || listen(listen_fd[i], 4096)) {
            die("bind/listen");
        }
        len = sizeof(listen_addr[i]);
        getsockname(listen_fd[i], (struct sockaddr *)&listen_addr[i], &len);
    }
    if (o->mode == MODE_SHARED_LT || o->mode == MODE_SHARED_ONESHOT) {
        shared_epfd = epoll_create1(EPOLL_CLOEXEC);
        if (shared_epfd < 0) {
            die("epoll_create1");
        }
        for (i = 0; i < o->listeners; i++) {
            memset(&ev, 0, sizeof(ev));
            ev.events = EPOLLIN
                        | (o->mode == MODE_SHARED_ONESHOT ? EPOLLONESHOT : 0);
            ev.data.u32 = (uint32_t)i;
            if (epoll_ctl(shared_epfd, EPOLL_CTL_ADD, listen_fd[i], &ev)) {
                die("epoll_ctl");
            }
        }
    }
}

static int parse_args(int argc, char **argv, options_t *o)
{
    int i, m;

    memset(o, 0, sizeof(*o));
    o->mode = MODE_ACCEPT;
    o->children = 64;
    o->connections = 20000;
    o->concurrency = 4;
    o->listeners = 1;
    o->park_set = 2;
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mode")) {
            for (m = 0; m <= MODE_PARK; m++) {
                if (!strcmp(argv[i + 1], mode_names[m])) {
                    o->mode = (mode_e)m;
                    break;
                }
            }
            if (m > MODE_PARK) {
                return -1;
            }
        }
        else if (!strcmp(argv[i], "--children")) {
            o->children = atoi(argv[i + 1]);
        }
        else if (!strcmp(argv[i], "--connections")) {
            o->connections = atol(argv[i + 1]);
        }
        else if (!strcmp(argv[i], "--concurrency")) {
            o->concurrency = atoi(argv[i + 1]);
        }
        else if (!strcmp(argv[i], "--listeners")) {
            o->listeners = atoi(argv[i + 1]);
        }
        else if (!strcmp(argv[i], "--park-set")) {
            o->park_set = atoi(argv[i + 1]);
        }
        else if (!strcmp(argv[i], "--hostile")) {
            for (m = 0; m <= HOSTILE_TAKE_TOP; m++) {
                if (!strcmp(argv[i + 1], hostile_names[m])) {
                    o->hostile = m;
                    break;
                }
            }
            if (m > HOSTILE_TAKE_TOP) {
                return -1;
            }
        }
        else {
            return -1;
        }
    }
    if (i != argc || o->children < 1 || o->children > MAX_CHILDREN
        || o->connections < 1 || o->connections > MAX_ACCEPTS
        || o->concurrency < 1 || o->listeners < 1
        || o->listeners > MAX_LISTENERS || o->park_set < 1
        || ((o->mode == MODE_ACCEPT || o->mode == MODE_PARK)
            && o->listeners != 1)
        || ((o->hostile == HOSTILE_DEL || o->hostile == HOSTILE_DUPADD
             || o->hostile == HOSTILE_TAKE || o->hostile == HOSTILE_TAKE_TOP)
            && o->mode != MODE_SHARED_LT && o->mode != MODE_SHARED_ONESHOT)
        || (o->hostile != HOSTILE_NONE && o->listeners != 1)) {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    pthread_mutexattr_t attr;
    options_t o;
    pid_t *pids;
    long done;
    int i;

    if (parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: wakeorder --mode accept|mutex|shared-lt|"
                "shared-oneshot|exclusive|park [--children N] "
                "[--connections K] [--concurrency C] [--listeners L] "
                "[--park-set S] [--hostile hoard|hoard-first|del|dupadd|take|"
                "take-top]\n");
        return 2;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pids = calloc((size_t)o.children, sizeof(*pids));
    if (sh == MAP_FAILED || pids == NULL) {
        die("mmap");
    }
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&sh->mutex, &attr);
    make_listeners(&o);
    for (i = 0; i < o.children; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            die("fork");
        }
        if (pids[i] == 0) {
            signal(SIGTERM, SIG_DFL);
            /* No process outlives a client that gave up. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1) {
                _exit(1);
            }
            child_main(i, &o);
        }
    }
    while (atomic_load(&sh->ready) < o.children || !all_sleeping(pids,
                                                                 o.children)) {
        usleep(10000);
    }
    done = run_client(&o);
    for (i = 0; i < o.children; i++) {
        kill(pids[i], SIGKILL);
    }
    for (i = 0; i < o.children; i++) {
        waitpid(pids[i], NULL, 0);
    }
    report(&o, done);
    return 0;
}
