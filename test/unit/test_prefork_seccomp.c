/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * The children's system-call filter (prefork_seccomp.c): the program run
 * on made-up calls by an interpreter of the instructions it uses, for
 * every ABI a process on this machine can call the kernel through, with
 * the high bits of every argument set too; every row of its allow-lists
 * named in docs/trust.md; and, as root, the filter installed in a process
 * of our own, refusing exactly what it should on every route the kernel
 * offers a 64-bit process, and nothing else.  Before it installs the
 * filter, a child moves its bucket sockets to descriptor numbers just under
 * 1024, where a program it runs will not open a socket of its own.
 */

/* The file under test, compiled here rather than on its own so that the
 * tests reach its static functions. */
#include "../../server/mpm/prefork/guard/prefork_seccomp.c"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/net.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>

#ifdef HAVE_LIBSECCOMP
#include <seccomp.h>
#endif

#include "apr_general.h"
#include "apr_portable.h"

#include "unit.h"

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef F_SETSIG
#define F_SETSIG 10
#endif
#ifndef F_SETOWN_EX
#define F_SETOWN_EX 15
#endif

#define ERRNO_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define ERRNO_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)

/* ------------------------------------------------------------------ */
/* The program, run here                                               */

#ifdef HAVE_LIBSECCOMP

/* Runs a classic BPF program on @a data as the kernel would, for the
 * instructions the filter uses; anything else fails the test. */
static unsigned int run(const struct sock_filter *insn, int len,
                        const struct seccomp_data *data)
{
    unsigned int a = 0, k;
    int pc = 0, steps = 0;

    while (pc >= 0 && pc < len && steps++ < 10000) {
        const struct sock_filter *i = &insn[pc];

        k = i->k;
        switch (i->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            ck_assert_uint_le(k + 4, sizeof(*data));
            memcpy(&a, (const char *)data + k, 4);
            pc++;
            break;
        case BPF_JMP | BPF_JA:
            pc += 1 + (int)k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += 1 + (a == k ? i->jt : i->jf);
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += 1 + (a >= k ? i->jt : i->jf);
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += 1 + ((a & k) ? i->jt : i->jf);
            break;
        case BPF_RET | BPF_K:
            return k;
        default:
            ck_abort_msg("instruction %#x at %d", i->code, pc);
        }
    }
    ck_abort_msg("the program ran off its end at %d", pc);
    return 0;
}

typedef struct {
    uint32_t arch;              /* libseccomp's token */
    unsigned int audit;         /* what the kernel reports */
} machine_abi_t;

static struct sock_filter program[4096];
static int program_len;
static const int bucket_fds[2] = { 1000, 1001 };

/* The ABIs of this machine: the native one and its companions. */
static int machine_abis(machine_abi_t *abi)
{
    uint32_t native = seccomp_arch_native();
    int n = 0;

    abi[n].arch = native;
    abi[n++].audit = native;
    if (native == SCMP_ARCH_X86_64) {
        abi[n].arch = SCMP_ARCH_X86;
        abi[n++].audit = AUDIT_ARCH_I386;
        abi[n].arch = SCMP_ARCH_X32;
        abi[n++].audit = AUDIT_ARCH_X86_64;
    }
    else if (native == SCMP_ARCH_AARCH64) {
        abi[n].arch = SCMP_ARCH_ARM;
        abi[n++].audit = AUDIT_ARCH_ARM;
    }
    return n;
}

static int nr_of(const machine_abi_t *abi, const char *name)
{
    int nr = seccomp_syscall_resolve_name_arch(abi->arch, name);

    if (nr < 0 && abi->arch == SCMP_ARCH_X86
        && strcmp(name, "setsockopt") == 0) {
        nr = 366;
    }
    return nr;
}

/* What the filter answers to @a name with these arguments, each with
 * @a high in its bits 32 to 63 on a 64-bit ABI. */
