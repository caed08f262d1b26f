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
 * The children's system-call filter, built and installed here: the
 * allow-lists as tables; a classic BPF program emitted from them, with
 * the same rules for the native ABI and its companions (32-bit x86 and
 * x32 beside x86-64, 32-bit ARM beside arm64) and any other ABI killed,
 * since libseccomp's own rules cannot say "only these values" (it names
 * each ABI's system calls); its install in a child still root,
 * no_new_privs off; and the move of a child's bucket sockets to the high
 * numbers its setsockopt() rule names, which the bucket set calls.  libc,
 * libseccomp and APR's socket type only: whether to install the filter,
 * in which processes, and what the log says are prefork_filter.c's.
 */

/* First: in httpd's tree HAVE_LIBSECCOMP comes from ap_config_auto.h. */
#include "ap_config.h"

#include "apr.h"
#include "apr_portable.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/net.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#endif
#ifdef HAVE_LIBSECCOMP
#include <seccomp.h>
#endif

#include "prefork_seccomp.h"

/* ------------------------------------------------------------------ */
/* The allow-lists                                                     */

/* Numbers newer than the C library's headers may know (Linux's own). */
#ifndef SOL_TLS
#define SOL_TLS 282
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif
#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#endif
#ifndef SO_SNDTIMEO_NEW
#define SO_SNDTIMEO_NEW 67
#endif
#ifndef SO_RCVTIMEO_OLD
#define SO_RCVTIMEO_OLD 20
#endif
#ifndef SO_SNDTIMEO_OLD
#define SO_SNDTIMEO_OLD 21
#endif
#ifndef TIOCGPTPEER
#define TIOCGPTPEER 0x5441
#endif
#ifndef FICLONE
#define FICLONE 0x40049409
#endif
#ifndef FICLONERANGE
#define FICLONERANGE 0x4020940d
#endif
/* The 32-bit ABIs' fcntl64() lock commands, which 64-bit headers name
 * with the plain commands' numbers. */
#define COMPAT_F_GETLK64  12
#define COMPAT_F_SETLK64  13
#define COMPAT_F_SETLKW64 14
/* kTLS (linux/tls.h), which OpenSSL 3 turns on where asked. */
#define PF_TLS_TX               1
#define PF_TLS_RX               2
#define PF_TLS_TX_ZEROCOPY_RO   3
#define PF_TLS_RX_EXPECT_NO_PAD 4
/* UDP segmentation offloads (linux/udp.h), which curl's HTTP/3 uses. */
#define PF_UDP_SEGMENT          103
#define PF_UDP_GRO              104

