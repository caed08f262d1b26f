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
 * The parent's look for other holders of a bucket socket: processes that
 * are neither the parent nor a live child (the caller says which pids are
 * its own) and hold one, found through the links of /proc/PID/fd alone.
 * Each call confirms the last look's suspects; a whole look over /proc,
 * when due, names new suspects for the next call, so that a child's
 * process between fork() and exec() is not taken for a holder.  Whole
 * looks are spaced by the CPU the last one took (pf_holders_next_look()).
 * It decides and logs nothing: prefork_sockguard.c asks, replaces the
 * sockets and names the holders (pf_holders_name()).
 */

#include "apr.h"
#include "apr_strings.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if APR_HAVE_UNISTD_H
#include <unistd.h>
#endif

#include "prefork_holders.h"

/* The suspects a look remembers for the next: more would mean a host
 * where many processes hold the server's sockets, and each is found
 * again at a later look. */
#define MAX_SUSPECTS 64

struct pf_holders_s {
    apr_time_t next_look;       /* when a whole look may start */
    pf_holder_t suspect[MAX_SUSPECTS];
    int num_suspects;
};

pf_holders_t *pf_holders_create(apr_pool_t *pool)
{
    return apr_pcalloc(pool, sizeof(pf_holders_t));
}

apr_time_t pf_holders_next_look(apr_time_t started, apr_int64_t cost_usec,
                                apr_time_t cycle)
{
    apr_int64_t spacing = cost_usec > 0
                              ? cost_usec * (1000000 / PF_HOLDERS_BUDGET_PPM)
                              : 0;

    /* Half a cycle: the cycles' own timing varies, and the look should
     * not skip one where it can afford it. */
    if (spacing < cycle / 2) {
        spacing = cycle / 2;
    }
    return started + spacing;
}

/* The CPU time this thread has used, in microseconds. */
static apr_int64_t cpu_usec(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (apr_int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int inode_wanted(const apr_ino_t *inodes, int n, apr_ino_t inode)
{
    int low = 0, high = n - 1, mid;

    while (low <= high) {
        mid = low + (high - low) / 2;
        if (inodes[mid] == inode) {
            return 1;
        }
        if (inodes[mid] < inode) {
            low = mid + 1;
        }
        else {
            high = mid - 1;
        }
    }
    return 0;
}

/* The sockets of @a inodes that process @a pid holds, into @a out (room
 * for @a room).  @return how many */
static int sockets_held(pid_t pid, const apr_ino_t *inodes, int n,
                        pf_holder_t *out, int room)
{
    char path[64], target[64];
    struct dirent *entry;
    unsigned long long inode;
    ssize_t len;
    DIR *dir;
    int fd, found = 0;

    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return 0;               /* gone, or no descriptors to read */
    }
    dir = fdopendir(fd);
    if (dir == NULL) {
        close(fd);
        return 0;
    }
    while (found < room && (entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') {
            continue;
        }
        len = readlinkat(dirfd(dir), entry->d_name, target,
                         sizeof(target) - 1);
        if (len <= 0) {
            continue;
        }
        target[len] = '\0';
        if (sscanf(target, "socket:[%llu]", &inode) == 1
            && inode_wanted(inodes, n, (apr_ino_t)inode)) {
            out[found].pid = pid;
            out[found].inode = (apr_ino_t)inode;
            found++;
        }
    }
    closedir(dir);
    return found;
}

static int was_suspect(const pf_holder_t *suspects, int n,
                       const pf_holder_t *h)
{
    int i;

    for (i = 0; i < n; i++) {
        if (suspects[i].pid == h->pid && suspects[i].inode == h->inode) {
            return 1;
        }
    }
    return 0;
}

/* The suspects of the last look that still hold what they held. */
static int confirm_suspects(pf_holders_t *h, const apr_ino_t *inodes, int n,
                            pf_holder_t *found, int room)
{
    pf_holder_t held[8];
    int i, j, k, confirmed = 0;

    for (i = 0; i < h->num_suspects && confirmed < room; i++) {
        k = sockets_held(h->suspect[i].pid, inodes, n, held, 8);
        for (j = 0; j < k && confirmed < room; j++) {
            if (held[j].inode == h->suspect[i].inode) {
                found[confirmed++] = held[j];
            }
        }
    }
    h->num_suspects = 0;
    return confirmed;
}

/* A whole look: every process but ours, its suspects noted for the next
 * call (those already confirmed are not suspected again). */
static void look_at_every_process(pf_holders_t *h, const apr_ino_t *inodes,
                                  int n, pf_holders_ours_fn *ours,
                                  void *baton, const pf_holder_t *confirmed,
                                  int num_confirmed)
{
    pf_holder_t held[8];
    struct dirent *entry;
    DIR *proc = opendir("/proc");
    long pid;
    int j, k;

    if (proc == NULL) {
        return;
    }
    while ((entry = readdir(proc)) != NULL
           && h->num_suspects < MAX_SUSPECTS) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') {
            continue;
        }
        pid = strtol(entry->d_name, NULL, 10);
        if (pid <= 0 || ours(baton, (pid_t)pid)) {
            continue;
        }
        k = sockets_held((pid_t)pid, inodes, n, held, 8);
        for (j = 0; j < k && h->num_suspects < MAX_SUSPECTS; j++) {
            if (!was_suspect(confirmed, num_confirmed, &held[j])) {
                h->suspect[h->num_suspects++] = held[j];
            }
        }
    }
    closedir(proc);
}

int pf_holders_look(pf_holders_t *h, const apr_ino_t *inodes, int n,
                    pf_holders_ours_fn *ours, void *baton, apr_time_t now,
                    pf_holder_t *found, int room)
{
    apr_int64_t cpu;
    int confirmed;

    if (n < 1) {
        h->num_suspects = 0;
        return 0;
    }
    confirmed = confirm_suspects(h, inodes, n, found, room);
    if (now < h->next_look) {
        return confirmed;
    }
    cpu = cpu_usec();
    look_at_every_process(h, inodes, n, ours, baton, found, confirmed);
    h->next_look = pf_holders_next_look(now, cpu_usec() - cpu,
                                        apr_time_from_sec(1));
    return confirmed;
}

const char *pf_holders_name(pid_t pid, char *buf, apr_size_t len)
{
    char path[64];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(buf, (int)len, f) == NULL) {
        apr_cpystrn(buf, "?", len);
    }
    if (f != NULL) {
        fclose(f);
    }
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    /* Its own choice of name: only printable ASCII reaches the log. */
    for (; n > 0; n--) {
        unsigned char c = (unsigned char)buf[n - 1];

        if (c < 0x20 || c > 0x7e) {
            buf[n - 1] = '?';
        }
    }
    return buf;
}
