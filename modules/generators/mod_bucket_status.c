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
 * mod_bucket_status: how connections spread over the prefork MPM's
 * listener buckets.
 *
 * Adds a "Listener buckets" section to mod_status's page and ?auto output,
 * and answers "SetHandler bucket-status" with an HTML page (?refresh=N),
 * ?auto, ?json or ?prometheus.  It reads the MPM's state only through
 * include/prefork_buckets.h: one copy of the shared segment per request,
 * no lock, nothing on the accept path.  A child running untrusted code can
 * rewrite the segment at any moment, even while it is read, so the reader
 * copies the header, the bucket table, each current bucket's record and
 * each slot once, uses only the copies, bounds every count by what this
 * process knows itself (the segment's sizes, ServerLimit) and cleans the
 * listener names of control characters.  With any other MPM the optional
 * function is absent and every format says that bucket data is
 * unavailable.
 */

#include "apr_atomic.h"
#include "apr_optional.h"
#include "apr_strings.h"

#include "ap_config.h"
#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "ap_mpm.h"
#include "mod_status.h"

#include "pfb_log.h"
#include "prefork_buckets.h"
#include "bucket_report.h"

module AP_MODULE_DECLARE_DATA bucket_status_module;

static APR_OPTIONAL_FN_TYPE(prefork_buckets_segment) *get_buckets_segment;

/* The segment as this request sees it: every count taken once from one
 * copy of the header and bounded by what this process knows itself, and
 * every record and slot read once.  A child running hostile code can
 * rewrite the segment at any moment; the copy cannot change under us. */
typedef struct {
    pfb_shm_t header;           /* one copy */
    int num_buckets;            /* bounded: see reader_limits() */
    int num_slots;
    int *record_of_bucket;      /* the bucket table, copied */
    int *bucket_of_record;      /* its inverse, -1 for none */
    int *record_index;          /* per bucket, its record's number */
    pfb_bucket_fields_t *records;   /* per bucket, its record copied */
    apr_uint32_t *retire_seq;   /* per bucket, its record's sequence */
    unsigned long long *accepted;   /* per bucket, summed over slots */
} reader_copy_t;

/* Copies taken when a child's count moved between its slot and its
 * bucket's total while we read: after that many the last one is used (a
 * child that keeps writing the sequence makes a report wrong, no more).
 * The move takes the parent a few stores; past the first retries the
 * parent was descheduled inside it, so the reader waits a little. */
#define READ_TRIES 16
#define READ_RETRY_WAIT_US 100

/* How many buckets and slots this reader will look at.  Both come from
 * this process: the segment's sizes (pfb_segment_t, set when the MPM made
 * it) and ServerLimit, which is fixed for the server's life and so the
 * same in every generation; each bucket needs a child, so there are never
 * more buckets than ServerLimit.  The header only ever lowers them. */
static void reader_limits(const pfb_segment_t *seg, int *max_buckets,
                          int *max_slots)
{
    int server_limit = 0;

    if (ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &server_limit) != APR_SUCCESS
        || server_limit < 1) {
        server_limit = 1;
    }
    *max_buckets = seg->num_records < server_limit ? seg->num_records
                                                   : server_limit;
    *max_slots = seg->num_slots < server_limit ? seg->num_slots
                                               : server_limit;
}

/* A listener address written by the MPM is printable ASCII ("host:port",
 * "[v6]:port"); anything else was written by a child, and would break the
 * line-based formats (?auto, both pages).  Every formatter gets the clean
 * string. */
static void copy_listener(char *out, apr_size_t len, const char *in)
{
    apr_size_t i;

    for (i = 0; i + 1 < len && in[i] != '\0'; i++) {
        unsigned char c = (unsigned char)in[i];

        out[i] = (c < 0x20 || c > 0x7e) ? '?' : (char)c;
    }
    out[i] = '\0';
}

