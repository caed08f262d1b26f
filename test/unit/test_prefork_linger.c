/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The lingering close (prefork_linger.c): when a connection shut down for
 * writing may be closed at once (a table), when httpd's lingering read
 * gives up (a table), and the lingering thread on real loopback
 * connections: a client that sends more after the response still gets the
 * whole response, the thread closes each socket at the client's end of
 * file or at the expiry, and every slot taken sends the caller to linger
 * itself.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/conn/prefork_linger.c"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#ifdef __linux__
#include <linux/sockios.h>
#endif

#include "unit.h"

#define SEC APR_INT64_C(1000000)
/* How long a test waits for a state it expects (usec). */
#define DEADLINE (60 * SEC)

typedef struct {
    const char *what;
    pf_linger_read_e input;
    int body_unread;
    int pipelined;
    pf_linger_action_e expected;
} decide_case_t;

static const decide_case_t decide_cases[] = {
    {"complete exchange, nothing waiting", PF_READ_NOTHING, 0, 0,
     PF_LINGER_IF_UNDELIVERED},
    {"body not read to its end", PF_READ_NOTHING, 1, 0, PF_LINGER_KEEP},
    {"pipelining seen", PF_READ_NOTHING, 0, 1, PF_LINGER_KEEP},
    {"body unread and pipelining", PF_READ_NOTHING, 1, 1, PF_LINGER_KEEP},
    {"client bytes waiting, complete exchange", PF_READ_DATA, 0, 0,
     PF_LINGER_KEEP},
    {"client bytes waiting, body unread", PF_READ_DATA, 1, 0,
     PF_LINGER_KEEP},
    {"client closed, complete exchange", PF_READ_EOF, 0, 0,
     PF_LINGER_CLOSE_NOW},
    {"client closed with its body unread", PF_READ_EOF, 1, 1,
     PF_LINGER_CLOSE_NOW},
    {"connection reset", PF_READ_ERROR, 1, 0, PF_LINGER_CLOSE_NOW},
};

START_TEST(decide_follows_table)
{
    const decide_case_t *c = &decide_cases[_i];
    pf_linger_exchange_t x;

    x.input = c->input;
    x.body_unread = c->body_unread;
    x.pipelined = c->pipelined;
    ck_assert_msg(pf_linger_decide(&x) == c->expected, "%s", c->what);
}
END_TEST

typedef struct {
    const char *what;
    apr_int64_t started, first_data, last_data;
    int short_linger;
    apr_int64_t expected;
} expiry_case_t;

static const expiry_case_t expiry_cases[] = {
    {"silent client: 2 s after the start", 100 * SEC, 0, 0, 0, 102 * SEC},
    {"bytes 1 s in: 2 s after them", 100 * SEC, 101 * SEC, 101 * SEC, 0,
     103 * SEC},
    {"still sending at 29 s: the 30 s cap", 100 * SEC, 101 * SEC, 129 * SEC,
     0, 131 * SEC},
    {"sending all along: 30 s after the first bytes", 100 * SEC, 101 * SEC,
     140 * SEC, 0, 131 * SEC},
    {"short note: 2 s after the first bytes", 100 * SEC, 101 * SEC,
     102 * SEC, 1, 103 * SEC},
    {"short note, silent: 2 s after the start", 100 * SEC, 0, 0, 1,
     102 * SEC},
    {"bytes before the start (clock skew) count from the start", 100 * SEC,
     99 * SEC, 99 * SEC, 0, 102 * SEC},
};

START_TEST(expiry_follows_table)
{
    const expiry_case_t *c = &expiry_cases[_i];
    pf_linger_times_t t;

    t.started = c->started;
    t.first_data = c->first_data;
    t.last_data = c->last_data;
    t.short_linger = c->short_linger;
    ck_assert_msg(pf_linger_expiry(&t) == c->expected, "%s: %lld", c->what,
                  (long long)pf_linger_expiry(&t));
}
END_TEST

/* A connected loopback pair; the client's receive buffer is set before
 * the handshake (0: the kernel's default) so that its window stays that
 * small. */
