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
 * The CPUs this process may use, from the kernel's own files.  The parsers
 * (cpu.max, cpu.cfs_quota_us, cpuset lists, /proc/self/cgroup, mountinfo)
 * take text, and the cgroup reader takes the directory it reads under, so
 * the unit tests feed them fake cgroup trees; the quota is the tightest
 * on the way from our group up to its mount point, v1 or v2.
 * pf_cpus_probe() gives the bucket set, through pf_steer_prepare(), the
 * count it sizes buckets by; the affinity mask and pinning serve steering
 * (cpu and local) and BucketCPUAffinity.  Where each CPU sits is prefork_topology.c's;
 * nothing here logs.
 */

#include "ap_config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_SCHED_H
#include <sched.h>
#endif

#include "prefork_cpus.h"
#include "prefork_config.h"

/* Highest CPU number a cpuset list may name (Linux allows 8192 CPUs). */
#define PF_MAX_CPU_NUMBER 65535

/* ------------------------------------------------------------------ */
/* Parsers: what the kernel writes in /proc and the cgroup files       */

/*
 * Reads a cgroup v2 cpu.max line ("max 100000" or "200000 100000").
 * @return the quota in whole CPUs rounded up (at least 1), 0 for "max"
 *         (no quota), or -1 if the text is not a cpu.max line
 */
static int pf_parse_cpu_max(const char *text)
{
    long long quota, period;
    char *end;

    if (text == NULL) {
        return -1;
    }
    while (isspace((unsigned char)*text)) {
        text++;
    }
    if (strncmp(text, "max", 3) == 0
        && (text[3] == '\0' || isspace((unsigned char)text[3]))) {
        return 0;
    }
    if (!isdigit((unsigned char)*text)) {
        return -1;
    }
    quota = strtoll(text, &end, 10);
    if (end == text || !isspace((unsigned char)*end)) {
        return -1;
    }
    text = end;
    while (isspace((unsigned char)*text)) {
        text++;
    }
    if (!isdigit((unsigned char)*text)) {
        return -1;
    }
    period = strtoll(text, &end, 10);
    if (period <= 0 || quota <= 0) {
        return -1;
    }
    /* A quota of 150000/100000 lets the group run 1.5 CPUs' worth: count
     * it as 2, since two children can then both make progress. */
    quota = (quota + period - 1) / period;
    if (quota > PF_MAX_SERVER_LIMIT) {
        quota = PF_MAX_SERVER_LIMIT;
    }
    return (int)(quota < 1 ? 1 : quota);
}

/*
 * Reads a cgroup v1 CFS quota: cpu.cfs_quota_us ("-1" or "150000") and
 * cpu.cfs_period_us ("100000").
 * @return the quota in whole CPUs rounded up (at least 1), 0 for -1 (no
 *         quota), or -1 if either text is not what the kernel writes there
 */
static int pf_parse_cfs_quota(const char *quota_text, const char *period_text)
{
    long long quota, period;
    char *end;

    if (quota_text == NULL || period_text == NULL) {
        return -1;
    }
    errno = 0;
    quota = strtoll(quota_text, &end, 10);
    if (end == quota_text || errno == ERANGE
        || (*end != '\0' && !isspace((unsigned char)*end))) {
        return -1;
    }
    if (quota == -1) {
        return 0;
    }
    period = strtoll(period_text, &end, 10);
    if (end == period_text || errno == ERANGE
        || (*end != '\0' && !isspace((unsigned char)*end))) {
        return -1;
    }
    if (quota <= 0 || period <= 0) {
        return -1;
    }
    /* As with cpu.max: 1.5 CPUs' worth lets two children make progress. */
    quota = (quota + period - 1) / period;
    if (quota > PF_MAX_SERVER_LIMIT) {
        quota = PF_MAX_SERVER_LIMIT;
    }
    return (int)quota;
}

/* Reads a CPU number of a cpuset list; NULL if there is none. */
static const char *parse_cpu_number(const char *p, long *cpu)
{
    char *end;

    if (!isdigit((unsigned char)*p)) {
        return NULL;
    }
    errno = 0;
    *cpu = strtol(p, &end, 10);
    if (errno == ERANGE || *cpu > PF_MAX_CPU_NUMBER) {
        return NULL;
    }
    return end;
}

/*
 * Counts the CPUs of a cpuset list, as in cpuset.cpus (v1 and v2),
 * cpuset.effective_cpus (v1) and cpuset.cpus.effective (v2): "0-3,8,10-11".
 * @return the number of CPUs, 0 for an empty list, or -1 if the text is
 *         not a CPU list
 */
