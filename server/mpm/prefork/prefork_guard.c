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

/* The bucket socket a child must hold; see prefork_guard.h. */

/* First: in httpd's tree HAVE_LIBSECCOMP comes from ap_config_auto.h. */
#include "ap_config.h"

#include "apr.h"
#include "apr_network_io.h"
#include "apr_portable.h"
#include "apr_strings.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif
#ifdef __linux__
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/net.h>
#endif
#ifdef HAVE_LIBSECCOMP
#include <seccomp.h>
#endif

#include "prefork_guard.h"
#include "prefork_os.h"

/* ------------------------------------------------------------------ */
/* The child's system-call filter                                      */

#ifdef HAVE_LIBSECCOMP

/* SOL_SOCKET options no process but a reuseport server's owner has a use
 * for, refused on every descriptor: a rule by descriptor number would not
 * hold (dup(), F_DUPFD and SCM_RIGHTS renumber a socket, and after exec()
 * the number means whatever the program opened). */
static const int refused_options[] = {
#ifdef SO_ATTACH_REUSEPORT_CBPF
    SO_ATTACH_REUSEPORT_CBPF,
#endif
#ifdef SO_ATTACH_REUSEPORT_EBPF
    SO_ATTACH_REUSEPORT_EBPF,
#endif
#ifdef SO_DETACH_REUSEPORT_BPF
    SO_DETACH_REUSEPORT_BPF,
#endif
#ifdef SO_LOCK_FILTER
    /* A locked socket filter cannot be removed, even by root. */
    SO_LOCK_FILTER,
#endif
};

/* io_uring runs socket operations (setsockopt among them, since Linux
 * 6.7) where no seccomp filter sees them.  ENOSYS is what programs that
 * can do without it expect from a kernel without it. */
static const char *const refused_syscalls[] = {
    "io_uring_setup", "io_uring_enter", "io_uring_register",
};

/* The ABIs a process of the native one can also call the kernel through:
 * without them in the filter their calls would meet the filter's
 * bad-architecture action and kill the caller (a 32-bit program run from
 * PHP); with them, they get the same rules. */
static void add_compat_arches(scmp_filter_ctx ctx)
{
    uint32_t native = seccomp_arch_native();

    if (native == SCMP_ARCH_X86_64) {
        seccomp_arch_add(ctx, SCMP_ARCH_X86);
        seccomp_arch_add(ctx, SCMP_ARCH_X32);
    }
    else if (native == SCMP_ARCH_AARCH64) {
        seccomp_arch_add(ctx, SCMP_ARCH_ARM);
    }
}

static int add_rules(scmp_filter_ctx ctx)
{
    apr_size_t i;
    int rc = 0, nr;

    for (i = 0; rc == 0 && i < sizeof(refused_options)
                                   / sizeof(refused_options[0]); i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setsockopt),
                              2, SCMP_A1(SCMP_CMP_EQ, SOL_SOCKET),
                              SCMP_A2(SCMP_CMP_EQ,
                                      (scmp_datum_t)refused_options[i]));
    }
#ifdef SYS_SETSOCKOPT
    /* Through socketcall() (32-bit x86) the level and the option are in
     * memory the filter cannot read: every setsockopt() that way is
     * refused.  Where the ABI has no socketcall, libseccomp adds
     * nothing. */
    if (rc == 0) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketcall),
                              1, SCMP_A0(SCMP_CMP_EQ, SYS_SETSOCKOPT));
    }
#endif
    for (i = 0; rc == 0 && i < sizeof(refused_syscalls)
                                   / sizeof(refused_syscalls[0]); i++) {
        nr = seccomp_syscall_resolve_name(refused_syscalls[i]);
        if (nr != __NR_SCMP_ERROR) {
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
        }
    }
    return rc;
}

/* CAP_SYS_ADMIN in our effective set: what installing a filter without
 * no_new_privs takes. */
static int have_sys_admin(void)
{
    struct __user_cap_header_struct header;
    struct __user_cap_data_struct data[2];

    memset(&header, 0, sizeof(header));
    memset(data, 0, sizeof(data));
    header.version = _LINUX_CAPABILITY_VERSION_3;
    if (syscall(SYS_capget, &header, data) != 0) {
        return 0;
    }
    return (data[CAP_SYS_ADMIN / 32].effective
            & (1u << (CAP_SYS_ADMIN % 32))) != 0;
}

pf_filter_state_e pf_guard_filter_probe(const char **why)
{
    if (seccomp_api_get() < 1) {
        *why = "the kernel has no seccomp filters";
        return PF_FILTER_NO_KERNEL;
    }
    if (!have_sys_admin()) {
        *why = "the server does not run with CAP_SYS_ADMIN, and children "
               "could only install the filter with no_new_privs, which "
               "setuid helpers do not survive";
        return PF_FILTER_NO_PRIVILEGE;
    }
    *why = NULL;
    return PF_FILTER_READY;
}

apr_status_t pf_guard_install_filter(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc;

    if (ctx == NULL) {
        return APR_ENOMEM;
    }
    /* no_new_privs off: we are root, and setuid and setgid programs the
     * child runs must keep their privileges. */
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (rc == 0) {
        add_compat_arches(ctx);
        rc = add_rules(ctx);
    }
    if (rc == 0) {
        rc = seccomp_load(ctx);
    }
    seccomp_release(ctx);
    return rc == 0 ? APR_SUCCESS : -rc;
}

#else /* !HAVE_LIBSECCOMP */

pf_filter_state_e pf_guard_filter_probe(const char **why)
{
    *why = "built without libseccomp";
    return PF_FILTER_NOT_BUILT;
}

apr_status_t pf_guard_install_filter(void)
{
    return APR_ENOTIMPL;
}

#endif /* HAVE_LIBSECCOMP */

