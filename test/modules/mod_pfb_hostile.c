/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Test-only: a child that runs hostile code, as mod_php or a CGI-like
 * handler may.  "SetHandler pfb-hostile" writes chosen values into every
 * byte a child can reach that the parent or other children read:
 *
 *   - the scoreboard's parent fields of every slot (pid, generation,
 *     quiescing, bucket) and every worker's status;
 *   - the MPM's whole shared segment (header, bucket table, bucket and
 *     slot records);
 *   - every BPF map mapped into the child (idle steering's counts);
 *
 * and tries to change any BPF map whose descriptor it holds (the socket
 * map, if a child could reach it).  Query string:
 *
 *   fill=zero|ones|huge|negative|big|random   what to write
 *   seed=N                                    for random
 *   own=quiescing                             only set its own slot's
 *                                             quiescing (and nothing else)
 *   then=exit|segv                            leave afterwards, cleanly or
 *                                             with a crash
 *
 * The answer says what was written: "segment BYTES scoreboard SLOTS
 * bpf_mappings N bpf_bytes N bpf_fds N map_changes N".  It must never be
 * loaded outside tests.
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/bpf.h>

#include "apr_optional.h"
#include "apr_strings.h"

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_protocol.h"
#include "ap_mpm.h"
#include "scoreboard.h"

#include "pfb_log.h"
#include "prefork_buckets.h"

module AP_MODULE_DECLARE_DATA pfb_hostile_module;

typedef struct {
    const char *name;
    int random;
    apr_uint32_t word;          /* repeated, for the fixed patterns */
} pattern_t;

static const pattern_t patterns[] = {
    { "zero", 0, 0x00000000u },
    { "ones", 0, 0xffffffffu },
    { "huge", 0, 0x7fffffffu },
    { "negative", 0, 0x80000000u },
    { "big", 0, 0x10000000u },
    { "random", 1, 0 },
};

/* Fills @a len bytes with the pattern, a 32-bit word at a time where it
 * fits. */
static void fill(void *at, size_t len, const pattern_t *pat,
                 unsigned int *seed)
{
    unsigned char *p = at;
    size_t i;

    for (i = 0; i < len; i++) {
        if (pat->random) {
            p[i] = (unsigned char)rand_r(seed);
        }
        else {
            p[i] = (unsigned char)(pat->word >> (8 * (i % 4)));
        }
    }
}

static const pattern_t *find_pattern(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
        if (strcmp(patterns[i].name, name) == 0) {
            return &patterns[i];
        }
    }
    return NULL;
}

/* Every slot's parent fields and every worker's status. */
static int fill_scoreboard(const pattern_t *pat, unsigned int *seed)
{
    int limit = 0, slot;

    ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &limit);
    for (slot = 0; slot < limit; slot++) {
        process_score *ps = ap_get_scoreboard_process(slot);
        worker_score *ws = ap_get_scoreboard_worker_from_indexes(slot, 0);

        if (ps == NULL || ws == NULL) {
            break;
        }
        /* A pid to signal that is not a child: the parent itself. */
        ps->pid = pat->random ? (pid_t)rand_r(seed) : getppid();
        fill(&ps->generation, sizeof(ps->generation), pat, seed);
        fill(&ps->quiescing, sizeof(ps->quiescing), pat, seed);
        fill(&ps->bucket, sizeof(ps->bucket), pat, seed);
        fill(&ws->status, sizeof(ws->status), pat, seed);
    }
    return slot;
}

/* Every BPF map mapped into this process, as /proc/self/maps lists it. */
static int fill_bpf_mappings(const pattern_t *pat, unsigned int *seed,
                             size_t *bytes)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long start, end;
    char perms[8];
    int n = 0;

    *bytes = 0;
    if (maps == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), maps)) {
        if (strstr(line, "bpf-map") == NULL
            || sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3
            || perms[1] != 'w') {
            continue;
        }
        fill((void *)start, end - start, pat, seed);
        *bytes += end - start;
        n++;
    }
    fclose(maps);
    return n;
}

/* Any BPF map descriptor this child holds, and how many changes the
 * kernel let it make through them. */
