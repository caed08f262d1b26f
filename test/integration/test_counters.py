# Licensed under the Apache License, Version 2.0; see LICENSE.
"""mod_bucket_status's counters never go down, whatever children do.

A bucket's accepted total is its exited children's (kept by the parent)
plus each live child's own counter.  When a child exits, its count moves
from its slot to the parent's total; a reader that copies the two while
the count moves could see it in neither place (a drop) or in both (a drop
at the next scrape).  These tests scrape ?prometheus over and over while
every child exits after one connection (MaxConnectionsPerChild 1), so
children exit and are replaced hundreds of times a second, and fail on
any counter that is lower than at the scrape before."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest
import urllib.request

from pfbtest import STATUS_LOAD, STATUS_LOCATION, Load, Server, wait_for

# Series of a counter family: name{labels} value.
COUNTER = re.compile(r"^(httpd_bucket_(?:accepted|steered)_connections_total"
                     r"\{[^}]*\}) (\d+)$", re.M)


def scrape(srv):
    with urllib.request.urlopen(srv.url("/bucket-status?prometheus="),
                                timeout=30) as r:
        return r.read().decode()


def accepted_total(srv):
    return sum(int(v) for v in re.findall(
        r"^httpd_bucket_accepted_connections_total\{[^}]*\} (\d+)$",
        scrape(srv), re.M))


class ParentHeld:
    """gdb holds the server's parent at the start of @a function until
    release(): children keep serving meanwhile.  The breakpoint is gone
    and the parent runs on when gdb detaches."""

    def __init__(self, pid, function):
        self.dir = tempfile.mkdtemp(prefix="pfb-gdb-")
        self.stopped = os.path.join(self.dir, "stopped")
        self.go = os.path.join(self.dir, "go")
        self.log = open(os.path.join(self.dir, "gdb.log"), "w+")
        self.proc = subprocess.Popen(
            [shutil.which("gdb"), "-nx", "-batch", "-p", str(pid),
             "-ex", "set pagination off",
             "-ex", "break %s" % function,
             "-ex", "shell touch %s.armed" % self.stopped,
             "-ex", "continue",
             "-ex", "shell touch %s; while [ ! -e %s ]; do sleep 0.05; done"
             % (self.stopped, self.go),
             "-ex", "delete",
             "-ex", "detach"],
            stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=subprocess.STDOUT)

    def armed(self):
        return os.path.exists(self.stopped + ".armed")

    def holding(self):
        return os.path.exists(self.stopped)

    def release(self):
        open(self.go, "w").close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.seek(0)
        out = self.log.read()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode, out


class CountersNeverGoDown(unittest.TestCase):

    # Scrapes to take, child exits to see and graceful restarts to make, at
    # least, within the deadline; the first drop ends the watch.
    SCRAPES = 500
    EXITS = 1500
    RESTARTS = 15
    DEADLINE = 240

    def watch(self, extra):
        conf = ("StartServers 16\nMinSpareServers 16\nMaxSpareServers 32\n"
                "ServerLimit 64\nMaxRequestWorkers 64\n"
                "MaxConnectionsPerChild 1\n" + extra + STATUS_LOCATION)
        with Server(extra=conf, extra_modules=STATUS_LOAD) as srv:
            srv.start()
            lock = threading.Lock()
            stop = threading.Event()
            last, drops = {}, []
            counts = {"scrapes": 0, "restarts": 0}

            # Scrapes from two threads: each is a connection and a child
            # exit too, and two readers double the chances.  A scrape is
            # held to what scrapes that had ended before it began saw: two
            # at once may be answered in either order.
            def reader():
                while not stop.is_set() and not drops:
                    with lock:
                        floor = dict(last)
                    seen = {m.group(1): int(m.group(2))
                            for m in COUNTER.finditer(scrape(srv))}
                    with lock:
                        for key, value in seen.items():
                            if value < floor.get(key, 0):
                                drops.append((key, floor[key], value))
                            last[key] = max(value, last.get(key, 0))
                        counts["scrapes"] += 1

            # Graceful restarts: every child of the old generation exits
            # within a few milliseconds of the others.
            def restarter():
                while not stop.is_set() and not drops:
                    srv.restart_gracefully()
                    with lock:
                        counts["restarts"] += 1

            load = Load("127.0.0.1", srv.ports[0], concurrency=4).start()
            threads = [threading.Thread(target=f, daemon=True)
                       for f in (reader, reader, restarter)]
            for t in threads:
                t.start()
            try:
                done = wait_for(
                    lambda: drops or (counts["scrapes"] >= self.SCRAPES
                                      and load.ok >= self.EXITS
                                      and counts["restarts"]
                                      >= self.RESTARTS),
                    self.DEADLINE, 0.1)
            finally:
                stop.set()
                load.stop()
                for t in threads:
                    t.join(60)
            print("  %d scrapes, %d requests (a child exit each), %d "
                  "graceful restarts" % (counts["scrapes"], load.ok,
                                         counts["restarts"]))
            self.assertEqual(drops, [], "counters went down (series, "
                             "before, after)")
            self.assertTrue(done, "too little happened in %d s" %
                            self.DEADLINE)
            self.assertEqual(load.errors, {})
            self.assertTrue(last, "no counter in the exposition")

    def test_an_exited_childs_count_is_never_missing(self):
        # The parent frees an exited child's slot, then adds the child's
        # count to its bucket's total (pf_bucketset_child_gone).  Held in
        # between, as a scrape can find it, the count must still be in
        # the sum: in the slot until it is in the total.
        self.assertIsNotNone(shutil.which("gdb"),
                             "gdb (Debian package gdb) is part of the test "
                             "setup")
        conf = ("ListenBuckets 1\nStartServers 3\nMinSpareServers 1\n"
                "MaxSpareServers 8\n" + STATUS_LOCATION)
        with Server(extra=conf, extra_modules=STATUS_LOAD) as srv:
            srv.start()
            srv.wait_ready(3)
            load = Load("127.0.0.1", srv.ports[0], concurrency=3,
                        max_requests=60).start().wait(120)
            self.assertEqual((load.ok, load.errors), (60, {}))
            children = json.loads(srv.get("/bucket-status?json")[1])[
                "children"]
            victim = max(children, key=lambda c: c["accepted"])
            self.assertGreater(victim["accepted"], 0, children)
            before = accepted_total(srv)
            held = ParentHeld(srv.pid(), "pf_bucketset_child_gone")
            try:
                self.assertTrue(wait_for(held.armed, 60, 0.05),
                                "gdb did not attach")
                os.kill(victim["pid"], signal.SIGKILL)
                self.assertTrue(wait_for(held.holding, 60, 0.05),
                                "the parent did not reach the breakpoint")
                held_total = accepted_total(srv)
            finally:
                rc, out = held.release()
            self.assertEqual(rc, 0, out)
            # The scrape's own connection makes it one more at least.
            self.assertGreater(held_total, before,
                               "a count in neither the slot nor the total: "
                               "%d before the exit, %d while the parent "
                               "moved %d connections of the child"
                               % (before, held_total, victim["accepted"]))
            self.assertGreater(accepted_total(srv), held_total)

    def test_accepted_never_goes_down_while_children_recycle(self):
        self.watch("ListenBuckets 2\n")

    def test_counters_never_go_down_under_idle_steering(self):
        self.watch("ListenBuckets 2\nListenBucketSteering idle\n")


if __name__ == "__main__":
    unittest.main()
