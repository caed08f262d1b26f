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
 * What check_config corrected (pf_correct_pool_config()), said in the
 * log: one line with its tag per correction, in httpd's words where
 * httpd's prefork makes the same one, on the console at start-up's first
 * pass and in the error log after that.  A room apart from
 * prefork_config.c only because it calls ap_log_error(), so that the
 * parse and the corrections stay pure; prefork.c calls it from
 * check_config and once core has opened the error log.
 */

#include "httpd.h"
#include "http_log.h"

#include "pfb_log.h"
#include "prefork_config_log.h"

APLOG_USE_MODULE(mpm_prefork);

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

void pf_config_log_fixes(const pf_config_t *conf, int startup, server_rec *s)
{
    int i;

    for (i = 0; i < conf->num_fixes; i++) {
        log_fix(&conf->fixes[i], startup, s);
    }
}