static int try_bpf_descriptors(int *changes)
{
    char path[64], target[64];
    union bpf_attr attr;
    int fd, key, found = 0;
    ssize_t len;

    *changes = 0;
    for (fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        len = readlink(path, target, sizeof(target) - 1);
        if (len < 0) {
            continue;
        }
        target[len] = '\0';
        if (strstr(target, "bpf") == NULL) {
            continue;
        }
        found++;
        for (key = 0; key < 16; key++) {
            memset(&attr, 0, sizeof(attr));
            attr.map_fd = (apr_uint32_t)fd;
            attr.key = (apr_uint64_t)(unsigned long)&key;
            if (syscall(SYS_bpf, BPF_MAP_DELETE_ELEM, &attr, sizeof(attr))
                == 0) {
                (*changes)++;
            }
        }
    }
    return found;
}

static int pfb_hostile_handler(request_rec *r)
{
    APR_OPTIONAL_FN_TYPE(prefork_buckets_segment) *get_segment;
    const pfb_segment_t *seg;
    const pattern_t *pat = NULL;
    unsigned int seed = 1;
    const char *then = "";
    char *args, *word, *state;
    size_t seg_bytes = 0, bpf_bytes = 0;
    int slots = 0, mappings = 0, fds, changes, own_quiescing = 0;

    if (strcmp(r->handler, "pfb-hostile") != 0) {
        return DECLINED;
    }
    args = apr_pstrdup(r->pool, r->args ? r->args : "");
    for (word = apr_strtok(args, "&", &state); word;
         word = apr_strtok(NULL, "&", &state)) {
        if (strncmp(word, "fill=", 5) == 0) {
            pat = find_pattern(word + 5);
        }
        else if (strncmp(word, "seed=", 5) == 0) {
            seed = (unsigned int)strtoul(word + 5, NULL, 10);
        }
        else if (strcmp(word, "own=quiescing") == 0) {
            own_quiescing = 1;
        }
        else if (strncmp(word, "then=", 5) == 0) {
            then = word + 5;
        }
    }
    if (pat == NULL && !own_quiescing) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r,
                      PFBLOGNO(00052) "pfb-hostile: no fill= pattern");
        return HTTP_BAD_REQUEST;
    }
    if (own_quiescing) {
        int slot;

        for (slot = 0; slot < ap_scoreboard_image->global->server_limit;
             slot++) {
            process_score *ps = ap_get_scoreboard_process(slot);

            if (ps != NULL && ps->pid == getpid()) {
                ps->quiescing = 1;
            }
        }
    }
    else {
        slots = fill_scoreboard(pat, &seed);
        get_segment = APR_RETRIEVE_OPTIONAL_FN(prefork_buckets_segment);
        seg = get_segment ? get_segment() : NULL;
        if (seg != NULL && seg->shm != NULL) {
            fill((void *)seg->shm, seg->size, pat, &seed);
            seg_bytes = seg->size;
        }
        mappings = fill_bpf_mappings(pat, &seed, &bpf_bytes);
    }
    fds = try_bpf_descriptors(&changes);

    ap_set_content_type(r, "text/plain");
    ap_rprintf(r, "segment %lu scoreboard %d bpf_mappings %d bpf_bytes %lu "
               "bpf_fds %d map_changes %d pid %ld\n",
               (unsigned long)seg_bytes, slots, mappings,
               (unsigned long)bpf_bytes, fds, changes, (long)getpid());
    ap_rflush(r);
    if (strcmp(then, "exit") == 0) {
        exit(0);
    }
    if (strcmp(then, "segv") == 0) {
        raise(SIGSEGV);
    }
    return OK;
}

static void pfb_hostile_register_hooks(apr_pool_t *AP_MAYBE_UNUSED(p))
{
    ap_hook_handler(pfb_hostile_handler, NULL, NULL, APR_HOOK_MIDDLE);
}

/* clang-format off */
AP_DECLARE_MODULE(pfb_hostile) = {
    STANDARD20_MODULE_STUFF,
    NULL, NULL, NULL, NULL, NULL,
    pfb_hostile_register_hooks,
    AP_MODULE_FLAG_NONE
};
/* clang-format on */
