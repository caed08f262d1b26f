/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * mod_bucket_status's pure part: balance math on edge cases, the 10-second
 * rate, the query-string parser (table and bounded random input) and each
 * formatter.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../modules/generators/bucket_report.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#define EPS 1e-6

START_TEST(balance_one_bucket_is_even)
{
    unsigned long long counts[] = { 1234 };
    bs_balance_t b;

    bs_compute_balance(counts, 1, &b);
    ck_assert_int_eq(b.n, 1);
    ck_assert(b.total == 1234);
    ck_assert_double_eq_tol(b.jain, 1.0, EPS);
    ck_assert_double_eq_tol(b.cv, 0.0, EPS);
    ck_assert_double_eq_tol(b.max_over_mean, 1.0, EPS);
    ck_assert_double_eq_tol(b.min_over_mean, 1.0, EPS);
}
END_TEST

START_TEST(balance_zero_traffic_is_even)
{
    unsigned long long counts[] = { 0, 0, 0, 0 };
    bs_balance_t b;

    bs_compute_balance(counts, 4, &b);
    ck_assert(b.total == 0);
    ck_assert_double_eq_tol(b.jain, 1.0, EPS);
    ck_assert_double_eq_tol(b.cv, 0.0, EPS);
    ck_assert_double_eq_tol(b.mean, 0.0, EPS);
}
END_TEST

START_TEST(balance_no_buckets_is_defined)
{
    bs_balance_t b;

    bs_compute_balance(NULL, 0, &b);
    ck_assert_int_eq(b.n, 0);
    ck_assert_double_eq_tol(b.jain, 1.0, EPS);
}
END_TEST

START_TEST(balance_one_hot_bucket)
{
    unsigned long long counts[] = { 0, 1000, 0, 0 };
    bs_balance_t b;

    bs_compute_balance(counts, 4, &b);
    ck_assert_double_eq_tol(b.jain, 0.25, EPS);
    ck_assert_double_eq_tol(b.max_over_mean, 4.0, EPS);
    ck_assert_double_eq_tol(b.min_over_mean, 0.0, EPS);
    ck_assert_double_eq_tol(b.cv, sqrt(3.0), EPS);
}
END_TEST

START_TEST(balance_known_values)
{
    unsigned long long counts[] = { 1, 2, 3 };
    bs_balance_t b;

    bs_compute_balance(counts, 3, &b);
    ck_assert_double_eq_tol(b.mean, 2.0, EPS);
    ck_assert_double_eq_tol(b.jain, 36.0 / 42.0, EPS);
    ck_assert_double_eq_tol(b.cv, sqrt(2.0 / 3.0) / 2.0, EPS);
    ck_assert_double_eq_tol(b.max_over_mean, 1.5, EPS);
    ck_assert_double_eq_tol(b.min_over_mean, 0.5, EPS);
}
END_TEST

START_TEST(recent_accepted_uses_oldest_sample_in_window)
{
    unsigned long long samples[] = { 100, 150, 90, 50 };
    long long times[] = { 20000000, 25000000, 19000000, 5000000 };

    /* now = 29.5 s, window 10 s: samples at 20 s and 25 s are inside, the
     * oldest of them (20 s, 100) is the base. */
    ck_assert(bs_recent_accepted(170, samples, times, 4, 29500000,
                                 10000000) == 70);
    /* The window's edge is inside: at 29 s the 19 s sample (90) counts. */
    ck_assert(bs_recent_accepted(170, samples, times, 4, 29000000,
                                 10000000) == 80);
    /* No sample in the window: nothing to compare with. */
    ck_assert(bs_recent_accepted(170, samples, times, 4, 99000000,
                                 10000000) == 0);
    /* Unwritten samples (time 0) are skipped. */
    times[0] = times[1] = times[2] = 0;
    ck_assert(bs_recent_accepted(170, samples, times, 4, 9000000,
                                 10000000) == 120);
}
END_TEST

typedef struct {
    const char *query;
    int ok;
    bs_format_e format;
    int refresh;
} query_row_t;

