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
 * The MPM's directives as pure functions: the strict parse of every
 * integer directive (decimal only, in range, refused with a message that
 * names the directive, echoes the value and gives the range), the parse
 * of ListenBucketSteering against what this build has, and the
 * corrections httpd's prefork makes to ServerLimit, MaxRequestWorkers,
 * StartServers and the spare-server limits (and to a ratio beside
 * ListenBuckets), returned as a list.  Nothing here calls the system,
 * reads httpd's globals or logs, so the unit tests feed it every value:
 * prefork_directives.c registers the directives, calls it, and says the
 * corrections once the log is open.
 */

#include "ap_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "prefork_buckets.h"
#include "prefork_config.h"

/* ------------------------------------------------------------------ */
/* Integers                                                            */

/* A whole decimal integer (optional sign, digits, optional surrounding
 * blanks) in [min, max]: PF_PARSE_OK and *out set, or why it was refused
 * (*out untouched).  strtoll alone takes "0x10", " 12abc" and "" too
 * readily. */
static pf_parse_e pf_parse_bounded_int(const char *arg, long long min,
                                       long long max, int *out)
{
    const char *p;
    char *end;
    long long value;

    if (arg == NULL) {
        return PF_PARSE_EMPTY;
    }
    p = arg;
    while (isspace((unsigned char)*p)) {
        p++;
    }
    if (*p == '\0') {
        return PF_PARSE_EMPTY;
    }
    /* strtoll alone takes "0x10", " 12abc" and "" too readily; accept an
     * optional sign and decimal digits only. */
    if (!isdigit((unsigned char)p[(*p == '-' || *p == '+') ? 1 : 0])) {
        return PF_PARSE_NOT_A_NUMBER;
    }
    errno = 0;
    value = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) {
        end++;
    }
    if (*end != '\0') {
        return PF_PARSE_NOT_A_NUMBER;
    }
    if (errno == ERANGE || value < min || value > max) {
        return PF_PARSE_OUT_OF_RANGE;
    }
    *out = (int)value;
    return PF_PARSE_OK;
}

/* The admin-facing message for a refused value, into buf. */
static char *pf_format_parse_error(char *buf, size_t len,
                                   const char *directive, const char *arg,
                                   long long min, long long max,
                                   pf_parse_e why)
{
    const char *what;

    switch (why) {
    case PF_PARSE_EMPTY:
        what = "is empty";
        break;
    case PF_PARSE_NOT_A_NUMBER:
        what = "is not a whole number";
        break;
    case PF_PARSE_OUT_OF_RANGE:
        what = "is out of range";
        break;
    default:
        what = "is invalid";
        break;
    }
    snprintf(buf, len, "%s: '%s' %s; expected an integer from %lld to %lld",
             directive, arg ? arg : "", what, min, max);
    return buf;
}

const char *pf_config_int(const char *directive, const char *arg,
                          long long min, long long max, int *out, char *buf,
                          size_t len)
{
    pf_parse_e why = pf_parse_bounded_int(arg, min, max, out);

    if (why == PF_PARSE_OK) {
        return NULL;
    }
    return pf_format_parse_error(buf, len, directive, arg, min, max, why);
}

/* ------------------------------------------------------------------ */
/* httpd's corrections                                                 */

static void note_fix(pf_fix_t *fixes, int *n, int kind, int given, int used)
{
    fixes[*n].kind = kind;
    fixes[*n].given = given;
    fixes[*n].used = used;
    ++*n;
}

