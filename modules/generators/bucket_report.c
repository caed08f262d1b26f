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

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bucket_report.h"

/* ------------------------------------------------------------------ */
/* Balance                                                             */

void bs_compute_balance(const unsigned long long *counts, int n,
                        bs_balance_t *out)
{
    double sum = 0.0, sum_sq = 0.0, var = 0.0, max = 0.0, min = 0.0;
    int i;

    memset(out, 0, sizeof(*out));
    out->n = n;
    out->max_over_mean = out->min_over_mean = out->jain = 1.0;
    if (n <= 0) {
        return;
    }
    for (i = 0; i < n; i++) {
        double x = (double)counts[i];

        out->total += counts[i];
        sum += x;
        sum_sq += x * x;
        if (i == 0 || x > max) {
            max = x;
        }
        if (i == 0 || x < min) {
            min = x;
        }
    }
    out->mean = sum / n;
    if (sum <= 0.0) {
        return;                 /* no traffic: nothing is uneven yet */
    }
    for (i = 0; i < n; i++) {
        double d = (double)counts[i] - out->mean;

        var += d * d;
    }
    var /= n;
    out->max_over_mean = max / out->mean;
    out->min_over_mean = min / out->mean;
    out->cv = sqrt(var) / out->mean;
    out->jain = (sum * sum) / ((double)n * sum_sq);
}

void bs_snapshot_balance(bs_snapshot_t *snap)
{
    unsigned long long *counts;
    int i, n = snap->num_buckets > snap->num_children ? snap->num_buckets
                                                      : snap->num_children;

    counts = malloc(sizeof(*counts) * (size_t)(n > 0 ? n : 1));
    if (counts == NULL) {
        bs_compute_balance(NULL, 0, &snap->over_buckets);
        bs_compute_balance(NULL, 0, &snap->over_children);
        return;
    }
    for (i = 0; i < snap->num_buckets; i++) {
        counts[i] = snap->buckets[i].accepted;
    }
    bs_compute_balance(counts, snap->num_buckets, &snap->over_buckets);
    for (i = 0; i < snap->num_children; i++) {
        counts[i] = snap->children[i].accepted;
    }
    bs_compute_balance(counts, snap->num_children, &snap->over_children);
    free(counts);
}

unsigned long long bs_recent_accepted(unsigned long long accepted_now,
                                      const unsigned long long *samples,
                                      const long long *times, int nsamples,
                                      long long now, long long window)
{
    int i, best = -1;

    for (i = 0; i < nsamples; i++) {
        if (times[i] <= 0 || times[i] > now) {
            continue;           /* never written, or from the future */
        }
        if (times[i] >= now - window) {
            if (best < 0 || times[i] < times[best]) {
                best = i;
            }
        }
    }
    if (best < 0 || samples[best] > accepted_now) {
        return 0;
    }
    return accepted_now - samples[best];
}

/* ------------------------------------------------------------------ */
/* Query string                                                        */

static int word_is(const char *word, size_t len, const char *name)
{
    return strlen(name) == len && strncmp(word, name, len) == 0;
}

/* The format word of a query word: the word, or the word before '=' when
 * the value is empty ("prometheus=", all a scrape configuration's params
 * can send). */
static size_t format_word_len(const char *word, size_t len)
{
    return len > 0 && word[len - 1] == '=' ? len - 1 : len;
}

/* Whether the query asks for Prometheus's format: then words this parser
 * does not know are a scraper's own parameters, and are ignored. */
static int query_wants_prometheus(const char *p)
{
    while (*p) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (word_is(p, format_word_len(p, len), "prometheus")) {
            return 1;
        }
        p += len;
        if (*p == '&') {
            p++;
        }
    }
    return 0;
}