static const query_row_t query_rows[] = {
    { NULL, 1, BS_FORMAT_HTML, 0 },
    { "", 1, BS_FORMAT_HTML, 0 },
    { "auto", 1, BS_FORMAT_AUTO, 0 },
    { "json", 1, BS_FORMAT_JSON, 0 },
    { "prometheus", 1, BS_FORMAT_PROMETHEUS, 0 },
    /* What Prometheus's scrape params send: a format word, empty value. */
    { "prometheus=", 1, BS_FORMAT_PROMETHEUS, 0 },
    { "json=", 1, BS_FORMAT_JSON, 0 },
    { "refresh=5", 1, BS_FORMAT_HTML, 5 },
    { "refresh=86400", 1, BS_FORMAT_HTML, 86400 },
    { "refresh=0", 0, BS_FORMAT_HTML, 0 },
    { "refresh=86401", 0, BS_FORMAT_HTML, 0 },
    { "refresh=99999999999999999999", 0, BS_FORMAT_HTML, 0 },
    { "refresh=", 0, BS_FORMAT_HTML, 0 },
    { "refresh=-1", 0, BS_FORMAT_HTML, 0 },
    { "refresh=5x", 0, BS_FORMAT_HTML, 0 },
    { "refresh=5&refresh=6", 0, BS_FORMAT_HTML, 0 },
    { "json&refresh=5", 0, BS_FORMAT_HTML, 0 },
    { "json&auto", 0, BS_FORMAT_HTML, 0 },
    { "json&", 0, BS_FORMAT_HTML, 0 },
    { "&json", 0, BS_FORMAT_HTML, 0 },
    { "json&&auto", 0, BS_FORMAT_HTML, 0 },
    { "JSON", 0, BS_FORMAT_HTML, 0 },
    { "jsonx", 0, BS_FORMAT_HTML, 0 },
    { "js", 0, BS_FORMAT_HTML, 0 },
    { "auto=1", 0, BS_FORMAT_HTML, 0 },
    { "<script>", 0, BS_FORMAT_HTML, 0 },
    /* With prometheus, a scrape configuration's own parameters are
     * ignored, wherever they stand; two formats or a refresh are still
     * refused. */
    { "prometheus&x=1", 1, BS_FORMAT_PROMETHEUS, 0 },
    { "x=1&prometheus=", 1, BS_FORMAT_PROMETHEUS, 0 },
    { "prometheus&&module=http&", 1, BS_FORMAT_PROMETHEUS, 0 },
    { "prometheus&auto", 0, BS_FORMAT_HTML, 0 },
    { "prometheus&refresh=5", 0, BS_FORMAT_HTML, 0 },
    { "prometheus&refresh=0", 0, BS_FORMAT_HTML, 0 },
    { "prometheusx&x=1", 0, BS_FORMAT_HTML, 0 },
    { "json&x=1", 0, BS_FORMAT_HTML, 0 },
    { "auto&x=1", 0, BS_FORMAT_HTML, 0 },
};

START_TEST(parse_query_follows_table)
{
    const query_row_t *row = &query_rows[_i];
    bs_query_t q;
    const char *error = NULL;
    int rc = bs_parse_query(row->query, &q, &error);

    ck_assert_msg((rc == 0) == row->ok, "'%s': rc %d", row->query ? row->query
                                                                  : "(null)",
                  rc);
    if (row->ok) {
        ck_assert_int_eq(q.format, row->format);
        ck_assert_int_eq(q.refresh, row->refresh);
    }
    else {
        ck_assert_ptr_nonnull(error);
    }
}
END_TEST

/* Bounded random input: 200000 strings of bytes drawn mostly from the
 * alphabet the parser cares about; it must answer 0 or -1 (with a reason)
 * and never read past the string (run under ASan with --enable-sanitizers). */
START_TEST(parse_query_survives_random_input)
{
    static const char alphabet[] = "autojsnprmehf=&0123456789-+ %\x01\xff";
    char input[48];
    unsigned seed = 20261122;
    int i, j, accepted = 0;

    for (i = 0; i < 200000; i++) {
        int len = (int)(rand_r(&seed) % (sizeof(input) - 1));
        bs_query_t q;
        const char *error = NULL;
        int rc;

        for (j = 0; j < len; j++) {
            input[j] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
        }
        input[len] = '\0';
        rc = bs_parse_query(input, &q, &error);
        ck_assert(rc == 0 || rc == -1);
        if (rc == -1) {
            ck_assert_ptr_nonnull(error);
        }
        else {
            accepted++;
            ck_assert(q.refresh >= 0 && q.refresh <= BS_MAX_REFRESH);
        }
    }
    ck_assert_int_gt(accepted, 0);
}
END_TEST