static unsigned int verdict(const machine_abi_t *abi, const char *name,
                            unsigned long long a0, unsigned long long a1,
                            unsigned long long a2, unsigned long long high)
{
    struct seccomp_data data;
    int nr = nr_of(abi, name);
    int wide = abi->arch == SCMP_ARCH_X86_64 || abi->arch == SCMP_ARCH_X32
               || abi->arch == SCMP_ARCH_AARCH64;

    ck_assert_msg(nr >= 0, "no %s in ABI %#x", name, abi->arch);
    memset(&data, 0, sizeof(data));
    data.nr = nr;
    data.arch = abi->audit;
    data.args[0] = a0 | (wide ? high : 0);
    data.args[1] = a1 | (wide ? high : 0);
    data.args[2] = a2 | (wide ? high : 0);
    return run(program, program_len, &data);
}

static void build(void)
{
    program_len = pf_seccomp_build(seccomp_arch_native(), bucket_fds, 2,
                                   program, 4096);
    ck_assert_int_gt(program_len, 0);
}

static const unsigned long long highs[] = { 0, 1ULL << 32,
                                            0xffffffff00000000ULL };

START_TEST(every_allowed_row_passes_on_every_abi)
{
    const pf_allowed_t *row;
    machine_abi_t abi[3];
    int count, n = machine_abis(abi), a, i;
    size_t h;

    build();
    row = pf_seccomp_allowed(&count);
    for (a = 0; a < n; a++) {
        for (h = 0; h < sizeof(highs) / sizeof(highs[0]); h++) {
            for (i = 0; i < count; i++) {
                unsigned int got;

                switch (row[i].kind) {
                case PF_ALLOW_FCNTL:
                    got = verdict(&abi[a], "fcntl", 5, row[i].value,
                                  O_NONBLOCK, highs[h]);
                    break;
                case PF_ALLOW_IOCTL:
                    got = verdict(&abi[a], "ioctl", 5, row[i].value, 0,
                                  highs[h]);
                    break;
                default:
                    got = verdict(&abi[a], "setsockopt", 5,
                                  (unsigned int)row[i].level, row[i].value,
                                  highs[h]);
                    break;
                }
                ck_assert_msg(got == SECCOMP_RET_ALLOW,
                              "%s refused (%#x) on ABI %#x, high %#llx",
                              row[i].name, got, abi[a].arch, highs[h]);
            }
        }
    }
}
END_TEST

START_TEST(what_makes_every_connection_signal_is_refused)
{
    static const unsigned int fcntl_refused[] = {
        F_SETOWN, F_SETOWN_EX, F_SETSIG, F_SETLEASE, F_NOTIFY,
        F_GETOWN, 99, 0xffffffffu,
    };
    static const unsigned int ioctl_refused[] = {
        FIOASYNC, FIOSETOWN, SIOCSPGRP, TIOCSTI, SIOCSIFFLAGS, 0,
    };
    machine_abi_t abi[3];
    int n = machine_abis(abi), a;
    size_t h, i;

    build();
    for (a = 0; a < n; a++) {
        for (h = 0; h < sizeof(highs) / sizeof(highs[0]); h++) {
            for (i = 0; i < sizeof(fcntl_refused) / sizeof(unsigned int);
                 i++) {
                ck_assert_uint_eq(verdict(&abi[a], "fcntl", 5,
                                          fcntl_refused[i], 0, highs[h]),
                                  ERRNO_EPERM);
            }
            for (i = 0; i < sizeof(ioctl_refused) / sizeof(unsigned int);
                 i++) {
                ck_assert_uint_eq(verdict(&abi[a], "ioctl", 5,
                                          ioctl_refused[i], 0, highs[h]),
                                  ERRNO_EPERM);
            }
            /* O_ASYNC in F_SETFL, alone or with any other flag. */
            ck_assert_uint_eq(verdict(&abi[a], "fcntl", 5, F_SETFL, O_ASYNC,
                                      highs[h]),
                              ERRNO_EPERM);
            ck_assert_uint_eq(verdict(&abi[a], "fcntl", 5, F_SETFL,
                                      O_ASYNC | O_NONBLOCK | O_RDWR,
                                      highs[h]),
                              ERRNO_EPERM);
            ck_assert_uint_eq(verdict(&abi[a], "fcntl", 5, F_SETFL,
                                      O_NONBLOCK | O_APPEND, highs[h]),
                              SECCOMP_RET_ALLOW);
        }
        /* fcntl64() on the ABIs that have it takes the same rules. */
        if (nr_of(&abi[a], "fcntl64") >= 0) {
            ck_assert_uint_eq(verdict(&abi[a], "fcntl64", 5, F_SETOWN, 1, 0),
                              ERRNO_EPERM);
            ck_assert_uint_eq(verdict(&abi[a], "fcntl64", 5, F_SETFL,
                                      O_ASYNC, 0),
                              ERRNO_EPERM);
            ck_assert_uint_eq(verdict(&abi[a], "fcntl64", 5, F_GETFL, 0, 0),
                              SECCOMP_RET_ALLOW);
        }
    }
}
END_TEST

