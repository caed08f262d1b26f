/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * prefork_cpus.c, usable CPUs under cgroups: the parsers of cgroup v1 CFS
 * quotas, cpuset lists, cgroup v2's cpu.max, /proc/self/cgroup and
 * /proc/self/mountinfo; the usable count from the online CPUs, the
 * affinity mask and the quota, and the bucket count it gives; and
 * pf_cgroup_cpus() reading fake cgroup v1, v2 and hybrid trees.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/steering/prefork_cpus.c"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "buckets/prefork_plan.h"

/* ------------------------------------------------------------------ */
/* Parsers                                                             */

typedef struct {
    const char *quota, *period;
    int cpus;
} cfs_row_t;

static const cfs_row_t cfs_rows[] = {
    { "-1\n", "100000\n", 0 },
    { "-1", "garbage", 0 },          /* no quota: the period is not read */
    { "100000\n", "100000\n", 1 },
    { "150000", "100000", 2 },       /* 1.5 CPUs count as 2 */
    { "50000", "100000", 1 },
    { "6400000\n", "100000\n", 64 },
    { "200000", "50000", 4 },
    { NULL, "100000", -1 },
    { "100000", NULL, -1 },
    { "", "100000", -1 },
    { "abc", "100000", -1 },
    { "100000x", "100000", -1 },
    { "100000", "", -1 },
    { "100000", "0", -1 },
    { "-5", "100000", -1 },
    { "0", "100000", -1 },
    { "99999999999999999999", "100000", -1 },
};

START_TEST(cfs_quota_parses_quota_period_and_none)
{
    const cfs_row_t *row = &cfs_rows[_i];

    ck_assert_msg(pf_parse_cfs_quota(row->quota, row->period) == row->cpus,
                  "quota '%s' period '%s': want %d, got %d",
                  row->quota ? row->quota : "(null)",
                  row->period ? row->period : "(null)", row->cpus,
                  pf_parse_cfs_quota(row->quota, row->period));
}
END_TEST

typedef struct {
    const char *text;
    int cpus;
} list_row_t;

static const list_row_t list_rows[] = {
    { "0-3", 4 },
    { "0-3,8,10-11\n", 7 },
    { "5", 1 },
    { "0-1\n", 2 },
    { "0-8191", 8192 },
    { "", 0 },
    { "\n", 0 },
    { NULL, -1 },
    { "3-1", -1 },
    { "a", -1 },
    { "0-", -1 },
    { "0,,1", -1 },
    { "0,", -1 },
    { "1 2", -1 },
    { "-1", -1 },
    { "99999999999", -1 },
    { "0-99999", -1 },
};

START_TEST(cpu_list_counts_ranges_and_refuses_garbage)
{
    const list_row_t *row = &list_rows[_i];

    ck_assert_msg(pf_parse_cpu_list(row->text) == row->cpus,
                  "'%s': want %d, got %d", row->text ? row->text : "(null)",
                  row->cpus, pf_parse_cpu_list(row->text));
}
END_TEST

START_TEST(self_path_finds_v1_controllers_and_v2)
{
    const char *text = "12:cpuset:/a\n"
                       "7:cpuacct:/only-acct\n"
                       "4:cpu,cpuacct:/b/c\n"
                       "1:name=systemd:/s\n"
                       "0::/u/v\n";
    char path[64];

    ck_assert_int_eq(pf_cgroup_self_path(text, "cpu", path, sizeof(path)),
                     0);
    ck_assert_str_eq(path, "/b/c");
    ck_assert_int_eq(pf_cgroup_self_path(text, "cpuset", path, sizeof(path)),
                     0);
    ck_assert_str_eq(path, "/a");
    ck_assert_int_eq(pf_cgroup_self_path(text, NULL, path, sizeof(path)), 0);
    ck_assert_str_eq(path, "/u/v");
    ck_assert_int_eq(pf_cgroup_self_path(text, "memory", path, sizeof(path)),
                     -1);
    /* The first line naming cpuacct wins, as the kernel lists each
     * controller once. */
    ck_assert_int_eq(pf_cgroup_self_path(text, "cpuacct", path,
                                         sizeof(path)), 0);
    ck_assert_str_eq(path, "/only-acct");
    ck_assert_int_eq(pf_cgroup_self_path(text, "cpu", path, 4), -1);
}
END_TEST