static bs_bucket_t test_buckets[2];
static bs_child_t test_children[3];

static void make_snapshot(bs_snapshot_t *snap, int available)
{
    memset(snap, 0, sizeof(*snap));
    memset(test_buckets, 0, sizeof(test_buckets));
    snap->available = available;
    snap->mpm_name = "event";
    snap->server_version = "Apache/2.4.62 (Debian)";
    snap->mode = "reuseport";
    snap->reason = "explicit";
    snap->so_reuseport = 1;
    snap->cpus_online = snap->cpus_affinity = snap->cpus_usable = 2;
    snap->explicit_buckets = 2;
    snap->buckets_per_listen = 2;
    snap->num_listeners = 1;
    snap->max_workers = 150;
    snap->server_limit = 256;
    snap->num_buckets = 2;
    snap->buckets = test_buckets;
    test_buckets[0].id = 0;
    strcpy(test_buckets[0].listener, "127.0.0.1:8080");
    test_buckets[0].accepted = 300;
    test_buckets[0].children = 3;
    test_buckets[0].idle = 2;
    test_buckets[0].busy = 1;
    test_buckets[0].backlog = 511;
    test_buckets[1].id = 1;
    strcpy(test_buckets[1].listener, "<b>\"x\\y\"</b>");
    test_buckets[1].accepted = 100;
    snap->num_children = 3;
    snap->children = test_children;
    test_children[0].slot = 0;
    test_children[0].pid = 11;
    test_children[0].accepted = 200;
    test_children[1].slot = 1;
    test_children[1].pid = 12;
    test_children[1].accepted = 100;
    test_children[2].slot = 2;
    test_children[2].pid = 13;
    test_children[2].bucket = 1;
    test_children[2].accepted = 100;
    bs_snapshot_balance(snap);
}

START_TEST(json_has_schema_fields_and_escapes)
{
    bs_snapshot_t snap;
    bs_buf_t buf;

    make_snapshot(&snap, 1);
    bs_buf_init(&buf);
    bs_format_json(&buf, &snap);
    ck_assert(!buf.failed);
    ck_assert_ptr_nonnull(strstr(buf.data, "{\"schema_version\": 1, "
                                           "\"available\": true"));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"mode\": \"reuseport\""));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"MaxRequestWorkers\": 150, "
                                           "\"ServerLimit\": 256}"));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"bucket_count\": 2"));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"accepted\": 300"));
    ck_assert_ptr_nonnull(strstr(buf.data,
                                 "\"listener\": \"<b>\\\"x\\\\y\\\"</b>\""));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"jain\": 0.8000"));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"pid\": 13, \"bucket\": 1"));
    bs_buf_free(&buf);
}
END_TEST

/* Under idle steering every format carries the mode and, per bucket, the
 * kept and moved counts; under hash none of them shows the counts. */
