/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Test-only handler for the load suite: "SetHandler pfb-test" answers
 * after a service time taken from the query string, so benchmarks can give
 * requests heterogeneous service times (e.g. exponential, drawn by the load
 * generator per request).
 *
 *   ?sleep=MS   sleep MS milliseconds (0-60000, fractions allowed)
 *   ?spin=MS    burn CPU for MS milliseconds (0-60000)
 *   ?hold=MS    send "pid N" at once, then sleep MS milliseconds
 *   ?teardown=MS answer at once; when the connection's pool is cleared
 *               (the child's teardown of the connection), log
 *               "teardown begins", sleep MS milliseconds or until a signal
 *               interrupts, then log "teardown ends" and which it was
 *
 * "SetHandler pfb-fixed" answers the load suite's 100-byte body and nothing
 * else, with no access-log line (it marks itself like the harness's probes,
 * below): the floor of httpd's own per-request cost.  The URL /floor is
 * mapped to no file at all (map_to_storage ends at once), so the floor
 * makes no stat(), open() or mmap().
 *
 * and "SetHandler pfb-scoreboard" answers with the scoreboard, one line per
 * slot in use, so the test harness can wait for children that finished
 * starting (SERVER_READY or later) rather than for processes that exist:
 *
 *   served-by P
 *   limits server-limit L max-workers W min-spare N max-spare X
 *   slot S pid P generation G status C quiescing Q bucket B
 *
 * (the bucket from the MPM's slot-to-bucket map, -1 without one: the
 * scoreboard's own bucket field is deprecated and always 0)
 * where C is mod_status's letter for the slot's state ('S' starting, '_'
 * waiting for a connection, 'W' writing ...); "served-by" names the child
 * answering, which is busy writing this very answer; "limits" are the MPM's
 * answers to ap_mpm_query(), the values in force after its corrections.
 * The request marks itself
 * with the environment variable pfb_probe so that the harness's access log
 * (CustomLog ... env=!pfb_probe) leaves it out.
 *
 * Never load it on a production server.
 */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "apr_strings.h"
#include "apr_time.h"

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_main.h"
#include "http_protocol.h"
#include "http_request.h"
#include "ap_mpm.h"
#include "scoreboard.h"

#include "pfb_log.h"
#include "prefork_buckets.h"

module AP_MODULE_DECLARE_DATA pfb_test_handler_module;

/* Milliseconds from "sleep=12.5" or "spin=3"; -1 when malformed. */
static double parse_ms(const char *value)
{
    char *end;
    double ms = strtod(value, &end);

    if (end == value || *end != '\0' || !(ms >= 0.0) || ms > 60000.0) {
        return -1.0;
    }
    return ms;
}

/* The connection pool's cleanup of ?teardown=MS: a teardown that takes
 * its time, so that a test can stop the server in the middle of one. */
static apr_status_t slow_teardown(void *data)
{
    const double *ms = data;
    struct timespec period;
    int interrupted;

    ap_log_error(APLOG_MARK, APLOG_INFO, 0, ap_server_conf,
                 PFBLOGNO(00181) "pfb-test: teardown begins (pid %ld)",
                 (long)getpid());
    period.tv_sec = (time_t)(*ms / 1000.0);
    period.tv_nsec = (long)((*ms - (double)period.tv_sec * 1000.0) * 1.0e6);
    interrupted = nanosleep(&period, NULL) != 0 && errno == EINTR;
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, ap_server_conf,
                 PFBLOGNO(00182) "pfb-test: teardown ends (pid %ld, %s)",
                 (long)getpid(),
                 interrupted ? "interrupted by a signal" : "slept its time");
    return APR_SUCCESS;
}

static int pfb_test_handler(request_rec *r)
{
    double ms = 0.0;
    int spin = 0, hold = 0, teardown = 0;

    if (strcmp(r->handler, "pfb-test") != 0) {
        return DECLINED;
    }
    if (r->args) {
        if (strncmp(r->args, "sleep=", 6) == 0) {
            ms = parse_ms(r->args + 6);
        }
        else if (strncmp(r->args, "spin=", 5) == 0) {
            ms = parse_ms(r->args + 5);
            spin = 1;
        }
        else if (strncmp(r->args, "hold=", 5) == 0) {
            ms = parse_ms(r->args + 5);
            hold = 1;
        }
        else if (strncmp(r->args, "teardown=", 9) == 0) {
            ms = parse_ms(r->args + 9);
            teardown = 1;
        }
        else {
            ms = -1.0;
        }
    }
    if (ms < 0.0) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                      PFBLOGNO(00038) "pfb-test: bad query string");
        return HTTP_BAD_REQUEST;
    }
    if (hold) {
        /* The client learns which child holds it before the wait: the
         * steering tests block chosen buckets this way. */
        ap_set_content_type(r, "text/plain");
        ap_rprintf(r, "pid %ld\n", (long)getpid());
        ap_rflush(r);
        apr_sleep((apr_interval_time_t)(ms * 1000.0));
        ap_rprintf(r, "held %.3f ms\n", ms);
        return OK;
    }
    if (teardown) {
        double *kept = apr_palloc(r->connection->pool, sizeof(*kept));

        *kept = ms;
        apr_pool_cleanup_register(r->connection->pool, kept, slow_teardown,
                                  apr_pool_cleanup_null);
        ms = 0.0;
    }
    else if (spin) {
        apr_time_t until = apr_time_now() + (apr_time_t)(ms * 1000.0);
        volatile unsigned long sink = 0;

        while (apr_time_now() < until) {
            sink++;
        }
    }
    else if (ms > 0.0) {
        apr_sleep((apr_interval_time_t)(ms * 1000.0));
    }
    ap_set_content_type(r, "text/plain");
    ap_rprintf(r, "served after %.3f ms (%s)\n", ms, spin ? "spin" : "sleep");
    return OK;
}

