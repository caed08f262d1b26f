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
 *   then=exit|segv|fatal                      leave afterwards: cleanly,
 *                                             with a crash, or with
 *                                             APEXIT_CHILDFATAL
 *
 * The answer says what was written: "segment BYTES scoreboard SLOTS
 * bpf_mappings N bpf_bytes N bpf_fds N map_changes N".
 *
 * Attacks that last (each sends "running pid P" at once, then repeats
 * until the file named by stop= exists, at most 60 s, and ends with a
 * summary line; the test creates the file):
 *
 *   segment=flip     the header's bucket count flips between 1 and the
 *                    record count, the bucket table valid, while other
 *                    children read the segment for status pages
 *   segment=huge     every count in the header at its largest, the table
 *                    and every slot pointing at valid records
 *   segment=linger   every slot's lingering count at 1, again and again
 *   segment=ctrl     every bucket's listener name with control
 *                    characters and "?auto" lines in it
 *   kill=KILL|TERM|HUP|USR1
 *                    sends that signal to every other child of the
 *                    parent, again and again ("kills N")
 *   rounds=N         kill: stop after N rounds, without waiting for stop=
 *   ignore=TERM      ignores SIGTERM (the stop signal) and waits
 *                    ("waited 1")
 *   hold=1           holds its connection until the stop file, then
 *                    leaves as then= says ("held 1"), so that a test
 *                    can make many children leave at once
 *   stop=PATH        the file that ends the attack
 *
 * Attacks on the bucket socket(s) this child holds (every listening
 * socket it finds), once each; the answer is "sockets N ok N errno E"
 * (E: the last failure's errno, 0 for none):
 *
 *   sock=cbpf        SO_ATTACH_REUSEPORT_CBPF, a program choosing socket 2
 *   sock=ebpf        SO_ATTACH_REUSEPORT_EBPF (with no program to give)
 *   sock=detach      SO_DETACH_REUSEPORT_BPF
 *   sock=shutdown    shutdown(SHUT_RDWR): the socket stops listening
 *   sock=connect     shutdown, then connect() the socket somewhere else
 *                    (again while the parent makes it listen in between)
 *   sock=backlog     listen(fd, 1)
 *   sock=nonblock    O_NONBLOCK on the shared open file description
 *   sock=rcvtimeo    SO_RCVTIMEO of a microsecond
 *   sock=filter      a socket filter that drops every handshake (Linux
 *                    6.18 refuses it to a process without privileges)
 *   sock=lock        SO_LOCK_FILTER
 *   sock=noreuseport SO_REUSEPORT off
 *   sock=opt         opt=NAME: an option that every accepted connection
 *                    inherits, set to a harmful value: linger (SO_LINGER
 *                    {1, 0}: every close a reset), ttl (IP_TTL 1), tos,
 *                    sndbuf and rcvbuf (2304), maxseg (TCP_MAXSEG 88),
 *                    keepalive, priority, nodelay, cork, keepidle,
 *                    defer (TCP_DEFER_ACCEPT 5), clamp (TCP_WINDOW_CLAMP
 *                    2048), usertimeout, congestion (reno), rcvlowat,
 *                    minttl (IP_MINTTL 255), dontroute, pacing
 *                    (SO_MAX_PACING_RATE 1000)
 *                    (pfb_hostile_socket.c has the list), and the fourth
 *                    round's: buflock (SO_BUF_LOCK 3), busypoll,
 *                    incomingcpu, zerocopy, timestamping, recverr,
 *                    freebind, pktinfo, quickack, inq
 *   sock=async       sig=IO|STOP: F_SETOWN to the process group, F_SETSIG
 *                    and O_ASYNC, so that each connection signals every
 *                    child; sock=asyncioctl: SIOCSPGRP and FIOASYNC
 *   via=dup          make each call through a dup() of the descriptor
 *   high=1           make each setsockopt() a raw system call with bits
 *                    32 to 63 of the descriptor, the level and the option
 *                    set (the kernel reads the low 32 bits only)
 *
 * A process that outlives the child, holding a copy of its bucket socket
 * (answers "grandchild pid P" at once, and runs until the stop file):
 *
 *   grandchild=hold      keeps the copy
 *   grandchild=linger    SO_LINGER {1, 0} on it every 2 ms
 *   grandchild=shutdown  shutdown() on it every 2 ms
 *   grandchild=steal     accepts on it and answers "stolen"; listens on
 *                        it again (with SO_REUSEPORT) when it stops
 *
 *   report=conn      the options of the connection the request came on:
 *                    "buf_lock N sndbuf N linger N ttl N"
 *
 * "PfbHostileChildInit fatal" makes every child exit with
 * APEXIT_CHILDFATAL from its child_init hook, before it serves anything.
 *
 * It must never be loaded outside tests.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <linux/filter.h>

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
#include "pfb_hostile.h"

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

/* ------------------------------------------------------------------ */
/* Attacks that last                                                   */

static int time_is_up(const char *stop_file, time_t started)
{
    return pfb_hostile_time_is_up(stop_file, started,
                                  PFB_HOSTILE_MAX_SECONDS);
}

/* Busy for about @a n loop turns, without a system call. */
static void spin(unsigned int n)
{
    volatile unsigned int i;

    for (i = 0; i < n; i++) {
    }
}

static pfb_shm_t *writable_header(const pfb_segment_t *seg)
{
    return (pfb_shm_t *)(void *)seg->shm;
}

/* Points every bucket-table entry at a record that exists, so that a
 * reader trusting the header's count finds a record for every bucket. */
static void valid_table(const pfb_segment_t *seg)
{
    pfb_layout_t layout;
    apr_int32_t *table;
    int b;

    pfb_layout(seg->num_records, seg->num_slots, &layout);
    table = (apr_int32_t *)((char *)writable_header(seg) + layout.table);
    for (b = 0; b < seg->num_records; b++) {
        table[b] = b;
    }
}

/* Every slot a live child of the current generation in a valid record,
 * with a huge counter: a reader that trusts the header visits them all,
 * for every bucket. */
static void busy_slots(const pfb_segment_t *seg)
{
    pfb_layout_t layout;
    pfb_slot_t *slots;
    int slot;

    pfb_layout(seg->num_records, seg->num_slots, &layout);
    slots = (pfb_slot_t *)((char *)writable_header(seg) + layout.slots);
    for (slot = 0; slot < seg->num_slots; slot++) {
        slots[slot].f.pid = 1;
        slots[slot].f.record = slot % seg->num_records;
        slots[slot].f.generation = seg->shm->generation;
        slots[slot].f.stopping = 0;
        slots[slot].f.accepted = ~(apr_uint64_t)0 - (apr_uint64_t)slot;
    }
}

/* Listener names with control characters, and lines that would parse as
 * ?auto figures if a formatter copied them through. */
static void control_listeners(const pfb_segment_t *seg)
{
    static const char name[] = "127.0.0.1:1\nTotal Accesses: 999\r\n"
                               "BucketCount: 77\n\033[31m\x7f";
    pfb_layout_t layout;
    pfb_bucket_t *records;
    int r;

    pfb_layout(seg->num_records, seg->num_slots, &layout);
    records = (pfb_bucket_t *)((char *)writable_header(seg)
                               + layout.records);
    for (r = 0; r < seg->num_records; r++) {
        memcpy(records[r].f.listener, name, sizeof(name));
    }
}

/* Every slot says its child still lingers on closed connections, as if
 * no idle child could be retired. */
static void lingering_slots(const pfb_segment_t *seg)
{
    pfb_layout_t layout;
    pfb_slot_t *slots;
    int slot;

    pfb_layout(seg->num_records, seg->num_slots, &layout);
    slots = (pfb_slot_t *)((char *)writable_header(seg) + layout.slots);
    for (slot = 0; slot < seg->num_slots; slot++) {
        slots[slot].f.lingering = 1;
    }
}

/* Rewrites the segment the way @a how says until told to stop; returns
 * how many times. */
static long segment_attack(const pfb_segment_t *seg, const char *how,
                           const char *stop_file)
{
    pfb_shm_t *h = writable_header(seg);
    time_t started = time(NULL);
    long rounds = 0;
    int i;

    if (strcmp(how, "flip") == 0) {
        unsigned int seed = (unsigned int)getpid();

        valid_table(seg);
        while (!time_is_up(stop_file, started)) {
            /* A reader that reads the count twice sees 1 the first time
             * and every record the second: a moment of 1, then a stretch
             * of every record, of lengths that vary so that some match
             * whatever the reader does in between. */
            for (i = 0; i < 16; i++) {
                unsigned int scale = 1u << (rand_r(&seed) % 4);

                h->num_buckets = 1;
                spin(100 * scale + rand_r(&seed) % 101);
                h->num_buckets = (apr_uint32_t)seg->num_records;
                spin(10000 * scale + rand_r(&seed) % 10001);
            }
            rounds++;
        }
        return rounds;
    }
    while (!time_is_up(stop_file, started)) {
        if (strcmp(how, "huge") == 0) {
            valid_table(seg);
            busy_slots(seg);
            h->num_buckets = 0xffffffffu;
            h->slots_used = 0x7fffffff;
            h->started = (apr_int64_t)((apr_uint64_t)1 << 63);
        }
        else if (strcmp(how, "ctrl") == 0) {
            control_listeners(seg);
        }
        else if (strcmp(how, "linger") == 0) {
            lingering_slots(seg);
        }
        else {
            break;
        }
        rounds++;
        /* The parent rewrites the segment once a cycle: every 5 ms
         * keeps it ours nearly all the time. */
        usleep(5000);
    }
    return rounds;
}

/* The other children of our parent, as /proc lists them. */
static int kill_siblings(int sig)
{
    pid_t me = getpid(), parent = getppid();
    struct dirent *entry;
    DIR *proc = opendir("/proc");
    int killed = 0;

    if (proc == NULL) {
        return 0;
    }
    while ((entry = readdir(proc)) != NULL) {
        char path[64], stat[512], *close_paren;
        long pid = strtol(entry->d_name, NULL, 10), ppid;
        FILE *f;

        if (pid <= 0 || pid == me) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        if ((f = fopen(path, "r")) == NULL) {
            continue;
        }
        close_paren = fgets(stat, sizeof(stat), f) ? strrchr(stat, ')')
                                                   : NULL;
        fclose(f);
        if (close_paren == NULL
            || sscanf(close_paren + 1, " %*c %ld", &ppid) != 1
            || ppid != (long)parent) {
            continue;
        }
        if (kill((pid_t)pid, sig) == 0) {
            killed++;
        }
    }
    closedir(proc);
    return killed;
}

/* A child that ignores the stop signal, as a script that installs its own
 * handler may: only the parent's SIGKILL ends it before the stop file. */
static long ignore_stop(const char *stop_file)
{
    struct sigaction ignore;
    time_t started = time(NULL);

    memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGTERM, &ignore, NULL);
    while (!time_is_up(stop_file, started)) {
        usleep(20000);
    }
    return 1;
}