START_TEST(options_off_the_list_and_the_bucket_descriptors_are_refused)
{
    static const struct {
        int level;
        unsigned int option;
    } refused[] = {
        { SOL_SOCKET, SO_BUF_LOCK },
        { SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF },
        { SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF },
        { SOL_SOCKET, SO_DETACH_REUSEPORT_BPF },
        { SOL_SOCKET, SO_LOCK_FILTER },
        { SOL_SOCKET, SO_ATTACH_FILTER },
        { SOL_SOCKET, SO_BUSY_POLL },
        { SOL_SOCKET, SO_INCOMING_CPU },
        { SOL_SOCKET, SO_TIMESTAMPING },
        { SOL_SOCKET, SO_ZEROCOPY },
        { SOL_SOCKET, SO_PRIORITY },
        { IPPROTO_TCP, TCP_MD5SIG },
        { IPPROTO_TCP, TCP_QUICKACK },
        { IPPROTO_TCP, TCP_WINDOW_CLAMP },
        { IPPROTO_TCP, TCP_INQ },
        { IPPROTO_TCP, TCP_FASTOPEN_KEY },
        { IPPROTO_TCP, TCP_CONGESTION },
        { IPPROTO_IP, IP_TTL },
        { IPPROTO_IP, IP_UNICAST_IF },
        { IPPROTO_IPV6, IPV6_UNICAST_HOPS },
        { SOL_PACKET, 1 },
        /* An option number of one level under another. */
        { IPPROTO_TCP, SO_REUSEADDR + 100 },
        { IPPROTO_IP, TCP_NODELAY + 200 },
    };
    machine_abi_t abi[3];
    int n = machine_abis(abi), a, f;
    size_t h, i;

    build();
    for (a = 0; a < n; a++) {
        for (h = 0; h < sizeof(highs) / sizeof(highs[0]); h++) {
            for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                ck_assert_msg(verdict(&abi[a], "setsockopt", 5,
                                      (unsigned int)refused[i].level,
                                      refused[i].option, highs[h])
                                  == ERRNO_EPERM,
                              "level %d option %u allowed on ABI %#x",
                              refused[i].level, refused[i].option,
                              abi[a].arch);
            }
            /* Nothing at all on the child's own bucket descriptors. */
            for (f = 0; f < 2; f++) {
                ck_assert_uint_eq(verdict(&abi[a], "setsockopt",
                                          (unsigned int)bucket_fds[f],
                                          IPPROTO_TCP, TCP_NODELAY,
                                          highs[h]),
                                  ERRNO_EPERM);
            }
            ck_assert_uint_eq(verdict(&abi[a], "setsockopt", 1002,
                                      IPPROTO_TCP, TCP_NODELAY, highs[h]),
                              SECCOMP_RET_ALLOW);
        }
    }
}
END_TEST

