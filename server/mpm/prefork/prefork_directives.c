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
 * The MPM's directives as httpd reads them: the command table (core's
 * Listen handlers and this MPM's own), the handlers, and the one
 * pf_config_t they fill, reset at each pre_config and corrected once at
 * check_config, after which prefork.c reads it through a const pointer;
 * and what check_config corrected, said in the log: one line with its tag
 * per correction, in httpd's words where httpd's prefork makes the same
 * one, on the console at start-up's first pass and in the error log after
 * that.  The parse of a value and the corrections themselves are pure, in
 * prefork_config.c; this room is their httpd glue.
 */

#include "apr_strings.h"

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "ap_listen.h"
#include "mpm_common.h"

#include "mpm_default.h"

#include "pfb_log.h"
#include "prefork_buckets.h"
#include "prefork_directives.h"

APLOG_USE_MODULE(mpm_prefork);

/* One integer directive: where it goes and what it accepts. */
typedef struct {
    int *value;
    long long min;
    long long max;
    const char *replaced_by;    /* a deprecated name's successor */
} int_directive_t;

/* The directives of this generation, and what check_config corrected in
 * them, logged once the error log is open (pf_directives_log_fixes()):
 * their one home. */
static pf_config_t conf;

/* Where each integer directive's value goes and what it accepts; the
 * command table points each directive at its entry. */
enum {
    D_START_SERVERS,
    D_MIN_SPARE,
    D_MAX_SPARE,
    D_MAX_WORKERS,
    D_MAX_CLIENTS,
    D_SERVER_LIMIT,
    D_MAX_CONNECTIONS,
    D_MAX_REQUESTS,
    D_SHUTDOWN_TIMEOUT,
    D_BUCKETS_RATIO,
    D_BUCKETS_EXPLICIT,
    D_COUNT
};
/* The pool's directives take any whole number httpd's prefork accepts and
 * corrects (pf_correct_pool_config()); what atoi() would have made of junk
 * ("8x", "-1") is refused. */
static int_directive_t int_directives[D_COUNT] = {
    [D_START_SERVERS] = { &conf.pool.start_servers, 0, 2147483647LL,
                          NULL },
    [D_MIN_SPARE] = { &conf.pool.min_spare_servers, 0, 2147483647LL,
                      NULL },
    [D_MAX_SPARE] = { &conf.pool.max_spare_servers, 0, 2147483647LL,
                      NULL },
    [D_MAX_WORKERS] = { &conf.pool.max_workers, 0, 2147483647LL, NULL },
    [D_MAX_CLIENTS] = { &conf.pool.max_workers, 0, 2147483647LL,
                        "MaxRequestWorkers" },
    [D_SERVER_LIMIT] = { &conf.pool.server_limit, 0, 2147483647LL,
                         NULL },
    [D_MAX_CONNECTIONS] = { &ap_max_requests_per_child, 0,
                           2147483647LL, NULL },
    [D_MAX_REQUESTS] = { &ap_max_requests_per_child, 0,
                        2147483647LL, "MaxConnectionsPerChild" },
    [D_SHUTDOWN_TIMEOUT] = { &ap_graceful_shutdown_timeout, 0,
                            2147483LL, NULL },
    [D_BUCKETS_RATIO] = { &conf.pool.ratio, 0, 2147483647LL, NULL },
    [D_BUCKETS_EXPLICIT] = { &conf.pool.explicit_buckets, 0,
                            PF_MAX_SERVER_LIMIT, NULL },
};

/* One correction, in httpd's words where httpd makes it.  At start-up's
 * first pass the line goes to the console (the error log is not open);
 * later, once core has opened the error log. */
