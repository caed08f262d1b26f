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
 * The httpd side of the lingering close: what the child learns of the
 * connection's exchange while it serves it (whether a request's body was
 * read to its end, whether a request came pipelined), httpd's own start
 * of the close (ap_start_lingering_close: the pre_close_connection hooks,
 * which let mod_ssl send its close_notify, the flush, the shutdown for
 * writing), then prefork_linger.c's decision in place of
 * ap_lingering_close()'s blocking reads.
 */

#include <string.h>

#include "apr_portable.h"
#include "apr_strings.h"

#include "httpd.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_log.h"
#include "http_main.h"
#include "http_protocol.h"
#include "util_filter.h"

#include "pfb_log.h"
#include "prefork_conn.h"
#include "prefork_linger.h"

/** How long an exiting child waits for its lingering sockets (usec): as
 *  long as the last one may linger, httpd's bound (30 s from the client's
 *  first bytes, then its quiet time).  A stop that must not wait (SIGTERM)
 *  ends the child at once. */
#define PF_CLOSE_EXIT_WAIT      (PF_LINGER_MAX_USEC + PF_LINGER_QUIET_USEC)

APLOG_USE_MODULE(mpm_prefork);

/* Set once the child logged that it lingers itself (per child). */
static int lingering_here_logged;

/* The exchange on the connection the child serves (a prefork child serves
 * one at a time); pf_close_connection() reads and resets it. */
static pf_linger_exchange_t in_hand;

/* The input filter that sees a request's body end (below). */
static ap_filter_rec_t *body_end_filter_handle;

static void log_lingering_here(apr_status_t rv)
{
    if (lingering_here_logged) {
        return;
    }
    lingering_here_logged = 1;
    ap_log_error(APLOG_MARK, APLOG_WARNING, rv, ap_server_conf,
                 PFBLOGNO(00120) "couldn't start the child's lingering "
                 "thread; this child lingers on closing connections "
                 "itself, as httpd's prefork does");
}

void pf_close_child_init(volatile apr_int32_t *lingering)
{
    apr_status_t rv = pf_linger_start();

    pf_linger_count_in(lingering);

    if (rv != APR_SUCCESS && rv != APR_ENOTIMPL) {
        log_lingering_here(rv);
    }
}

/* Requests of the connection itself: not subrequests, internal redirects
 * (which share the first request's input) or HTTP/2 streams (whose
 * connection is not the one the child closes). */
static int request_of_the_connection(const request_rec *r)
{
    return r->main == NULL && r->prev == NULL
           && r->connection->master == NULL;
}

/* Whether the request announces a body, as HTTP_IN decides it: any
 * Transfer-Encoding, or a Content-Length other than 0 (one that does not
 * parse is answered with 400, its bytes unread). */
static int announces_body(const request_rec *r)
{
    const char *length = apr_table_get(r->headers_in, "Content-Length");
    apr_off_t value;
    char *end;

    if (apr_table_get(r->headers_in, "Transfer-Encoding") != NULL) {
        return 1;
    }
    if (length == NULL) {
        return 0;
    }
    return apr_strtoff(&value, length, &end, 10) != APR_SUCCESS
           || end == length || *end != '\0' || value != 0;
}

/* Before a request is read: its body is unread until known otherwise,
 * so that a request that fails while being read (or a keep-alive wait
 * that ends in the timeout, with the client's next request possibly on
 * its way) lingers as httpd does.  Data already buffered when a request
 * begins came with the request before it: pipelining. */
static void note_request_begins(request_rec *AP_MAYBE_UNUSED(r),
                                conn_rec *c)
{
    if (c->master != NULL) {
        return;
    }
    in_hand.body_unread = 1;
    if (c->data_in_input_filters) {
        in_hand.pipelined = 1;
    }
}

/* The request is read: if it has a body, the body-end filter watches for
 * its end. */
static int note_request_read(request_rec *r)
{
    if (!request_of_the_connection(r)) {
        return DECLINED;
    }
    in_hand.body_unread = announces_body(r);
    if (in_hand.body_unread) {
        ap_add_input_filter_handle(body_end_filter_handle, NULL, r,
                                   r->connection);
    }
    return DECLINED;
}

/* Just above HTTP_IN: the end of stream it passes up is the body read to
 * its end, by the handler or by ap_discard_request_body(). */