static void connect_pair(int *server, int *client, int client_rcvbuf)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int lfd;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(*client, 0);
    if (client_rcvbuf) {
        ck_assert_int_eq(setsockopt(*client, SOL_SOCKET, SO_RCVBUF,
                                    &client_rcvbuf, sizeof(client_rcvbuf)),
                         0);
    }
    ck_assert_int_eq(connect(*client, (struct sockaddr *)&sin, sizeof(sin)),
                     0);
    *server = accept(lfd, NULL, NULL);
    ck_assert_int_ge(*server, 0);
    close(lfd);
}

/* Writes all of buf, however slowly the peer reads (the server's send
 * buffer is made large enough for the tests' responses). */
static void write_all(int fd, const char *buf, size_t len)
{
    ssize_t n;

    while (len > 0) {
        n = send(fd, buf, len, MSG_NOSIGNAL);
        ck_assert_msg(n > 0, "send: %s", strerror(errno));
        buf += n;
        len -= (size_t)n;
    }
}

/* Reads until end of file; returns the bytes read, or -errno on error. */
static long read_to_eof(int fd)
{
    char buf[65536];
    long total = 0;
    ssize_t n;

    for (;;) {
        n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0) {
            return total;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        total += n;
    }
}

/* How many sockets the lingering thread holds now. */
static int held_by_lingerer(void)
{
    int used;

    pthread_mutex_lock(&lingerer.lock);
    used = lingerer.used;
    pthread_mutex_unlock(&lingerer.lock);
    return used;
}

/* Waits for the lingering thread to hold `count` sockets. */
static int wait_pending(int count)
{
    apr_int64_t until = pf_linger_now() + DEADLINE;

    while (held_by_lingerer() != count && pf_linger_now() < until) {
        poll(NULL, 0, 5);
    }
    return held_by_lingerer();
}

static long outq_of(int fd)
{
    int outq = -1;

    ck_assert_int_eq(ioctl(fd, SIOCOUTQ, &outq), 0);
    return outq;
}

/* The client has every byte: a complete exchange may close at once, and
 * is closed at once with no reset. */