#define FCNTL(cmd) { PF_ALLOW_FCNTL, 0, (unsigned int)(cmd), #cmd }
#define IOCTL(req) { PF_ALLOW_IOCTL, 0, (unsigned int)(req), #req }
#define SOCKOPT(level, opt) \
    { PF_ALLOW_SOCKOPT, (level), (unsigned int)(opt), #level " " #opt }

/* Every fcntl() command, ioctl() request and setsockopt() pair that the
 * children, the modules they load and the programs they run are known to
 * use; docs/trust.md says who uses each (a unit test checks that every
 * row is there).  Everything else gets EPERM, on any descriptor.  Left
 * out on purpose: F_SETOWN, F_SETOWN_EX, F_SETSIG, O_ASYNC in F_SETFL,
 * FIOASYNC, FIOSETOWN and SIOCSPGRP (on a copy of the bucket socket they
 * make every connection signal every sibling), and every option that
 * only changes how a socket is routed, filtered or steered. */
static const pf_allowed_t allowed[] = {
    /* Descriptors and blocking mode (libc, APR, PHP, curl); F_SETFL is
     * allowed only without O_ASYNC (see below). */
    FCNTL(F_DUPFD),
    FCNTL(F_DUPFD_CLOEXEC),
    FCNTL(F_GETFD),
    FCNTL(F_SETFD),
    FCNTL(F_GETFL),
    FCNTL(F_SETFL),
    /* Record locks (APR's fcntl mutexes, sqlite, postdrop, PHP's
     * session files through flock() emulation where needed). */
    FCNTL(F_GETLK),
    FCNTL(F_SETLK),
    FCNTL(F_SETLKW),
#ifdef F_OFD_GETLK
    FCNTL(F_OFD_GETLK),
    FCNTL(F_OFD_SETLK),
    FCNTL(F_OFD_SETLKW),
#endif
    FCNTL(COMPAT_F_GETLK64),
    FCNTL(COMPAT_F_SETLK64),
    FCNTL(COMPAT_F_SETLKW64),

    /* Terminals: isatty() and tcgetattr() (libc, PHP's posix_isatty(),
     * ls, curl, sh), the window size (ls, curl's progress bar), the
     * foreground group (bash), and a pseudo-terminal a program opens for
     * a child of its own (openpty(): PHP's proc_open() "pty"). */
    IOCTL(TCGETS),
    IOCTL(TIOCGWINSZ),
    IOCTL(TIOCGPGRP),
    IOCTL(TIOCGPTN),
    IOCTL(TIOCSPTLCK),
    IOCTL(TIOCGPTPEER),
    IOCTL(TIOCSCTTY),
    /* Bytes waiting (FIONREAD = SIOCINQ: coreutils, PHP streams), bytes
     * unsent (SIOCOUTQ: this MPM's lingering close), the out-of-band mark
     * (APR's apr_socket_atmark()). */
    IOCTL(FIONREAD),
    IOCTL(SIOCOUTQ),
    IOCTL(SIOCATMARK),
    /* The descriptor's own flags: non-blocking (APR's pipes), close on
     * exec. */
    IOCTL(FIONBIO),
    IOCTL(FIOCLEX),
    IOCTL(FIONCLEX),
    /* Reading interfaces: if_nametoindex() and if_indextoname() (libc,
     * for IPv6 scope ids in getaddrinfo()), curl's --interface, APR. */
    IOCTL(SIOCGIFNAME),
    IOCTL(SIOCGIFCONF),
    IOCTL(SIOCGIFFLAGS),
    IOCTL(SIOCGIFADDR),
    IOCTL(SIOCGIFNETMASK),
    IOCTL(SIOCGIFMTU),
    IOCTL(SIOCGIFHWADDR),
    IOCTL(SIOCGIFINDEX),
    /* Copy-on-write copies (cp --reflink=auto, coreutils 9). */
    IOCTL(FICLONE),
    IOCTL(FICLONERANGE),

    /* Sockets of every kind (APR's apr_socket_opt_set(), PHP's streams
     * and socket_set_option(), curl, mysqlnd, OpenSSL, mod_proxy). */
    SOCKOPT(SOL_SOCKET, SO_REUSEADDR),
    SOCKOPT(SOL_SOCKET, SO_REUSEPORT),
    SOCKOPT(SOL_SOCKET, SO_KEEPALIVE),
    SOCKOPT(SOL_SOCKET, SO_BROADCAST),
    SOCKOPT(SOL_SOCKET, SO_LINGER),
    SOCKOPT(SOL_SOCKET, SO_SNDBUF),
    SOCKOPT(SOL_SOCKET, SO_RCVBUF),
    SOCKOPT(SOL_SOCKET, SO_RCVTIMEO_OLD),
    SOCKOPT(SOL_SOCKET, SO_SNDTIMEO_OLD),
    SOCKOPT(SOL_SOCKET, SO_RCVTIMEO_NEW),
    SOCKOPT(SOL_SOCKET, SO_SNDTIMEO_NEW),
    SOCKOPT(SOL_SOCKET, SO_BINDTODEVICE),
    SOCKOPT(SOL_SOCKET, SO_PASSCRED),
    SOCKOPT(IPPROTO_TCP, TCP_NODELAY),
    SOCKOPT(IPPROTO_TCP, TCP_CORK),
    SOCKOPT(IPPROTO_TCP, TCP_KEEPIDLE),
    SOCKOPT(IPPROTO_TCP, TCP_KEEPINTVL),
    SOCKOPT(IPPROTO_TCP, TCP_KEEPCNT),
    SOCKOPT(IPPROTO_TCP, TCP_DEFER_ACCEPT),
    SOCKOPT(IPPROTO_TCP, TCP_USER_TIMEOUT),
    SOCKOPT(IPPROTO_TCP, TCP_FASTOPEN),
    SOCKOPT(IPPROTO_TCP, TCP_FASTOPEN_CONNECT),
    /* kTLS: the TLS upper layer and its keys (OpenSSL 3). */
    SOCKOPT(IPPROTO_TCP, TCP_ULP),
    SOCKOPT(SOL_TLS, PF_TLS_TX),
    SOCKOPT(SOL_TLS, PF_TLS_RX),
    SOCKOPT(SOL_TLS, PF_TLS_TX_ZEROCOPY_RO),
    SOCKOPT(SOL_TLS, PF_TLS_RX_EXPECT_NO_PAD),
    /* IPv4 and IPv6: errors queued for the resolver's UDP socket (libc's
     * res_send()), path MTU discovery and packet info on datagrams
     * (curl's HTTP/3, OpenSSL's DTLS), binding (APR, curl), v6-only
     * listeners (APR, PHP, curl, OpenSSL). */
    SOCKOPT(IPPROTO_IP, IP_RECVERR),
    SOCKOPT(IPPROTO_IP, IP_MTU_DISCOVER),
    SOCKOPT(IPPROTO_IP, IP_PKTINFO),
    SOCKOPT(IPPROTO_IP, IP_FREEBIND),
    SOCKOPT(IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT),
    SOCKOPT(IPPROTO_IPV6, IPV6_V6ONLY),
    SOCKOPT(IPPROTO_IPV6, IPV6_RECVERR),
    SOCKOPT(IPPROTO_IPV6, IPV6_MTU_DISCOVER),
    SOCKOPT(IPPROTO_IPV6, IPV6_RECVPKTINFO),
    /* Multicast (APR's apr_mcast_*(), PHP's socket_set_option()). */
    SOCKOPT(IPPROTO_IP, IP_MULTICAST_IF),
    SOCKOPT(IPPROTO_IP, IP_MULTICAST_TTL),
    SOCKOPT(IPPROTO_IP, IP_MULTICAST_LOOP),
    SOCKOPT(IPPROTO_IP, IP_ADD_MEMBERSHIP),
    SOCKOPT(IPPROTO_IP, IP_DROP_MEMBERSHIP),
    SOCKOPT(IPPROTO_IP, IP_ADD_SOURCE_MEMBERSHIP),
    SOCKOPT(IPPROTO_IP, IP_DROP_SOURCE_MEMBERSHIP),
    SOCKOPT(IPPROTO_IP, MCAST_JOIN_GROUP),
    SOCKOPT(IPPROTO_IP, MCAST_LEAVE_GROUP),
    SOCKOPT(IPPROTO_IP, MCAST_JOIN_SOURCE_GROUP),
    SOCKOPT(IPPROTO_IP, MCAST_LEAVE_SOURCE_GROUP),
    SOCKOPT(IPPROTO_IPV6, IPV6_MULTICAST_IF),
    SOCKOPT(IPPROTO_IPV6, IPV6_MULTICAST_HOPS),
    SOCKOPT(IPPROTO_IPV6, IPV6_MULTICAST_LOOP),
    SOCKOPT(IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP),
    SOCKOPT(IPPROTO_IPV6, IPV6_DROP_MEMBERSHIP),
    SOCKOPT(IPPROTO_IPV6, MCAST_JOIN_GROUP),
    SOCKOPT(IPPROTO_IPV6, MCAST_LEAVE_GROUP),
    SOCKOPT(IPPROTO_IPV6, MCAST_JOIN_SOURCE_GROUP),
    SOCKOPT(IPPROTO_IPV6, MCAST_LEAVE_SOURCE_GROUP),
    /* UDP segmentation offloads (curl's HTTP/3). */
    SOCKOPT(SOL_UDP, PF_UDP_SEGMENT),
    SOCKOPT(SOL_UDP, PF_UDP_GRO),
};

#define NUM_ALLOWED ((int)(sizeof(allowed) / sizeof(allowed[0])))

const pf_allowed_t *pf_seccomp_allowed(int *count)
{
    *count = NUM_ALLOWED;
    return allowed;
}

/* ------------------------------------------------------------------ */
/* The program                                                         */

#if defined(HAVE_LIBSECCOMP) && defined(__linux__)

/* The low 32 bits of argument @a n, which is all the kernel reads of the
 * descriptor, the level, the option, the command and the request: a
 * caller is free to set the others, so no comparison may look at them. */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n) + 4)