static apr_status_t body_end_filter(ap_filter_t *f, apr_bucket_brigade *bb,
                                    ap_input_mode_t mode,
                                    apr_read_type_e block,
                                    apr_off_t readbytes)
{
    apr_status_t rv = ap_get_brigade(f->next, bb, mode, block, readbytes);
    apr_bucket *b;

    if (rv != APR_SUCCESS) {
        return rv;
    }
    for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb);
         b = APR_BUCKET_NEXT(b)) {
        if (APR_BUCKET_IS_EOS(b)) {
            in_hand.body_unread = 0;
            ap_remove_input_filter(f);
            break;
        }
    }
    return rv;
}

void pf_close_hooks(void)
{
    ap_hook_pre_read_request(note_request_begins, NULL, NULL,
                             APR_HOOK_REALLY_FIRST);
    ap_hook_post_read_request(note_request_read, NULL, NULL,
                              APR_HOOK_REALLY_FIRST);
    body_end_filter_handle =
        ap_register_input_filter("PREFORK_BODY_END", body_end_filter, NULL,
                                 AP_FTYPE_PROTOCOL - 1);
}

/* A non-blocking look at what the client sent that nobody read: the
 * connection's input filters' buffers (a pipelined request read with the
 * last one), then the socket, as ap_check_pipeline() looks after each
 * request.  The filters' speculative mode leaves it all where it is. */
static pf_linger_read_e look_at_input(conn_rec *c)
{
    apr_bucket_brigade *bb = apr_brigade_create(c->pool, c->bucket_alloc);
    pf_linger_read_e seen = PF_READ_NOTHING;
    apr_status_t rv;

    rv = ap_get_brigade(c->input_filters, bb, AP_MODE_SPECULATIVE,
                        APR_NONBLOCK_READ, 1);
    if (APR_STATUS_IS_EOF(rv)) {
        seen = PF_READ_EOF;
    }
    else if (rv == APR_SUCCESS && !APR_BRIGADE_EMPTY(bb)) {
        seen = APR_BUCKET_IS_EOS(APR_BRIGADE_FIRST(bb)) ? PF_READ_EOF
                                                        : PF_READ_DATA;
    }
    /* Otherwise nothing waits (EAGAIN), or a filter could not tell: the
     * exchange decides. */
    apr_brigade_destroy(bb);
    return seen;
}

/* The descriptor now belongs to the lingering thread: the socket's pool
 * cleanup (when the transaction pool is cleared) must not close it. */
static void forget_descriptor(apr_socket_t *csd)
{
    apr_os_sock_t none = -1;

    apr_os_sock_put(&csd, &none, NULL);
}

void pf_close_connection(conn_rec *c, volatile sig_atomic_t *stop)
{
    apr_socket_t *csd = ap_get_conn_socket(c);
    pf_linger_exchange_t exchange = in_hand;
    pf_linger_action_e action;
    apr_os_sock_t fd;
    apr_status_t rv;
    int short_linger;

    memset(&in_hand, 0, sizeof(in_hand));
    if (csd == NULL) {
        /* As httpd does for modules that take the socket away. */
        c->aborted = 1;
        return;
    }
    /* Before the close starts: mod_ssl ends its TLS state when the end
     * of the connection passes its output filter (the flush below), and
     * its input filter is not to be read after that. */
    exchange.input = c->aborted ? PF_READ_ERROR : look_at_input(c);
    if (ap_start_lingering_close(c)
        || apr_os_sock_get(&fd, csd) != APR_SUCCESS || fd < 0) {
        apr_socket_close(csd);
        return;
    }
    action = pf_linger_decide(&exchange);
    if (action == PF_LINGER_CLOSE_NOW
        || (action == PF_LINGER_IF_UNDELIVERED && pf_linger_delivered(fd))) {
        apr_socket_close(csd);
        return;
    }
    short_linger = apr_table_get(c->notes, "short-lingering-close") != NULL;
    rv = pf_linger_hand_off(fd, short_linger);
    if (rv == APR_SUCCESS) {
        forget_descriptor(csd);
        return;
    }
    if (rv != APR_EAGAIN && rv != APR_ENOTIMPL) {
        log_lingering_here(rv);
    }
    pf_linger_here(fd, short_linger, stop);
    apr_socket_close(csd);
}

void pf_close_finish(void)
{
    pf_linger_finish(PF_CLOSE_EXIT_WAIT);
}
