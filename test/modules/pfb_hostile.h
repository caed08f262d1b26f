/* Licensed under the Apache License, Version 2.0; see LICENSE.
 *
 * Test-only: the parts of mod_pfb_hostile that attack the bucket socket a
 * child holds (pfb_hostile_socket.c); the handler in mod_pfb_hostile.c
 * reads the query and calls them.
 */

#ifndef PFB_HOSTILE_H
#define PFB_HOSTILE_H

#include <time.h>

#include "httpd.h"

/** The longest a lasting attack runs, whatever the test does. */
#define PFB_HOSTILE_MAX_SECONDS 60

/** Whether the stop file exists or the attack has run out its time. */
int pfb_hostile_time_is_up(const char *stop_file, time_t started,
                           int max_seconds);

/**
 * One attack, once, on every listening socket this child holds (its
 * bucket's), through a dup() of it with @a dup_it, with bits 32 to 63 of
 * setsockopt()'s ints set with @a high; answers "sockets N ok N errno E
 * pid P".
 */
void pfb_hostile_socket_attack(request_rec *r, const char *how,
                               const char *opt, const char *sig, int dup_it,
                               int high);

/**
 * A process that outlives this child with a copy of its bucket socket:
 * forked twice (its parent exits, so it is nobody's child of ours), in a
 * session of its own, every other descriptor closed, it does @a mode to
 * the copy until @a stop_file exists (PFB_HOSTILE_MAX_SECONDS * 2 at
 * most); answers "grandchild pid P".
 */
void pfb_hostile_grandchild(request_rec *r, const char *mode,
                            const char *stop_file);

/** Reports the options of the connection the request came on, as the
 *  kernel copied them from the listener: "buf_lock N sndbuf N linger N
 *  ttl N". */
void pfb_hostile_report_connection(request_rec *r);

#endif /* PFB_HOSTILE_H */