#else
#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#endif

#define RET_ALLOW   SECCOMP_RET_ALLOW
#define RET_EPERM   (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define RET_ENOSYS  (SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))
#ifdef SECCOMP_RET_KILL_PROCESS
#define RET_BAD_ARCH SECCOMP_RET_KILL_PROCESS
#else
#define RET_BAD_ARCH SECCOMP_RET_KILL
#endif

/* x32 shares x86-64's audit arch and sets this bit in its numbers. */
#define X32_SYSCALL_BIT 0x40000000u

/* The largest program the kernel takes (BPF_MAXINSNS). */
#define MAX_INSNS 4096
/* Labels a program may jump to: one per ABI and one per call of each. */
#define MAX_LABELS 64

/* A program being written: plain instructions, and unconditional jumps
 * to labels, whose 32-bit offsets are filled in at the end (a conditional
 * jump reaches 255 instructions at most; every one here goes to the next
 * instruction but one). */
typedef struct {
    struct sock_filter *insn;
    int len;
    int room;
    int label_at[MAX_LABELS];
    int num_labels;
    int jump_to[MAX_INSNS];         /* per instruction: a label, or -1 */
    int failed;
} prog_t;

static void emit(prog_t *p, unsigned short code, unsigned int k,
                 unsigned char jt, unsigned char jf)
{
    if (p->len >= p->room || p->len >= MAX_INSNS) {
        p->failed = 1;
        return;
    }
    p->insn[p->len].code = code;
    p->insn[p->len].jt = jt;
    p->insn[p->len].jf = jf;
    p->insn[p->len].k = k;
    p->jump_to[p->len] = -1;
    p->len++;
}