START_TEST(self_path_tells_v1_and_v2_apart)
{
    char path[64];

    ck_assert_int_eq(pf_cgroup_self_path("0::/user.slice/x.scope\n", "cpu",
                                         path, sizeof(path)), -1);
    ck_assert_int_eq(pf_cgroup_self_path("0::/user.slice/x.scope\n", NULL,
                                         path, sizeof(path)), 0);
    ck_assert_str_eq(path, "/user.slice/x.scope");
    ck_assert_int_eq(pf_cgroup_self_path("4:cpu:/a", NULL, path,
                                         sizeof(path)), -1);
    ck_assert_int_eq(pf_cgroup_self_path("4:cpu:/a", "cpu", path,
                                         sizeof(path)), 0);
    ck_assert_str_eq(path, "/a");
    ck_assert_int_eq(pf_cgroup_self_path("", NULL, path, sizeof(path)), -1);
    ck_assert_int_eq(pf_cgroup_self_path("garbage\n", "cpu", path,
                                         sizeof(path)), -1);
    ck_assert_int_eq(pf_cgroup_self_path(NULL, "cpu", path, sizeof(path)),
                     -1);
}
END_TEST

typedef struct {
    const char *line, *controller;
    int result;
    const char *root, *mnt;
} mountinfo_row_t;

static const mountinfo_row_t mountinfo_rows[] = {
    { "35 24 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:13 - "
      "cgroup cgroup rw,cpu,cpuacct\n", "cpu", 1, "/",
      "/sys/fs/cgroup/cpu,cpuacct" },
    { "35 24 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:13 - "
      "cgroup cgroup rw,cpu,cpuacct\n", "cpuset", 0, NULL, NULL },
    { "35 24 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:13 - "
      "cgroup cgroup rw,cpu,cpuacct\n", NULL, 0, NULL, NULL },
    { "36 24 0:31 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n",
      "cpu", 0, NULL, NULL },
    { "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 master:1 - cgroup2 "
      "cgroup2 rw,nsdelegate,memory_recursiveprot\n", NULL, 1, "/",
      "/sys/fs/cgroup" },
    { "29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "cpu", 0,
      NULL, NULL },
    { "512 500 0:30 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cpu "
      "ro,cpu\n", "cpu", 1, "/docker/abc", "/sys/fs/cgroup/cpu" },
    { "40 24 0:32 / /mnt/my\\040cg rw - cgroup2 none rw\n", NULL, 1, "/",
      "/mnt/my cg" },
    { "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n", NULL, 0, NULL,
      NULL },
    { "garbage\n", NULL, -1, NULL, NULL },
    { "35 24 0:30 / /sys/fs/cgroup/cpu rw cgroup cgroup rw,cpu\n", "cpu", -1,
      NULL, NULL },
    { "35 24 0:30 / /sys/fs/cgroup/cpu rw - cgroup\n", "cpu", -1, NULL,
      NULL },
    { "", NULL, -1, NULL, NULL },
};

START_TEST(mountinfo_line_finds_cgroup_mounts)
{
    const mountinfo_row_t *row = &mountinfo_rows[_i];
    char root[64], mnt[64];
    int result;

    result = pf_parse_mountinfo_cgroup(row->line, row->controller, root,
                                       sizeof(root), mnt, sizeof(mnt));
    ck_assert_msg(result == row->result, "row %d: want %d, got %d", _i,
                  row->result, result);
    if (row->root) {
        ck_assert_str_eq(root, row->root);
        ck_assert_str_eq(mnt, row->mnt);
    }
}
END_TEST

