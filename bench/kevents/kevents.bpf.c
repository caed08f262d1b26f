/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The load suite's kernel-event counter: tracepoint programs that count,
 * in the kernel, what a server's tasks cost per connection (system calls,
 * accepts, wake-ups, voluntary and involuntary switches, page faults) and
 * the time the server's CPUs spend in NET_RX softirqs on the packets that
 * RPS sends them from the rig's veth, where stock prefork's walk over
 * every child's wait-queue entry on the listener is paid.  Only tracepoints:
 * no kprobes, kfuncs or function tracing, which these hosts refuse.
 *
 * Built with clang -target bpf into a bpftool skeleton; kevents.c loads
 * it, fills the member set and reads the counters.  The record layouts
 * below are the tracepoints' own (/sys/kernel/tracing/events/.../format),
 * stable since 4.x for the fields read here. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kevents.h"

/* No GPL-only helper is called: the programs read their tracepoint's
 * record and keep counts in maps. */
char LICENSE[] SEC("license") = "Apache-2.0";

/* Set by the loader before the programs are loaded. */
const volatile __u64 cpu_mask = ~0ULL;       /* the server's CPUs (< 64) */
const volatile __s64 nr_accept = -1;         /* this architecture's */
const volatile __s64 nr_accept4 = -1;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, __u8);
} members SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kevents_counts);
} counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kevents_cpu_state);
} cpu_state SEC(".maps");

/* The records, as the format files give them (8 bytes of common fields
 * first). */
struct sys_enter_rec {
    __u64 common;
    __s64 id;
    __u64 args[6];
};

struct sys_exit_rec {
    __u64 common;
    __s64 id;
    __s64 ret;
};

struct wakeup_rec {
    __u64 common;
    char comm[16];
    __s32 pid;
    __s32 prio;
    __s32 target_cpu;
};

struct switch_rec {
    __u64 common;
    char prev_comm[16];
    __s32 prev_pid;
    __s32 prev_prio;
    __s64 prev_state;
    char next_comm[16];
    __s32 next_pid;
    __s32 next_prio;
};

struct fork_rec {
    __u64 common;
    __u32 parent_comm_loc;
    __s32 parent_pid;
    __u32 child_comm_loc;
    __s32 child_pid;
};

struct softirq_rec {
    __u64 common;
    __u32 vec;
};

/* net:netif_rx and net:netif_receive_skb: only the fixed fields (a
 * program may read nothing past them, nor, without a GPL licence, the
 * packet itself, so the device's name is out of reach). */
struct skb_rec {
    __u64 common;
    __u64 skbaddr;
    __u32 len;
};

#define NET_RX_SOFTIRQ 3
/* sched_switch's prev_state: TASK_REPORT_MAX marks a preemption (the
 * task was runnable); no state bit set means runnable too. */
#define PREEMPTED_BIT 0x100
#define STATE_BITS 0xff

static __always_inline struct kevents_counts *my_counts(void)
{
    __u32 zero = 0;

    return bpf_map_lookup_elem(&counts, &zero);
}

static __always_inline int is_member(__u32 pid)
{
    return bpf_map_lookup_elem(&members, &pid) != 0;
}

static __always_inline int current_is_member(void)
{
    return is_member((__u32)bpf_get_current_pid_tgid());
}

/* The counts to add to when the current task is the server's, else 0. */
static __always_inline struct kevents_counts *member_counts(void)
{
    return current_is_member() ? my_counts() : 0;
}