static int pf_parse_cpu_list(const char *text)
{
    const char *p = text;
    long first, last, count = 0;

    if (text == NULL) {
        return -1;
    }
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p == '\0' || *p == '\n') {
        return 0;
    }
    for (;;) {
        p = parse_cpu_number(p, &first);
        if (p == NULL) {
            return -1;
        }
        last = first;
        if (*p == '-') {
            p = parse_cpu_number(p + 1, &last);
            if (p == NULL || last < first) {
                return -1;
            }
        }
        count += last - first + 1;
        if (*p != ',') {
            break;
        }
        p++;
    }
    while (isspace((unsigned char)*p)) {
        p++;
    }
    if (*p != '\0') {
        return -1;
    }
    return count > PF_MAX_CPU_NUMBER ? PF_MAX_CPU_NUMBER : (int)count;
}

/* Whether a comma-separated list ("rw,cpu,cpuacct") holds a word. */
static int list_has_word(const char *list, size_t list_len, const char *word)
{
    size_t word_len = strlen(word);
    const char *p = list, *end = list + list_len, *comma;

    while (p < end) {
        comma = memchr(p, ',', (size_t)(end - p));
        if (comma == NULL) {
            comma = end;
        }
        if ((size_t)(comma - p) == word_len
            && strncmp(p, word, word_len) == 0) {
            return 1;
        }
        p = comma + 1;
    }
    return 0;
}

/*
 * Finds this process's group in the text of /proc/self/cgroup
 * ("4:cpu,cpuacct:/a/b" for cgroup v1, "0::/a/b" for cgroup v2).
 * @param controller A cgroup v1 controller ("cpu", "cpuset"), or NULL for
 *        the cgroup v2 hierarchy
 * @param path Receives the group's path, e.g. "/a/b"
 * @return 0 if found, -1 if not (or if it does not fit in @a len)
 */
static int pf_cgroup_self_path(const char *proc_cgroup, const char *controller,
                               char *path, size_t len)
{
    const char *line = proc_cgroup, *colon1, *colon2, *nl;
    size_t path_len;

    if (proc_cgroup == NULL || len == 0) {
        return -1;
    }
    while (*line != '\0') {
        nl = strchr(line, '\n');
        if (nl == NULL) {
            nl = line + strlen(line);
        }
        colon1 = memchr(line, ':', (size_t)(nl - line));
        colon2 = colon1 ? memchr(colon1 + 1, ':', (size_t)(nl - colon1 - 1))
                        : NULL;
        if (colon2 != NULL && colon2[1] == '/'
            && (controller == NULL
                    ? (colon1 - line == 1 && line[0] == '0'
                       && colon2 == colon1 + 1)
                    : list_has_word(colon1 + 1,
                                    (size_t)(colon2 - colon1 - 1),
                                    controller))) {
            path_len = (size_t)(nl - colon2 - 1);
            if (path_len >= len) {
                return -1;
            }
            memcpy(path, colon2 + 1, path_len);
            path[path_len] = '\0';
            return 0;
        }
        line = *nl ? nl + 1 : nl;
    }
    return -1;
}

/* Copies the next space-separated field of a mountinfo line, undoing the
 * kernel's octal escapes ("\040" for a space); NULL if there is none or
 * it does not fit. */
static const char *mountinfo_field(const char *p, char *buf, size_t len)
{
    size_t n = 0;

    while (*p == ' ') {
        p++;
    }
    if (*p == '\0' || *p == '\n') {
        return NULL;
    }
    while (*p != '\0' && *p != ' ' && *p != '\n') {
        if (n + 1 >= len) {
            return NULL;
        }
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0'
            && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
            buf[n++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8
                              + (p[3] - '0'));
            p += 4;
        }
        else {
            buf[n++] = *p++;
        }
    }
    buf[n] = '\0';
    return p;
}

/*
 * Reads one line of /proc/self/mountinfo, looking for a cgroup hierarchy.
 * @param controller A cgroup v1 controller: the line matches a "cgroup"
 *        mount whose options name it; or NULL: a "cgroup2" mount
 * @param root Receives the mount's root within the hierarchy (field 4)
 * @param mnt Receives the mount point (field 5), "\040" escapes undone
 * @return 1 if the line is such a mount, 0 if it is another mount, -1 if
 *         it is not a mountinfo line or a field does not fit
 */
