/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * LD_PRELOAD shim for the steering fallback tests: bpf(2) through
 * syscall() (which is how libbpf calls it) fails with EPERM, as for a
 * process without CAP_BPF, and attaching a reuseport program fails with
 * EPERM too; every other call passes through.  With PFB_NOBPF=attach in
 * the environment only the attaching fails, so the programs load and the
 * last step is refused.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);

long syscall(long number, ...)
{
    const char *only = getenv("PFB_NOBPF");
    long args[6];
    va_list ap;
    int i;

    if (number == SYS_bpf && (only == NULL || strcmp(only, "attach") != 0)) {
        errno = EPERM;
        return -1;
    }
    /* Every Linux system call takes at most six word-sized arguments;
     * reading six is what the C library's own wrapper does. */
    va_start(ap, number);
    for (i = 0; i < 6; i++) {
        args[i] = va_arg(ap, long);
    }
    va_end(ap);
    return ((long (*)(long, ...))dlsym(RTLD_NEXT, "syscall"))(
        number, args[0], args[1], args[2], args[3], args[4], args[5]);
}

int setsockopt(int fd, int level, int name, const void *value, socklen_t len)
{
    static setsockopt_fn real_setsockopt;

    if (level == SOL_SOCKET
        && (name == SO_ATTACH_REUSEPORT_CBPF
            || name == SO_ATTACH_REUSEPORT_EBPF)) {
        errno = EPERM;
        return -1;
    }
    if (real_setsockopt == NULL) {
        real_setsockopt = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
    }
    return real_setsockopt(fd, level, name, value, len);
}