START_TEST(acknowledged_response_is_delivered)
{
    static const char response[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                   "Connection: close\r\n\r\nok";
    apr_int64_t until = pf_linger_now() + DEADLINE;
    int server, client;

    connect_pair(&server, &client, 0);
    write_all(server, response, sizeof(response) - 1);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    /* Loopback acknowledges as it delivers; wait for the state anyway. */
    while (outq_of(server) > 1 && pf_linger_now() < until) {
        poll(NULL, 0, 5);
    }
    ck_assert_int_eq(pf_linger_delivered(server), 1);
    close(server);
    ck_assert_int_eq(read_to_eof(client), (long)sizeof(response) - 1);
    close(client);
}
END_TEST

/* A client whose window is nearly closed has most of the response still
 * in the server's send queue: not delivered, so the socket is kept; the
 * client that then sends more (a pipelined request) and reads at leisure
 * gets every byte, because the lingering thread reads what it sends. */
START_TEST(pipelined_bytes_after_response_lose_nothing)
{
    static char body[256 * 1024];
    int sndbuf = 1024 * 1024, server, client;

    memset(body, 'x', sizeof(body));
    connect_pair(&server, &client, 4096);
    ck_assert_int_eq(setsockopt(server, SOL_SOCKET, SO_SNDBUF, &sndbuf,
                                sizeof(sndbuf)), 0);
    write_all(server, body, sizeof(body));
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    ck_assert_int_gt(outq_of(server), 1);
    ck_assert_int_eq(pf_linger_delivered(server), 0);
    ck_assert_int_eq(pf_linger_hand_off(server, 0), APR_SUCCESS);
    ck_assert_int_eq(wait_pending(1), 1);
    /* Closed now instead, the next send would be answered with RST and
     * the unsent rest of the body dropped. */
    write_all(client, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n", 31);
    ck_assert_int_eq(read_to_eof(client), (long)sizeof(body));
    ck_assert_int_eq(held_by_lingerer(), 1);
    close(client);
    ck_assert_int_eq(wait_pending(0), 0);
}
END_TEST

/* A client still uploading after its answer: the lingering thread reads
 * what it sends, so it sends every byte and reads the answer whole. */
START_TEST(upload_after_the_answer_loses_nothing)
{
    static char chunk[16 * 1024];
    int server, client, i;

    memset(chunk, 'x', sizeof(chunk));
    connect_pair(&server, &client, 0);
    write_all(server, "413", 3);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    ck_assert_int_eq(pf_linger_hand_off(server, 0), APR_SUCCESS);
    for (i = 0; i < 64; i++) {
        write_all(client, chunk, sizeof(chunk));
    }
    ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
    ck_assert_int_eq(read_to_eof(client), 3);
    close(client);
    ck_assert_int_eq(wait_pending(0), 0);
}
END_TEST

/* A client that never answers: the thread gives up after httpd's quiet
 * time, and the client sees an orderly end of file. */
START_TEST(silent_client_is_closed_at_expiry)
{
    int server, client;
    apr_int64_t handed;

    connect_pair(&server, &client, 0);
    write_all(server, "bye", 3);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    handed = pf_linger_now();
    ck_assert_int_eq(pf_linger_hand_off(server, 0), APR_SUCCESS);
    ck_assert_int_eq(wait_pending(0), 0);
    ck_assert_int_ge(pf_linger_now() - handed, PF_LINGER_QUIET_USEC);
    ck_assert_int_eq(read_to_eof(client), 3);
    close(client);
}
END_TEST

/* Every slot taken: the caller is told to linger itself. */
START_TEST(full_set_sends_the_caller_to_linger_itself)
{
    int server[PF_LINGER_SLOTS + 1], client[PF_LINGER_SLOTS + 1];
    int i;

    for (i = 0; i <= PF_LINGER_SLOTS; i++) {
        connect_pair(&server[i], &client[i], 0);
        ck_assert_int_eq(shutdown(server[i], SHUT_WR), 0);
    }
    for (i = 0; i < PF_LINGER_SLOTS; i++) {
        ck_assert_int_eq(pf_linger_hand_off(server[i], 0), APR_SUCCESS);
    }
    ck_assert_int_eq(pf_linger_hand_off(server[PF_LINGER_SLOTS], 0),
                     APR_EAGAIN);
    close(server[PF_LINGER_SLOTS]);
    /* The client's close ends each lingering socket at once. */
    for (i = 0; i <= PF_LINGER_SLOTS; i++) {
        close(client[i]);
    }
    ck_assert_int_eq(wait_pending(0), 0);
}
END_TEST

/* Closes the client's socket after a short while (a thread of the test,
 * while the main thread waits in pf_linger_finish). */
static void *close_later(void *arg)
{
    poll(NULL, 0, 100);
    close(*(int *)arg);
    return NULL;
}

/* An exiting child: pf_linger_finish() waits for the client to close,
 * not for a fixed time. */
START_TEST(finish_waits_for_the_client)
{
    int server, client;
    pthread_t closer;
    apr_int64_t began;

    connect_pair(&server, &client, 0);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    ck_assert_int_eq(pf_linger_hand_off(server, 0), APR_SUCCESS);
    began = pf_linger_now();
    ck_assert_int_eq(pthread_create(&closer, NULL, close_later, &client), 0);
    pf_linger_finish(DEADLINE);
    ck_assert_int_eq(held_by_lingerer(), 0);
    ck_assert_int_eq(pthread_join(closer, NULL), 0);
    /* The client's close ended it, not the quiet time. */
    ck_assert_int_lt(pf_linger_now() - began, PF_LINGER_QUIET_USEC);
}
END_TEST

/* An exiting child: pf_linger_finish() waits for the thread, then closes
 * what is left, here at once. */
START_TEST(finish_closes_what_is_left)
{
    int server, client;

    connect_pair(&server, &client, 0);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    ck_assert_int_eq(pf_linger_hand_off(server, 0), APR_SUCCESS);
    ck_assert_int_eq(held_by_lingerer(), 1);
    pf_linger_finish(0);
    ck_assert_int_eq(held_by_lingerer(), 0);
    ck_assert_int_eq(read_to_eof(client), 0);
    close(client);
}
END_TEST

/* No stop: lingering runs its course. */
static volatile sig_atomic_t no_stop;

/* Lingering in the caller's own thread ends at the client's close. */
START_TEST(linger_here_ends_at_client_close)
{
    int server, client;

    connect_pair(&server, &client, 0);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    write_all(client, "more", 4);
    ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
    pf_linger_here(server, 0, &no_stop);
    close(server);
    ck_assert_int_eq(read_to_eof(client), 0);
    close(client);
}
END_TEST

/* What the interrupter thread works on. */
typedef struct {
    pthread_t target;
    int client;
    volatile int done;
} interrupter_t;

static void ignore_signal(int sig)
{
    (void)sig;
}

/* Keeps the client talking (so that the quiet expiry keeps moving) and
 * signals the lingering thread, until it has returned. */
static void *interrupt_lingering(void *arg)
{
    interrupter_t *it = arg;

    while (!it->done) {
        (void)send(it->client, "x", 1, MSG_NOSIGNAL);
        pthread_kill(it->target, SIGUSR2);
        poll(NULL, 0, 1);
    }
    return NULL;
}

/* A stop that arrives while the child lingers itself ends the lingering,
 * as httpd's child dies in its lingering close: with the client still
 * sending, lingering would otherwise run to its 30 s cap. */
START_TEST(linger_here_ends_at_a_stop)
{
    static volatile sig_atomic_t stopping = 1;
    struct sigaction sa, saved;
    interrupter_t it;
    pthread_t thread;
    apr_int64_t started;
    int server;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = ignore_signal;      /* no SA_RESTART: poll() ends */
    ck_assert_int_eq(sigaction(SIGUSR2, &sa, &saved), 0);
    connect_pair(&server, &it.client, 0);
    ck_assert_int_eq(shutdown(server, SHUT_WR), 0);
    it.target = pthread_self();
    it.done = 0;
    ck_assert_int_eq(pthread_create(&thread, NULL, interrupt_lingering, &it),
                     0);
    started = pf_linger_now();
    pf_linger_here(server, 0, &stopping);
    it.done = 1;
    pthread_join(thread, NULL);
    ck_assert_msg(pf_linger_now() - started < PF_LINGER_MAX_USEC,
                  "lingered to the cap despite the stop");
    close(server);
    close(it.client);
    ck_assert_int_eq(sigaction(SIGUSR2, &saved, NULL), 0);
}
END_TEST

Suite *linger_suite(void)
{
    Suite *s = suite_create("linger");
    TCase *tc = tcase_create("decision");
    TCase *sockets = tcase_create("sockets");

    tcase_add_loop_test(tc, decide_follows_table, 0,
                        sizeof(decide_cases) / sizeof(decide_cases[0]));
    tcase_add_loop_test(tc, expiry_follows_table, 0,
                        sizeof(expiry_cases) / sizeof(expiry_cases[0]));
    suite_add_tcase(s, tc);
    tcase_add_test(sockets, acknowledged_response_is_delivered);
    tcase_add_test(sockets, pipelined_bytes_after_response_lose_nothing);
    tcase_add_test(sockets, upload_after_the_answer_loses_nothing);
    tcase_add_test(sockets, silent_client_is_closed_at_expiry);
    tcase_add_test(sockets, full_set_sends_the_caller_to_linger_itself);
    tcase_add_test(sockets, finish_waits_for_the_client);
    tcase_add_test(sockets, finish_closes_what_is_left);
    tcase_add_test(sockets, linger_here_ends_at_client_close);
    tcase_add_test(sockets, linger_here_ends_at_a_stop);
    tcase_set_timeout(sockets, 90);
    suite_add_tcase(s, sockets);
    return s;
}