int bs_parse_query(const char *query, bs_query_t *out, const char **error)
{
    const char *p = query;
    int have_format = 0, have_refresh = 0, lenient;

    out->format = BS_FORMAT_HTML;
    out->refresh = 0;
    if (p == NULL || *p == '\0') {
        return 0;
    }
    lenient = query_wants_prometheus(p);
    while (*p) {
        const char *end = p;
        size_t len, word_len;

        while (*end && *end != '&') {
            end++;
        }
        len = (size_t)(end - p);
        word_len = format_word_len(p, len);
        if (word_is(p, word_len, "auto") || word_is(p, word_len, "json")
            || word_is(p, word_len, "prometheus")) {
            if (have_format) {
                *error = "more than one output format asked for";
                return -1;
            }
            have_format = 1;
            out->format = word_is(p, word_len, "auto")   ? BS_FORMAT_AUTO
                          : word_is(p, word_len, "json") ? BS_FORMAT_JSON
                                                         : BS_FORMAT_PROMETHEUS;
        }
        else if (len > 8 && strncmp(p, "refresh=", 8) == 0) {
            const char *d = p + 8;
            long value = 0;

            if (have_refresh) {
                *error = "refresh given twice";
                return -1;
            }
            for (; d < end; d++) {
                if (!isdigit((unsigned char)*d) || value > BS_MAX_REFRESH) {
                    *error = "refresh must be a number of seconds from 1 "
                             "to 86400";
                    return -1;
                }
                value = value * 10 + (*d - '0');
            }
            if (value < 1 || value > BS_MAX_REFRESH) {
                *error = "refresh must be a number of seconds from 1 to 86400";
                return -1;
            }
            have_refresh = 1;
            out->refresh = (int)value;
        }
        else if (!lenient) {
            *error = len == 0 ? "empty word in the query string"
                              : "unknown word in the query string; expected "
                                "auto, json, prometheus or refresh=N";
            return -1;
        }
        p = *end ? end + 1 : end;
        if (!lenient && *p == '\0' && end[0] == '&') {
            *error = "query string ends with '&'";
            return -1;
        }
    }
    if (have_refresh && out->format != BS_FORMAT_HTML) {
        *error = "refresh applies to the HTML page only";
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Buffer                                                              */

void bs_buf_init(bs_buf_t *buf)
{
    memset(buf, 0, sizeof(*buf));
}

void bs_buf_free(bs_buf_t *buf)
{
    free(buf->data);
    bs_buf_init(buf);
}

static int buf_reserve(bs_buf_t *buf, size_t more)
{
    size_t cap;
    char *data;

    if (buf->failed) {
        return -1;
    }
    if (buf->len + more + 1 <= buf->cap) {
        return 0;
    }
    cap = buf->cap ? buf->cap : 1024;
    while (cap < buf->len + more + 1) {
        cap *= 2;
    }
    data = realloc(buf->data, cap);
    if (data == NULL) {
        buf->failed = 1;
        return -1;
    }
    buf->data = data;
    buf->cap = cap;
    return 0;
}

void bs_buf_printf(bs_buf_t *buf, const char *fmt, ...)
{
    va_list ap;
    int need;

    va_start(ap, fmt);
    need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0 || buf_reserve(buf, (size_t)need) != 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf->data + buf->len, buf->cap - buf->len, fmt, ap);
    va_end(ap);
    buf->len += (size_t)need;
}

static void buf_putc(bs_buf_t *buf, char c)
{
    if (buf_reserve(buf, 1) == 0) {
        buf->data[buf->len++] = c;
        buf->data[buf->len] = '\0';
    }
}

static void buf_puts(bs_buf_t *buf, const char *s)
{
    size_t n = strlen(s);

    if (buf_reserve(buf, n) == 0) {
        memcpy(buf->data + buf->len, s, n + 1);
        buf->len += n;
    }
}

void bs_buf_html(bs_buf_t *buf, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            buf_puts(buf, "&lt;");
            break;
        case '>':
            buf_puts(buf, "&gt;");
            break;
        case '&':
            buf_puts(buf, "&amp;");
            break;
        case '"':
            buf_puts(buf, "&quot;");
            break;
        case '\'':
            buf_puts(buf, "&#39;");
            break;
        default:
            buf_putc(buf, *s);
        }
    }
}

void bs_buf_json_string(bs_buf_t *buf, const char *s)
{
    buf_putc(buf, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            buf_putc(buf, '\\');
            buf_putc(buf, (char)c);
        }
        else if (c < 0x20) {
            bs_buf_printf(buf, "\\u%04x", c);
        }
        else {
            buf_putc(buf, (char)c);
        }
    }
    buf_putc(buf, '"');
}

