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

/* In an httpd source tree configure's results (HAVE_SO_REUSEPORT...) are
 * in ap_config_auto.h; the standalone build passes them with -D. */
#include "ap_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#ifdef HAVE_SCHED_H
#include <sched.h>
#endif
#ifdef __linux__
#include <linux/filter.h>
#endif

#include "apr_portable.h"
#include "apr_strings.h"

#include "prefork_os.h"
#include "prefork_policy.h"

int pf_os_probe_reuseport(apr_status_t *status, const char **why)
{
#if defined(HAVE_SO_REUSEPORT) && defined(__linux__)
    int fds[2] = { -1, -1 };
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int one = 1;
    int i, ok = 0;

    *status = APR_SUCCESS;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (i = 0; i < 2; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0) {
            *why = "socket()";
            goto done;
        }
        if (setsockopt(fds[i], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
            *why = "setsockopt(SO_REUSEPORT)";
            goto done;
        }
        /* The second socket binds to the port the kernel gave the first:
         * only a kernel that groups reuseport sockets lets it. */
        if (bind(fds[i], (struct sockaddr *)&sin, sizeof(sin))) {
            *why = i ? "bind() of a second socket to the same port" : "bind()";
            goto done;
        }
        if (i == 0 && getsockname(fds[0], (struct sockaddr *)&sin, &len)) {
            *why = "getsockname()";
            goto done;
        }
    }
    ok = 1;
done:
    if (!ok) {
        *status = errno;
    }
    for (i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return ok;
#else
    *status = APR_ENOTIMPL;
    *why = "SO_REUSEPORT with load balancing (Linux 3.9 or later)";
    return 0;
#endif
}

/* setsockopt() on an APR socket, with errno as the status. */
static apr_status_t set_socket_option(apr_socket_t *sd, int level, int name,
                                      const void *value, socklen_t len)
{
    apr_os_sock_t fd;

    apr_os_sock_get(&fd, sd);
    if (setsockopt(fd, level, name, value, len)) {
        return errno;
    }
    return APR_SUCCESS;
}

apr_status_t pf_os_set_reuseport(apr_socket_t *sd)
{
#ifdef HAVE_SO_REUSEPORT
    int one = 1;

    return set_socket_option(sd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
#else
    (void)sd;
    return APR_ENOTIMPL;
#endif
}

/* Copies an int socket option when the original has it; quietly skips
 * options the original's family does not carry. */
static apr_status_t copy_int_option(int from, int to, int level, int name)
{
    int value = 0;
    socklen_t len = sizeof(value);

    if (getsockopt(from, level, name, &value, &len)) {
        return APR_SUCCESS;
    }
    if (setsockopt(to, level, name, &value, sizeof(value))) {
        return errno;
    }
    return APR_SUCCESS;
}

apr_status_t pf_os_duplicate_listener(apr_socket_t **out, apr_socket_t *orig,
                                      apr_sockaddr_t *bind_addr, int backlog,
                                      const pf_sockopts_t *options,
                                      apr_pool_t *p)
{
    apr_os_sock_t from, fd;
    apr_os_sock_info_t info;
    apr_status_t rv = APR_SUCCESS;
    apr_int32_t nodelay = 0;
    pf_sockopts_t now;
    pf_sockopt_set_t failed;
    int one = 1;

    apr_os_sock_get(&from, orig);
    if (options == NULL) {
        pf_sockopts_record(from, &now);
        options = &now;
    }
    fd = socket(bind_addr->family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) {
        return errno;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))) {
        rv = errno;
    }
#ifdef HAVE_SO_REUSEPORT
    if (rv == APR_SUCCESS
        && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
        rv = errno;
    }
#else
    rv = APR_ENOTIMPL;
#endif
    /* Every option connections inherit; a buffer size the kernel chose is
     * left to the kernel, since setting one turns off its autotuning for
     * every connection accepted from the socket. */
    if (rv == APR_SUCCESS) {
        pf_sockopts_repair(fd, options, &failed);
        if (failed) {
            rv = APR_EINVAL;    /* an option the kernel would not take */
        }
    }
#ifdef IP_FREEBIND
    if (rv == APR_SUCCESS) {
        rv = copy_int_option(from, fd, IPPROTO_IP, IP_FREEBIND);
    }
#endif
#if APR_HAVE_IPV6
    if (rv == APR_SUCCESS && bind_addr->family == AF_INET6) {
        rv = copy_int_option(from, fd, IPPROTO_IPV6, IPV6_V6ONLY);
    }
#endif
    if (rv == APR_SUCCESS
        && bind(fd, (struct sockaddr *)&bind_addr->sa, bind_addr->salen)) {
        rv = errno;
    }
    if (rv == APR_SUCCESS && listen(fd, backlog)) {
        rv = errno;
    }
    if (rv != APR_SUCCESS) {
        close(fd);
        return rv;
    }

    memset(&info, 0, sizeof(info));
    info.os_sock = &fd;
    info.local = (struct sockaddr *)&bind_addr->sa;
    info.remote = NULL;
    info.family = bind_addr->family;
    info.type = SOCK_STREAM;
    info.protocol = IPPROTO_TCP;
    *out = NULL;
    rv = apr_os_sock_make(out, &info, p);
    if (rv != APR_SUCCESS) {
        close(fd);
        return rv;
    }
    /* The kernel option was copied above, and connections inherit it.
     * APR records its own options per socket, and marks a connection as
     * having TCP_NODELAY only when its listener is marked: unmarked, core
     * would set it again with a setsockopt() for every connection. */
    if (apr_socket_opt_get(orig, APR_TCP_NODELAY, &nodelay) == APR_SUCCESS
        && nodelay) {
        rv = apr_socket_opt_set(*out, APR_TCP_NODELAY, 1);
    }
    return rv;
}