static void ret(prog_t *p, unsigned int action)
{
    emit(p, BPF_RET | BPF_K, action, 0, 0);
}

static void load(prog_t *p, unsigned int offset)
{
    emit(p, BPF_LD | BPF_W | BPF_ABS, offset, 0, 0);
}

/* If A == value: return @a action; else go on. */
static void return_if(prog_t *p, unsigned int value, unsigned int action)
{
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, value, 0, 1);
    ret(p, action);
}

static int new_label(prog_t *p)
{
    if (p->num_labels >= MAX_LABELS) {
        p->failed = 1;
        return 0;
    }
    p->label_at[p->num_labels] = -1;
    return p->num_labels++;
}

static void place(prog_t *p, int label)
{
    p->label_at[label] = p->len;
}

static void jump(prog_t *p, int label)
{
    emit(p, BPF_JMP | BPF_JA, 0, 0, 0);
    if (!p->failed) {
        p->jump_to[p->len - 1] = label;
    }
}

/* If A == value: go to @a label; else go on. */
static void jump_if(prog_t *p, unsigned int value, int label)
{
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, value, 0, 1);
    jump(p, label);
}

static void resolve(prog_t *p)
{
    int i, target;

    for (i = 0; !p->failed && i < p->len; i++) {
        if (p->jump_to[i] < 0) {
            continue;
        }
        target = p->label_at[p->jump_to[i]];
        if (target <= i) {
            p->failed = 1;      /* jumps go forward only */
            return;
        }
        p->insn[i].k = (unsigned int)(target - i - 1);
    }
}

/* One ABI's numbers for the calls the filter looks at (-1: none). */
typedef struct {
    uint32_t arch;              /* libseccomp's token */
    unsigned int audit_arch;    /* what the kernel reports */
    int setsockopt;
    int fcntl;
    int fcntl64;
    int ioctl;
    int socketcall;
    int io_uring[3];
} abi_t;

static int number_of(uint32_t arch, const char *name)
{
    int nr = seccomp_syscall_resolve_name_arch(arch, name);

    if (nr >= 0) {
        return nr;
    }
    /* libseccomp 2.5 names 32-bit x86's setsockopt() by its socketcall()
     * route only; Linux 4.3 gave it a number of its own. */
    if (arch == SCMP_ARCH_X86 && strcmp(name, "setsockopt") == 0) {
        return 366;
    }
    return -1;
}

static void abi_numbers(uint32_t arch, abi_t *abi)
{
    static const char *const io_uring[] = {
        "io_uring_setup", "io_uring_enter", "io_uring_register",
    };
    int i;

    abi->arch = arch;
    abi->audit_arch = arch == SCMP_ARCH_X32 ? AUDIT_ARCH_X86_64 : arch;
    abi->setsockopt = number_of(arch, "setsockopt");
    abi->fcntl = number_of(arch, "fcntl");
    abi->fcntl64 = number_of(arch, "fcntl64");
    abi->ioctl = number_of(arch, "ioctl");
    abi->socketcall = number_of(arch, "socketcall");
    for (i = 0; i < 3; i++) {
        abi->io_uring[i] = number_of(arch, io_uring[i]);
    }
}

/* setsockopt(): nothing on the bucket descriptors, and on any other only
 * the table's pairs, grouped by level. */