START_TEST(other_routes_and_other_calls)
{
    struct seccomp_data data;
    machine_abi_t abi[3];
    int n = machine_abis(abi), a;

    build();
    for (a = 0; a < n; a++) {
        ck_assert_uint_eq(verdict(&abi[a], "io_uring_setup", 1, 0, 0, 0),
                          ERRNO_ENOSYS);
        ck_assert_uint_eq(verdict(&abi[a], "io_uring_enter", 1, 0, 0, 0),
                          ERRNO_ENOSYS);
        ck_assert_uint_eq(verdict(&abi[a], "read", 5, 0, 0, 0),
                          SECCOMP_RET_ALLOW);
        ck_assert_uint_eq(verdict(&abi[a], "close", 5, 0, 0, 0),
                          SECCOMP_RET_ALLOW);
        if (nr_of(&abi[a], "socketcall") >= 0) {
            ck_assert_uint_eq(verdict(&abi[a], "socketcall", SYS_SETSOCKOPT,
                                      0, 0, 0),
                              ERRNO_EPERM);
            ck_assert_uint_eq(verdict(&abi[a], "socketcall", SYS_SOCKET, 0,
                                      0, 0),
                              SECCOMP_RET_ALLOW);
        }
    }
    /* An ABI the filter has no rules for could call past them. */
    memset(&data, 0, sizeof(data));
    data.arch = 0x12345678;
    ck_assert_uint_eq(run(program, program_len, &data) & SECCOMP_RET_ACTION_FULL,
#ifdef SECCOMP_RET_KILL_PROCESS
                      SECCOMP_RET_KILL_PROCESS
#else
                      SECCOMP_RET_KILL
#endif
    );
}
END_TEST

#endif /* HAVE_LIBSECCOMP */

/* How docs/trust.md writes a row's value: its last word, without the
 * prefix of a number of our own. */
static const char *doc_name(const char *name)
{
    const char *last = strrchr(name, ' ');

    last = last != NULL ? last + 1 : name;
    if (strncmp(last, "PF_", 3) == 0) {
        return last + 3;
    }
    if (strncmp(last, "COMPAT_", 7) == 0) {
        return last + 7;
    }
    return last;
}

/* Every row of the allow-lists, by its name, in docs/trust.md's list of
 * what children may do, so that the document says who needs each. */
START_TEST(every_row_is_in_the_trust_document)
{
    const pf_allowed_t *row;
    const char *top = getenv("PFB_TOP");
    char path[1024], *text;
    FILE *f;
    long size;
    int count, i;

    snprintf(path, sizeof(path), "%s/docs/trust.md", top ? top : ".");
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    rewind(f);
    text = calloc(1, (size_t)size + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(fread(text, 1, (size_t)size, f), size);
    fclose(f);
    row = pf_seccomp_allowed(&count);
    ck_assert_int_gt(count, 20);
    for (i = 0; i < count; i++) {
        snprintf(path, sizeof(path), "`%s`", doc_name(row[i].name));
        ck_assert_msg(strstr(text, path) != NULL,
                      "%s is allowed but docs/trust.md does not list %s",
                      row[i].name, path);
    }
    free(text);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The bucket sockets out of reach                                     */

static apr_pool_t *pool;

static void setup(void)
{
    apr_initialize();
    apr_pool_create(&pool, NULL);
}

static void teardown(void)
{
    apr_pool_destroy(pool);
    apr_terminate();
}

/* A listening socket on a loopback port the kernel picks, and that port. */
static int loopback_listener(int *port)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

/* A connection to the port is accepted on fd. */
static int accepts(int fd, int port)
{
    struct sockaddr_in addr;
    int c = socket(AF_INET, SOCK_STREAM, 0), a, ok;

    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((unsigned short)port);
    ok = connect(c, (struct sockaddr *)&addr, sizeof(addr)) == 0;
    a = ok ? accept(fd, NULL, NULL) : -1;
    close(c);
    if (a >= 0) {
        close(a);
    }
    return a >= 0;
}

START_TEST(a_child_moves_its_bucket_sockets_out_of_reach)
{
    int port, fd = loopback_listener(&port), moved = -1;
    apr_socket_t *sd = NULL;
    apr_os_sock_t os = fd, now;

    ck_assert_int_eq(apr_os_sock_put(&sd, &os, pool), APR_SUCCESS);
    pf_seccomp_move_high(&sd, 1, &moved);
    ck_assert_int_gt(moved, fd);
    ck_assert_int_lt(moved, 1024);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert(fcntl(moved, F_GETFD) & FD_CLOEXEC);
    apr_os_sock_get(&now, sd);
    ck_assert_int_eq(now, moved);
    ck_assert(accepts(moved, port));
    close(moved);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The filter, as root                                                 */

#ifdef HAVE_LIBSECCOMP

/* The status line of /proc/self/status that starts with @a key. */
static int status_value(const char *key)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    int value = -1;

    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, strlen(key)) == 0) {
            value = atoi(line + strlen(key));
        }
    }
    if (f) {
        fclose(f);
    }
    return value;
}