START_TEST(steering_figures_in_every_format)
{
    bs_snapshot_t snap;
    bs_buf_t buf;
    int f, idle;

    for (idle = 0; idle < 2; idle++) {
        make_snapshot(&snap, 1);
        snap.steering = idle ? "idle" : "hash";
        snap.steering_wanted = "idle";
        snap.cpu_affinity = 1;
        test_buckets[0].steer_kept = 250;
        test_buckets[0].steer_moved = 50;
        test_buckets[1].steer_kept = 70;
        test_buckets[1].steer_moved = 30;
        test_buckets[1].steer_idle = -2;
        for (f = 0; f < 4; f++) {
            bs_buf_init(&buf);
            switch (f) {
            case 0:
                bs_format_json(&buf, &snap);
                ck_assert_ptr_nonnull(strstr(buf.data, idle
                    ? "\"steering\": \"idle\""
                    : "\"steering\": \"hash\", \"steering_wanted\": "
                      "\"idle\", \"steering_fallback\": \"refused\", "
                      "\"cpu_affinity\": true"));
                ck_assert(!idle == !strstr(buf.data, "\"steering\": "
                          "{\"kept\": 70, \"moved\": 30, \"idle\": -2}"));
                break;
            case 1:
                bs_format_auto(&buf, &snap);
                ck_assert_ptr_nonnull(strstr(buf.data, idle
                    ? "BucketSteering: idle\n" : "BucketSteering: hash\n"));
                ck_assert_ptr_nonnull(strstr(buf.data,
                                             "BucketCPUAffinity: 1\n"));
                ck_assert(!idle == !strstr(buf.data,
                                           "Bucket[0]SteeringMoved: 50\n"));
                ck_assert(!idle == !strstr(buf.data,
                                           "Bucket[1]SteeringIdle: -2\n"));
                ck_assert_ptr_nonnull(strstr(buf.data, idle
                    ? "BucketSteeringFallback: none\n"
                    : "BucketSteeringFallback: refused\n"));
                break;
            case 2:
                bs_format_prometheus(&buf, &snap);
                ck_assert_ptr_nonnull(strstr(buf.data, idle
                    ? "steering=\"idle\",steering_wanted=\"idle\","
                      "steering_fallback=\"none\",cpu_affinity=\"1\"} 1"
                    : "steering=\"hash\",steering_wanted=\"idle\","
                      "steering_fallback=\"refused\",cpu_affinity=\"1\"} 1"));
                ck_assert(!idle == !strstr(buf.data,
                    "httpd_bucket_steered_connections_total{bucket=\"0\","
                    "listener=\"127.0.0.1:8080\",how=\"kept\"} 250\n"));
                break;
            default:
                bs_format_html_page(&buf, &snap, 0);
                ck_assert(!idle == !strstr(buf.data, "idle child\">Moved</th>"));
                ck_assert(!idle == !strstr(buf.data,
                                           "accepted\">Steering idle</th>"));
                ck_assert(idle == !strstr(buf.data, "(idle asked for"));
                break;
            }
            ck_assert(!buf.failed);
            bs_buf_free(&buf);
        }
    }
}
END_TEST

/* Under local steering every format names the mode and carries the kept
 * and moved counts, as under idle. */
START_TEST(local_steering_in_every_format)
{
    bs_snapshot_t snap;
    bs_buf_t buf;

    make_snapshot(&snap, 1);
    snap.steering = snap.steering_wanted = "local";
    test_buckets[1].steer_kept = 70;
    test_buckets[1].steer_moved = 30;
    test_buckets[1].steer_idle = -2;
    bs_buf_init(&buf);
    bs_format_json(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(buf.data, "\"steering\": \"local\", "
                                 "\"steering_wanted\": \"local\", "
                                 "\"steering_fallback\": \"none\""));
    ck_assert_ptr_nonnull(strstr(buf.data, "\"steering\": {\"kept\": 70, "
                                 "\"moved\": 30, \"idle\": -2}"));
    bs_buf_free(&buf);
    bs_buf_init(&buf);
    bs_format_auto(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketSteering: local\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "Bucket[1]SteeringMoved: 30\n"));
    bs_buf_free(&buf);
    bs_buf_init(&buf);
    bs_format_prometheus(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(buf.data, "steering=\"local\","
                                 "steering_wanted=\"local\","
                                 "steering_fallback=\"none\""));
    ck_assert_ptr_nonnull(strstr(buf.data,
        "httpd_bucket_steered_connections_total{bucket=\"1\","));
    ck_assert_ptr_nonnull(strstr(buf.data, "httpd_bucket_steering_idle{"));
    bs_buf_free(&buf);
    bs_buf_init(&buf);
    bs_format_html_page(&buf, &snap, 0);
    ck_assert_ptr_nonnull(strstr(buf.data, "Local steering: <b>Kept</b>, "
                                 "connections left where the receiving CPU "
                                 "sent them"));
    ck_assert(!buf.failed);
    bs_buf_free(&buf);
}
END_TEST