static __always_inline int on_server_cpu(void)
{
    __u32 cpu = bpf_get_smp_processor_id();

    return cpu < 64 && (cpu_mask >> cpu) & 1;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int on_sys_enter(struct sys_enter_rec *rec)
{
    struct kevents_counts *c = member_counts();

    (void)rec;
    if (c) {
        c->syscalls++;
    }
    return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int on_sys_exit(struct sys_exit_rec *rec)
{
    struct kevents_counts *c;

    if (rec->ret < 0 || (rec->id != nr_accept && rec->id != nr_accept4)) {
        return 0;
    }
    if ((c = member_counts())) {
        c->accepts++;
    }
    return 0;
}

SEC("tracepoint/sched/sched_wakeup")
int on_wakeup(struct wakeup_rec *rec)
{
    struct kevents_counts *c;

    if (!is_member((__u32)rec->pid) || !(c = my_counts())) {
        return 0;
    }
    c->wakeups++;
    return 0;
}

SEC("tracepoint/sched/sched_switch")
int on_switch(struct switch_rec *rec)
{
    struct kevents_counts *c;

    if (!is_member((__u32)rec->prev_pid) || !(c = my_counts())) {
        return 0;
    }
    if ((rec->prev_state & PREEMPTED_BIT) || !(rec->prev_state & STATE_BITS)) {
        c->switches_involuntary++;
    }
    else {
        c->switches_voluntary++;
    }
    return 0;
}

SEC("tracepoint/sched/sched_process_fork")
int on_fork(struct fork_rec *rec)
{
    struct kevents_counts *c;
    __u32 child = (__u32)rec->child_pid;
    __u8 one = 1;

    if (!is_member((__u32)rec->parent_pid)) {
        return 0;
    }
    bpf_map_update_elem(&members, &child, &one, BPF_ANY);
    if ((c = my_counts())) {
        c->forks++;
    }
    return 0;
}

SEC("tracepoint/exceptions/page_fault_user")
int on_fault_user(void *rec)
{
    struct kevents_counts *c = member_counts();

    (void)rec;
    if (c) {
        c->faults_user++;
    }
    return 0;
}

SEC("tracepoint/exceptions/page_fault_kernel")
int on_fault_kernel(void *rec)
{
    struct kevents_counts *c = member_counts();

    (void)rec;
    if (c) {
        c->faults_kernel++;
    }
    return 0;
}

/* The packet being processed on this CPU is done at `now`. */
static __always_inline void close_packet(struct kevents_cpu_state *st,
                                         struct kevents_counts *c, __u64 now)
{
    if (st->packet_start && st->packet_ours) {
        c->netrx_ns_ours += now - st->packet_start;
    }
    st->packet_start = 0;
}

SEC("tracepoint/irq/softirq_entry")
int on_softirq_entry(struct softirq_rec *rec)
{
    struct kevents_cpu_state *st;
    __u32 zero = 0;

    if (rec->vec != NET_RX_SOFTIRQ || !on_server_cpu()) {
        return 0;
    }
    st = bpf_map_lookup_elem(&cpu_state, &zero);
    if (st) {
        st->softirq_start = bpf_ktime_get_ns();
        st->packet_start = 0;
    }
    return 0;
}

SEC("tracepoint/irq/softirq_exit")
int on_softirq_exit(struct softirq_rec *rec)
{
    struct kevents_cpu_state *st;
    struct kevents_counts *c;
    __u32 zero = 0;
    __u64 now;

    if (rec->vec != NET_RX_SOFTIRQ || !on_server_cpu()) {
        return 0;
    }
    st = bpf_map_lookup_elem(&cpu_state, &zero);
    c = my_counts();
    if (!st || !c || !st->softirq_start) {
        return 0;
    }
    now = bpf_ktime_get_ns();
    close_packet(st, c, now);
    c->netrx_softirqs++;
    c->netrx_ns += now - st->softirq_start;
    st->softirq_start = 0;
    return 0;
}

/* Packets handed to the server's CPUs by RPS: queued (netif_rx) on a CPU
 * outside the mask, received on one inside it.  On these hosts only the
 * rig's veth spreads packets to other CPUs (loopback's are received where
 * they are sent), so those are the server's.  A packet received where it
 * was queued leaves the table, so that no stale address is taken for a
 * later packet's. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, __u64);
    __type(value, __u8);
} steered SEC(".maps");

SEC("tracepoint/net/netif_rx")
int on_queued(struct skb_rec *rec)
{
    __u64 skb = rec->skbaddr;
    __u8 one = 1;

    if (!on_server_cpu()) {
        bpf_map_update_elem(&steered, &skb, &one, BPF_ANY);
    }
    return 0;
}

SEC("tracepoint/net/netif_receive_skb")
int on_receive(struct skb_rec *rec)
{
    struct kevents_cpu_state *st;
    struct kevents_counts *c;
    __u64 skb = rec->skbaddr, now;
    __u32 zero = 0;

    if (!on_server_cpu()) {
        bpf_map_delete_elem(&steered, &skb);
        return 0;
    }
    st = bpf_map_lookup_elem(&cpu_state, &zero);
    c = my_counts();
    if (!st || !c || !st->softirq_start) {
        return 0;
    }
    now = bpf_ktime_get_ns();
    close_packet(st, c, now);
    st->packet_start = now;
    st->packet_ours = bpf_map_delete_elem(&steered, &skb) == 0;
    if (st->packet_ours) {
        c->netrx_packets_ours++;
    }
    return 0;
}