static void emit_setsockopt(prog_t *p, const int *bucket_fds, int num_fds)
{
    int levels[16], level_label[16], num_levels = 0, i, j;

    load(p, ARG_LOW(0));
    for (i = 0; i < num_fds; i++) {
        if (bucket_fds[i] >= 0) {
            return_if(p, (unsigned int)bucket_fds[i], RET_EPERM);
        }
    }
    for (i = 0; i < NUM_ALLOWED; i++) {
        if (allowed[i].kind != PF_ALLOW_SOCKOPT) {
            continue;
        }
        for (j = 0; j < num_levels && levels[j] != allowed[i].level; j++) {
        }
        if (j == num_levels && num_levels < 16) {
            levels[num_levels] = allowed[i].level;
            level_label[num_levels++] = new_label(p);
        }
    }
    load(p, ARG_LOW(1));
    for (j = 0; j < num_levels; j++) {
        jump_if(p, (unsigned int)levels[j], level_label[j]);
    }
    ret(p, RET_EPERM);
    for (j = 0; j < num_levels; j++) {
        place(p, level_label[j]);
        load(p, ARG_LOW(2));
        for (i = 0; i < NUM_ALLOWED; i++) {
            if (allowed[i].kind == PF_ALLOW_SOCKOPT
                && allowed[i].level == levels[j]) {
                return_if(p, allowed[i].value, RET_ALLOW);
            }
        }
        ret(p, RET_EPERM);
    }
}

/* fcntl() and fcntl64(): the table's commands; F_SETFL without O_ASYNC,
 * a bit the kernel reads from the argument's low 32 bits. */
static void emit_fcntl(prog_t *p)
{
    int i;

    load(p, ARG_LOW(1));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, F_SETFL, 0, 4);
    load(p, ARG_LOW(2));
    emit(p, BPF_JMP | BPF_JSET | BPF_K, O_ASYNC, 0, 1);
    ret(p, RET_EPERM);
    ret(p, RET_ALLOW);
    for (i = 0; i < NUM_ALLOWED; i++) {
        if (allowed[i].kind == PF_ALLOW_FCNTL && allowed[i].value != F_SETFL) {
            return_if(p, allowed[i].value, RET_ALLOW);
        }
    }
    ret(p, RET_EPERM);
}

static void emit_ioctl(prog_t *p)
{
    int i;

    load(p, ARG_LOW(1));
    for (i = 0; i < NUM_ALLOWED; i++) {
        if (allowed[i].kind == PF_ALLOW_IOCTL) {
            return_if(p, allowed[i].value, RET_ALLOW);
        }
    }
    ret(p, RET_EPERM);
}

/* One ABI: A holds the system-call number on entry. */
static void emit_abi(prog_t *p, const abi_t *abi, const int *bucket_fds,
                     int num_fds)
{
    int l_sockopt = new_label(p), l_fcntl = new_label(p);
    int l_ioctl = new_label(p), i;

    if (abi->setsockopt >= 0) {
        jump_if(p, (unsigned int)abi->setsockopt, l_sockopt);
    }
    if (abi->fcntl >= 0) {
        jump_if(p, (unsigned int)abi->fcntl, l_fcntl);
    }
    if (abi->fcntl64 >= 0) {
        jump_if(p, (unsigned int)abi->fcntl64, l_fcntl);
    }
    if (abi->ioctl >= 0) {
        jump_if(p, (unsigned int)abi->ioctl, l_ioctl);
    }
    for (i = 0; i < 3; i++) {
        if (abi->io_uring[i] >= 0) {
            return_if(p, (unsigned int)abi->io_uring[i], RET_ENOSYS);
        }
    }
    if (abi->socketcall >= 0) {
        /* Its arguments are in memory the filter cannot read: every
         * setsockopt() that way is refused (32-bit programs keep the
         * direct call, under the rules above). */
        emit(p, BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)abi->socketcall,
             0, 3);
        load(p, ARG_LOW(0));
        return_if(p, SYS_SETSOCKOPT, RET_EPERM);
    }
    ret(p, RET_ALLOW);
    place(p, l_sockopt);
    emit_setsockopt(p, bucket_fds, num_fds);
    place(p, l_fcntl);
    emit_fcntl(p);
    place(p, l_ioctl);
    emit_ioctl(p);
}

/* The ABIs a process of the native one can also call the kernel through:
 * each gets the same rules; an ABI not listed is killed, as it could call
 * past them. */
static int abis_of(uint32_t native, abi_t *abi)
{
    int n = 0;

    abi_numbers(native, &abi[n++]);
    if (native == SCMP_ARCH_X86_64) {
        abi_numbers(SCMP_ARCH_X86, &abi[n++]);
        abi_numbers(SCMP_ARCH_X32, &abi[n++]);
    }
    else if (native == SCMP_ARCH_AARCH64) {
        abi_numbers(SCMP_ARCH_ARM, &abi[n++]);
    }
    return n;
}