START_TEST(mountinfo_line_refuses_fields_that_do_not_fit)
{
    char root[64], mnt[8];

    ck_assert_int_eq(pf_parse_mountinfo_cgroup(
                         "29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 "
                         "rw\n", NULL, root, sizeof(root), mnt, sizeof(mnt)),
                     -1);
}
END_TEST

START_TEST(cgroup_dir_joins_mount_and_path_below_root)
{
    char dir[64];

    ck_assert_int_eq(pf_cgroup_dir("/sys/fs/cgroup/cpu", "/", "/a/b", dir,
                                   sizeof(dir)), 0);
    ck_assert_str_eq(dir, "/sys/fs/cgroup/cpu/a/b");
    ck_assert_int_eq(pf_cgroup_dir("/sys/fs/cgroup", "/", "/", dir,
                                   sizeof(dir)), 0);
    ck_assert_str_eq(dir, "/sys/fs/cgroup");
    ck_assert_int_eq(pf_cgroup_dir("/c", "/docker/abc", "/docker/abc", dir,
                                   sizeof(dir)), 0);
    ck_assert_str_eq(dir, "/c");
    ck_assert_int_eq(pf_cgroup_dir("/c", "/docker/abc", "/docker/abc/x",
                                   dir, sizeof(dir)), 0);
    ck_assert_str_eq(dir, "/c/x");
    ck_assert_int_eq(pf_cgroup_dir("/c", "/docker/abc", "/docker/abcd", dir,
                                   sizeof(dir)), -1);
    ck_assert_int_eq(pf_cgroup_dir("/c", "/docker", "/", dir, sizeof(dir)),
                     -1);
    ck_assert_int_eq(pf_cgroup_dir("/sys/fs/cgroup/cpu", "/", "/a/b", dir,
                                   8), -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* cpu.max and the usable count                                        */

START_TEST(cpu_max_parses_quota_and_max)
{
    ck_assert_int_eq(pf_parse_cpu_max("max 100000\n"), 0);
    ck_assert_int_eq(pf_parse_cpu_max("200000 100000\n"), 2);
    ck_assert_int_eq(pf_parse_cpu_max("150000 100000"), 2);
    ck_assert_int_eq(pf_parse_cpu_max("50000 100000"), 1);
    ck_assert_int_eq(pf_parse_cpu_max("6400000 100000"), 64);
}
END_TEST

START_TEST(cpu_max_refuses_garbage)
{
    ck_assert_int_eq(pf_parse_cpu_max(NULL), -1);
    ck_assert_int_eq(pf_parse_cpu_max(""), -1);
    ck_assert_int_eq(pf_parse_cpu_max("maximum"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("100000"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("100000 0"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("-5 100000"), -1);
    ck_assert_int_eq(pf_parse_cpu_max("abc 100000"), -1);
}
END_TEST

START_TEST(usable_cpus_honours_affinity_and_quota)
{
    /* A container limited to 2 CPUs on a 64-CPU host gets 2. */
    ck_assert_int_eq(pf_usable_cpus(64, 64, 2), 2);
    ck_assert_int_eq(pf_usable_cpus(64, 8, 0), 8);
    ck_assert_int_eq(pf_usable_cpus(64, 8, 16), 8);
    ck_assert_int_eq(pf_usable_cpus(64, 0, 0), 64);
    ck_assert_int_eq(pf_usable_cpus(0, 0, 0), 1);
    /* A quota larger than the machine does not add CPUs. */
    ck_assert_int_eq(pf_usable_cpus(4, 4, 32), 4);
}
END_TEST

START_TEST(quota_container_gets_quota_buckets)
{
    pf_plan_in_t in;
    pf_bucket_plan_t plan;

    memset(&in, 0, sizeof(in));
    in.usable_cpus = pf_usable_cpus(64, 64, pf_parse_cpu_max("200000 100000"));
    in.ratio = 1;
    in.reuseport_ok = 1;
    in.num_listeners = 1;
    in.max_workers = 256;
    in.min_spare_servers = 5;
    in.steering_usable = 1;
    pf_plan_buckets(&in, &plan, NULL);
    ck_assert_int_eq(plan.num_buckets, 2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fake trees                                                          */

static char top[256];

static void mkdir_parents(const char *path)
{
    char buf[1024];
    char *p;

    snprintf(buf, sizeof(buf), "%s", path);
    for (p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                ck_abort_msg("mkdir %s: %s", buf, strerror(errno));
            }
            *p = '/';
        }
    }
}

/* Writes a file of the fake tree, making its directories. */
static void put(const char *rel, const char *content)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", top, rel);
    mkdir_parents(path);
    f = fopen(path, "w");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    fputs(content, f);
    fclose(f);
}

static void make_top(void)
{
    snprintf(top, sizeof(top), "%s/pfb-cgroup-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_msg(mkdtemp(top) != NULL, "mkdtemp: %s", strerror(errno));
}

static void remove_top(void)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    if (top[0] != '\0' && system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", top);
    }
}

/* A hybrid host (Debian 10/11, RHEL 8 with systemd): v1 controllers, an
 * empty v2 hierarchy beside them. */
static const char hybrid_mountinfo[] =
    "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
    "25 22 0:23 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 "
    "cgroup2 rw,nsdelegate\n"
    "27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup "
    "cgroup rw,xattr,name=systemd\n"
    "31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup "
    "cgroup rw,cpu,cpuacct\n"
    "32 25 0:30 / /sys/fs/cgroup/cpuset rw,nosuid shared:16 - cgroup cgroup "
    "rw,cpuset\n";

START_TEST(v1_quota_of_a_parent_limits_the_group)
{
    int quota, cpuset;

    put("proc/self/mountinfo", hybrid_mountinfo);
    put("proc/self/cgroup", "11:cpuset:/web\n4:cpu,cpuacct:/web/httpd\n"
                            "1:name=systemd:/web/httpd\n0::/web/httpd\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/cpu.cfs_quota_us", "150000\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/httpd/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/httpd/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-63\n");
    put("sys/fs/cgroup/cpuset/web/cpuset.effective_cpus", "0-2,5\n");
    put("sys/fs/cgroup/cpuset/web/cpuset.cpus", "0-7\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 2);
    ck_assert_int_eq(cpuset, 4);
}
END_TEST

START_TEST(v1_tightest_quota_wins)
{
    int quota, cpuset;

    put("proc/self/mountinfo", hybrid_mountinfo);
    put("proc/self/cgroup", "4:cpu,cpuacct:/web/httpd\n0::/\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/cpu.cfs_quota_us", "300000\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/httpd/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/web/httpd/cpu.cfs_period_us", "100000\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 1);
    ck_assert_int_eq(cpuset, 0);
}
END_TEST

/* Docker on cgroup v1 without a cgroup namespace: the container's own
 * group is bind-mounted as the root of each hierarchy. */
START_TEST(v1_container_sees_its_group_as_the_mount)
{
    int quota, cpuset;

    put("proc/self/mountinfo",
        "700 600 0:50 / / rw - overlay overlay rw\n"
        "710 700 0:55 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - "
        "cgroup cgroup ro,cpu,cpuacct\n"
        "711 700 0:56 /docker/abc /sys/fs/cgroup/cpuset ro,nosuid - cgroup "
        "cgroup ro,cpuset\n");
    put("proc/self/cgroup", "5:cpuset:/docker/abc\n"
                            "3:cpu,cpuacct:/docker/abc\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpuset/cpuset.cpus", "1\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 1);
    ck_assert_int_eq(cpuset, 1);
}
END_TEST

START_TEST(v2_quota_of_a_parent_limits_the_group)
{
    int quota, cpuset;

    put("proc/self/mountinfo",
        "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
        "25 22 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 "
        "rw,nsdelegate,memory_recursiveprot\n");
    put("proc/self/cgroup", "0::/system.slice/httpd.service\n");
    put("sys/fs/cgroup/system.slice/cpu.max", "300000 100000\n");
    put("sys/fs/cgroup/system.slice/httpd.service/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/system.slice/httpd.service/cpuset.cpus.effective",
        "0-7\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 3);
    ck_assert_int_eq(cpuset, 8);
}
END_TEST

/* A container with its own cgroup namespace sees "0::/" and its group
 * mounted at /sys/fs/cgroup. */
START_TEST(v2_namespace_root_is_read)
{
    int quota, cpuset;

    put("proc/self/mountinfo",
        "800 700 0:60 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n");
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    put("sys/fs/cgroup/cpuset.cpus.effective", "2-3\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 2);
    ck_assert_int_eq(cpuset, 2);
}
END_TEST

START_TEST(unreadable_or_garbage_limits_are_ignored)
{
    int quota, cpuset;

    put("proc/self/mountinfo",
        "25 22 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    put("proc/self/cgroup", "0::/a/b\n");
    put("sys/fs/cgroup/a/b/cpu.max", "banana\n");
    put("sys/fs/cgroup/a/cpu.max", "100000 100000\n");
    put("sys/fs/cgroup/a/b/cpuset.cpus.effective", "many\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 1);
    ck_assert_int_eq(cpuset, 0);
}
END_TEST

START_TEST(no_limits_read_as_none)
{
    int quota = -7, cpuset = -7;

    put("proc/self/mountinfo", hybrid_mountinfo);
    put("proc/self/cgroup", "11:cpuset:/\n4:cpu,cpuacct:/\n0::/\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 0);
    ck_assert_int_eq(cpuset, 0);
}
END_TEST

START_TEST(missing_proc_files_read_as_none)
{
    int quota = -7, cpuset = -7;

    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 0);
    ck_assert_int_eq(cpuset, 0);
    put("proc/self/cgroup", "0::/\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 0);
    ck_assert_int_eq(cpuset, 0);
}
END_TEST

/* Files above the mount point belong to another mount: never read. */
START_TEST(walk_stops_at_the_mount_point)
{
    int quota, cpuset;

    put("proc/self/mountinfo", hybrid_mountinfo);
    put("proc/self/cgroup", "0::/a\n");
    put("sys/fs/cgroup/cpu.max", "100000 100000\n");
    put("sys/fs/cgroup/unified/a/cpu.max", "max 100000\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 0);
}
END_TEST

/* A group outside what its mount shows is not guessed at. */
START_TEST(group_outside_the_mount_root_is_not_read)
{
    int quota, cpuset;

    put("proc/self/mountinfo",
        "710 700 0:55 /docker/other /sys/fs/cgroup/cpu ro - cgroup cgroup "
        "ro,cpu\n");
    put("proc/self/cgroup", "3:cpu:/docker/mine\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 0);
}
END_TEST

/* mountinfo lines longer than the reader's buffer are skipped whole, and
 * the lines after them still count. */
START_TEST(long_mountinfo_lines_are_skipped)
{
    char *info;
    size_t pad = 20000;
    int quota, cpuset;

    info = malloc(pad + 512);
    ck_assert_ptr_nonnull(info);
    strcpy(info, "90 22 0:70 / /mnt/");
    memset(info + strlen(info), 'x', pad);
    strcpy(info + 18 + pad,
           " rw - tmpfs tmpfs rw\n"
           "25 22 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    put("proc/self/mountinfo", info);
    free(info);
    put("proc/self/cgroup", "0::/a\n");
    put("sys/fs/cgroup/a/cpu.max", "400000 100000\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 4);
}
END_TEST

/* A host with hundreds of mounts: mountinfo is read in pieces, and lines
 * that straddle two reads still count. */
START_TEST(many_mounts_before_the_cgroup_lines)
{
    char *info, *p;
    int i, quota, cpuset;

    info = malloc(400 * 100 + 512);
    ck_assert_ptr_nonnull(info);
    p = info;
    for (i = 0; i < 400; i++) {
        p += sprintf(p, "%d 22 0:%d / /var/lib/containers/overlay/%05d rw - "
                        "overlay overlay rw\n", 100 + i, 100 + i, i);
    }
    strcpy(p, "31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "
              "rw,cpu,cpuacct\n"
              "32 25 0:30 / /sys/fs/cgroup/cpuset rw - cgroup cgroup "
              "rw,cpuset");          /* the last line has no newline */
    put("proc/self/mountinfo", info);
    free(info);
    put("proc/self/cgroup", "11:cpuset:/w\n4:cpu,cpuacct:/w\n");
    put("sys/fs/cgroup/cpu,cpuacct/w/cpu.cfs_quota_us", "250000\n");
    put("sys/fs/cgroup/cpu,cpuacct/w/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpuset/w/cpuset.effective_cpus", "4-9\n");
    pf_cgroup_cpus(top, &quota, &cpuset);
    ck_assert_int_eq(quota, 3);
    ck_assert_int_eq(cpuset, 6);
}
END_TEST

Suite *cpus_suite(void)
{
    Suite *s = suite_create("cpus");
    TCase *parse = tcase_create("parse");
    TCase *usable = tcase_create("Usable CPUs");
    TCase *trees = tcase_create("trees");

    tcase_add_loop_test(parse, cfs_quota_parses_quota_period_and_none, 0,
                        (int)(sizeof(cfs_rows) / sizeof(cfs_rows[0])));
    tcase_add_loop_test(parse, cpu_list_counts_ranges_and_refuses_garbage, 0,
                        (int)(sizeof(list_rows) / sizeof(list_rows[0])));
    tcase_add_test(parse, self_path_finds_v1_controllers_and_v2);
    tcase_add_test(parse, self_path_tells_v1_and_v2_apart);
    tcase_add_loop_test(parse, mountinfo_line_finds_cgroup_mounts, 0,
                        (int)(sizeof(mountinfo_rows)
                              / sizeof(mountinfo_rows[0])));
    tcase_add_test(parse, mountinfo_line_refuses_fields_that_do_not_fit);
    tcase_add_test(parse, cgroup_dir_joins_mount_and_path_below_root);
    tcase_set_timeout(parse, 10);

    tcase_add_test(usable, cpu_max_parses_quota_and_max);
    tcase_add_test(usable, cpu_max_refuses_garbage);
    tcase_add_test(usable, usable_cpus_honours_affinity_and_quota);
    tcase_add_test(usable, quota_container_gets_quota_buckets);
    tcase_set_timeout(usable, 10);

    tcase_add_checked_fixture(trees, make_top, remove_top);
    tcase_add_test(trees, v1_quota_of_a_parent_limits_the_group);
    tcase_add_test(trees, v1_tightest_quota_wins);
    tcase_add_test(trees, v1_container_sees_its_group_as_the_mount);
    tcase_add_test(trees, v2_quota_of_a_parent_limits_the_group);
    tcase_add_test(trees, v2_namespace_root_is_read);
    tcase_add_test(trees, unreadable_or_garbage_limits_are_ignored);
    tcase_add_test(trees, no_limits_read_as_none);
    tcase_add_test(trees, missing_proc_files_read_as_none);
    tcase_add_test(trees, walk_stops_at_the_mount_point);
    tcase_add_test(trees, group_outside_the_mount_root_is_not_read);
    tcase_add_test(trees, long_mountinfo_lines_are_skipped);
    tcase_add_test(trees, many_mounts_before_the_cgroup_lines);
    tcase_set_timeout(trees, 10);

    suite_add_tcase(s, parse);
    suite_add_tcase(s, usable);
    suite_add_tcase(s, trees);
    return s;
}