START_TEST(auto_lines_are_name_colon_value)
{
    bs_snapshot_t snap;
    bs_buf_t buf;
    char *line, *save = NULL;
    int lines = 0;

    make_snapshot(&snap, 1);
    bs_buf_init(&buf);
    bs_format_auto(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketCount: 2\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "Bucket[0]Accepted: 300\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketChildBalanceJain: "));
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketBalanceJain: 0.8000\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketSoReuseport: 1\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketMaxRequestWorkers: 150\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketServerLimit: 256\n"));
    for (line = strtok_r(buf.data, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *colon = strstr(line, ": ");
        char *p;
        static const char *const words[] = { "yes", "no", "true", "false",
                                             "on", "off", "unknown" };
        size_t w;

        ck_assert_msg(colon != NULL, "no ': ' in '%s'", line);
        /* Booleans in one style, 1 or 0, as BucketDataAvailable. */
        for (w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
            ck_assert_msg(strcmp(colon + 2, words[w]) != 0, "'%s'", line);
        }
        /* One prefix for the module's lines; a bucket's own figures in
         * httpd's indexed style, Bucket[N]Name, never Bucket0Name. */
        ck_assert_msg(strncmp(line, "Bucket", 6) == 0, "'%s'", line);
        ck_assert_msg(!(line[6] >= '0' && line[6] <= '9'), "'%s'", line);
        for (p = line; p < colon; p++) {
            ck_assert_msg(*p != ' ', "space in name of '%s'", line);
        }
        lines++;
    }
    ck_assert_int_gt(lines, 30);
    bs_buf_free(&buf);

    /* SO_REUSEPORT not probed (nothing needed it): no line, not a word. */
    snap.so_reuseport = -1;
    bs_buf_init(&buf);
    bs_format_auto(&buf, &snap);
    ck_assert_ptr_null(strstr(buf.data, "BucketSoReuseport"));
    bs_buf_free(&buf);
}
END_TEST

START_TEST(prometheus_families_have_help_and_type)
{
    bs_snapshot_t snap;
    bs_buf_t buf;
    char *line, *save = NULL;
    char last_type[128] = "";
    int samples = 0;

    make_snapshot(&snap, 1);
    bs_buf_init(&buf);
    bs_format_prometheus(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(
        buf.data, "httpd_bucket_accepted_connections_total{bucket=\"0\","
                  "listener=\"127.0.0.1:8080\"} 300\n"));
    ck_assert_ptr_nonnull(strstr(buf.data,
                                 "listener=\"<b>\\\"x\\\\y\\\"</b>\""));
    for (line = strtok_r(buf.data, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# TYPE ", 7) == 0) {
            sscanf(line + 7, "%127s", last_type);
            continue;
        }
        if (line[0] == '#') {
            ck_assert(strncmp(line, "# HELP ", 7) == 0);
            continue;
        }
        /* A sample belongs to the family declared just before it. */
        ck_assert_msg(strncmp(line, last_type, strlen(last_type)) == 0
                          && (line[strlen(last_type)] == ' '
                              || line[strlen(last_type)] == '{'),
                      "'%s' outside family %s", line, last_type);
        ck_assert(strncmp(line, "httpd_bucket_", 13) == 0);
        samples++;
    }
    ck_assert_int_gt(samples, 20);
    bs_buf_free(&buf);
}
END_TEST

START_TEST(html_page_escapes_and_refreshes)
{
    bs_snapshot_t snap;
    bs_buf_t buf;

    make_snapshot(&snap, 1);
    bs_buf_init(&buf);
    bs_format_html_page(&buf, &snap, 7);
    ck_assert_ptr_nonnull(strstr(buf.data, "content=\"7\""));
    ck_assert_ptr_nonnull(strstr(buf.data, "<svg "));
    ck_assert_ptr_nonnull(strstr(buf.data, "&lt;b&gt;&quot;x\\y&quot;"));
    ck_assert_ptr_null(strstr(buf.data, "<b>"));
    ck_assert_ptr_nonnull(strstr(buf.data, "</html>\n"));
    bs_buf_free(&buf);
}
END_TEST

START_TEST(every_format_says_when_data_is_unavailable)
{
    bs_snapshot_t snap;
    bs_buf_t buf;
    int format;

    make_snapshot(&snap, 0);
    for (format = 0; format < 5; format++) {
        bs_buf_init(&buf);
        switch (format) {
        case 0:
            bs_format_html_page(&buf, &snap, 0);
            break;
        case 1:
            bs_format_html_section(&buf, &snap);
            break;
        case 2:
            bs_format_auto(&buf, &snap);
            ck_assert_ptr_nonnull(strstr(buf.data, "BucketDataAvailable: 0"));
            ck_assert_ptr_nonnull(strstr(buf.data,
                                         "BucketDataUnavailableReason: "));
            break;
        case 3:
            bs_format_json(&buf, &snap);
            ck_assert_ptr_nonnull(strstr(buf.data, "\"available\": false"));
            break;
        default:
            bs_format_prometheus(&buf, &snap);
            /* Another MPM is the admin's choice: its own reason. */
            ck_assert_ptr_nonnull(strstr(buf.data,
                                         "httpd_bucket_data_available{"
                                         "reason=\"other-mpm\"} 0\n"));
            ck_assert_ptr_null(strstr(buf.data, "httpd_bucket_info"));
            ck_assert_ptr_nonnull(strstr(buf.data,
                                         "httpd_bucket_build_info{version=\""
                                         BS_VERSION "\",httpd=\"Apache/2.4.62"
                                         " (Debian)\",mpm=\"event\"} 1\n"));
            break;
        }
        if (format != 4) {
            ck_assert_ptr_nonnull(strstr(buf.data,
                                         "bucket data unavailable: the "
                                         "running MPM is event"));
        }
        bs_buf_free(&buf);
    }
}
END_TEST

