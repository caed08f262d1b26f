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
 * Every call ListenBucketSteering makes to the kernel's BPF side, one step
 * each, with errno as its status: the maps (the socket map, the mmap-able
 * idle counts, the CPU table) made with libbpf; the programs of
 * prefork_steering.bpf.c loaded from the skeleton bpftool made of them,
 * first as programs that also choose for a closing socket's queue (Linux
 * 5.14), else as ones that only select; attaching and detaching.  A load
 * keeps libbpf's messages from stderr, which is the error log, but for
 * the verifier's last line; RLIMIT_MEMLOCK is put back after each step,
 * so that children do not inherit libbpf's raise of it.  Without the
 * programs every step but detaching returns APR_ENOTIMPL.  Then, at the
 * end, the socket maps made of those steps (below).  Its caller is
 * prefork_steering.c; it logs nothing.
 */

/* In an httpd source tree configure's results (HAVE_BPF_STEERING...) are
 * in ap_config_auto.h; the standalone build passes them with -D. */
#include "ap_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/socket.h>

#include "apr_portable.h"
#include "apr_strings.h"

#include "prefork_buckets.h"
#include "prefork_steering_kernel.h"

#ifdef HAVE_BPF_STEERING
#include <sys/mman.h>
#include <sys/resource.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
/* Made by bpftool from prefork_steering.bpf.c at build time: the
 * programs' object, embedded, and typed access to its parts. */
#include "prefork_steering.skel.h"
#endif

/* SO_DETACH_REUSEPORT_BPF is Linux 5.8; older headers lack the name. */
#if defined(__linux__) && !defined(SO_DETACH_REUSEPORT_BPF)
#define SO_DETACH_REUSEPORT_BPF 68
#endif

static apr_status_t set_option(apr_socket_t *sd, int name, const void *value,
                               socklen_t len)
{
    apr_os_sock_t fd;

    if (apr_os_sock_get(&fd, sd) != APR_SUCCESS || fd < 0) {
        return APR_EBADF;
    }
    if (setsockopt(fd, SOL_SOCKET, name, value, len) != 0) {
        return errno;
    }
    return APR_SUCCESS;
}

apr_status_t pf_steer_kernel_detach(apr_socket_t *sd)
{
#if defined(__linux__) && defined(HAVE_SO_REUSEPORT)
    int unused = 0;
    apr_status_t rv;

    rv = set_option(sd, SO_DETACH_REUSEPORT_BPF, &unused, sizeof(unused));
    /* ENOENT: no program was attached; EINVAL: the socket is in no
     * reuseport group (SO_REUSEPORT off), so none can be.  Either is what
     * we want. */
    return rv == ENOENT || rv == EINVAL ? APR_SUCCESS : rv;
#else
    (void)sd;
    (void)set_option;
    return APR_SUCCESS;
#endif
}

void pf_steer_kernel_close(int fd)
{
    if (fd >= 0) {
        close(fd);
    }
}

#ifdef HAVE_BPF_STEERING

int pf_steer_kernel_built(void)
{
    return 1;
}

/* libbpf returns -errno from some calls and -1 with errno from others. */
static apr_status_t libbpf_status(long ret)
{
    if (ret >= 0) {
        return APR_SUCCESS;
    }
    if (ret < -1) {
        return (apr_status_t)-ret;
    }
    return errno ? errno : APR_EGENERAL;
}

/* Before Linux 5.11 libbpf raises RLIMIT_MEMLOCK to infinity, once per
 * process, for the maps' sake, and every child would inherit that (its
 * libbpf_set_memlock_rlim(), which would stop it, is not exported before
 * libbpf 1.2).  Each step puts back the limit the admin set. */
typedef struct {
    struct rlimit limit;
    int saved;
} memlock_t;

static void memlock_save(memlock_t *m)
{
    m->saved = getrlimit(RLIMIT_MEMLOCK, &m->limit) == 0;
}

static void memlock_restore(const memlock_t *m)
{
    if (m->saved) {
        setrlimit(RLIMIT_MEMLOCK, &m->limit);
    }
}