static long kill_attack(const char *which, const char *stop_file,
                        long rounds)
{
    int sig = strcmp(which, "TERM") == 0   ? SIGTERM
              : strcmp(which, "HUP") == 0  ? SIGHUP
              : strcmp(which, "USR1") == 0 ? SIGUSR1
                                           : SIGKILL;
    time_t started = time(NULL);
    long kills = 0, round;

    for (round = 0; (rounds <= 0 || round < rounds)
                    && !time_is_up(stop_file, started); round++) {
        kills += kill_siblings(sig);
        usleep(2000);
    }
    return kills;
}

/* ------------------------------------------------------------------ */
/* The handler                                                         */

static int child_init_fatal;

static void leave(const char *then)
{
    if (strcmp(then, "exit") == 0) {
        exit(0);
    }
    if (strcmp(then, "segv") == 0) {
        raise(SIGSEGV);
    }
    if (strcmp(then, "fatal") == 0) {
        exit(APEXIT_CHILDFATAL);
    }
}

static const pfb_segment_t *segment(void)
{
    APR_OPTIONAL_FN_TYPE(prefork_buckets_segment) *get_segment;

    get_segment = APR_RETRIEVE_OPTIONAL_FN(prefork_buckets_segment);
    return get_segment ? get_segment() : NULL;
}