static void log_fix(const pf_fix_t *fix, int startup, server_rec *s)
{
    int startup_flag = startup ? APLOG_STARTUP : 0;
    const server_rec *to = startup ? NULL : s;
    const char *warning = startup ? "WARNING: " : "";

    switch (fix->kind) {
    case PF_FIX_SERVER_LIMIT_ABOVE_CAP:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00080) "%sServerLimit of %d exceeds the "
                     "compile-time limit of %d servers, decreasing to %d",
                     warning, fix->given, PF_MAX_SERVER_LIMIT, fix->used);
        break;
    case PF_FIX_SERVER_LIMIT_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00081) "%sServerLimit of %d not allowed, "
                     "increasing to %d", warning, fix->given, fix->used);
        break;
    case PF_FIX_SERVER_LIMIT_RESTART:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00082) "%schanging ServerLimit to %d from the "
                     "original value of %d is not allowed during a restart; "
                     "ServerLimit stays %d until the server is stopped and "
                     "started", warning, fix->given, fix->used, fix->used);
        break;
    case PF_FIX_WORKERS_ABOVE_LIMIT:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00083) "%sMaxRequestWorkers of %d exceeds "
                     "ServerLimit value of %d servers, decreasing "
                     "MaxRequestWorkers to %d; to increase it, increase "
                     "ServerLimit", warning, fix->given, fix->used,
                     fix->used);
        break;
    case PF_FIX_WORKERS_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00084) "%sMaxRequestWorkers of %d not "
                     "allowed, increasing to %d", warning, fix->given,
                     fix->used);
        break;
    case PF_FIX_START_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00085) "%sStartServers of %d not allowed, "
                     "increasing to %d", warning, fix->given, fix->used);
        break;
    case PF_FIX_START_ABOVE_WORKERS:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00086) "%sStartServers of %d exceeds "
                     "MaxRequestWorkers of %d, decreasing StartServers to %d",
                     warning, fix->given, fix->used, fix->used);
        break;
    case PF_FIX_MIN_SPARE_BELOW_ONE:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00087) "%sMinSpareServers of %d not allowed, "
                     "increasing to %d to avoid almost certain server "
                     "failure", warning, fix->given, fix->used);
        break;
    case PF_FIX_MAX_SPARE_NOT_ABOVE_MIN:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00088) "%sMaxSpareServers of %d is not above "
                     "MinSpareServers of %d, increasing MaxSpareServers to "
                     "%d", warning, fix->given, fix->used - 1, fix->used);
        break;
    case PF_FIX_RATIO_WITH_EXPLICIT:
        ap_log_error(APLOG_MARK, APLOG_WARNING | startup_flag, 0, to,
                     PFBLOGNO(00089) "%sboth ListenBuckets (%d) and "
                     "ListenCoresBucketsRatio (%d) are set; ListenBuckets "
                     "wins and the ratio is ignored", warning, fix->used,
                     fix->given);
        break;
    default:
        break;
    }
}

void pf_directives_log_fixes(int startup, server_rec *s)
{
    int i;

    for (i = 0; i < conf.num_fixes; i++) {
        log_fix(&conf.fixes[i], startup, s);
    }
}

const pf_config_t *pf_directives_reset(void)
{
    conf.pool.start_servers = DEFAULT_START_DAEMON;
    conf.pool.min_spare_servers = DEFAULT_MIN_FREE_DAEMON;
    conf.pool.max_spare_servers = DEFAULT_MAX_FREE_DAEMON;
    conf.pool.server_limit = DEFAULT_SERVER_LIMIT;
    conf.pool.max_workers = DEFAULT_SERVER_LIMIT;
    conf.pool.ratio = 0;
    conf.pool.explicit_buckets = PF_BUCKETS_UNSET;
    conf.steering = PFB_STEER_HASH;
    conf.cpu_affinity = 0;
    conf.syscall_filter = 1;
    conf.num_fixes = 0;
    return &conf;
}

void pf_directives_correct(int first_server_limit)
{
    conf.num_fixes = pf_correct_pool_config(&conf.pool, first_server_limit,
                                            conf.fixes);
}

/* Every integer directive: a strict parse and its range, from the entry
 * its command_rec points at.  The message names the directive, echoes the
 * value and gives the range. */
static const char *set_int_directive(cmd_parms *cmd,
                                     void *AP_MAYBE_UNUSED(dir_config),
                                     const char *arg)
{
    const int_directive_t *d = cmd->info;
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    char msg[512];

    if (err != NULL) {
        return err;
    }
    if (d->replaced_by) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, NULL,
                     PFBLOGNO(00033) "%s is deprecated, use %s instead.",
                     cmd->cmd->name, d->replaced_by);
    }
    err = pf_config_int(cmd->cmd->name, arg, d->min, d->max, d->value, msg,
                        sizeof(msg));
    return err != NULL ? apr_pstrdup(cmd->pool, err) : NULL;
}

static const char *set_bucket_steering(cmd_parms *cmd,
                                       void *AP_MAYBE_UNUSED(dir_config),
                                       const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    char msg[1024];

    if (err != NULL) {
        return err;
    }
    err = pf_config_steering(cmd->cmd->name, arg, &conf.steering, msg,
                             sizeof(msg));
    return err != NULL ? apr_pstrdup(cmd->pool, err) : NULL;
}

/* BucketCPUAffinity and ChildSyscallFilter: On or Off, into the int
 * their command_rec points at. */
static const char *set_switch(cmd_parms *cmd, void *AP_MAYBE_UNUSED(dir_config),
                              const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    int *value = cmd->info;

    if (err != NULL) {
        return err;
    }
    if (!strcasecmp(arg, "on")) {
        *value = 1;
    }
    else if (!strcasecmp(arg, "off")) {
        *value = 0;
    }
    else {
        return apr_psprintf(cmd->pool, "%s: '%s' is not a switch; expected "
                            "On or Off", cmd->cmd->name, arg);
    }
    return NULL;
}

/* clang-format off */
/* Built from core's individual Listen handlers instead of LISTEN_COMMANDS,
 * because that macro carries core's own ListenCoresBucketsRatio and the
 * first match in a table wins. */