/* This MPM runs, but its segment has a layout this module does not read:
 * a fault, with its own reason and words. */
START_TEST(an_incompatible_segment_is_told_apart_from_another_mpm)
{
    bs_snapshot_t snap;
    bs_buf_t buf;

    make_snapshot(&snap, 0);
    snap.mpm_name = "prefork";
    snap.unavailable = BS_UNAVAILABLE_INCOMPATIBLE;
    bs_buf_init(&buf);
    bs_format_prometheus(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(buf.data, "httpd_bucket_data_available{"
                                           "reason=\"incompatible\"} 0\n"));
    bs_buf_free(&buf);
    bs_buf_init(&buf);
    bs_format_auto(&buf, &snap);
    ck_assert_ptr_nonnull(strstr(buf.data, "BucketDataUnavailableReason: "
                                           "bucket data unavailable: the "
                                           "running MPM writes its bucket "
                                           "data in a layout"));
    ck_assert_ptr_null(strstr(buf.data, "is prefork"));
    bs_buf_free(&buf);
}
END_TEST

typedef struct {
    const char *steering, *wanted, *mode;
    int per_listen;
    const char *fallback;
    const char *reason;
} fallback_row_t;

static const fallback_row_t fallback_rows[] = {
    { "idle", "idle", "reuseport", 4, "none", NULL },
    { "hash", "hash", "reuseport", 4, "none", NULL },
    { "cpu", "cpu", "reuseport", 2, "none", NULL },
    { "local", "local", "reuseport", 2, "none", NULL },
    { NULL, NULL, "single", 1, "none", NULL },
    /* The kernel or the privileges refused the program (PFB00043). */
    { "hash", "idle", "reuseport", 4, "refused", NULL },
    { "hash", "cpu", "reuseport", 2, "refused", NULL },
    { "hash", "local", "reuseport", 2, "refused", NULL },
    /* Nothing to choose between (PFB00042): not a fault. */
    { "hash", "idle", "reuseport", 1, "one-bucket-per-listen", NULL },
    { "hash", "idle", "per-listen", 1, "one-bucket-per-listen", NULL },
    { "hash", "cpu", "single", 1, "one-bucket-per-listen", NULL },
    { "hash", "idle", NULL, 4, "one-bucket-per-listen", NULL },
    /* The ratio with idle or local steering the kernel refuses: one
     * bucket for every Listen instead of the ratio's (PFB00150), a fault
     * the steering alert is for. */
    { "hash", "idle", "single", 1, "refused", "idle-steering-unavailable" },
    { "hash", "local", "single", 1, "refused", "idle-steering-unavailable" },
    { "hash", "idle", "single", 1, "one-bucket-per-listen",
      "ratio-one-per-listen" },
};

START_TEST(steering_fallback_follows_table)
{
    const fallback_row_t *row = &fallback_rows[_i];
    bs_snapshot_t snap;

    memset(&snap, 0, sizeof(snap));
    snap.steering = row->steering;
    snap.steering_wanted = row->wanted;
    snap.mode = row->mode;
    snap.buckets_per_listen = row->per_listen;
    snap.reason = row->reason;
    ck_assert_str_eq(bs_steering_fallback(&snap), row->fallback);
}
END_TEST

