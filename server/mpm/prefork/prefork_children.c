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

/* The parent's own record of its children; see prefork_children.h. */

#include "apr.h"
#include "apr_thread_proc.h"
#include "apr_time.h"

#include <signal.h>

#include "ap_config.h"
#include "httpd.h"
#include "http_log.h"
#include "http_main.h"
#include "mpm_common.h"
#include "scoreboard.h"

#include "pfb_log.h"
#include "prefork_children.h"

APLOG_USE_MODULE(mpm_prefork);

pf_children_t *pf_children_create(apr_pool_t *p, int num_slots)
{
    pf_children_t *c = apr_pcalloc(p, sizeof(*c));

    c->slot = apr_pcalloc(p, sizeof(pf_child_t) * (apr_size_t)num_slots);
    c->num_slots = num_slots;
    return c;
}

int pf_children_free_slot(const pf_children_t *c, int limit)
{
    int slot;

    for (slot = 0; slot < limit && slot < c->num_slots; slot++) {
        if (c->slot[slot].pid == 0) {
            return slot;
        }
    }
    return -1;
}

int pf_children_find(const pf_children_t *c, pid_t pid)
{
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid == pid) {
            return slot;
        }
    }
    return -1;
}

void pf_children_started(pf_children_t *c, int slot, pid_t pid,
                         ap_generation_t generation, int bucket)
{
    pf_child_t *child = &c->slot[slot];

    child->pid = pid;
    child->generation = generation;
    child->bucket = bucket;
    child->told_to_stop = 0;
    child->started = apr_time_now();
    child->ready = 0;
    if (slot + 1 > c->used) {
        c->used = slot + 1;
    }
}

int pf_children_mark_ready(pf_children_t *c, pid_t pid)
{
    int slot = pid > 0 ? pf_children_find(c, pid) : -1;

    if (slot >= 0) {
        c->slot[slot].ready = 1;
    }
    return slot;
}

int pf_children_tell_to_stop(pf_children_t *c, int slot)
{
    pf_child_t *child = &c->slot[slot];

    if (child->pid == 0 || child->told_to_stop) {
        return 0;
    }
    child->told_to_stop = 1;
    kill(child->pid, AP_SIG_GRACEFUL);
    return 1;
}

void pf_children_forget(pf_children_t *c, int slot)
{
    c->slot[slot].pid = 0;
    c->slot[slot].told_to_stop = 0;
}

int pf_children_live(const pf_children_t *c)
{
    int slot, n = 0;

    for (slot = 0; slot < c->used; slot++) {
        n += c->slot[slot].pid != 0;
    }
    return n;
}

int pf_children_in_use(const pf_children_t *c)
{
    int slot;

    for (slot = c->used - 1; slot >= 0; slot--) {
        if (c->slot[slot].pid != 0) {
            break;
        }
    }
    return slot + 1;
}

void pf_children_count_bucket(const pf_children_t *c, int bucket,
                              ap_generation_t gen, int *current, int *old)
{
    int slot;

    *current = *old = 0;
    for (slot = 0; slot < c->used; slot++) {
        const pf_child_t *child = &c->slot[slot];

        if (child->pid == 0 || child->bucket != bucket) {
            continue;
        }
        if (child->generation != gen) {
            *old += 1;
        }
        else if (!child->told_to_stop) {
            *current += 1;
        }
    }
}

void pf_children_reap(pf_children_t *c, pf_child_gone_fn *gone)
{
    apr_proc_t proc;
    apr_exit_why_e why;
    apr_status_t rv;
    int slot, status;

    for (slot = 0; slot < c->used; slot++) {
        if (c->slot[slot].pid == 0) {
            continue;
        }
        proc.pid = c->slot[slot].pid;
        rv = apr_proc_wait(&proc, &status, &why, APR_NOWAIT);
        if (rv == APR_CHILD_NOTDONE) {
            continue;
        }
        if (rv == APR_CHILD_DONE) {
            ap_process_child_status(&proc, why, status);
        }
        gone(slot);
        pf_children_forget(c, slot);
    }
}

void pf_children_reclaim(pf_children_t *c, int terminate,
                         pf_child_gone_fn *gone)
{
    static const struct {
        int at_sec;
        int sig;
    } steps[] = { { 3, SIGTERM }, { 5, SIGTERM }, { 7, SIGTERM },
                  { 9, SIGKILL }, { 10, 0 } };
    apr_time_t started = apr_time_now(), progress = started;
    apr_interval_time_t wait = apr_time_from_msec(16);
    int slot, step = 0, sig = terminate ? SIGTERM : 0, live, last_live;

    last_live = pf_children_live(c);
    for (;;) {
        for (slot = 0; sig && slot < c->used; slot++) {
            if (c->slot[slot].pid != 0) {
                kill(c->slot[slot].pid, sig);
            }
        }
        sig = 0;
        pf_children_reap(c, gone);
#if APR_HAS_OTHER_CHILD
        apr_proc_other_child_refresh_all(APR_OC_REASON_RESTART);
#endif
        if ((live = pf_children_live(c)) == 0) {
            return;
        }
        if (live < last_live) {
            /* Children are leaving, only slowly (a loaded host, a big
             * pool, modules that take long to unload): the escalation
             * counts from the last exit, up to a minute in all. */
            last_live = live;
            if (apr_time_now() - started < apr_time_from_sec(60)) {
                progress = apr_time_now();
            }
        }
        apr_sleep(wait);
        wait = wait * 4 > apr_time_from_sec(1) ? apr_time_from_sec(1)
                                               : wait * 4;
        if (apr_time_now() - progress
            < apr_time_from_sec(steps[step].at_sec)) {
            continue;
        }
        if (steps[step].sig == 0) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, ap_server_conf,
                         PFBLOGNO(00050) "%d child process(es) did not exit "
                         "after SIGKILL; continuing anyway", live);
            return;
        }
        sig = steps[step++].sig;
        if (sig == SIGKILL) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, ap_server_conf,
                         PFBLOGNO(00170) "%d child process(es) still did "
                         "not exit, sending a SIGKILL", live);
        }
        else {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ap_server_conf,
                         PFBLOGNO(00051) "%d child process(es) still did "
                         "not exit, sending a SIGTERM", live);
        }
    }
}

void pf_children_publish(const pf_children_t *c)
{
    int slot;

    for (slot = 0; slot < c->used; slot++) {
        const pf_child_t *child = &c->slot[slot];
        process_score *ps = &ap_scoreboard_image->parent[slot];

        ps->pid = child->pid;
        ps->generation = child->generation;
        ps->quiescing = child->told_to_stop;
        ps->bucket = 0;
    }
}