apr_status_t pf_steer_kernel_idle_table(int records, int *fd,
                                        pf_steer_bucket_t **table,
                                        size_t *len)
{
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
    long page = sysconf(_SC_PAGESIZE);
    size_t size;
    memlock_t memlock;
    void *addr;
    int map_fd;

    if (records < 1 || records > PF_STEER_MAX_RECORDS) {
        return APR_EINVAL;
    }
    size = (size_t)records * sizeof(pf_steer_bucket_t);
    memlock_save(&memlock);
    map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pfb_idle", sizeof(pf_u32),
                            (unsigned int)size, 1, &opts);
    memlock_restore(&memlock);
    if (map_fd < 0) {
        return libbpf_status(map_fd);
    }
    if (page > 0) {
        size = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    }
    addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
    if (addr == MAP_FAILED) {
        apr_status_t rv = errno;

        close(map_fd);
        return rv;
    }
    *fd = map_fd;
    *table = addr;
    *len = size;
    return APR_SUCCESS;
}

apr_status_t pf_steer_kernel_socket_map(int entries, int *fd)
{
    memlock_t memlock;
    int map_fd;

    memlock_save(&memlock);
    map_fd = bpf_map_create(BPF_MAP_TYPE_REUSEPORT_SOCKARRAY, "pfb_sockets",
                            sizeof(pf_u32), sizeof(pf_u64),
                            (unsigned int)entries, NULL);
    memlock_restore(&memlock);
    if (map_fd < 0) {
        return libbpf_status(map_fd);
    }
    *fd = map_fd;
    return APR_SUCCESS;
}

apr_status_t pf_steer_kernel_cpu_map(const pf_steer_cpu_entry_t *table,
                                     int entries, int *fd)
{
    memlock_t memlock;
    int map_fd, cpu, ret;
    pf_u32 key;

    memlock_save(&memlock);
    map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pfb_cpu_shards",
                            sizeof(pf_u32), sizeof(pf_steer_cpu_entry_t),
                            (unsigned int)entries, NULL);
    memlock_restore(&memlock);
    if (map_fd < 0) {
        return libbpf_status(map_fd);
    }
    for (cpu = 0; cpu < entries; cpu++) {
        key = (pf_u32)cpu;
        ret = bpf_map_update_elem(map_fd, &key, &table[cpu], BPF_ANY);
        if (ret < 0) {
            apr_status_t rv = libbpf_status(ret);

            close(map_fd);
            return rv;
        }
    }
    *fd = map_fd;
    return APR_SUCCESS;
}

int pf_steer_kernel_possible_cpus(void)
{
    int n = libbpf_num_possible_cpus();

    return n > 0 ? n : -1;
}

apr_status_t pf_steer_kernel_socket_at(int map_fd, int key,
                                       apr_uint64_t *cookie)
{
    pf_u32 k = (pf_u32)key;
    pf_u64 value = 0;
    int ret = bpf_map_lookup_elem(map_fd, &k, &value);

    if (ret < 0) {
        return libbpf_status(ret);
    }
    *cookie = value;
    return APR_SUCCESS;
}

apr_status_t pf_steer_kernel_cookie(apr_socket_t *sd, apr_uint64_t *cookie)
{
    apr_os_sock_t fd;
    pf_u64 value = 0;
    socklen_t len = sizeof(value);

    if (apr_os_sock_get(&fd, sd) != APR_SUCCESS || fd < 0) {
        return APR_EBADF;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &value, &len) != 0) {
        return errno;
    }
    *cookie = value;
    return APR_SUCCESS;
}

apr_status_t pf_steer_kernel_put_socket(int map_fd, int key,
                                        apr_socket_t *sd)
{
    pf_u32 k = (pf_u32)key;
    pf_u64 value;
    apr_os_sock_t fd;

    if (apr_os_sock_get(&fd, sd) != APR_SUCCESS || fd < 0) {
        return APR_EBADF;
    }
    value = (pf_u64)fd;
    return libbpf_status(bpf_map_update_elem(map_fd, &k, &value, BPF_ANY));
}

apr_status_t pf_steer_kernel_clear_socket(int map_fd, int key)
{
    pf_u32 k = (pf_u32)key;
    apr_status_t rv = libbpf_status(bpf_map_delete_elem(map_fd, &k));

    return rv == ENOENT ? APR_SUCCESS : rv;
}