const command_rec pf_directives_cmds[] = {
AP_INIT_TAKE_ARGV("Listen", ap_set_listener, NULL, RSRC_CONF,
    "A port number or a numeric IP address and a port number, and an "
    "optional protocol"),
AP_INIT_TAKE1("ListenBacklog", ap_set_listenbacklog, NULL, RSRC_CONF,
    "Maximum length of the queue of pending connections, as used by "
    "listen(2)"),
AP_INIT_TAKE1("SendBufferSize", ap_set_send_buffer_size, NULL, RSRC_CONF,
    "Send buffer size in bytes"),
AP_INIT_TAKE1("ReceiveBufferSize", ap_set_receive_buffer_size, NULL,
    RSRC_CONF, "Receive buffer size in bytes"),
#ifdef HAVE_AP_SET_LISTENTCPDEFERACCEPT
/* Core's handler exists only in releases that have the directive (found by
 * configure); without it the directive is unknown there, as with any MPM. */
AP_INIT_TAKE1("ListenTCPDeferAccept", ap_set_listentcpdeferaccept, NULL,
    RSRC_CONF, "Value set for the socket option TCP_DEFER_ACCEPT if it is "
    "set"),
#endif
AP_INIT_TAKE1("ListenCoresBucketsRatio", set_int_directive,
    &int_directives[D_BUCKETS_RATIO], RSRC_CONF,
    "an integer from 0 to 2147483647: usable CPUs per listener bucket, 0 = "
    "buckets off"),
AP_INIT_TAKE1("ListenBuckets", set_int_directive,
    &int_directives[D_BUCKETS_EXPLICIT],
    RSRC_CONF, "an integer from 0 to 200000: listener buckets per Listen; "
    "0 = every Listen in one bucket, unless ListenCoresBucketsRatio is set"),
AP_INIT_TAKE1("ListenBucketSteering", set_bucket_steering, NULL, RSRC_CONF,
    "hash, cpu, idle or local: how a new connection picks its bucket "
    "among a Listen's sockets (default hash)"),
AP_INIT_TAKE1("BucketCPUAffinity", set_switch, &conf.cpu_affinity,
    RSRC_CONF, "On or Off: pin each bucket's children to the CPUs that feed "
    "it under cpu or local steering (default Off)"),
AP_INIT_TAKE1("ChildSyscallFilter", set_switch, &conf.syscall_filter,
    RSRC_CONF, "On or Off: children install the system-call filter that "
    "guards the bucket sockets (default On)"),
AP_INIT_TAKE1("StartServers", set_int_directive,
    &int_directives[D_START_SERVERS],
    RSRC_CONF, "an integer from 0 to 2147483647: number of child processes "
    "created at start-up (0 is corrected to 1)"),
AP_INIT_TAKE1("MinSpareServers", set_int_directive,
    &int_directives[D_MIN_SPARE],
    RSRC_CONF, "an integer from 0 to 2147483647: minimum number of idle "
    "children, split over the buckets under hash or cpu steering (0 is "
    "corrected to 1)"),
AP_INIT_TAKE1("MaxSpareServers", set_int_directive,
    &int_directives[D_MAX_SPARE],
    RSRC_CONF, "an integer from 0 to 2147483647: maximum number of idle "
    "children, split over the buckets under hash or cpu steering (at least "
    "MinSpareServers + 1)"),
AP_INIT_TAKE1("MaxClients", set_int_directive,
    &int_directives[D_MAX_CLIENTS],
    RSRC_CONF, "an integer from 0 to 2147483647 (deprecated name of "
    "MaxRequestWorkers)"),
AP_INIT_TAKE1("MaxRequestWorkers", set_int_directive,
    &int_directives[D_MAX_WORKERS],
    RSRC_CONF, "an integer from 0 to 2147483647: maximum number of children "
    "alive at the same time (1 to ServerLimit)"),
AP_INIT_TAKE1("ServerLimit", set_int_directive,
    &int_directives[D_SERVER_LIMIT],
    RSRC_CONF, "an integer from 0 to 2147483647: maximum value of "
    "MaxRequestWorkers for this run of Apache (1 to 200000)"),
AP_INIT_TAKE1("MaxConnectionsPerChild", set_int_directive,
    &int_directives[D_MAX_CONNECTIONS], RSRC_CONF, "an integer from 0 to "
    "2147483647: connections a child serves before it exits, 0 = no limit"),
AP_INIT_TAKE1("MaxRequestsPerChild", set_int_directive,
    &int_directives[D_MAX_REQUESTS], RSRC_CONF,
    "an integer from 0 to 2147483647 "
    "(deprecated name of MaxConnectionsPerChild)"),
AP_INIT_TAKE1("GracefulShutdownTimeout", set_int_directive,
    &int_directives[D_SHUTDOWN_TIMEOUT], RSRC_CONF,
    "an integer from 0 to 2147483: "
    "seconds to wait for children to finish their connections at a "
    "graceful stop, 0 = no limit"),
{ NULL }
};