static int pfb_hostile_handler(request_rec *r)
{
    const pfb_segment_t *seg;
    const pattern_t *pat = NULL;
    unsigned int seed = 1;
    const char *then = "", *segment_how = NULL, *kill_how = NULL;
    const char *sock_how = NULL, *stop_file = NULL, *ignore_how = NULL;
    const char *opt = NULL, *sig = NULL, *grandchild = NULL;
    long kill_rounds = 0;
    char *args, *word, *state;
    size_t seg_bytes = 0, bpf_bytes = 0;
    int slots = 0, mappings = 0, fds, changes, own_quiescing = 0;
    int via_dup = 0, hold = 0, high = 0, report = 0;

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
        else if (strncmp(word, "segment=", 8) == 0) {
            segment_how = word + 8;
        }
        else if (strncmp(word, "kill=", 5) == 0) {
            kill_how = word + 5;
        }
        else if (strncmp(word, "ignore=", 7) == 0) {
            ignore_how = word + 7;
        }
        else if (strncmp(word, "rounds=", 7) == 0) {
            kill_rounds = strtol(word + 7, NULL, 10);
        }
        else if (strncmp(word, "sock=", 5) == 0) {
            sock_how = word + 5;
        }
        else if (strcmp(word, "via=dup") == 0) {
            via_dup = 1;
        }
        else if (strncmp(word, "opt=", 4) == 0) {
            opt = word + 4;
        }
        else if (strcmp(word, "high=1") == 0) {
            high = 1;
        }
        else if (strncmp(word, "sig=", 4) == 0) {
            sig = word + 4;
        }
        else if (strncmp(word, "grandchild=", 11) == 0) {
            grandchild = word + 11;
        }
        else if (strcmp(word, "report=conn") == 0) {
            report = 1;
        }
        else if (strcmp(word, "hold=1") == 0) {
            hold = 1;
        }
        else if (strncmp(word, "stop=", 5) == 0) {
            stop_file = word + 5;
        }
    }
    ap_set_content_type(r, "text/plain");
    if (report) {
        pfb_hostile_report_connection(r);
        return OK;
    }
    if (grandchild) {
        pfb_hostile_grandchild(r, grandchild, stop_file);
        return OK;
    }
    if (hold) {
        time_t started = time(NULL);

        ap_rprintf(r, "running pid %ld\n", (long)getpid());
        ap_rflush(r);
        while (!time_is_up(stop_file, started)) {
            usleep(20000);
        }
        ap_rprintf(r, "held 1\n");
        ap_rflush(r);
        leave(then);
        return OK;
    }
    if (ignore_how && strcmp(ignore_how, "TERM") == 0) {
        ap_rprintf(r, "running pid %ld\n", (long)getpid());
        ap_rflush(r);
        ap_rprintf(r, "waited %ld\n", ignore_stop(stop_file));
        return OK;
    }
    if (segment_how || kill_how) {
        long rounds;

        seg = segment();
        if (segment_how && (seg == NULL || seg->shm == NULL)) {
            return HTTP_SERVICE_UNAVAILABLE;
        }
        ap_rprintf(r, "running pid %ld\n", (long)getpid());
        ap_rflush(r);
        rounds = segment_how ? segment_attack(seg, segment_how, stop_file)
                             : kill_attack(kill_how, stop_file, kill_rounds);
        ap_rprintf(r, "%s %ld\n", segment_how ? "rounds" : "kills", rounds);
        return OK;
    }
    if (sock_how) {
        pfb_hostile_socket_attack(r, sock_how, opt, sig, via_dup, high);
        ap_rflush(r);
        leave(then);
        return OK;
    }
    if (pat == NULL && !own_quiescing) {
        if (*then) {
            ap_rprintf(r, "pid %ld\n", (long)getpid());
            ap_rflush(r);
            leave(then);
            return OK;
        }
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
        seg = segment();
        if (seg != NULL && seg->shm != NULL) {
            fill((void *)seg->shm, seg->size, pat, &seed);
            seg_bytes = seg->size;
        }
        mappings = fill_bpf_mappings(pat, &seed, &bpf_bytes);
    }
    fds = try_bpf_descriptors(&changes);

    ap_rprintf(r, "segment %lu scoreboard %d bpf_mappings %d bpf_bytes %lu "
               "bpf_fds %d map_changes %d pid %ld\n",
               (unsigned long)seg_bytes, slots, mappings,
               (unsigned long)bpf_bytes, fds, changes, (long)getpid());
    ap_rflush(r);
    leave(then);
    return OK;
}