/* A listening socket on a loopback port the kernel picks. */
static int listener(void)
{
    struct sockaddr_in addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0
        || listen(fd, 16) != 0) {
        return -1;
    }
    return fd;
}

/* A system call's result, or -errno. */
static long result(long ret)
{
    return ret < 0 ? -errno : ret;
}

/* With bits 32 to 63 of every int argument set: the kernel reads the low
 * 32 bits only. */
static long high_call(long nr, long a, long b, long c)
{
    long high = 1L << 32;

    return result(syscall(nr, a | high, b | high, c | high, 0L, 0L));
}

#if defined(__x86_64__)
/* The 32-bit x86 entry point, open to 64-bit processes too: returns the
 * kernel's result (-errno on failure). */
static long int80(long nr, long a, long b, long c, long d, long e)
{
    long ret;

    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e)
                     : "memory");
    return ret;
}

/* Whether this kernel takes 32-bit x86 system calls from us: without
 * IA32 emulation, int 0x80 is a fault, so a probe process tries it. */
static int ia32_entry_available(void)
{
    int status = 0;
    pid_t pid = fork();

    if (pid == 0) {
        _exit(int80(20 /* i386 getpid */, 0, 0, 0, 0, 0) == getpid() ? 0
                                                                     : 1);
    }
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)
           && WEXITSTATUS(status) == 0;
}

/* The 32-bit routes: direct calls, and setsockopt() through socketcall(),
 * with arguments where a 32-bit pointer reaches them. */
static int ia32_findings(int fd, int bucket)
{
    unsigned int *low = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    long p;

    if (low == MAP_FAILED) {
        return 40;
    }
    p = (long)(unsigned long)low;
    low[0] = 1;                 /* an int 1 */
    if (int80(366, fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, p, 4) != -EPERM
        || int80(366, fd, SOL_SOCKET, SO_BUF_LOCK, p, 4) != -EPERM
        || int80(366, fd, SOL_SOCKET, SO_REUSEADDR, p, 4) != 0
        || int80(366, bucket, SOL_SOCKET, SO_REUSEADDR, p, 4) != -EPERM) {
        return 41;
    }
    low[1] = (unsigned int)fd;
    low[2] = SOL_SOCKET;
    low[3] = SO_REUSEADDR;
    low[4] = (unsigned int)p;
    low[5] = 4;
    if (int80(102, SYS_SETSOCKOPT, p + 4, 0, 0, 0) != -EPERM) {
        return 42;
    }
    /* fcntl (55) and fcntl64 (221), ioctl (54). */
    if (int80(55, fd, F_SETOWN, getpid(), 0, 0) != -EPERM
        || int80(221, fd, F_SETOWN, getpid(), 0, 0) != -EPERM
        || int80(221, fd, F_SETFL, O_ASYNC, 0, 0) != -EPERM
        || int80(221, fd, F_GETFL, 0, 0, 0) < 0
        || int80(54, fd, FIOASYNC, p, 0, 0) != -EPERM
        || int80(54, fd, FIONBIO, p, 0, 0) != 0) {
        return 43;
    }
    return 0;
}
#endif

