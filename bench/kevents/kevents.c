/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The load suite's kernel-event counter (bench/kevents.py runs it
 * around a measured run):
 *
 *   kevents --tasks /sys/fs/cgroup/cpuacct/NAME/tasks --cpus 0
 *
 * Loads the tracepoint programs of kevents.bpf.c, takes every task of the
 * server's cgroup into the member set (twice, after the fork tracepoint is
 * attached, so that no task forked meanwhile is missed), prints "ready",
 * and counts until SIGINT or SIGTERM; then prints the counters, summed
 * over CPUs, as one JSON object.  Needs root and tracefs
 * (/sys/kernel/tracing). */

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kevents.h"
#include "kevents.skel.h"

static void die(const char *what)
{
    fprintf(stderr, "kevents: %s\n", what);
    exit(2);
}

/* "0-3,8" -> a mask of CPUs below 64. */
static __u64 parse_cpus(const char *text)
{
    __u64 mask = 0;
    const char *p = text;
    char *end;
    long lo, hi;

    while (*p) {
        lo = strtol(p, &end, 10);
        if (end == p || lo < 0 || lo > 63) {
            die("--cpus takes a list of CPUs below 64 (0-3,8)");
        }
        hi = lo;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo || hi > 63) {
                die("--cpus takes a list of CPUs below 64 (0-3,8)");
            }
        }
        for (; lo <= hi; lo++) {
            mask |= 1ULL << lo;
        }
        if (*end == ',') {
            end++;
        }
        else if (*end) {
            die("--cpus takes a list of CPUs below 64 (0-3,8)");
        }
        p = end;
    }
    return mask;
}

/* Every task listed in a cgroup's tasks file joins the member set;
 * returns how many were listed. */
static int add_members(int map_fd, const char *tasks)
{
    FILE *f = fopen(tasks, "r");
    unsigned int pid;
    __u8 one = 1;
    int n = 0;

    if (f == NULL) {
        die("cannot read --tasks");
    }
    while (fscanf(f, "%u", &pid) == 1) {
        bpf_map_update_elem(map_fd, &pid, &one, BPF_ANY);
        n++;
    }
    fclose(f);
    return n;
}

static void print_counts(int map_fd, int members)
{
    struct kevents_counts *per_cpu, sum;
    __u32 zero = 0;
    int ncpus = libbpf_num_possible_cpus(), i;

    if (ncpus <= 0 || (per_cpu = calloc((size_t)ncpus,
                                        sizeof(*per_cpu))) == NULL) {
        die("cannot size the per-CPU counters");
    }
    if (bpf_map_lookup_elem(map_fd, &zero, per_cpu) != 0) {
        die("cannot read the counters");
    }
    /* Every field is a __u64 count, summed over the CPUs. */
    memset(&sum, 0, sizeof(sum));
    for (i = 0; i < ncpus; i++) {
        const __u64 *from = (const __u64 *)&per_cpu[i];
        __u64 *to = (__u64 *)&sum;
        size_t f;

        for (f = 0; f < sizeof(sum) / sizeof(__u64); f++) {
            to[f] += from[f];
        }
    }
    free(per_cpu);
    printf("{\"members_at_start\": %d, \"syscalls\": %llu, "
           "\"accepts\": %llu, \"wakeups\": %llu, "
           "\"switches_voluntary\": %llu, \"switches_involuntary\": %llu, "
           "\"faults_user\": %llu, \"faults_kernel\": %llu, "
           "\"forks\": %llu, \"netrx_softirqs\": %llu, "
           "\"netrx_ns\": %llu, \"netrx_packets_ours\": %llu, "
           "\"netrx_ns_ours\": %llu}\n", members,
           (unsigned long long)sum.syscalls, (unsigned long long)sum.accepts,
           (unsigned long long)sum.wakeups,
           (unsigned long long)sum.switches_voluntary,
           (unsigned long long)sum.switches_involuntary,
           (unsigned long long)sum.faults_user,
           (unsigned long long)sum.faults_kernel,
           (unsigned long long)sum.forks,
           (unsigned long long)sum.netrx_softirqs,
           (unsigned long long)sum.netrx_ns,
           (unsigned long long)sum.netrx_packets_ours,
           (unsigned long long)sum.netrx_ns_ours);
}

int main(int argc, char **argv)
{
    struct kevents *skel;
    const char *tasks = NULL, *cpus = NULL;
    sigset_t stop;
    int i, sig, members, map_fd;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tasks") == 0) {
            tasks = argv[i + 1];
        }
        else if (strcmp(argv[i], "--cpus") == 0) {
            cpus = argv[i + 1];
        }
        else {
            break;
        }
    }
    if (i != argc || tasks == NULL || cpus == NULL) {
        die("usage: kevents --tasks CGROUP/tasks --cpus LIST");
    }
    /* Signals are taken by sigwait() only. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, NULL);

    skel = kevents__open();
    if (skel == NULL) {
        die("cannot open the programs");
    }
    skel->rodata->cpu_mask = parse_cpus(cpus);
#ifdef SYS_accept
    skel->rodata->nr_accept = SYS_accept;
#endif
    skel->rodata->nr_accept4 = SYS_accept4;
    if (kevents__load(skel) != 0) {
        die("the kernel refused the programs (root, and a kernel with BPF "
            "tracepoint programs, are needed)");
    }
    if (kevents__attach(skel) != 0) {
        die("cannot attach to the tracepoints (is tracefs mounted at "
            "/sys/kernel/tracing?)");
    }
    map_fd = bpf_map__fd(skel->maps.members);
    members = add_members(map_fd, tasks);
    add_members(map_fd, tasks);
    printf("ready\n");
    fflush(stdout);
    sigwait(&stop, &sig);
    print_counts(bpf_map__fd(skel->maps.counts), members);
    kevents__destroy(skel);
    return 0;
}