int pf_correct_pool_config(pf_pool_config_t *cfg, int first_server_limit,
                           pf_fix_t *fixes)
{
    int n = 0;

    if (cfg->server_limit > PF_MAX_SERVER_LIMIT) {
        note_fix(fixes, &n, PF_FIX_SERVER_LIMIT_ABOVE_CAP, cfg->server_limit,
                 PF_MAX_SERVER_LIMIT);
        cfg->server_limit = PF_MAX_SERVER_LIMIT;
    }
    else if (cfg->server_limit < 1) {
        note_fix(fixes, &n, PF_FIX_SERVER_LIMIT_BELOW_ONE, cfg->server_limit,
                 1);
        cfg->server_limit = 1;
    }
    /* The scoreboard is sized once, at the first start. */
    if (first_server_limit > 0 && cfg->server_limit != first_server_limit) {
        note_fix(fixes, &n, PF_FIX_SERVER_LIMIT_RESTART, cfg->server_limit,
                 first_server_limit);
        cfg->server_limit = first_server_limit;
    }
    if (cfg->max_workers > cfg->server_limit) {
        note_fix(fixes, &n, PF_FIX_WORKERS_ABOVE_LIMIT, cfg->max_workers,
                 cfg->server_limit);
        cfg->max_workers = cfg->server_limit;
    }
    else if (cfg->max_workers < 1) {
        note_fix(fixes, &n, PF_FIX_WORKERS_BELOW_ONE, cfg->max_workers, 1);
        cfg->max_workers = 1;
    }
    if (cfg->start_servers < 1) {
        note_fix(fixes, &n, PF_FIX_START_BELOW_ONE, cfg->start_servers, 1);
        cfg->start_servers = 1;
    }
    else if (cfg->start_servers > cfg->max_workers) {
        note_fix(fixes, &n, PF_FIX_START_ABOVE_WORKERS, cfg->start_servers,
                 cfg->max_workers);
        cfg->start_servers = cfg->max_workers;
    }
    if (cfg->min_spare_servers < 1) {
        note_fix(fixes, &n, PF_FIX_MIN_SPARE_BELOW_ONE,
                 cfg->min_spare_servers, 1);
        cfg->min_spare_servers = 1;
    }
    if (cfg->min_spare_servers > PF_MAX_SERVER_LIMIT) {
        cfg->min_spare_servers = PF_MAX_SERVER_LIMIT;
    }
    if (cfg->max_spare_servers > PF_MAX_SERVER_LIMIT + 1) {
        cfg->max_spare_servers = PF_MAX_SERVER_LIMIT + 1;
    }
    if (cfg->max_spare_servers <= cfg->min_spare_servers) {
        note_fix(fixes, &n, PF_FIX_MAX_SPARE_NOT_ABOVE_MIN,
                 cfg->max_spare_servers, cfg->min_spare_servers + 1);
        cfg->max_spare_servers = cfg->min_spare_servers + 1;
    }
    if (cfg->explicit_buckets > 0 && cfg->ratio > 0) {
        note_fix(fixes, &n, PF_FIX_RATIO_WITH_EXPLICIT, cfg->ratio,
                 cfg->explicit_buckets);
        cfg->ratio = 0;
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* ListenBucketSteering                                                */

/* "hash", "cpu", "idle" or "local" (any case) into a pfb_steer_e: 0, or
 * -1. */
static int pf_steer_parse_mode(const char *arg, int *mode)
{
    int m;

    if (arg == NULL) {
        return -1;
    }
    for (m = PFB_STEER_HASH; m <= PFB_STEER_LOCAL; m++) {
        if (strcasecmp(arg, pfb_steer_name(m)) == 0) {
            *mode = m;
            return 0;
        }
    }
    return -1;
}

/* What configure found missing (PF_STEER_BUILD_MISSING, e.g. "bpftool");
 * a build whose steering was switched off by hand says what it needs. */
#ifndef PF_STEER_BUILD_MISSING
#define PF_STEER_BUILD_MISSING "clang with the bpf target, libbpf and bpftool"
#endif

/* Whether this build can run @a mode: NULL if it can, else what the build
 * lacked. */
static const char *pf_steer_mode_missing(int mode)
{
#ifdef HAVE_BPF_STEERING
    (void)mode;
    return NULL;
#else
    return mode == PFB_STEER_HASH ? NULL : PF_STEER_BUILD_MISSING;
#endif
}

const char *pf_config_steering(const char *directive, const char *arg,
                               int *mode, char *buf, size_t len)
{
    const char *missing;

    if (pf_steer_parse_mode(arg, mode) != 0) {
        snprintf(buf, len, "%s: '%s' is not a steering mode; expected hash, "
                 "cpu, idle or local", directive, arg ? arg : "");
        return buf;
    }
    missing = pf_steer_mode_missing(*mode);
    if (missing != NULL) {
        snprintf(buf, len, "%s: '%s' needs the MPM's BPF programs, and this "
                 "build has none: it was made without %s; use hash, or "
                 "rebuild the MPM with them (docs/building.md)", directive,
                 arg, missing);
        return buf;
    }
    return NULL;
}
