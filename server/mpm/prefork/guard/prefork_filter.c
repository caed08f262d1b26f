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
 * The httpd side of the children's system-call filter: ChildSyscallFilter
 * and the log.  The parent finds out once per server whether children can
 * install the filter and says so (PFB00063, or PFB00064 with the reason),
 * or, with the filter off, says at each start what is open; each child
 * installs it after fork, while still root; and so does a process a
 * module forks from the parent to run as User (mod_cgid's daemon), which
 * would otherwise run outside it with everything it starts.  The filter
 * itself, its rules and its install are prefork_seccomp.c's, which calls
 * nothing of httpd; prefork.c calls this file from its hooks and the
 * child's start.
 */

#include "apr.h"

#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "httpd.h"
#include "http_log.h"

#include "pfb_log.h"
#include "prefork_seccomp.h"
#include "prefork_sockguard.h"

APLOG_USE_MODULE(mpm_prefork);

void pf_filter_probe(pf_filter_retained_t *r, int wanted, server_rec *s)
{
    const char *why = NULL;

    if (r->probed || !wanted) {
        return;
    }
    r->probed = 1;
    r->state = pf_seccomp_probe(&why);
    if (r->state == PF_FILTER_READY) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     PFBLOGNO(00063) "system-call filter on: children, and "
                     "every program they run, may use only the fcntl() "
                     "commands, ioctl() requests and socket options that "
                     "modules need (no O_ASYNC, owner or signal on a file, "
                     "no steering program, socket filter or TCP key), "
                     "none at all on the bucket sockets they hold, and get "
                     "ENOSYS from io_uring; the parent checks each bucket "
                     "socket every cycle");
    }
    else {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     PFBLOGNO(00064) "system-call filter unavailable (%s): "
                     "a child, or a program it runs, can make its bucket "
                     "socket signal every sibling, attach, replace or "
                     "detach the steering program of its Listen's "
                     "reuseport group, or set any option on it; the parent "
                     "still checks and puts right each bucket socket every "
                     "cycle", why);
    }
}

void pf_filter_log_off(int wanted, int startup, server_rec *s)
{
    if (wanted) {
        return;
    }
    ap_log_error(APLOG_MARK, APLOG_WARNING | (startup ? APLOG_STARTUP : 0), 0,
                 startup ? NULL : s,
                 PFBLOGNO(00174) "%sChildSyscallFilter off: children, and "
                 "every program they run, may use any fcntl() command, "
                 "ioctl() request and socket option on the bucket sockets, "
                 "attach, replace or detach their Listen's steering "
                 "program, lock socket filters and set TCP MD5 or AO keys; "
                 "still guarding the bucket sockets: the parent's check of "
                 "each one every maintenance cycle and whenever a child "
                 "exits, which puts back their listening state, backlog, "
                 "file flags, owner and signal, and every option the "
                 "kernel lets it read, replaces a socket it cannot put "
                 "right or that was put right twice, and attaches its "
                 "steering programs again (keys it cannot see)",
                 startup ? "WARNING: " : "");
}

void pf_filter_child(const pf_filter_retained_t *r, int wanted,
                     const int *bucket_fds, int num_fds, int bucket,
                     server_rec *s)
{
    apr_status_t rv;

    if (!wanted || !r->probed || r->state != PF_FILTER_READY) {
        return;
    }
    rv = pf_seccomp_install(bucket_fds, num_fds);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     PFBLOGNO(00065) "couldn't install the system-call "
                     "filter in the child of bucket %d; it runs without "
                     "it", bucket);
    }
}

void pf_filter_helper(int wanted, server_rec *s)
{
    const char *why;
    apr_status_t rv;

    if (!wanted || pf_seccomp_probe(&why) != PF_FILTER_READY) {
        return;
    }
    rv = pf_seccomp_install(NULL, 0);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     PFBLOGNO(00175) "couldn't install the system-call "
                     "filter in pid %" APR_PID_T_FMT ", which a module "
                     "forked from the parent to run as User (mod_cgid's "
                     "daemon); it and the programs it starts run without "
                     "it", getpid());
    }
}