apr_status_t pf_os_listener_queue(apr_socket_t *sd, int *queued, int *limit)
{
#if defined(HAVE_TCP_INFO) && defined(__linux__)
    apr_os_sock_t fd;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    apr_os_sock_get(&fd, sd);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len)) {
        return errno;
    }
    /* On a listening socket Linux reports the accept queue's current
     * length in tcpi_unacked and its limit in tcpi_sacked. */
    *queued = (int)ti.tcpi_unacked;
    *limit = (int)ti.tcpi_sacked;
    return APR_SUCCESS;
#else
    (void)sd;
    *queued = 0;
    *limit = 0;
    return APR_ENOTIMPL;
#endif
}

apr_status_t pf_os_refuse_new_connections(apr_socket_t *sd)
{
#if defined(__linux__) && defined(SO_ATTACH_FILTER)
    /* One instruction: "return 0", keep no byte of any packet. */
    static struct sock_filter drop_all[] = {
        BPF_STMT(BPF_RET | BPF_K, 0)
    };
    struct sock_fprog prog;

    prog.len = 1;
    prog.filter = drop_all;
    return set_socket_option(sd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
                             sizeof(prog));
#else
    (void)sd;
    return APR_ENOTIMPL;
#endif
}

static int read_small_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

/* Longest cgroup path or mount point followed; longer ones are skipped
 * (Kubernetes paths run to about 200 bytes). */
#define PF_CGROUP_PATH_MAX 2048

/* Reads a control file of a group's directory. */
static int read_cgroup_file(const char *dir, const char *name, char *buf,
                            size_t len)
{
    char path[PF_CGROUP_PATH_MAX + 64];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return read_small_file(path, buf, len);
}

/* One cgroup hierarchy: a v1 controller's, or v2's (controller NULL). */
typedef struct {
    const char *controller;
    char group[PF_CGROUP_PATH_MAX]; /* our group's path in it, "" if none */
    char dir[PF_CGROUP_PATH_MAX];   /* where its files are, "" if unknown */
    size_t mount_len;               /* the mount point's part of dir: the
                                       groups above it are not visible */
} cgroup_hierarchy_t;

/* Matches one line of mountinfo against the hierarchies not found yet. */
static void match_cgroup_mount(const char *top, const char *line,
                               cgroup_hierarchy_t *hier, int count)
{
    char root[PF_CGROUP_PATH_MAX], mnt[PF_CGROUP_PATH_MAX];
    char below[PF_CGROUP_PATH_MAX];
    int i, n;

    for (i = 0; i < count; i++) {
        if (hier[i].group[0] == '\0' || hier[i].dir[0] != '\0'
            || pf_parse_mountinfo_cgroup(line, hier[i].controller, root,
                                         sizeof(root), mnt,
                                         sizeof(mnt)) != 1
            || pf_cgroup_dir(mnt, root, hier[i].group, below,
                             sizeof(below))) {
            continue;
        }
        n = snprintf(hier[i].dir, sizeof(hier[i].dir), "%s%s", top, below);
        if (n > 0 && (size_t)n < sizeof(hier[i].dir)) {
            hier[i].mount_len = strlen(top) + strlen(mnt);
        }
        else {
            hier[i].dir[0] = '\0';
        }
    }
}