static void reader_alloc(reader_copy_t *rc, const pfb_segment_t *seg,
                         apr_pool_t *p)
{
    int max_buckets, max_slots;
    apr_size_t n;

    reader_limits(seg, &max_buckets, &max_slots);
    n = (apr_size_t)max_buckets + 1;
    rc->record_of_bucket = apr_palloc(p, sizeof(int) * n);
    rc->record_index = apr_palloc(p, sizeof(int) * n);
    rc->records = apr_palloc(p, sizeof(*rc->records) * n);
    rc->retire_seq = apr_palloc(p, sizeof(*rc->retire_seq) * n);
    rc->accepted = apr_palloc(p, sizeof(*rc->accepted) * n);
    rc->bucket_of_record = apr_palloc(p, sizeof(int)
                                             * (apr_size_t)seg->num_records);
}

/* Copies the header, the bucket table and the current buckets' records,
 * once each, through the header's bounded accessors. */
static void copy_buckets(reader_copy_t *rc, const pfb_segment_t *seg)
{
    int max_buckets, max_slots, b, r, n = 0;

    reader_limits(seg, &max_buckets, &max_slots);
    memcpy(&rc->header, (const void *)seg->shm, sizeof(rc->header));
    rc->num_buckets = rc->header.num_buckets > (apr_uint32_t)max_buckets
                          ? max_buckets
                          : (int)rc->header.num_buckets;
    rc->num_slots = rc->header.slots_used < 0 ? 0
                    : rc->header.slots_used > max_slots ? max_slots
                                                        : rc->header.slots_used;
    for (r = 0; r < seg->num_records; r++) {
        rc->bucket_of_record[r] = -1;
    }
    for (b = 0; b < rc->num_buckets; b++) {
        const pfb_bucket_t *rec;

        r = pfb_segment_table(seg, b);
        rec = pfb_segment_record(seg, r);
        if (rec == NULL || rc->bucket_of_record[r] >= 0) {
            continue;           /* no record, or one named twice */
        }
        rc->retire_seq[n] = pfb_retire_seq_begin(rec);
        memcpy(&rc->records[n], (const void *)&rec->f, sizeof(rc->records[n]));
        rc->record_of_bucket[n] = b;
        rc->record_index[n] = r;
        rc->bucket_of_record[r] = n;
        rc->accepted[n] = rc->records[n].retired;
        n++;
    }
    rc->num_buckets = n;
}

/* One pass over the slots: each child's counter goes to its bucket (a
 * child that has exited counts until the parent has moved its count into
 * the bucket's total), and the current generation's live children are
 * listed. */
static void copy_children(bs_snapshot_t *snap, reader_copy_t *rc,
                          const pfb_segment_t *seg)
{
    int slot, n = 0;

    for (slot = 0; slot < rc->num_slots; slot++) {
        const pfb_slot_fields_t *s = &pfb_segment_slot(seg, slot)->f;
        apr_int32_t pid = s->pid, record = s->record;
        apr_int32_t generation = s->generation, stopping = s->stopping;
        unsigned long long accepted =
            apr_atomic_read64((volatile apr_uint64_t *)&s->accepted);
        int i;

        if (record < 0 || record >= seg->num_records
            || (i = rc->bucket_of_record[record]) < 0) {
            continue;
        }
        rc->accepted[i] = pfb_add_saturated(rc->accepted[i], accepted);
        if (pid == 0 || stopping || generation != rc->header.generation) {
            continue;
        }
        snap->children[n].slot = slot;
        snap->children[n].pid = (long)pid;
        snap->children[n].bucket = rc->record_of_bucket[i];
        snap->children[n].accepted = accepted;
        n++;
    }
    snap->num_children = n;
}

/* Whether a count moved between a slot and its bucket's total while we
 * copied them: then the sums may hold it twice or not at all. */
static int counts_moved(const reader_copy_t *rc, const pfb_segment_t *seg)
{
    int i;

    for (i = 0; i < rc->num_buckets; i++) {
        const pfb_bucket_t *rec = pfb_segment_record(seg,
                                                      rc->record_index[i]);

        if (rec == NULL || pfb_retire_seq_changed(rec, rc->retire_seq[i])) {
            return 1;
        }
    }
    return 0;
}