/* libbpf writes its messages to stderr, which is the error log: while the
 * MPM loads, they come here instead, and the last useful line is kept for
 * the caller's one log line.  The verifier's account arrives as one
 * message ending "-- END PROG LOAD LOG --"; its last line says what was
 * refused. */
static char *kept_line;
static size_t kept_len;

static void keep_line(const char *start, const char *end)
{
    size_t n;

    while (end > start && (end[-1] == '\n' || end[-1] == ' ')) {
        end--;
    }
    n = (size_t)(end - start);
    if (n == 0 || kept_line == NULL || kept_len == 0) {
        return;
    }
    if (n >= kept_len) {
        n = kept_len - 1;
    }
    memcpy(kept_line, start, n);
    kept_line[n] = '\0';
}

__attribute__((format(printf, 2, 0)))
static int keep_libbpf_message(enum libbpf_print_level level,
                               const char *format, va_list args)
{
    char *text, *end, *line;
    va_list copy;
    int len;

    if (level == LIBBPF_DEBUG) {
        return 0;
    }
    va_copy(copy, args);
    len = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    if (len <= 0 || (text = malloc((size_t)len + 1)) == NULL) {
        return 0;
    }
    vsnprintf(text, (size_t)len + 1, format, args);
    end = strstr(text, "-- END PROG LOAD LOG --");
    if (end == NULL) {
        end = text + len;
    }
    while (end > text && end[-1] == '\n') {
        end--;
    }
    for (line = end; line > text && line[-1] != '\n'; line--) {
    }
    keep_line(line, end);
    free(text);
    return 0;
}

static struct bpf_program *program_of(struct prefork_steering *skel,
                                      int mode)
{
    switch (mode) {
    case PFB_STEER_HASH:
        return skel->progs.pf_steer_hash;
    case PFB_STEER_IDLE:
        return skel->progs.pf_steer_idle;
    case PFB_STEER_CPU:
        return skel->progs.pf_steer_cpu;
    case PFB_STEER_LOCAL:
        return skel->progs.pf_steer_local;
    default:
        return NULL;
    }
}

/* Hands a map the parent made to the skeleton, or tells libbpf not to
 * make one the chosen program does not use. */
static int hand_over(struct bpf_map *map, int fd)
{
    return fd >= 0 ? bpf_map__reuse_fd(map, fd)
                   : bpf_map__set_autocreate(map, false);
}

static apr_status_t load_program(struct prefork_steering *skel,
                                 const pf_steer_program_t *spec,
                                 int select_only, int *prog_fd)
{
    struct bpf_program *chosen = program_of(skel, spec->mode);
    int modes[] = { PFB_STEER_HASH, PFB_STEER_IDLE, PFB_STEER_CPU,
                    PFB_STEER_LOCAL };
    size_t i;
    int ret, fd;

    if (chosen == NULL || spec->socks_fd < 0) {
        return APR_EINVAL;
    }
    for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        bpf_program__set_autoload(program_of(skel, modes[i]),
                                  modes[i] == spec->mode);
    }
    if (select_only) {
        /* A kernel before 5.14 knows no program that also chooses where
         * a closing socket's connections go. */
        bpf_program__set_expected_attach_type(chosen,
                                              BPF_SK_REUSEPORT_SELECT);
    }
    skel->rodata->pf_listen = spec->listen;
    ret = hand_over(skel->maps.pf_sockets, spec->socks_fd);
    if (ret == 0) {
        ret = hand_over(skel->maps.pf_idle_table, spec->idle_fd);
    }
    if (ret == 0) {
        ret = hand_over(skel->maps.pf_cpu_shards, spec->cpu_fd);
    }
    if (ret == 0) {
        ret = prefork_steering__load(skel);
    }
    if (ret != 0) {
        return libbpf_status(ret);
    }
    /* A copy of our own: the skeleton and everything else it opened are
     * closed before any child is forked. */
    fd = fcntl(bpf_program__fd(chosen), F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
        return errno;
    }
    *prog_fd = fd;
    return APR_SUCCESS;
}

