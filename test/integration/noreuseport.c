/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * LD_PRELOAD shim for the fallback tests: setsockopt(SO_REUSEPORT) fails
 * with ENOPROTOOPT, as on a kernel without it; every other call passes
 * through.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>

typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);

int setsockopt(int fd, int level, int name, const void *value, socklen_t len)
{
    static setsockopt_fn real_setsockopt;

    if (level == SOL_SOCKET && name == SO_REUSEPORT) {
        errno = ENOPROTOOPT;
        return -1;
    }
    if (real_setsockopt == NULL) {
        real_setsockopt = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
    }
    return real_setsockopt(fd, level, name, value, len);
}