/* The buckets and the children, copied again while a count moved. */
static void copy_segment(bs_snapshot_t *snap, reader_copy_t *rc,
                         const pfb_segment_t *seg, apr_pool_t *p)
{
    int max_buckets, max_slots, tries = 0;

    reader_alloc(rc, seg, p);
    reader_limits(seg, &max_buckets, &max_slots);
    snap->children = apr_palloc(p, sizeof(bs_child_t)
                                       * (apr_size_t)(max_slots + 1));
    for (;;) {
        copy_buckets(rc, seg);
        copy_children(snap, rc, seg);
        if (!counts_moved(rc, seg) || ++tries >= READ_TRIES) {
            break;
        }
        if (tries > 2) {
            apr_sleep(READ_RETRY_WAIT_US);
        }
    }
}

static void copy_bucket(bs_bucket_t *out, const reader_copy_t *rc, int i,
                        apr_time_t now)
{
    const pfb_bucket_fields_t *f = &rc->records[i];
    unsigned long long samples[PFB_RATE_SAMPLES];
    long long times[PFB_RATE_SAMPLES];
    int s;

    out->id = rc->record_of_bucket[i];
    copy_listener(out->listener, sizeof(out->listener), f->listener);
    out->children = f->children;
    out->idle = f->idle;
    out->busy = f->busy;
    out->starting = f->starting;
    out->stopping = f->stopping;
    out->queue_depth = f->queue_depth;
    out->backlog = f->backlog;
    out->steer_kept = f->steer_kept;
    out->steer_moved = f->steer_moved;
    out->steer_idle = f->steer_idle;
    out->accepted = rc->accepted[i];
    for (s = 0; s < PFB_RATE_SAMPLES; s++) {
        samples[s] = f->accepted_sample[s];
        times[s] = f->sample_time[s];
    }
    out->accepted_10s = bs_recent_accepted(out->accepted, samples, times,
                                           PFB_RATE_SAMPLES, now,
                                           apr_time_from_sec(10));
}

static void take_snapshot(bs_snapshot_t *snap, apr_pool_t *p)
{
    const pfb_segment_t *seg = get_buckets_segment ? get_buckets_segment()
                                                   : NULL;
    const pfb_shm_t *h;
    reader_copy_t rc;
    apr_time_t now = apr_time_now();
    int i;

    memset(snap, 0, sizeof(*snap));
    snap->mpm_name = ap_show_mpm();
    /* The banner, not the description: what the admin's ServerTokens
     * lets the server say about itself. */
    snap->server_version = ap_get_server_banner();
    if (!pfb_segment_usable(seg)) {
        snap->available = 0;
        /* The optional function is this MPM's own: it runs, but writes a
         * layout this module does not read. */
        snap->unavailable = get_buckets_segment != NULL
                                ? BS_UNAVAILABLE_INCOMPATIBLE
                                : BS_UNAVAILABLE_OTHER_MPM;
        return;
    }
    copy_segment(snap, &rc, seg, p);
    h = &rc.header;
    snap->available = 1;
    snap->mode = pfb_mode_name(h->mode);
    snap->reason = pfb_reason_name(h->reason);
    snap->steering = pfb_steer_name(h->steer_active);
    snap->steering_wanted = pfb_steer_name(h->steer_wanted);
    snap->cpu_affinity = h->cpu_affinity;
    snap->so_reuseport = h->so_reuseport;
    snap->cpus_online = h->cpus_online;
    snap->cpus_affinity = h->cpus_affinity;
    snap->cpus_quota = h->cpus_quota;
    snap->cpus_usable = h->cpus_usable;
    snap->ratio = h->ratio;
    snap->explicit_buckets = h->explicit_buckets;
    snap->buckets_per_listen = h->buckets_per_listen;
    snap->num_listeners = (int)h->num_listeners;
    snap->generation = h->generation;
    /* The limits from this process's own configuration, as the MPM
     * corrected it, not from the segment a child can write. */
    if (ap_mpm_query(AP_MPMQ_MAX_DAEMONS, &snap->max_workers) != APR_SUCCESS) {
        snap->max_workers = 0;
    }
    if (ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &snap->server_limit)
        != APR_SUCCESS) {
        snap->server_limit = 0;
    }
    /* In floating point: the start time is the segment's, and a child may
     * have written anything there. */
    snap->uptime = ((double)now - (double)h->started) / APR_USEC_PER_SEC;
    snap->start_time = (double)h->started / APR_USEC_PER_SEC;
    snap->num_buckets = rc.num_buckets;
    snap->buckets = apr_pcalloc(p, sizeof(bs_bucket_t)
                                       * (apr_size_t)(rc.num_buckets + 1));
    for (i = 0; i < rc.num_buckets; i++) {
        copy_bucket(&snap->buckets[i], &rc, i, now);
    }
    bs_snapshot_balance(snap);
}

