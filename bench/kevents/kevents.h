/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * What the kernel-event counter's programs (kevents.bpf.c) and its loader
 * (kevents.c) share: the counters, summed over CPUs by the loader. */

#ifndef KEVENTS_H
#define KEVENTS_H

/* One set per CPU (a per-CPU array of one entry).  Only __u64 counts:
 * the loader sums them over the CPUs as an array. */
struct kevents_counts {
    /* Of the server's tasks (the member set: the cgroup's tasks when the
     * loader started, and every task they forked since). */
    __u64 syscalls;
    __u64 accepts;              /* accept() and accept4() that returned one */
    __u64 wakeups;              /* sched_wakeup of a member */
    __u64 switches_voluntary;   /* a member left the CPU to sleep */
    __u64 switches_involuntary; /* a member was preempted */
    __u64 faults_user;          /* page faults in user mode */
    __u64 faults_kernel;        /* in the kernel, on a member's behalf */
    __u64 forks;
    /* On the CPUs of the mask (the server's): NET_RX softirqs, their
     * time, and of that time what the packets RPS steered there from
     * other CPUs took (from each such packet's netif_receive_skb to the
     * next packet's, or to the end of the softirq). */
    __u64 netrx_softirqs;
    __u64 netrx_ns;
    __u64 netrx_packets_ours;
    __u64 netrx_ns_ours;
};

/* Where a CPU is in its current NET_RX softirq. */
struct kevents_cpu_state {
    __u64 softirq_start;        /* 0: not in NET_RX */
    __u64 packet_start;         /* 0: no packet being processed */
    __u32 packet_ours;
    __u32 pad;
};

#endif