/* The load suite's static file (STATIC_BODY in bench/suite.py). */
static const char fixed_body[] =
    "static file of one hundred bytes for the load suite "
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n";

/* The floor's URL names no file: skip core's directory and file walks. */
static int pfb_fixed_map_to_storage(request_rec *r)
{
    return strcmp(r->uri, "/floor") == 0 ? OK : DECLINED;
}

static int pfb_fixed_handler(request_rec *r)
{
    if (strcmp(r->handler, "pfb-fixed") != 0) {
        return DECLINED;
    }
    apr_table_setn(r->subprocess_env, "pfb_probe", "1");
    ap_set_content_type(r, "text/html");
    ap_set_content_length(r, sizeof(fixed_body) - 1);
    if (!r->header_only) {
        ap_rwrite(fixed_body, sizeof(fixed_body) - 1, r);
    }
    return OK;
}

/* mod_status's letters for the worker states of scoreboard.h. */
static char status_letter(int status)
{
    static const char letters[] = {
        [SERVER_DEAD] = '.',         [SERVER_STARTING] = 'S',
        [SERVER_READY] = '_',        [SERVER_BUSY_READ] = 'R',
        [SERVER_BUSY_WRITE] = 'W',   [SERVER_BUSY_KEEPALIVE] = 'K',
        [SERVER_BUSY_LOG] = 'L',     [SERVER_BUSY_DNS] = 'D',
        [SERVER_CLOSING] = 'C',      [SERVER_GRACEFUL] = 'G',
        [SERVER_IDLE_KILL] = 'I'};

    if (status < 0 || status >= (int)sizeof(letters) || !letters[status]) {
        return '?';
    }
    return letters[status];
}

static int pfb_scoreboard_handler(request_rec *r)
{
    APR_OPTIONAL_FN_TYPE(prefork_buckets_segment) *get_segment =
        APR_RETRIEVE_OPTIONAL_FN(prefork_buckets_segment);
    const pfb_segment_t *seg = get_segment ? get_segment() : NULL;
    int server_limit = 0, slot, usable = pfb_segment_usable(seg);
    int max_workers = 0, min_spare = 0, max_spare = 0;

    if (strcmp(r->handler, "pfb-scoreboard") != 0) {
        return DECLINED;
    }
    if (!ap_scoreboard_image
        || ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &server_limit)
               != APR_SUCCESS) {
        return HTTP_SERVICE_UNAVAILABLE;
    }
    apr_table_setn(r->subprocess_env, "pfb_probe", "1");
    ap_set_content_type(r, "text/plain");
    ap_rprintf(r, "served-by %ld\n", (long)getpid());
    ap_mpm_query(AP_MPMQ_MAX_DAEMONS, &max_workers);
    ap_mpm_query(AP_MPMQ_MIN_SPARE_DAEMONS, &min_spare);
    ap_mpm_query(AP_MPMQ_MAX_SPARE_DAEMONS, &max_spare);
    ap_rprintf(r, "limits server-limit %d max-workers %d min-spare %d "
               "max-spare %d\n", server_limit, max_workers, min_spare,
               max_spare);
    for (slot = 0; slot < server_limit; slot++) {
        process_score *ps = ap_get_scoreboard_process(slot);
        worker_score *ws = ap_get_scoreboard_worker_from_indexes(slot, 0);

        if (ps->pid == 0 && ws->status == SERVER_DEAD) {
            continue;
        }
        ap_rprintf(r,
                   "slot %d pid %ld generation %d status %c quiescing %d "
                   "bucket %d\n",
                   slot, (long)ps->pid, (int)ps->generation,
                   status_letter(ws->status), (int)ps->quiescing,
                   usable ? pfb_segment_slot_bucket(seg, slot) : -1);
    }
    return OK;
}

static void pfb_test_register_hooks(apr_pool_t *AP_MAYBE_UNUSED(p))
{
    ap_hook_handler(pfb_test_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_handler(pfb_scoreboard_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_handler(pfb_fixed_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_map_to_storage(pfb_fixed_map_to_storage, NULL, NULL,
                           APR_HOOK_FIRST);
}

/* clang-format off */
AP_DECLARE_MODULE(pfb_test_handler) = {
    STANDARD20_MODULE_STUFF,
    NULL, NULL, NULL, NULL, NULL,
    pfb_test_register_hooks,
    AP_MODULE_FLAG_NONE
};
/* clang-format on */