/* Runs in a child of the test: every finding is a distinct exit code, so
 * the test names the one that failed. */
static int filter_findings(void)
{
    struct sock_filter pick[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
    struct sock_fprog prog = { 1, pick };
    struct f_owner_ex owner;
    struct tcp_md5sig md5;
    struct ifreq ifr;
    struct flock lock;
    char file[] = "/tmp/pfb-seccomp-XXXXXX";
    int fd, bucket, copy, one = 1, bad_fd = -1, queued = 0, filefd;
    int rcvbuf = 65536, idle = 30;
    long got;
#if defined(__x86_64__)
    int ia32 = ia32_entry_available();
#endif

    /* The child's own bucket socket, as it has it when it installs the
     * filter; another socket it opens later; its bucket socket under
     * another number. */
    bucket = listener();
    if (bucket < 0 || pf_seccomp_install(&bucket, 1) != APR_SUCCESS) {
        return 10;
    }
    if (status_value("Seccomp:") != 2 || status_value("NoNewPrivs:") != 0) {
        return 11;
    }
    fd = listener();
    copy = dup(bucket);
    filefd = mkstemp(file);
    if (fd < 0 || copy < 0 || filefd < 0) {
        return 12;
    }
    unlink(file);
    /* Off the list, on any socket, the bucket's under any number. */
    if (result(setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                          sizeof(prog))) != -EPERM
        || result(setsockopt(copy, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF,
                             &bad_fd, sizeof(bad_fd))) != -EPERM
        || result(setsockopt(copy, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF,
                             &one, sizeof(one))) != -EPERM
        || result(setsockopt(fd, SOL_SOCKET, SO_LOCK_FILTER, &one,
                             sizeof(one))) != -EPERM
        || result(setsockopt(copy, SOL_SOCKET, SO_BUF_LOCK, &one,
                             sizeof(one))) != -EPERM
        || result(setsockopt(copy, IPPROTO_TCP, TCP_QUICKACK, &one,
                             sizeof(one))) != -EPERM) {
        return 13;
    }
    memset(&md5, 0, sizeof(md5));
    md5.tcpm_addr.ss_family = AF_INET;
    if (result(setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof(md5)))
        != -EPERM) {
        return 14;
    }
    /* On the list, on any socket but the bucket's own number. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0
        || setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0
        || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf))
               != 0
        || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0
        || setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle))
               != 0
        || setsockopt(copy, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one))
               != 0) {
        return 15;
    }
    if (result(setsockopt(bucket, SOL_SOCKET, SO_KEEPALIVE, &one,
                          sizeof(one))) != -EPERM
        || result(setsockopt(bucket, IPPROTO_TCP, TCP_NODELAY, &one,
                             sizeof(one))) != -EPERM) {
        return 16;
    }
    /* The shared file's owner, signal and O_ASYNC. */
    memset(&owner, 0, sizeof(owner));
    owner.type = F_OWNER_PGRP;
    owner.pid = getpgrp();
    if (result(fcntl(copy, F_SETOWN, -getpgrp())) != -EPERM
        || result(fcntl(copy, F_SETOWN_EX, &owner)) != -EPERM
        || result(fcntl(copy, F_SETSIG, SIGSTOP)) != -EPERM
        || result(fcntl(copy, F_SETFL, O_ASYNC | O_NONBLOCK)) != -EPERM
        || result(ioctl(copy, FIOASYNC, &one)) != -EPERM
        || result(ioctl(copy, FIOSETOWN, &one)) != -EPERM
        || result(ioctl(copy, SIOCSPGRP, &one)) != -EPERM) {
        return 17;
    }
    /* ...refused with the high bits set too, which the kernel ignores. */
    if (high_call(SYS_fcntl, copy, F_SETOWN, 1) != -EPERM
        || high_call(SYS_fcntl, copy, F_SETFL, O_ASYNC) != -EPERM
        || high_call(SYS_ioctl, copy, FIOASYNC, (long)&one) != -EPERM
        || high_call(SYS_setsockopt, copy, SOL_SOCKET, SO_BUF_LOCK)
               != -EPERM
        || high_call(SYS_setsockopt, bucket, SOL_SOCKET, SO_KEEPALIVE)
               != -EPERM) {
        return 18;
    }
    /* What programs use every day still works. */
    memset(&lock, 0, sizeof(lock));
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0
        || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0
        || fcntl(fd, F_DUPFD_CLOEXEC, 10) < 0
        || fcntl(filefd, F_SETLK, &lock) != 0
        || ioctl(fd, FIONBIO, &one) != 0
        /* A listener has no queues to measure: the kernel's answer, not
         * the filter's. */
        || result(ioctl(fd, FIONREAD, &queued)) != -EINVAL
        || result(ioctl(fd, SIOCOUTQ, &queued)) != -EINVAL
        || result(ioctl(fd, TCGETS, &queued)) != -ENOTTY) {
        return 19;
    }
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0 || if_nametoindex("lo") == 0) {
        return 20;
    }
    /* The allowed F_SETFL with high bits in its flag word's upper half. */
    got = high_call(SYS_fcntl, fd, F_SETFL, O_NONBLOCK);
    if (got != 0) {
        return 21;
    }