static int pf_parse_mountinfo_cgroup(const char *line, const char *controller,
                                     char *root, size_t root_len, char *mnt,
                                     size_t mnt_len)
{
    char field[256];
    const char *p = line;
    int i;

    if (line == NULL) {
        return -1;
    }
    /* mount id, parent id, major:minor, root, mount point, options */
    for (i = 0; i < 6; i++) {
        if (i == 3) {
            p = mountinfo_field(p, root, root_len);
        }
        else if (i == 4) {
            p = mountinfo_field(p, mnt, mnt_len);
        }
        else {
            p = mountinfo_field(p, field, sizeof(field));
        }
        if (p == NULL) {
            return -1;
        }
    }
    /* optional fields ("shared:13"), up to a lone "-" */
    do {
        p = mountinfo_field(p, field, sizeof(field));
        if (p == NULL) {
            return -1;
        }
    } while (strcmp(field, "-") != 0);
    p = mountinfo_field(p, field, sizeof(field));  /* file system type */
    if (p == NULL) {
        return -1;
    }
    if (controller == NULL) {
        return strcmp(field, "cgroup2") == 0;
    }
    if (strcmp(field, "cgroup") != 0) {
        return 0;
    }
    p = mountinfo_field(p, field, sizeof(field));  /* source */
    if (p == NULL || mountinfo_field(p, field, sizeof(field)) == NULL) {
        return -1;
    }
    return list_has_word(field, strlen(field), controller);
}

/*
 * Where a group's files are: the mount point plus the group's path below
 * the mount's root (a container often sees its own group as the root of
 * the mount: root "/docker/abc", path "/docker/abc").
 * @return 0, or -1 if @a path is not at or below @a root (the group is not
 *         visible under this mount) or the result does not fit
 */
static int pf_cgroup_dir(const char *mnt, const char *root, const char *path,
                         char *dir, size_t len)
{
    size_t root_len = strlen(root);
    const char *below = path;
    int n;

    if (strcmp(root, "/") != 0) {
        if (strncmp(path, root, root_len) != 0
            || (path[root_len] != '\0' && path[root_len] != '/')) {
            return -1;
        }
        below = path + root_len;
    }
    if (strcmp(below, "/") == 0) {
        below = "";
    }
    n = snprintf(dir, len, "%s%s", mnt, below);
    if (n < 0 || (size_t)n >= len) {
        return -1;
    }
    return 0;
}

/*
 * The CPUs that bucket sizing should count: the online CPUs, cut down to
 * the affinity mask and to the cgroup quota when those are known (> 0).
 */
static int pf_usable_cpus(int online, int affinity, int quota)
{
    int cpus = online > 0 ? online : 1;

    if (affinity > 0 && affinity < cpus) {
        cpus = affinity;
    }
    if (quota > 0 && quota < cpus) {
        cpus = quota;
    }
    return cpus;
}

/* ------------------------------------------------------------------ */
/* Reading them                                                        */

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

/*
 * Reads the CPU limits of this process's cgroup, v1 and v2 alike: the
 * tightest quota from its group up to the top of the mount (v2 cpu.max,
 * v1 cpu.cfs_quota_us / cpu.cfs_period_us) and its cpuset's effective
 * CPUs.  Hierarchies are found through /proc/self/cgroup and
 * /proc/self/mountinfo.  @a top is "" on a live system; the tests pass a
 * directory holding a fake proc/self/ and the mount points below it.
 * *quota is set to the quota in whole CPUs rounded up, 0 if none; *cpuset
 * to the cpuset's CPU count, 0 if none is readable.
 */
static void pf_cgroup_cpus(const char *top, int *quota, int *cpuset)
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

void pf_cpus_probe(pf_cpu_info_t *info)
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
    pf_cgroup_cpus("", &info->quota, &cpuset);
    /* A cpuset already narrows the affinity mask on Linux; counting it
     * as well covers a mask that was read before the cpuset changed. */
    info->affinity = smaller_limit(info->affinity, cpuset);
    info->usable = pf_usable_cpus(info->online, info->affinity, info->quota);
}

/* ------------------------------------------------------------------ */
/* The affinity mask (ListenBucketSteering cpu, BucketCPUAffinity)     */

/* Masks wider than cpu_set_t (1024 CPUs) are read with a dynamic set. */
#define PF_MAX_CPUS 8192

int pf_cpus_affinity(int *cpus, int room)
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

apr_status_t pf_cpus_pin(const int *cpus, int num_cpus)
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