/* ------------------------------------------------------------------ */
/* The parent's checks                                                 */

static int int_option(int fd, int level, int name)
{
    int value = 0;
    socklen_t len = sizeof(value);

    return getsockopt(fd, level, name, &value, &len) == 0 ? value : -1;
}

static int set_int_option(int fd, int level, int name, int value)
{
    return setsockopt(fd, level, name, &value, sizeof(value));
}

int pf_guard_backlog(apr_socket_t *sd)
{
    int queued, limit;

    return pf_os_listener_queue(sd, &queued, &limit) == APR_SUCCESS ? limit
                                                                     : 0;
}

int pf_guard_local_port(apr_socket_t *sd)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    apr_os_sock_t fd;

    if (apr_os_sock_get(&fd, sd) != APR_SUCCESS
        || getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        return -1;
    }
    switch (addr.ss_family) {
    case AF_INET:
        return ntohs(((struct sockaddr_in *)&addr)->sin_port);
#if APR_HAVE_IPV6
    case AF_INET6:
        return ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
#endif
    default:
        return -1;
    }
}

/* SO_REUSEPORT goes first: listen() again joins the group only with it.
 * Only ever set: a socket kept from a generation that ran buckets may
 * carry it where the present one does not, and nothing a child does with
 * it there matters (only root can join a root's group). */
static int check_reuseport(int fd, const pf_guard_want_t *want)
{
#ifdef SO_REUSEPORT
    if (want->reuseport && int_option(fd, SOL_SOCKET, SO_REUSEPORT) == 0
        && set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1) == 0) {
        return PF_GUARD_REUSEPORT;
    }
#else
    (void)fd;
    (void)want;
#endif
    return 0;
}

/* A socket that stopped listening (shutdown()) listens again, on its own
 * address, in its reuseport group.  One that cannot (a child connected
 * it elsewhere) is the caller's to replace. */
static int check_listening(apr_socket_t *sd, int fd,
                           const pf_guard_want_t *want, int *failed)
{
    int backlog;

    if (int_option(fd, SOL_SOCKET, SO_ACCEPTCONN) == 0) {
        if (want->backlog > 0 && listen(fd, want->backlog) == 0) {
            return PF_GUARD_NOT_LISTENING;
        }
        *failed |= PF_GUARD_NOT_LISTENING;
        return 0;
    }
    /* listen() on a listening socket only sets its backlog. */
    backlog = pf_guard_backlog(sd);
    if (want->backlog > 0 && backlog > 0 && backlog != want->backlog
        && listen(fd, want->backlog) == 0) {
        return PF_GUARD_BACKLOG;
    }
    return 0;
}

/* One open file description for the parent and every child of the
 * bucket: O_NONBLOCK set by one child (fcntl, FIONBIO) makes the others'
 * blocking accept() return at once. */
static int check_blocking(int fd, const pf_guard_want_t *want)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags >= 0 && ((flags & O_NONBLOCK) != 0) != (want->nonblock != 0)
        && fcntl(fd, F_SETFL, want->nonblock ? flags | O_NONBLOCK
                                             : flags & ~O_NONBLOCK) == 0) {
        return PF_GUARD_NONBLOCK;
    }
    return 0;
}

/* A receive timeout on a listening socket times a blocking accept() out
 * the same way. */
static int check_timeout(int fd)
{
    struct timeval tv, none;
    socklen_t len = sizeof(tv);

    memset(&tv, 0, sizeof(tv));
    memset(&none, 0, sizeof(none));
    if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0
        && (tv.tv_sec != 0 || tv.tv_usec != 0)
        && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none))
               == 0) {
        return PF_GUARD_RCVTIMEO;
    }
    return 0;
}

/* A socket filter drops the bucket's handshakes.  The parent attaches one
 * of its own only at a graceful stop; any other was a child's.  Detaching
 * where there is none says ENOENT. */
static int check_filter(int fd, const pf_guard_want_t *want, int *failed)
{
#ifdef SO_DETACH_FILTER
    int zero = 0;

    if (want->keep_filter) {
        return 0;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &zero, sizeof(zero))
        == 0) {
        return PF_GUARD_FILTER;
    }
    if (errno == EPERM) {
        *failed |= PF_GUARD_FILTER;
    }
#else
    (void)fd;
    (void)want;
    (void)failed;
#endif
    return 0;
}

int pf_guard_check_socket(apr_socket_t *sd, const pf_guard_want_t *want,
                          int *failed)
{
    apr_os_sock_t fd;
    int fixed = 0;

    *failed = 0;
    if (sd == NULL || apr_os_sock_get(&fd, sd) != APR_SUCCESS || fd < 0) {
        return 0;
    }
    fixed |= check_reuseport(fd, want);
    fixed |= check_listening(sd, fd, want, failed);
    fixed |= check_blocking(fd, want);
    fixed |= check_timeout(fd);
    fixed |= check_filter(fd, want, failed);
    return fixed;
}

char *pf_guard_describe(int bits, char *buf, apr_size_t len)
{
    static const struct {
        int bit;
        const char *words;
    } names[] = {
        { PF_GUARD_NOT_LISTENING, "stopped listening" },
        { PF_GUARD_REPLACED, "could not listen again and was replaced" },
        { PF_GUARD_BACKLOG, "backlog changed" },
        { PF_GUARD_NONBLOCK, "O_NONBLOCK changed" },
        { PF_GUARD_RCVTIMEO, "receive timeout set" },
        { PF_GUARD_FILTER, "socket filter attached" },
        { PF_GUARD_REUSEPORT, "SO_REUSEPORT turned off" },
    };
    apr_size_t i, used = 0;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (bits & names[i].bit) {
            apr_snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         names[i].words);
            used += strlen(buf + used);
        }
    }
    return buf;
}