#ifdef SYS_io_uring_setup
    if (result(syscall(SYS_io_uring_setup, 1, NULL)) != -ENOSYS) {
        return 22;
    }
#endif
#if defined(__x86_64__)
    if (ia32 && (got = ia32_findings(fd, bucket)) != 0) {
        return (int)got;
    }
    if (!ia32) {
        printf("seccomp-kernel: no 32-bit x86 entry in this kernel; its "
               "rules were not exercised\n");
    }
#endif
    close(copy);
    close(fd);
    close(bucket);
    return 0;
}

START_TEST(the_filter_refuses_what_it_should_and_nothing_else)
{
    int status = 0;
    pid_t pid;

    apr_initialize();
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        _exit(filter_findings());
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "killed by signal %d",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ck_assert_msg(WEXITSTATUS(status) == 0, "finding %d",
                  WEXITSTATUS(status));
    apr_terminate();
}
END_TEST

#endif /* HAVE_LIBSECCOMP */

Suite *seccomp_suite(void)
{
    Suite *s = suite_create("seccomp");
    TCase *pure = tcase_create("pure");
    TCase *descriptors = tcase_create("descriptors");

#ifdef HAVE_LIBSECCOMP
    tcase_add_test(pure, every_allowed_row_passes_on_every_abi);
    tcase_add_test(pure, what_makes_every_connection_signal_is_refused);
    tcase_add_test(pure,
                   options_off_the_list_and_the_bucket_descriptors_are_refused);
    tcase_add_test(pure, other_routes_and_other_calls);
#endif
    tcase_add_test(pure, every_row_is_in_the_trust_document);
    suite_add_tcase(s, pure);

    tcase_add_checked_fixture(descriptors, setup, teardown);
    tcase_add_test(descriptors,
                   a_child_moves_its_bucket_sockets_out_of_reach);
    suite_add_tcase(s, descriptors);
    return s;
}

Suite *seccomp_kernel_suite(void)
{
    Suite *s = suite_create("seccomp-kernel");
    TCase *root = tcase_create("root");

#ifdef HAVE_LIBSECCOMP
    tcase_add_test(root, the_filter_refuses_what_it_should_and_nothing_else);
#endif
    suite_add_tcase(s, root);
    return s;
}
