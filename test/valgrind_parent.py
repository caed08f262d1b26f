#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""valgrind memcheck on the parent over start, graceful restart and stop,
with 4 buckets, once with hash and once with idle steering
(maps and programs made with libbpf and replaced by the parent; libbpf's
own feature probes are suppressed, test/valgrind-libbpf.supp): fails on any
"definitely lost" block allocated by this project's code (a stack through
mod_mpm_prefork.so), and on any error valgrind reports in a stack through
it (a bpf(2) argument with uninitialised bytes, say).  Children are forked
copies and are not checked (--child-silent-after-fork).  A third pass has
a hostile child (test/modules/mod_pfb_hostile.c) write huge and random
values over the scoreboard, the shared segment and the idle counts, and
exit, shut its bucket socket down, shrink its backlog, set SO_LINGER and a
buffer size on it through a copy (put back in place, and with a new socket),
and exit with APEXIT_CHILDFATAL, before the graceful restart: memcheck then
watches the parent use whatever a child can write, put the socket right,
replace it and replace the children."""

import os
import re
import signal
import subprocess
import sys

from pfbtest import Server, HOSTILE_SO, http_get


# A block is ours when a frame names the module or any of its sources
# (prefork.c, prefork_*.c in any of the MPM's folders).
OURS = re.compile(r"mod_mpm_prefork|\bprefork(_\w+)?\.c\b")
# libbpf's feature probes, which valgrind misreads (the file says how).
SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "valgrind-libbpf.supp")
HOSTILE = ("ListenBucketSteering idle\n<Location /hostile>\n"
           "    SetHandler pfb-hostile\n</Location>\n")
CONFIGS = ("ListenBuckets 4\nStartServers 4\n",
           "ListenBuckets 4\nStartServers 4\nListenBucketSteering idle\n",
           "ListenBuckets 4\nStartServers 4\n" + HOSTILE)


def scribble(srv):
    """A hostile child writes over everything children can reach, then
    exits; the parent reaps it and runs a cycle with the values in
    place."""
    for query in ("fill=huge", "fill=random&seed=7&then=exit"):
        status, body = http_get("127.0.0.1", srv.ports[0],
                                "/hostile?" + query, timeout=120)
        if status != 200 or b"segment" not in body:
            raise SystemExit("valgrind: hostile child answered %d" % status)
    # Its bucket socket shut down, its backlog shrunk, an option every
    # connection inherits set and a buffer size set (which takes a new
    # socket), then a fatal exit after serving: the parent puts the socket
    # right (PFB00060) and replaces the child (PFB00068).
    for query, tag in (("sock=backlog", "PFB00060"),
                       ("sock=shutdown", "PFB00060"),
                       ("sock=opt&opt=linger&via=dup", "SO_LINGER"),
                       ("sock=opt&opt=sndbuf&via=dup", "SO_SNDBUF"),
                       ("then=fatal", "PFB00068")):
        seen = srv.log_count(tag)
        status, _ = http_get("127.0.0.1", srv.ports[0], "/hostile?" + query,
                             timeout=120)
        if status != 200 or not srv.wait_log(tag, count=seen + 1,
                                             timeout=120):
            raise SystemExit("valgrind: %s: %d, no %s" % (query, status, tag))


def main():
    failed = 0
    for extra in CONFIGS:
        failed |= check_parent(extra)
    return failed


def check_parent(extra):
    hostile = "pfb-hostile" in extra
    modules = "LoadModule pfb_hostile_module %s\n" % HOSTILE_SO \
        if hostile else ""
    with Server(extra=extra, extra_modules=modules,
                expect_log=("AH00052", "AH02179", "PFB00060",
                            "PFB00068")) as srv:
        log = os.path.join(srv.root, "valgrind.log")
        srv.wrapper = ["valgrind", "--tool=memcheck", "--leak-check=full",
                       "--errors-for-leak-kinds=definite",
                       "--child-silent-after-fork=yes",
                       "--suppressions=" + SUPPRESSIONS,
                       "--log-file=" + log]
        srv.start(timeout=120)
        # Children run under valgrind too, slowly: wait for them, and for
        # the restart's, rather than for a guess at how long that takes.
        if len(srv.wait_ready(4, timeout=120)) < 4:
            print("valgrind: the children did not start")
            return 1
        if hostile:
            scribble(srv)
        # Waited for in the log: a hostile child has scribbled over the
        # scoreboard the harness would otherwise read.
        srv.graceful()
        if not srv.wait_log("PFB00017", count=2, timeout=120):
            print("valgrind: the graceful restart did not finish")
            return 1
        srv.signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            print("valgrind: the server did not stop")
            return 1
        text = open(log).read()
        blocks = re.split(r"\n==\d+== \n", text)
        ours = [b for b in blocks
                if OURS.search(b)
                and ("definitely lost" in b or "uninitialised" in b
                     or "Invalid " in b)]
        summary = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) "
                            r"blocks", text)
        errors = re.search(r"ERROR SUMMARY: (\d+) errors", text)
        print("valgrind (parent, %s): %s; leaks and errors from this "
              "project: %d" % (extra.strip().replace("\n", ", "),
                               summary.group(0) if summary
                               else "no leak summary", len(ours)))
        for b in ours:
            print(b)
        if not summary or not errors:
            print("valgrind: no summary in %s" % log)
            return 1
        if "Steering idle" in extra and "PFB00046" not in srv.error_log():
            # Under valgrind the programs must really have been loaded, or
            # this pass checked nothing of them.
            print("valgrind: idle steering was not attached:\n%s"
                  % srv.error_log()[-2000:])
            return 1
        return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
