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
 * no lock, nothing on the accept path, every index bounded by the
 * segment's sizes as this process knows them (a child running untrusted
 * code can scribble on the segment but cannot move them).  With any other
 * MPM the optional function is absent and every format says that bucket
 * data is unavailable.
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

/* Connections accepted by a bucket's children so far: those of children
 * that have exited, plus the live children's counters. */
static unsigned long long bucket_accepted(const pfb_segment_t *seg, int r,
                                          const pfb_bucket_t *in)
{
    unsigned long long total = in->f.retired;
    int slot, used = pfb_segment_slots_used(seg);

    for (slot = 0; slot < used; slot++) {
        const pfb_slot_t *s = pfb_segment_slot(seg, slot);

        if (s->f.pid != 0 && s->f.record == r) {
            total += apr_atomic_read64(
                (volatile apr_uint64_t *)&s->f.accepted);
        }
    }
    return total;
}

static void copy_bucket(bs_bucket_t *out, const pfb_segment_t *seg, int b,
                        apr_time_t now)
{
    const pfb_bucket_t *in = pfb_segment_bucket(seg, b);
    const pfb_bucket_fields_t *f = &in->f;
    unsigned long long samples[PFB_RATE_SAMPLES];
    long long times[PFB_RATE_SAMPLES];
    int i, r = (int)(in - pfb_segment_record(seg, 0));

    out->id = b;
    apr_cpystrn(out->listener, f->listener, sizeof(out->listener));
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
    out->accepted = bucket_accepted(seg, r, in);
    for (i = 0; i < PFB_RATE_SAMPLES; i++) {
        samples[i] = f->accepted_sample[i];
        times[i] = f->sample_time[i];
    }
    out->accepted_10s = bs_recent_accepted(out->accepted, samples, times,
                                           PFB_RATE_SAMPLES, now,
                                           apr_time_from_sec(10));
}

/* The live children of the current generation, from the segment's slot
 * records. */
static void copy_children(bs_snapshot_t *snap, const pfb_segment_t *seg,
                          apr_pool_t *p)
{
    int slot, n = 0;
    int used = pfb_segment_slots_used(seg);

    snap->children = apr_pcalloc(p, sizeof(bs_child_t)
                                        * (apr_size_t)(used + 1));
    for (slot = 0; slot < used; slot++) {
        const pfb_slot_t *s = pfb_segment_slot(seg, slot);
        int bucket = pfb_segment_slot_bucket(seg, slot);

        if (bucket < 0 || s->f.stopping
            || s->f.generation != seg->shm->generation) {
            continue;
        }
        snap->children[n].slot = slot;
        snap->children[n].pid = (long)s->f.pid;
        snap->children[n].bucket = bucket;
        snap->children[n].accepted =
            apr_atomic_read64((volatile apr_uint64_t *)&s->f.accepted);
        n++;
    }
    snap->num_children = n;
}

static void take_snapshot(bs_snapshot_t *snap, apr_pool_t *p)
{
    const pfb_segment_t *seg = get_buckets_segment ? get_buckets_segment()
                                                   : NULL;
    const pfb_shm_t *shm;
    apr_time_t now = apr_time_now();
    int b;

    memset(snap, 0, sizeof(*snap));
    snap->mpm_name = ap_show_mpm();
    snap->server_version = ap_get_server_description();
    if (!pfb_segment_usable(seg)) {
        snap->available = 0;
        return;
    }
    shm = seg->shm;
    snap->available = 1;
    snap->mode = pfb_mode_name(shm->mode);
    snap->reason = pfb_reason_name(shm->reason);
    snap->steering = pfb_steer_name(shm->steer_active);
    snap->steering_wanted = pfb_steer_name(shm->steer_wanted);
    snap->cpu_affinity = shm->cpu_affinity;
    snap->so_reuseport = shm->so_reuseport;
    snap->cpus_online = shm->cpus_online;
    snap->cpus_affinity = shm->cpus_affinity;
    snap->cpus_quota = shm->cpus_quota;
    snap->cpus_usable = shm->cpus_usable;
    snap->ratio = shm->ratio;
    snap->explicit_buckets = shm->explicit_buckets;
    snap->buckets_per_listen = shm->buckets_per_listen;
    snap->num_listeners = (int)shm->num_listeners;
    snap->generation = shm->generation;
    snap->max_workers = shm->max_workers;
    snap->uptime = (double)(now - shm->started) / APR_USEC_PER_SEC;
    snap->start_time = (double)shm->started / APR_USEC_PER_SEC;
    snap->num_buckets = 0;
    snap->buckets = apr_pcalloc(p, sizeof(bs_bucket_t)
                                       * (apr_size_t)(pfb_segment_num_buckets(
                                                          seg)
                                                      + 1));
    for (b = 0; b < pfb_segment_num_buckets(seg); b++) {
        if (pfb_segment_bucket(seg, b) == NULL) {
            continue;
        }
        copy_bucket(&snap->buckets[snap->num_buckets++], seg, b, now);
    }
    copy_children(snap, seg, p);
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