/*
 * Writes the filter for @a native (libseccomp's token) and its companion
 * ABIs into @a out.
 * @return the number of instructions, or -1 if it would not fit
 */
static int pf_seccomp_build(uint32_t native, const int *bucket_fds,
                            int num_fds, struct sock_filter *out, int room)
{
    abi_t abi[3];
    prog_t *p = calloc(1, sizeof(*p));
    int num_abis = abis_of(native, abi), label[3], x32 = -1, i, len;

    if (p == NULL) {
        return -1;
    }
    p->insn = out;
    p->room = room;
    for (i = 0; i < num_abis; i++) {
        label[i] = new_label(p);
        if (abi[i].arch == SCMP_ARCH_X32) {
            x32 = i;
        }
    }
    load(p, offsetof(struct seccomp_data, arch));
    for (i = 0; i < num_abis; i++) {
        if (i != x32) {
            jump_if(p, abi[i].audit_arch, label[i]);
        }
    }
    ret(p, RET_BAD_ARCH);
    for (i = 0; i < num_abis; i++) {
        place(p, label[i]);
        if (i == x32) {
            /* Reached from x86-64's numbers with the x32 bit set. */
            emit_abi(p, &abi[i], bucket_fds, num_fds);
            continue;
        }
        load(p, offsetof(struct seccomp_data, nr));
        if (abi[i].arch == SCMP_ARCH_X86_64 && x32 >= 0) {
            emit(p, BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1);
            jump(p, label[x32]);
        }
        emit_abi(p, &abi[i], bucket_fds, num_fds);
    }
    resolve(p);
    len = p->failed ? -1 : p->len;
    free(p);
    return len;
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

pf_filter_state_e pf_seccomp_probe(const char **why)
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

apr_status_t pf_seccomp_install(const int *bucket_fds, int num_fds)
{
    struct sock_filter *insn = malloc(sizeof(*insn) * MAX_INSNS);
    struct sock_fprog prog;
    apr_status_t rv = APR_SUCCESS;
    int len;

    if (insn == NULL) {
        return APR_ENOMEM;
    }
    len = pf_seccomp_build(seccomp_arch_native(), bucket_fds, num_fds,
                           insn, MAX_INSNS);
    if (len < 0) {
        rv = E2BIG;
    }
    else {
        prog.len = (unsigned short)len;
        prog.filter = insn;
        /* no_new_privs off: we are root, and setuid and setgid programs
         * the child runs must keep their privileges. */
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
            rv = errno;
        }
    }
    free(insn);
    return rv;
}

#else /* !(HAVE_LIBSECCOMP && __linux__) */

pf_filter_state_e pf_seccomp_probe(const char **why)
{
    *why = "built without libseccomp";
    return PF_FILTER_NOT_BUILT;
}

apr_status_t pf_seccomp_install(const int *bucket_fds, int num_fds)
{
    (void)bucket_fds;
    (void)num_fds;
    return APR_ENOTIMPL;
}

#endif /* HAVE_LIBSECCOMP && __linux__ */

/* ------------------------------------------------------------------ */
/* The child's bucket descriptors                                      */

/* Numbers a program the child runs would have to open a thousand
 * descriptors to reach, and below 1024, where select() still works and
 * the kernel's table of descriptors stays small. */
void pf_seccomp_move_high(apr_socket_t *const *sds, int n, int *fds)
{
    struct rlimit limit;
    apr_sockaddr_t *addr;
    apr_os_sock_t fd, moved;
    apr_socket_t *sd;
    int top = 1024, i;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 1024) {
        top = (int)limit.rlim_cur;
    }
    for (i = 0; i < n; i++) {
        fds[i] = -1;
        sd = sds[i];
        if (sd == NULL || apr_os_sock_get(&fd, sd) != APR_SUCCESS || fd < 0) {
            continue;
        }
        fds[i] = fd;
        if (top - n <= fd
            || (moved = fcntl(fd, F_DUPFD_CLOEXEC, top - n)) < 0) {
            continue;
        }
        close(fd);
        apr_os_sock_put(&sd, &moved, NULL);
        /* apr_os_sock_put() forgets the local address; asking for it once
         * here spares a getsockname() for every connection accepted. */
        apr_socket_addr_get(&addr, APR_LOCAL, sd);
        fds[i] = moved;
    }
}