static int write_buffer(request_rec *r, bs_buf_t *buf)
{
    if (buf->failed) {
        bs_buf_free(buf);
        ap_log_rerror(APLOG_MARK, APLOG_ERR, APR_ENOMEM, r,
                      PFBLOGNO(00036) "bucket-status: out of memory while "
                      "formatting the report");
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    if (buf->len > 0) {
        ap_rwrite(buf->data, (int)buf->len, r);
    }
    bs_buf_free(buf);
    return OK;
}

/* mod_status's hook: our section in /server-status and ?auto. */
static int bucket_status_hook(request_rec *r, int flags)
{
    bs_snapshot_t snap;
    bs_buf_t buf;

    take_snapshot(&snap, r->pool);
    bs_buf_init(&buf);
    if (flags & AP_STATUS_SHORT) {
        bs_format_auto(&buf, &snap);
    }
    else {
        bs_format_html_section(&buf, &snap);
    }
    return write_buffer(r, &buf);
}

static int bucket_status_handler(request_rec *r)
{
    bs_query_t query;
    bs_snapshot_t snap;
    bs_buf_t buf;
    const char *error = NULL;

    if (strcmp(r->handler, "bucket-status") != 0) {
        return DECLINED;
    }
    r->allowed = (AP_METHOD_BIT << M_GET);
    if (r->method_number != M_GET) {
        return DECLINED;
    }
    if (bs_parse_query(r->args, &query, &error) != 0) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                      PFBLOGNO(00037) "bucket-status: refused query "
                      "string: %s", error);
        return HTTP_BAD_REQUEST;
    }
    take_snapshot(&snap, r->pool);
    bs_buf_init(&buf);
    apr_table_setn(r->headers_out, "Cache-Control", "no-cache");
    switch (query.format) {
    case BS_FORMAT_AUTO:
        ap_set_content_type(r, "text/plain; charset=utf-8");
        bs_format_auto(&buf, &snap);
        break;
    case BS_FORMAT_JSON:
        ap_set_content_type(r, "application/json");
        bs_format_json(&buf, &snap);
        break;
    case BS_FORMAT_PROMETHEUS:
        ap_set_content_type(r, "text/plain; version=0.0.4; charset=utf-8");
        bs_format_prometheus(&buf, &snap);
        break;
    default:
        ap_set_content_type(r, "text/html; charset=utf-8");
        bs_format_html_page(&buf, &snap, query.refresh);
        break;
    }
    if (r->header_only) {
        bs_buf_free(&buf);
        return OK;
    }
    return write_buffer(r, &buf);
}

static void bucket_status_retrieve(void)
{
    get_buckets_segment = APR_RETRIEVE_OPTIONAL_FN(prefork_buckets_segment);
}

static void bucket_status_register_hooks(apr_pool_t *AP_MAYBE_UNUSED(p))
{
    ap_hook_handler(bucket_status_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_optional_fn_retrieve(bucket_status_retrieve, NULL, NULL,
                                 APR_HOOK_MIDDLE);
    APR_OPTIONAL_HOOK(ap, status_hook, bucket_status_hook, NULL, NULL,
                      APR_HOOK_MIDDLE);
}

/* clang-format off */
AP_DECLARE_MODULE(bucket_status) = {
    STANDARD20_MODULE_STUFF,
    NULL,                       /* create per-directory config structure */
    NULL,                       /* merge per-directory config structures */
    NULL,                       /* create per-server config structure */
    NULL,                       /* merge per-server config structures */
    NULL,                       /* command apr_table_t */
    bucket_status_register_hooks, /* register hooks */
    AP_MODULE_FLAG_NONE         /* flags */
};
/* clang-format on */