/* Finds where each hierarchy's files for our group are, reading
 * /proc/self/mountinfo under `top` ("" on a live system) once, line by
 * line, with no allocation: the parent does this at every restart. */
static void find_cgroup_dirs(const char *top, cgroup_hierarchy_t *hier,
                             int count)
{
    char buf[8192], path[PF_CGROUP_PATH_MAX + 64];
    char *start, *nl;
    size_t have = 0;
    ssize_t got;
    int fd, skipping = 0;

    snprintf(path, sizeof(path), "%s/proc/self/mountinfo", top);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    for (;;) {
        got = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (got <= 0) {
            if (have > 0 && !skipping) {
                buf[have] = '\0';
                match_cgroup_mount(top, buf, hier, count);
            }
            break;
        }
        have += (size_t)got;
        buf[have] = '\0';
        start = buf;
        while ((nl = strchr(start, '\n')) != NULL) {
            *nl = '\0';
            if (!skipping) {
                match_cgroup_mount(top, start, hier, count);
            }
            skipping = 0;
            start = nl + 1;
        }
        have -= (size_t)(start - buf);
        memmove(buf, start, have);
        if (have == sizeof(buf) - 1) {
            /* No mount line is this long; skip it to its end. */
            skipping = 1;
            have = 0;
        }
    }
    close(fd);
}

/* Cuts the last component off a group's directory; 0 once it would go
 * above the mount point. */
static int parent_group(char *dir, size_t mount_len)
{
    char *slash = strrchr(dir, '/');

    if (strlen(dir) <= mount_len || slash == NULL
        || (size_t)(slash - dir) < mount_len) {
        return 0;
    }
    *slash = '\0';
    return 1;
}

/* The tightest CPU quota on the way from a group up to its mount point:
 * a parent's quota limits every group below it.  v2 keeps it in cpu.max,
 * v1 in cpu.cfs_quota_us and cpu.cfs_period_us. */
static int tightest_quota(char *dir, size_t mount_len, int v1)
{
    char text[128], period[128];
    int tightest = 0, cpus;

    do {
        cpus = 0;
        if (!v1 && read_cgroup_file(dir, "cpu.max", text, sizeof(text)) == 0) {
            cpus = pf_parse_cpu_max(text);
        }
        else if (v1
                 && read_cgroup_file(dir, "cpu.cfs_quota_us", text,
                                     sizeof(text)) == 0
                 && read_cgroup_file(dir, "cpu.cfs_period_us", period,
                                     sizeof(period)) == 0) {
            cpus = pf_parse_cfs_quota(text, period);
        }
        if (cpus > 0 && (tightest == 0 || cpus < tightest)) {
            tightest = cpus;
        }
    } while (parent_group(dir, mount_len));
    return tightest;
}

/* The CPUs of a group's cpuset: the effective list, which the kernel has
 * already cut down to the parents' lists. */
static int cpuset_cpus(const char *dir, int v1)
{
    char text[4096];
    int cpus = -1;

    if (v1) {
        if (read_cgroup_file(dir, "cpuset.effective_cpus", text,
                             sizeof(text)) == 0
            || read_cgroup_file(dir, "cpuset.cpus", text, sizeof(text)) == 0) {
            cpus = pf_parse_cpu_list(text);
        }
    }
    else if (read_cgroup_file(dir, "cpuset.cpus.effective", text,
                              sizeof(text)) == 0) {
        cpus = pf_parse_cpu_list(text);
    }
    return cpus > 0 ? cpus : 0;
}

static int smaller_limit(int a, int b)
{
    if (a <= 0) {
        return b;
    }
    return (b > 0 && b < a) ? b : a;
}

