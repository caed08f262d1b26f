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
 * The httpd side of the lingering close: httpd's own start of it
 * (ap_start_lingering_close: the pre_close_connection hooks, which let
 * mod_ssl send its close_notify, the flush, the shutdown for writing),
 * then prefork_linger.c's decision in place of ap_lingering_close()'s
 * blocking reads.
 */

#include "apr_portable.h"

#include "httpd.h"
#include "http_connection.h"
#include "http_core.h"
#include "http_log.h"
#include "http_main.h"

#include "pfb_log.h"
#include "prefork_close.h"
#include "prefork_linger.h"

APLOG_USE_MODULE(mpm_prefork);

/* Set once the child logged that it lingers itself (per child). */
static int lingering_here_logged;

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

void pf_close_child_init(void)
{
    apr_status_t rv = pf_linger_start();

    if (rv != APR_SUCCESS && rv != APR_ENOTIMPL) {
        log_lingering_here(rv);
    }
}

/* The descriptor now belongs to the lingering thread: the socket's pool
 * cleanup (when the transaction pool is cleared) must not close it. */
static void forget_descriptor(apr_socket_t *csd)
{
    apr_os_sock_t none = -1;

    apr_os_sock_put(&csd, &none, NULL);
}

void pf_close_connection(conn_rec *c)
{
    apr_socket_t *csd = ap_get_conn_socket(c);
    pf_linger_probe_t probe;
    apr_os_sock_t fd;
    apr_status_t rv;
    int short_linger;

    if (csd == NULL) {
        /* As httpd does for modules that take the socket away. */
        c->aborted = 1;
        return;
    }
    if (ap_start_lingering_close(c)
        || apr_os_sock_get(&fd, csd) != APR_SUCCESS || fd < 0) {
        apr_socket_close(csd);
        return;
    }
    pf_linger_probe(fd, &probe);
    if (pf_linger_decide(&probe) == PF_LINGER_CLOSE_NOW) {
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
    pf_linger_here(fd, short_linger);
    apr_socket_close(csd);
}

void pf_close_finish(void)
{
    pf_linger_finish(PF_CLOSE_EXIT_WAIT);
}