void bs_buf_prom_label(bs_buf_t *buf, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            buf_putc(buf, '\\');
            buf_putc(buf, *s);
        }
        else if (*s == '\n') {
            buf_puts(buf, "\\n");
        }
        else {
            buf_putc(buf, *s);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Shared wording                                                      */

static void unavailable_reason(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    if (snap->unavailable == BS_UNAVAILABLE_INCOMPATIBLE) {
        buf_puts(buf, "bucket data unavailable: the running MPM writes its "
                      "bucket data in a layout this mod_bucket_status does "
                      "not read; install both from the same build");
        return;
    }
    bs_buf_printf(buf, "bucket data unavailable: the running MPM is %s, not "
                       "the prefork MPM with listener buckets",
                  snap->mpm_name ? snap->mpm_name : "unknown");
}

/* What the page says of SO_REUSEPORT; the other formats give 1 or 0, and
 * nothing until a bucket needed it. */
static const char *reuseport_words(int so_reuseport)
{
    return so_reuseport > 0    ? "works"
           : so_reuseport == 0 ? "refused by the kernel"
                               : "not needed yet";
}

/* Kept/moved figures mean something only under the steering modes that
 * count idle children: idle and local. */
static int steering_counts(const bs_snapshot_t *snap)
{
    return snap->steering != NULL && (strcmp(snap->steering, "idle") == 0
                                      || strcmp(snap->steering, "local") == 0);
}

static const char *text_or(const char *s, const char *fallback)
{
    return s != NULL ? s : fallback;
}

const char *bs_steering_fallback(const bs_snapshot_t *snap)
{
    const char *active = text_or(snap->steering, "hash");
    const char *wanted = text_or(snap->steering_wanted, active);

    if (strcmp(active, wanted) == 0) {
        return "none";
    }
    /* The buckets the ratio asked for went with the steering: a fault to
     * alert on, not the arrangement the admin chose. */
    if (strcmp(text_or(snap->reason, ""), "idle-steering-unavailable") == 0) {
        return "refused";
    }
    /* The MPM attaches no program unless each Listen has several
     * SO_REUSEPORT sockets to choose between. */
    if (snap->mode == NULL || strcmp(snap->mode, "reuseport") != 0
        || snap->buckets_per_listen < 2) {
        return "one-bucket-per-listen";
    }
    return "refused";
}

/* ------------------------------------------------------------------ */
/* HTML                                                                */

static void html_balance_row(bs_buf_t *buf, const char *what,
                             const bs_balance_t *b)
{
    bs_buf_printf(buf,
                  "<tr><th>%s</th><td>%d</td><td>%llu</td><td>%.2f</td>"
                  "<td>%.2f</td><td>%.3f</td><td>%.4f</td></tr>\n",
                  what, b->n, b->total, b->max_over_mean, b->min_over_mean,
                  b->cv, b->jain);
}

static void html_summary(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    bs_buf_printf(buf, "<dl>\n<dt>Mode</dt><dd>%s (%s)</dd>\n", snap->mode,
                  snap->reason);
    bs_buf_printf(buf, "<dt>SO_REUSEPORT</dt><dd>%s</dd>\n",
                  reuseport_words(snap->so_reuseport));
    bs_buf_printf(buf, "<dt>Steering</dt><dd>%s", text_or(snap->steering,
                                                            "hash"));
    if (strcmp(bs_steering_fallback(snap), "refused") == 0) {
        bs_buf_printf(buf, " (%s asked for; refused, see the error log%s)",
                      snap->steering_wanted,
                      strcmp(text_or(snap->reason, ""),
                             "idle-steering-unavailable") == 0
                          ? "; one bucket for every Listen instead of the "
                            "ratio's"
                          : "");
    }
    else if (strcmp(bs_steering_fallback(snap), "none") != 0) {
        bs_buf_printf(buf, " (%s asked for; nothing to steer with one "
                           "bucket per Listen)",
                      snap->steering_wanted);
    }
    bs_buf_printf(buf, "; BucketCPUAffinity %s</dd>\n",
                  snap->cpu_affinity ? "on" : "off");
    bs_buf_printf(buf,
                  "<dt>Buckets</dt><dd>%d (%d per Listen, %d Listen(s))</dd>\n",
                  snap->num_buckets, snap->buckets_per_listen,
                  snap->num_listeners);
    bs_buf_printf(buf,
                  "<dt>CPUs</dt><dd>%d usable (online %d, affinity %d, "
                  "cgroup quota %d); ListenCoresBucketsRatio %d, "
                  "ListenBuckets %d</dd>\n",
                  snap->cpus_usable, snap->cpus_online, snap->cpus_affinity,
                  snap->cpus_quota, snap->ratio, snap->explicit_buckets);
    bs_buf_printf(buf, "<dt>Limits</dt><dd>MaxRequestWorkers %d, "
                       "ServerLimit %d</dd>\n",
                  snap->max_workers, snap->server_limit);
    bs_buf_printf(buf, "<dt>Generation</dt><dd>%d</dd>\n</dl>\n",
                  snap->generation);
}

static void html_tables(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    int i;

    buf_puts(buf, "<table border=\"1\">\n<tr><th>Bucket</th><th>Listener"
                  "</th><th>Children</th><th>Idle</th><th>Busy</th>"
                  "<th>Starting</th><th>Stopping</th><th>Accepted</th>"
                  "<th>Last 10 s</th><th>Queue</th><th>Backlog</th>");
    if (steering_counts(snap)) {
        buf_puts(buf, "<th title=\"left where the kernel's hash (idle) or "
                      "the receiving CPU (local) sent them\">"
                      "Kept</th><th title=\"moved here from a bucket with no "
                      "idle child\">Moved</th><th title=\"the count the "
                      "steering program reads: waiting children minus "
                      "connections sent and not yet accepted\">Steering idle</th>");
    }
    buf_puts(buf, "</tr>\n");
    for (i = 0; i < snap->num_buckets; i++) {
        const bs_bucket_t *b = &snap->buckets[i];

        bs_buf_printf(buf, "<tr><td>%d</td><td>", b->id);
        bs_buf_html(buf, b->listener);
        bs_buf_printf(buf,
                      "</td><td>%u</td><td>%u</td><td>%u</td><td>%u</td>"
                      "<td>%u</td><td>%llu</td><td>%llu</td><td>%u</td>"
                      "<td>%u</td>",
                      b->children, b->idle, b->busy, b->starting, b->stopping,
                      b->accepted, b->accepted_10s, b->queue_depth,
                      b->backlog);
        if (steering_counts(snap)) {
            bs_buf_printf(buf, "<td>%llu</td><td>%llu</td><td>%lld</td>",
                          b->steer_kept, b->steer_moved, b->steer_idle);
        }
        buf_puts(buf, "</tr>\n");
    }
    buf_puts(buf, "</table>\n");
    if (steering_counts(snap)) {
        int local = strcmp(snap->steering, "local") == 0;

        bs_buf_printf(buf, "<p><small>%s steering: <b>Kept</b>, "
                      "connections left where the %s sent them; "
                      "<b>Moved</b>, ", local ? "Local" : "Idle",
                      local ? "receiving CPU" : "kernel's hash");
        buf_puts(buf, "moved here from a bucket with no idle child; "
                      "<b>Steering idle</b>, the count the program reads (waiting "
                      "children minus connections sent and not yet "
                      "accepted; below 0 when connections queue).  Copied "
                      "once a second.</small></p>\n");
    }
    buf_puts(buf, "<h3>Balance of accepted connections</h3>\n"
                  "<table border=\"1\">\n<tr><th>Over</th><th>N</th>"
                  "<th>Total</th><th>Max/mean</th><th>Min/mean</th>"
                  "<th>CV</th><th>Jain</th></tr>\n");
    html_balance_row(buf, "buckets", &snap->over_buckets);
    html_balance_row(buf, "children", &snap->over_children);
    buf_puts(buf, "</table>\n");
}

/* Horizontal bars, one per bucket, scaled to the busiest bucket. */
static void html_svg_chart(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    unsigned long long max = 0;
    int i, bar_height = 18, width = 480, label = 170;
    int height = snap->num_buckets * (bar_height + 4) + 24;

    for (i = 0; i < snap->num_buckets; i++) {
        if (snap->buckets[i].accepted > max) {
            max = snap->buckets[i].accepted;
        }
    }
    bs_buf_printf(buf,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" role=\"img\" aria-label=\"Accepted "
                  "connections per bucket\">\n",
                  label + width + 90, height);
    for (i = 0; i < snap->num_buckets; i++) {
        const bs_bucket_t *b = &snap->buckets[i];
        int y = i * (bar_height + 4) + 4;
        int w = max ? (int)((double)width * (double)b->accepted
                            / (double)max)
                    : 0;

        bs_buf_printf(buf,
                      "<text x=\"0\" y=\"%d\" font-size=\"12\">%d ",
                      y + 13, b->id);
        bs_buf_html(buf, b->listener);
        bs_buf_printf(buf,
                      "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" "
                      "height=\"%d\" fill=\"#4a78b0\"/>\n<text x=\"%d\" "
                      "y=\"%d\" font-size=\"12\">%llu</text>\n",
                      label, y, w, bar_height, label + w + 4, y + 13,
                      b->accepted);
    }
    bs_buf_printf(buf,
                  "<text x=\"0\" y=\"%d\" font-size=\"11\">accepted "
                  "connections per bucket since start</text>\n</svg>\n",
                  height - 4);
}

void bs_format_html_section(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    buf_puts(buf, "<h2>Listener buckets</h2>\n");
    if (!snap->available) {
        buf_puts(buf, "<p>");
        unavailable_reason(buf, snap);
        buf_puts(buf, "</p>\n");
        return;
    }
    html_summary(buf, snap);
    html_tables(buf, snap);
}

void bs_format_html_page(bs_buf_t *buf, const bs_snapshot_t *snap,
                         int refresh)
{
    buf_puts(buf, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
                  "<meta charset=\"utf-8\"/>\n");
    if (refresh > 0) {
        bs_buf_printf(buf, "<meta http-equiv=\"refresh\" content=\"%d\"/>\n",
                      refresh);
    }
    buf_puts(buf, "<title>Listener bucket status</title>\n<style>\n"
                  "body { font-family: sans-serif; }\n"
                  "table { border-collapse: collapse; }\n"
                  "td, th { padding: 2px 8px; text-align: right; }\n"
                  "dt { font-weight: bold; }\n</style>\n</head>\n<body>\n"
                  "<h1>Listener bucket status</h1>\n");
    if (!snap->available) {
        buf_puts(buf, "<p>");
        unavailable_reason(buf, snap);
        buf_puts(buf, "</p>\n</body>\n</html>\n");
        return;
    }
    bs_buf_printf(buf, "<p>Up %.0f s.</p>\n", snap->uptime);
    html_summary(buf, snap);
    html_svg_chart(buf, snap);
    html_tables(buf, snap);
    buf_puts(buf, "</body>\n</html>\n");
}

/* ------------------------------------------------------------------ */
/* ?auto                                                               */

/* Every name starts with "Bucket", so one prefix finds this module's lines
 * among mod_status's; a bucket's own figures take httpd's indexed style,
 * "Bucket[N]Name", as mod_proxy's ProxyBalancer[N]Worker[M]Name lines. */

static void auto_balance(bs_buf_t *buf, const char *prefix,
                         const bs_balance_t *b)
{
    bs_buf_printf(buf, "%sBalanceJain: %.4f\n", prefix, b->jain);
    bs_buf_printf(buf, "%sBalanceCV: %.4f\n", prefix, b->cv);
    bs_buf_printf(buf, "%sBalanceMaxMean: %.4f\n", prefix, b->max_over_mean);
    bs_buf_printf(buf, "%sBalanceMinMean: %.4f\n", prefix, b->min_over_mean);
}

static void auto_bucket(bs_buf_t *buf, const bs_snapshot_t *snap,
                        const bs_bucket_t *b)
{
    bs_buf_printf(buf, "Bucket[%d]Listener: %s\n", b->id, b->listener);
    bs_buf_printf(buf, "Bucket[%d]Children: %u\n", b->id, b->children);
    bs_buf_printf(buf, "Bucket[%d]Idle: %u\n", b->id, b->idle);
    bs_buf_printf(buf, "Bucket[%d]Busy: %u\n", b->id, b->busy);
    bs_buf_printf(buf, "Bucket[%d]Starting: %u\n", b->id, b->starting);
    bs_buf_printf(buf, "Bucket[%d]Stopping: %u\n", b->id, b->stopping);
    bs_buf_printf(buf, "Bucket[%d]Accepted: %llu\n", b->id, b->accepted);
    bs_buf_printf(buf, "Bucket[%d]Accepted10s: %llu\n", b->id,
                  b->accepted_10s);
    bs_buf_printf(buf, "Bucket[%d]QueueDepth: %u\n", b->id, b->queue_depth);
    bs_buf_printf(buf, "Bucket[%d]Backlog: %u\n", b->id, b->backlog);
    if (steering_counts(snap)) {
        bs_buf_printf(buf, "Bucket[%d]SteeringKept: %llu\n", b->id,
                      b->steer_kept);
        bs_buf_printf(buf, "Bucket[%d]SteeringMoved: %llu\n", b->id,
                      b->steer_moved);
        bs_buf_printf(buf, "Bucket[%d]SteeringIdle: %lld\n", b->id,
                      b->steer_idle);
    }
}

void bs_format_auto(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    int i;

    bs_buf_printf(buf, "BucketDataAvailable: %d\n", snap->available ? 1 : 0);
    if (!snap->available) {
        buf_puts(buf, "BucketDataUnavailableReason: ");
        unavailable_reason(buf, snap);
        buf_putc(buf, '\n');
        return;
    }
    bs_buf_printf(buf, "BucketMode: %s\n", snap->mode);
    bs_buf_printf(buf, "BucketModeReason: %s\n", snap->reason);
    /* Booleans are 1 or 0, as BucketDataAvailable; not probed yet (no
     * bucket needed SO_REUSEPORT), the line is left out. */
    if (snap->so_reuseport >= 0) {
        bs_buf_printf(buf, "BucketSoReuseport: %d\n",
                      snap->so_reuseport > 0 ? 1 : 0);
    }
    bs_buf_printf(buf, "BucketSteering: %s\n",
                  text_or(snap->steering, "hash"));
    bs_buf_printf(buf, "BucketSteeringWanted: %s\n",
                  text_or(snap->steering_wanted, "hash"));
    bs_buf_printf(buf, "BucketSteeringFallback: %s\n",
                  bs_steering_fallback(snap));
    bs_buf_printf(buf, "BucketCPUAffinity: %d\n",
                  snap->cpu_affinity ? 1 : 0);
    bs_buf_printf(buf, "BucketCount: %d\n", snap->num_buckets);
    bs_buf_printf(buf, "BucketsPerListen: %d\n", snap->buckets_per_listen);
    bs_buf_printf(buf, "BucketCPUsUsable: %d\n", snap->cpus_usable);
    bs_buf_printf(buf, "BucketCPUsOnline: %d\n", snap->cpus_online);
    bs_buf_printf(buf, "BucketCPUsAffinity: %d\n", snap->cpus_affinity);
    bs_buf_printf(buf, "BucketCPUQuota: %d\n", snap->cpus_quota);
    bs_buf_printf(buf, "BucketRatio: %d\n", snap->ratio);
    bs_buf_printf(buf, "BucketExplicit: %d\n", snap->explicit_buckets);
    bs_buf_printf(buf, "BucketMaxRequestWorkers: %d\n", snap->max_workers);
    bs_buf_printf(buf, "BucketServerLimit: %d\n", snap->server_limit);
    auto_balance(buf, "Bucket", &snap->over_buckets);
    auto_balance(buf, "BucketChild", &snap->over_children);
    for (i = 0; i < snap->num_buckets; i++) {
        auto_bucket(buf, snap, &snap->buckets[i]);
    }
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */

static void json_balance(bs_buf_t *buf, const bs_balance_t *b)
{
    bs_buf_printf(buf,
                  "{\"n\": %d, \"total\": %llu, \"mean\": %.4f, "
                  "\"max_over_mean\": %.4f, \"min_over_mean\": %.4f, "
                  "\"cv\": %.4f, \"jain\": %.4f}",
                  b->n, b->total, b->mean, b->max_over_mean,
                  b->min_over_mean, b->cv, b->jain);
}

void bs_format_json(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    int i;

    if (!snap->available) {
        bs_buf_printf(buf, "{\"schema_version\": %d, \"available\": false, "
                           "\"reason\": ",
                      BS_JSON_SCHEMA_VERSION);
        {
            bs_buf_t reason;

            bs_buf_init(&reason);
            unavailable_reason(&reason, snap);
            bs_buf_json_string(buf, reason.data ? reason.data : "");
            bs_buf_free(&reason);
        }
        buf_puts(buf, "}\n");
        return;
    }
    bs_buf_printf(buf, "{\"schema_version\": %d, \"available\": true, "
                       "\"version\": ",
                  BS_JSON_SCHEMA_VERSION);
    bs_buf_json_string(buf, BS_VERSION);
    buf_puts(buf, ", \"mode\": ");
    bs_buf_json_string(buf, snap->mode);
    buf_puts(buf, ", \"mode_reason\": ");
    bs_buf_json_string(buf, snap->reason);
    buf_puts(buf, ", \"steering\": ");
    bs_buf_json_string(buf, text_or(snap->steering, "hash"));
    buf_puts(buf, ", \"steering_wanted\": ");
    bs_buf_json_string(buf, text_or(snap->steering_wanted, "hash"));
    buf_puts(buf, ", \"steering_fallback\": ");
    bs_buf_json_string(buf, bs_steering_fallback(snap));
    bs_buf_printf(buf, ", \"cpu_affinity\": %s",
                  snap->cpu_affinity ? "true" : "false");
    bs_buf_printf(buf,
                  ", \"so_reuseport\": %s, \"generation\": %d, "
                  "\"start_time\": %.3f, "
                  "\"uptime_seconds\": %.1f, \"bucket_count\": %d, "
                  "\"buckets_per_listen\": %d, \"listeners\": %d,\n"
                  " \"cpus\": {\"online\": %d, \"affinity\": %d, \"quota\": "
                  "%d, \"usable\": %d},\n \"directives\": "
                  "{\"ListenCoresBucketsRatio\": %d, \"ListenBuckets\": %d, "
                  "\"MaxRequestWorkers\": %d, \"ServerLimit\": %d},\n "
                  "\"buckets\": [",
                  snap->so_reuseport > 0   ? "true"
                  : snap->so_reuseport == 0 ? "false"
                                            : "null",
                  snap->generation, snap->start_time, snap->uptime,
                  snap->num_buckets,
                  snap->buckets_per_listen, snap->num_listeners,
                  snap->cpus_online, snap->cpus_affinity, snap->cpus_quota,
                  snap->cpus_usable, snap->ratio, snap->explicit_buckets,
                  snap->max_workers, snap->server_limit);
    for (i = 0; i < snap->num_buckets; i++) {
        const bs_bucket_t *b = &snap->buckets[i];

        bs_buf_printf(buf, "%s\n  {\"id\": %d, \"listener\": ",
                      i ? "," : "", b->id);
        bs_buf_json_string(buf, b->listener);
        bs_buf_printf(buf,
                      ", \"children\": {\"total\": %u, \"idle\": %u, "
                      "\"busy\": %u, \"starting\": %u, \"stopping\": %u}, "
                      "\"accepted\": %llu, \"accepted_last_10s\": %llu, "
                      "\"queue_depth\": %u, \"backlog\": %u",
                      b->children, b->idle, b->busy, b->starting, b->stopping,
                      b->accepted, b->accepted_10s, b->queue_depth,
                      b->backlog);
        if (steering_counts(snap)) {
            bs_buf_printf(buf,
                          ", \"steering\": {\"kept\": %llu, \"moved\": "
                          "%llu, \"idle\": %lld}",
                          b->steer_kept, b->steer_moved, b->steer_idle);
        }
        buf_putc(buf, '}');
    }
    buf_puts(buf, "],\n \"children\": [");
    for (i = 0; i < snap->num_children; i++) {
        const bs_child_t *c = &snap->children[i];

        bs_buf_printf(buf,
                      "%s\n  {\"slot\": %d, \"pid\": %ld, \"bucket\": %d, "
                      "\"accepted\": %llu}",
                      i ? "," : "", c->slot, c->pid, c->bucket, c->accepted);
    }
    buf_puts(buf, "],\n \"balance\": {\"buckets\": ");
    json_balance(buf, &snap->over_buckets);
    buf_puts(buf, ", \"children\": ");
    json_balance(buf, &snap->over_children);
    buf_puts(buf, "}}\n");
}

/* ------------------------------------------------------------------ */
/* Prometheus                                                          */

/* Names follow Prometheus' conventions: counters end in _total, the one
 * time is in seconds, constant facts are labels of an _info gauge, and
 * nothing is computed here that rate() computes better from a counter
 * (no precomputed rate, no since-start balance: the recording rules in
 * contrib/prometheus compute both over a window). */

static void prom_family(bs_buf_t *buf, const char *name, const char *type,
                        const char *help)
{
    bs_buf_printf(buf, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                  type);
}

/* One label: name="value", escaped, with a comma before all but the first. */
static void prom_label(bs_buf_t *buf, int first, const char *name,
                       const char *value)
{
    bs_buf_printf(buf, "%s%s=\"", first ? "" : ",", name);
    bs_buf_prom_label(buf, value);
    buf_putc(buf, '"');
}

static void prom_bucket_labels(bs_buf_t *buf, const bs_bucket_t *b)
{
    bs_buf_printf(buf, "{bucket=\"%d\",listener=\"", b->id);
    bs_buf_prom_label(buf, b->listener);
    buf_puts(buf, "\"");
}

typedef enum {
    PROM_ACCEPTED,
    PROM_QUEUE_DEPTH,
    PROM_BACKLOG
} prom_field_e;

static void prom_per_bucket(bs_buf_t *buf, const bs_snapshot_t *snap,
                            const char *name, const char *type,
                            const char *help, prom_field_e field)
{
    int i;

    prom_family(buf, name, type, help);
    for (i = 0; i < snap->num_buckets; i++) {
        const bs_bucket_t *b = &snap->buckets[i];
        unsigned long long v = field == PROM_ACCEPTED      ? b->accepted
                               : field == PROM_QUEUE_DEPTH ? b->queue_depth
                                                           : b->backlog;

        buf_puts(buf, name);
        prom_bucket_labels(buf, b);
        bs_buf_printf(buf, "} %llu\n", v);
    }
}

/* Present whatever the MPM: which module build reads which server. */
static void prom_build_info(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    prom_family(buf, "httpd_bucket_build_info", "gauge",
                "Always 1: mod_bucket_status's version, the running httpd "
                "as ServerTokens shows it, and its MPM");
    buf_puts(buf, "httpd_bucket_build_info{");
    prom_label(buf, 1, "version", BS_VERSION);
    prom_label(buf, 0, "httpd", text_or(snap->server_version, "unknown"));
    prom_label(buf, 0, "mpm", text_or(snap->mpm_name, "unknown"));
    buf_puts(buf, "} 1\n");
}

static void prom_info(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    prom_family(buf, "httpd_bucket_info", "gauge",
                "Always 1: bucket mode and why, SO_REUSEPORT, steering in "
                "force and asked for, why they differ, BucketCPUAffinity");
    buf_puts(buf, "httpd_bucket_info{");
    prom_label(buf, 1, "mode", snap->mode);
    prom_label(buf, 0, "mode_reason", snap->reason);
    /* Yes-or-no figures are 1 or 0 here as in ?auto; SO_REUSEPORT not
     * probed yet has no label, as ?auto has no line. */
    if (snap->so_reuseport >= 0) {
        prom_label(buf, 0, "so_reuseport", snap->so_reuseport > 0 ? "1" : "0");
    }
    prom_label(buf, 0, "steering", text_or(snap->steering, "hash"));
    prom_label(buf, 0, "steering_wanted",
               text_or(snap->steering_wanted, "hash"));
    prom_label(buf, 0, "steering_fallback", bs_steering_fallback(snap));
    prom_label(buf, 0, "cpu_affinity", snap->cpu_affinity ? "1" : "0");
    buf_puts(buf, "} 1\n");
}

static void prom_steering(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    int i;

    prom_family(buf, "httpd_bucket_steered_connections_total", "counter",
                "Connections the idle- or local-steering program sent to "
                "the bucket: kept where the hash (the receiving CPU) chose, "
                "or moved in");
    for (i = 0; i < snap->num_buckets; i++) {
        const bs_bucket_t *b = &snap->buckets[i];

        buf_puts(buf, "httpd_bucket_steered_connections_total");
        prom_bucket_labels(buf, b);
        bs_buf_printf(buf, ",how=\"kept\"} %llu\n", b->steer_kept);
        buf_puts(buf, "httpd_bucket_steered_connections_total");
        prom_bucket_labels(buf, b);
        bs_buf_printf(buf, ",how=\"moved\"} %llu\n", b->steer_moved);
    }
    prom_family(buf, "httpd_bucket_steering_idle", "gauge",
                "Idle count the steering program reads: waiting children "
                "minus connections sent and not yet accepted");
    for (i = 0; i < snap->num_buckets; i++) {
        buf_puts(buf, "httpd_bucket_steering_idle");
        prom_bucket_labels(buf, &snap->buckets[i]);
        bs_buf_printf(buf, "} %lld\n", snap->buckets[i].steer_idle);
    }
}

static void prom_children(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    static const char *const states[] = { "idle", "busy", "starting",
                                          "stopping" };
    int i, s;

    prom_family(buf, "httpd_bucket_children", "gauge",
                "Children of the bucket by state");
    for (i = 0; i < snap->num_buckets; i++) {
        const bs_bucket_t *b = &snap->buckets[i];
        unsigned values[4];

        values[0] = b->idle;
        values[1] = b->busy;
        values[2] = b->starting;
        values[3] = b->stopping;
        for (s = 0; s < 4; s++) {
            buf_puts(buf, "httpd_bucket_children");
            prom_bucket_labels(buf, b);
            bs_buf_printf(buf, ",state=\"%s\"} %u\n", states[s], values[s]);
        }
    }
}

void bs_format_prometheus(bs_buf_t *buf, const bs_snapshot_t *snap)
{
    prom_family(buf, "httpd_bucket_data_available", "gauge",
                "1 if the running MPM publishes listener bucket data, else "
                "0 with the reason: other-mpm or incompatible");
    if (!snap->available) {
        /* Why, as a label of the 0: another MPM is the admin's choice,
         * a layout the module cannot read is a fault. */
        bs_buf_printf(buf, "httpd_bucket_data_available{reason=\"%s\"} 0\n",
                      snap->unavailable == BS_UNAVAILABLE_INCOMPATIBLE
                          ? "incompatible"
                          : "other-mpm");
        prom_build_info(buf, snap);
        return;
    }
    buf_puts(buf, "httpd_bucket_data_available 1\n");
    prom_build_info(buf, snap);
    prom_info(buf, snap);
    prom_family(buf, "httpd_bucket_generation", "gauge",
                "The server's generation: graceful and full restarts since "
                "it started");
    bs_buf_printf(buf, "httpd_bucket_generation %d\n", snap->generation);
    prom_family(buf, "httpd_bucket_start_time_seconds", "gauge",
                "Unix time of the server's first start (restarts keep it)");
    bs_buf_printf(buf, "httpd_bucket_start_time_seconds %.3f\n",
                  snap->start_time);
    prom_family(buf, "httpd_bucket_per_listen", "gauge",
                "Buckets (SO_REUSEPORT sockets) each Listen is split into");
    bs_buf_printf(buf, "httpd_bucket_per_listen %d\n",
                  snap->buckets_per_listen);
    prom_family(buf, "httpd_bucket_cpus_usable", "gauge",
                "CPUs the bucket count was based on");
    bs_buf_printf(buf, "httpd_bucket_cpus_usable %d\n", snap->cpus_usable);
    prom_family(buf, "httpd_bucket_max_request_workers", "gauge",
                "MaxRequestWorkers in force: most children alive at once, "
                "server-wide");
    bs_buf_printf(buf, "httpd_bucket_max_request_workers %d\n",
                  snap->max_workers);
    prom_family(buf, "httpd_bucket_server_limit", "gauge",
                "ServerLimit in force: the upper bound of MaxRequestWorkers "
                "until a full restart");
    bs_buf_printf(buf, "httpd_bucket_server_limit %d\n", snap->server_limit);
    prom_per_bucket(buf, snap, "httpd_bucket_accepted_connections_total",
                    "counter", "Connections accepted by the bucket's children",
                    PROM_ACCEPTED);
    prom_per_bucket(buf, snap, "httpd_bucket_queue_depth", "gauge",
                    "Connections waiting in the bucket's accept queue",
                    PROM_QUEUE_DEPTH);
    prom_per_bucket(buf, snap, "httpd_bucket_backlog", "gauge",
                    "Limit of the bucket's accept queue", PROM_BACKLOG);
    if (steering_counts(snap)) {
        prom_steering(buf, snap);
    }
    prom_children(buf, snap);
}