/* Counts the samples (non-comment lines) of an exposition. */
static int prom_samples(const char *text)
{
    int n = 0;
    const char *line = text;

    while (line && *line) {
        if (*line != '#') {
            n++;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return n;
}

/* The exposition keeps to the conventions: no precomputed rate and no
 * since-start balance (rate() and the recording rules do those), a start
 * time in seconds, the generation, build facts as labels, and the series
 * count docs/monitoring.md gives: 9 for the server, 7 per bucket, 10 per
 * bucket under idle steering. */
START_TEST(prometheus_follows_the_conventions)
{
    bs_snapshot_t snap;
    bs_buf_t buf;

    make_snapshot(&snap, 1);
    snap.generation = 3;
    snap.start_time = 1795000000.25;
    snap.steering = snap.steering_wanted = "hash";
    snap.server_version = "Apache/2.4.62 \"quoted\"";
    test_buckets[0].accepted_10s = 42;
    bs_buf_init(&buf);
    bs_format_prometheus(&buf, &snap);
    ck_assert(!buf.failed);
    ck_assert_ptr_null(strstr(buf.data, "_last_10s"));
    ck_assert_ptr_null(strstr(buf.data, "balance"));
    ck_assert_ptr_null(strstr(buf.data, "httpd_bucket_buckets"));
    ck_assert_ptr_nonnull(strstr(buf.data, "httpd_bucket_generation 3\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "httpd_bucket_start_time_seconds "
                                           "1795000000.250\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "httpd_bucket_per_listen 2\n"));
    ck_assert_ptr_nonnull(strstr(buf.data,
                                 "httpd=\"Apache/2.4.62 \\\"quoted\\\"\""));
    ck_assert_ptr_nonnull(strstr(buf.data,
                                 "httpd_bucket_info{mode=\"reuseport\","
                                 "mode_reason=\"explicit\",so_reuseport="
                                 "\"1\",steering=\"hash\",steering_wanted="
                                 "\"hash\",steering_fallback=\"none\","
                                 "cpu_affinity=\"0\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(buf.data,
                                 "httpd_bucket_max_request_workers 150\n"));
    ck_assert_ptr_nonnull(strstr(buf.data, "httpd_bucket_server_limit 256\n"));
    ck_assert_int_eq(prom_samples(buf.data), 9 + 7 * 2);
    bs_buf_free(&buf);

    snap.steering = snap.steering_wanted = "idle";
    bs_buf_init(&buf);
    bs_format_prometheus(&buf, &snap);
    ck_assert_int_eq(prom_samples(buf.data), 9 + 10 * 2);
    bs_buf_free(&buf);
}
END_TEST

/* configure's AC_INIT version reaches the unit build through DEFS; the
 * module's own copy (the in-tree build has no DEFS of ours) must agree. */
START_TEST(version_matches_configure)
{
    ck_assert_str_eq(BS_VERSION, PACKAGE_VERSION);
}
END_TEST

Suite *bucket_report_suite(void)
{
    Suite *s = suite_create("bucket-report");
    TCase *balance = tcase_create("Balance");
    TCase *query = tcase_create("Query");
    TCase *format = tcase_create("Formats");

    tcase_add_test(balance, balance_one_bucket_is_even);
    tcase_add_test(balance, balance_zero_traffic_is_even);
    tcase_add_test(balance, balance_no_buckets_is_defined);
    tcase_add_test(balance, balance_one_hot_bucket);
    tcase_add_test(balance, balance_known_values);
    tcase_add_test(balance, recent_accepted_uses_oldest_sample_in_window);
    tcase_add_loop_test(query, parse_query_follows_table, 0,
                        (int)(sizeof(query_rows) / sizeof(query_rows[0])));
    tcase_add_test(query, parse_query_survives_random_input);
    tcase_add_test(format, json_has_schema_fields_and_escapes);
    tcase_add_test(format, auto_lines_are_name_colon_value);
    tcase_add_test(format, steering_figures_in_every_format);
    tcase_add_test(format, local_steering_in_every_format);
    tcase_add_test(format, prometheus_families_have_help_and_type);
    tcase_add_test(format, html_page_escapes_and_refreshes);
    tcase_add_test(format, every_format_says_when_data_is_unavailable);
    tcase_add_test(format,
                   an_incompatible_segment_is_told_apart_from_another_mpm);
    tcase_add_loop_test(format, steering_fallback_follows_table, 0,
                        (int)(sizeof(fallback_rows)
                              / sizeof(fallback_rows[0])));
    tcase_add_test(format, prometheus_follows_the_conventions);
    tcase_add_test(format, version_matches_configure);
    tcase_set_timeout(balance, 10);
    tcase_set_timeout(query, 30);
    tcase_set_timeout(format, 10);
    suite_add_tcase(s, balance);
    suite_add_tcase(s, query);
    suite_add_tcase(s, format);
    return s;
}