void pf_os_cgroup_cpus(const char *top, int *quota, int *cpuset)
{
    char self[8192], path[PF_CGROUP_PATH_MAX + 64];
    /* A host can mount both: v1 controllers beside an empty v2 hierarchy
     * ("hybrid"), or the other way round; each limit counts where its
     * files are. */
    cgroup_hierarchy_t hier[3];
    cgroup_hierarchy_t *v2 = &hier[0], *v1_cpu = &hier[1];
    cgroup_hierarchy_t *v1_cpuset = &hier[2];
    int i;

    *quota = 0;
    *cpuset = 0;
    snprintf(path, sizeof(path), "%s/proc/self/cgroup", top);
    if (read_small_file(path, self, sizeof(self))) {
        return;
    }
    memset(hier, 0, sizeof(hier));
    v2->controller = NULL;
    v1_cpu->controller = "cpu";
    v1_cpuset->controller = "cpuset";
    for (i = 0; i < 3; i++) {
        if (pf_cgroup_self_path(self, hier[i].controller, hier[i].group,
                                sizeof(hier[i].group))) {
            hier[i].group[0] = '\0';
        }
    }
    find_cgroup_dirs(top, hier, 3);
    if (v2->dir[0] != '\0') {
        *cpuset = smaller_limit(*cpuset, cpuset_cpus(v2->dir, 0));
        *quota = smaller_limit(*quota,
                               tightest_quota(v2->dir, v2->mount_len, 0));
    }
    if (v1_cpu->dir[0] != '\0') {
        *quota = smaller_limit(*quota, tightest_quota(v1_cpu->dir,
                                                      v1_cpu->mount_len, 1));
    }
    if (v1_cpuset->dir[0] != '\0') {
        *cpuset = smaller_limit(*cpuset, cpuset_cpus(v1_cpuset->dir, 1));
    }
}

void pf_os_probe_cpus(pf_cpu_info_t *info)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cpuset;

    info->online = online > 0 ? (int)online : 1;
    info->affinity = 0;
#if defined(HAVE_SCHED_GETAFFINITY) && defined(CPU_COUNT)
    {
        cpu_set_t set;

        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof(set), &set) == 0) {
            info->affinity = CPU_COUNT(&set);
        }
    }
#endif
    pf_os_cgroup_cpus("", &info->quota, &cpuset);
    /* A cpuset already narrows the affinity mask on Linux; counting it
     * as well covers a mask that was read before the cpuset changed. */
    info->affinity = smaller_limit(info->affinity, cpuset);
}

/* ------------------------------------------------------------------ */
/* ListenBucketSteering                                                */

/* Masks wider than cpu_set_t (1024 CPUs) are read with a dynamic set. */
#define PF_MAX_CPUS 8192

int pf_os_affinity_cpus(int *cpus, int room)
{
#if defined(HAVE_SCHED_GETAFFINITY) && defined(CPU_ALLOC)
    cpu_set_t *set = CPU_ALLOC(PF_MAX_CPUS);
    size_t size = CPU_ALLOC_SIZE(PF_MAX_CPUS);
    int cpu, n = 0;

    if (set == NULL) {
        return 0;
    }
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
        for (cpu = 0; cpu < PF_MAX_CPUS && n < room; cpu++) {
            if (CPU_ISSET_S(cpu, size, set)) {
                cpus[n++] = cpu;
            }
        }
    }
    CPU_FREE(set);
    return n;
#else
    (void)cpus;
    (void)room;
    return 0;
#endif
}

apr_status_t pf_os_pin_to_cpus(const int *cpus, int num_cpus)
{
#if defined(HAVE_SCHED_SETAFFINITY) && defined(CPU_ALLOC)
    cpu_set_t *set = CPU_ALLOC(PF_MAX_CPUS);
    size_t size = CPU_ALLOC_SIZE(PF_MAX_CPUS);
    apr_status_t rv = APR_SUCCESS;
    int i;

    if (set == NULL) {
        return APR_ENOMEM;
    }
    CPU_ZERO_S(size, set);
    for (i = 0; i < num_cpus; i++) {
        if (cpus[i] >= 0 && cpus[i] < PF_MAX_CPUS) {
            CPU_SET_S(cpus[i], size, set);
        }
    }
    if (sched_setaffinity(0, size, set)) {
        rv = errno;
    }
    CPU_FREE(set);
    return rv;
#else
    (void)cpus;
    (void)num_cpus;
    return APR_ENOTIMPL;
#endif
}