static void pfb_hostile_child_init(apr_pool_t *AP_MAYBE_UNUSED(p),
                                   server_rec *AP_MAYBE_UNUSED(s))
{
    if (child_init_fatal) {
        exit(APEXIT_CHILDFATAL);
    }
}

static const char *set_child_init(cmd_parms *AP_MAYBE_UNUSED(cmd),
                                  void *AP_MAYBE_UNUSED(dir_config),
                                  const char *arg)
{
    if (strcmp(arg, "fatal") != 0) {
        return "PfbHostileChildInit: expected fatal";
    }
    child_init_fatal = 1;
    return NULL;
}

static const command_rec pfb_hostile_cmds[] = {
    AP_INIT_TAKE1("PfbHostileChildInit", set_child_init, NULL, RSRC_CONF,
                  "fatal: every child exits with APEXIT_CHILDFATAL from "
                  "child_init"),
    { NULL }
};

static void pfb_hostile_register_hooks(apr_pool_t *AP_MAYBE_UNUSED(p))
{
    ap_hook_handler(pfb_hostile_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_child_init(pfb_hostile_child_init, NULL, NULL, APR_HOOK_MIDDLE);
}

/* clang-format off */
AP_DECLARE_MODULE(pfb_hostile) = {
    STANDARD20_MODULE_STUFF,
    NULL, NULL, NULL, NULL,
    pfb_hostile_cmds,
    pfb_hostile_register_hooks,
    AP_MODULE_FLAG_NONE
};
/* clang-format on */