/* One attempt: the skeleton opened, loaded, destroyed. */
static apr_status_t load_once(const pf_steer_program_t *spec,
                              int select_only, int *prog_fd)
{
    struct prefork_steering *skel = prefork_steering__open();
    apr_status_t rv;

    if (skel == NULL) {
        return errno ? errno : APR_EGENERAL;
    }
    rv = load_program(skel, spec, select_only, prog_fd);
    prefork_steering__destroy(skel);
    return rv;
}

apr_status_t pf_steer_kernel_load(const pf_steer_program_t *spec,
                                  int *prog_fd, int *hands_over, char *log,
                                  size_t log_len)
{
    libbpf_print_fn_t previous;
    memlock_t memlock;
    apr_status_t rv;

    if (log != NULL && log_len > 0) {
        log[0] = '\0';
    }
    kept_line = log;
    kept_len = log_len;
    memlock_save(&memlock);
    previous = libbpf_set_print(keep_libbpf_message);
    *hands_over = 1;
    rv = load_once(spec, 0, prog_fd);
    if (rv != APR_SUCCESS) {
        *hands_over = 0;
        rv = load_once(spec, 1, prog_fd);
    }
    /* Never leave libbpf pointing into this module: it may be unloaded
     * at the next restart while libbpf stays. */
    libbpf_set_print(previous);
    memlock_restore(&memlock);
    kept_line = NULL;
    kept_len = 0;
    return rv;
}

apr_status_t pf_steer_kernel_attach(apr_socket_t *sd, int prog_fd)
{
    return set_option(sd, SO_ATTACH_REUSEPORT_EBPF, &prog_fd,
                      sizeof(prog_fd));
}

void pf_steer_kernel_unmap(pf_steer_bucket_t *table, size_t len)
{
    if (table != NULL) {
        munmap((void *)table, len);
    }
}

#else /* !HAVE_BPF_STEERING */

int pf_steer_kernel_built(void)
{
    return 0;
}

apr_status_t pf_steer_kernel_idle_table(int records, int *fd,
                                        pf_steer_bucket_t **table,
                                        size_t *len)
{
    (void)records;
    (void)fd;
    (void)table;
    (void)len;
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_socket_map(int entries, int *fd)
{
    (void)entries;
    (void)fd;
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_cpu_map(const pf_steer_cpu_entry_t *table,
                                     int entries, int *fd)
{
    (void)table;
    (void)entries;
    (void)fd;
    return APR_ENOTIMPL;
}

int pf_steer_kernel_possible_cpus(void)
{
    return -1;
}

apr_status_t pf_steer_kernel_socket_at(int map_fd, int key,
                                       apr_uint64_t *cookie)
{
    (void)map_fd;
    (void)key;
    (void)cookie;
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_cookie(apr_socket_t *sd, apr_uint64_t *cookie)
{
    (void)sd;
    (void)cookie;
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_put_socket(int map_fd, int key,
                                        apr_socket_t *sd)
{
    (void)map_fd;
    (void)key;
    (void)sd;
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_clear_socket(int map_fd, int key)
{
    (void)map_fd;
    (void)key;
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_load(const pf_steer_program_t *spec,
                                  int *prog_fd, int *hands_over, char *log,
                                  size_t log_len)
{
    (void)spec;
    (void)prog_fd;
    *hands_over = 0;
    if (log != NULL && log_len > 0) {
        log[0] = '\0';
    }
    return APR_ENOTIMPL;
}

apr_status_t pf_steer_kernel_attach(apr_socket_t *sd, int prog_fd)
{
    (void)sd;
    (void)prog_fd;
    return APR_ENOTIMPL;
}

void pf_steer_kernel_unmap(pf_steer_bucket_t *table, size_t len)
{
    (void)table;
    (void)len;
}

#endif /* HAVE_BPF_STEERING */

/* ------------------------------------------------------------------ */
/*
 * The REUSEPORT_SOCKARRAYs the steering programs choose sockets from.  The
 * generation's map, kept for the server's life and grown by doubling, is
 * made to hold each bucket's socket under its bucket number, leaving
 * alone a key that holds the right one, so that a cycle with nothing to
 * mend changes nothing.  A handover's map holds one socket under the hash
 * program for a moment, so that a replaced socket's queue passes to its
 * successor (Linux 5.14).  prefork_steering.c keeps the generation's map;
 * the guard (prefork_sockguard.c) asks whether a handover can be made and
 * makes one.  Kernel calls go through the steps above.
 */


/* Room for @a needed buckets in a steering map: a power of two, at least
 * 16, so that a restart adding a Listen seldom needs a new map. */
static int map_capacity(int needed)
{
    int capacity = 16;

    while (capacity < needed && capacity < PF_STEER_MAX_RECORDS) {
        capacity *= 2;
    }
    return capacity;
}

void pf_steer_map_init(pf_steer_map_t *m, apr_pool_t *pool)
{
    memset(m, 0, sizeof(*m));
    m->pool = pool;
    m->fd = -1;
}

apr_status_t pf_steer_map_ensure(pf_steer_map_t *m, int needed,
                                 const char **step)
{
    int capacity, fd, key;
    apr_status_t rv;

    if (m->fd >= 0 && m->capacity >= needed) {
        return APR_SUCCESS;
    }
    capacity = map_capacity(needed);
    if (capacity < needed) {
        *step = "sizing the socket map";
        return APR_EINVAL;
    }
    rv = pf_steer_kernel_socket_map(capacity, &fd);
    if (rv != APR_SUCCESS) {
        *step = "bpf(BPF_MAP_CREATE) of the REUSEPORT_SOCKARRAY";
        return rv;
    }
    for (key = 0; m->fd >= 0 && key < m->capacity; key++) {
        pf_steer_kernel_clear_socket(m->fd, key);
    }
    pf_steer_kernel_close(m->fd);
    m->fd = fd;
    m->capacity = capacity;
    /* Grows by doubling, so a long run of restarts allocates from the
     * long-lived pool a bounded number of times. */
    m->wanted_cookie = apr_pcalloc(m->pool, sizeof(apr_uint64_t)
                                                * (apr_size_t)capacity);
    m->held_cookie = apr_pcalloc(m->pool, sizeof(apr_uint64_t)
                                              * (apr_size_t)capacity);
    return APR_SUCCESS;
}

/* Bucket @a k's socket, as of now (the bucket set may replace one in
 * place): in a generation with something to steer, its one socket. */
static apr_socket_t *socket_of(const pf_generation_t *gen, int k)
{
    return gen->bucket[k].listeners->sd;
}

/* Whether @a sd listens now.  One that does not (a child shut it down
 * since the parent's last look) is not hashed, so the kernel takes it in
 * no socket map: the guard's next check, which the child's exit or the
 * next cycle brings, puts it right and refills the map. */
static int listening_now(apr_socket_t *sd)
{
    apr_os_sock_t fd;
    int on = 0;
    socklen_t len = sizeof(on);

    return apr_os_sock_get(&fd, sd) == APR_SUCCESS && fd >= 0
           && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0
           && on != 0;
}

/* Whether @a cookie is wanted under a key other than @a key. */
static int wanted_elsewhere(const pf_steer_map_t *m, apr_uint64_t cookie,
                            int key)
{
    int k;

    for (k = 0; k < m->capacity; k++) {
        if (k != key && m->wanted_cookie[k] == cookie) {
            return 1;
        }
    }
    return 0;
}

apr_status_t pf_steer_map_sync(pf_steer_map_t *m, const pf_generation_t *gen,
                               int *changed, int *bad)
{
    apr_status_t rv, first = APR_SUCCESS;
    int key;

    *changed = 0;
    *bad = -1;
    for (key = 0; key < m->capacity; key++) {
        m->wanted_cookie[key] = 0;
        if (key < gen->num_buckets && socket_of(gen, key) != NULL) {
            pf_steer_kernel_cookie(socket_of(gen, key),
                                   &m->wanted_cookie[key]);
        }
        if (pf_steer_kernel_socket_at(m->fd, key, &m->held_cookie[key])
            != APR_SUCCESS) {
            m->held_cookie[key] = 0;
        }
    }
    /* A socket can be under one key at a time: one that moves is taken
     * out of its old key first, and a key no bucket wants is emptied. */
    for (key = 0; key < m->capacity; key++) {
        if (m->held_cookie[key] != 0
            && m->held_cookie[key] != m->wanted_cookie[key]
            && (m->wanted_cookie[key] == 0
                || wanted_elsewhere(m, m->held_cookie[key], key))) {
            pf_steer_kernel_clear_socket(m->fd, key);
        }
    }
    for (key = 0; key < gen->num_buckets && key < m->capacity; key++) {
        if (m->held_cookie[key] == m->wanted_cookie[key]
            || socket_of(gen, key) == NULL) {
            continue;
        }
        rv = pf_steer_kernel_put_socket(m->fd, key, socket_of(gen, key));
        if (rv == APR_SUCCESS) {
            (*changed)++;
        }
        else if (first == APR_SUCCESS && listening_now(socket_of(gen, key))) {
            first = rv;
            *bad = key;
        }
    }
    return first;
}

void pf_steer_map_close(pf_steer_map_t *m)
{
    pf_steer_kernel_close(m->fd);
    m->fd = -1;
}

/* ------------------------------------------------------------------ */
/* A handover                                                          */

/* The hash program over a map of one socket: it chooses key 0, or
 * nothing. */
static apr_status_t load_handover(int *map_fd, int *prog_fd, int *hands_over,
                                  char *line, apr_size_t line_len)
{
    pf_steer_program_t spec;
    apr_status_t rv;

    *map_fd = *prog_fd = -1;
    *hands_over = 0;
    rv = pf_steer_kernel_socket_map(1, map_fd);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    memset(&spec, 0, sizeof(spec));
    spec.mode = PFB_STEER_HASH;
    spec.socks_fd = *map_fd;
    spec.idle_fd = spec.cpu_fd = -1;
    spec.listen.first_bucket = 0;
    spec.listen.per_listen = 1;
    spec.listen.probes = 0;
    spec.listen.capacity = 1;
    return pf_steer_kernel_load(&spec, prog_fd, hands_over, line, line_len);
}

int pf_steer_can_hand_over(char *why, apr_size_t why_len)
{
    char line[256];
    int map_fd, prog_fd, hands_over;
    apr_status_t rv;

    *why = '\0';
    if (!pf_steer_kernel_built()) {
        apr_cpystrn(why, "this build has no BPF programs", why_len);
        return 0;
    }
    rv = load_handover(&map_fd, &prog_fd, &hands_over, line, sizeof(line));
    pf_steer_kernel_close(prog_fd);
    pf_steer_kernel_close(map_fd);
    if (rv != APR_SUCCESS) {
        apr_snprintf(why, why_len, "loading the SK_REUSEPORT program "
                     "failed%s%s", *line ? ": " : "", line);
        return 0;
    }
    if (!hands_over) {
        apr_cpystrn(why, "the kernel has no program that chooses where a "
                    "closing socket's connections go (Linux 5.14)",
                    why_len);
    }
    return hands_over;
}

apr_status_t pf_steer_handover(apr_socket_t *fresh, int old_fd, int stays)
{
    int map_fd, prog_fd, hands_over;
    apr_status_t rv;

    rv = load_handover(&map_fd, &prog_fd, &hands_over, NULL, 0);
    if (rv == APR_SUCCESS && !hands_over) {
        rv = APR_ENOTIMPL;
    }
    if (rv == APR_SUCCESS) {
        rv = pf_steer_kernel_put_socket(map_fd, 0, fresh);
    }
    if (rv == APR_SUCCESS) {
        rv = pf_steer_kernel_attach(fresh, prog_fd);
    }
    if (rv == APR_SUCCESS) {
        /* The kernel hands every connection queued on the old socket, and
         * every handshake it answered, to the one the program chooses. */
        if (shutdown(old_fd, SHUT_RDWR) != 0) {
            rv = errno;
        }
        if (!stays) {
            pf_steer_kernel_detach(fresh);
        }
    }
    pf_steer_kernel_close(prog_fd);
    pf_steer_kernel_close(map_fd);
    return rv;
}
