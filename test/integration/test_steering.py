# Licensed under the Apache License, Version 2.0; see LICENSE.
"""ListenBucketSteering and BucketCPUAffinity against the real server.

Loading BPF programs needs root, as do all these tests (run.py refuses to
run otherwise); the kernel's own verifier checks the programs here.
"""

import ctypes
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

from pfbtest import (Server, Load, STATUS_LOAD, STATUS_LOCATION, NOBPF_SO,
                     NOBPF_MPM_SO)
from pfbtest.sockets import listening_inodes, pidfd_getfd, process_socket_fds
from test_status import check_html

LOCATIONS = (STATUS_LOCATION
             + "<Location /pfb-test>\n    SetHandler pfb-test\n</Location>\n")
MODULES = STATUS_LOAD

# Four buckets of exactly two children, and no slot to spare: a bucket
# whose two children are held stays without an idle child.  With no slot
# to spare, a bucket whose children are all busy under load wants one more
# and the MPM logs PFB00010 (MaxRequestWorkers reached): the set-up.
FULL_LOG = ("PFB00010",)
FOUR_FULL = ("ListenBuckets 4\nStartServers 8\nMinSpareServers 4\n"
             "MaxSpareServers 8\nMaxRequestWorkers 8\nServerLimit 8\n")
HOLD_MS = 8000
# Latency that tells a request that waited for a held child (most of
# HOLD_MS) from one that did not, with room for a loaded machine.
WAITED_S = HOLD_MS / 2000.0

# A client run on one CPU: connects COUNT times, then prints the status
# JSON, fetched from that CPU too (so it counts there as well).
PINNED_CLIENT = r"""
import os, socket, sys, urllib.request
cpu, port, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
os.sched_setaffinity(0, {cpu})
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /index.html HTTP/1.0\r\nHost: t\r\n\r\n")
    while s.recv(65536):
        pass
    s.close()
with urllib.request.urlopen("http://127.0.0.1:%d/bucket-status?json" % port,
                            timeout=30) as r:
    sys.stdout.write(r.read().decode())
"""


def restarts_under_load(test, srv, concurrency):
    """Three graceful restarts, each after 100 more requests served, under
    a closed-loop load that must see no error."""
    load = Load("127.0.0.1", srv.ports[0], concurrency=concurrency).start()
    try:
        for _ in range(3):
            test.assertTrue(load.wait_served(100), load.errors)
            srv.restart_gracefully()
    finally:
        load.stop()
    test.assertEqual(load.errors, {})


def status_json(srv):
    with urllib.request.urlopen(srv.url("/bucket-status?json"),
                                timeout=30) as r:
        return json.loads(r.read().decode())


def imbalance(snap):
    """Connections accepted minus those the program placed (published)."""
    return sum(b["accepted"] for b in snap["buckets"]) - steered(snap)


def steered(snap):
    """Connections the program placed (kept + moved), as published."""
    return sum(b["steering"]["kept"] + b["steering"]["moved"]
               for b in snap["buckets"])


def hold_child(port, ms):
    """Opens a request that keeps its child busy for ms; returns the socket
    and the pid of the child holding it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=ms / 1000 + 30)
    s.sendall(b"GET /pfb-test?hold=%d HTTP/1.0\r\nHost: t\r\n\r\n" % ms)
    data = b""
    while b"pid " not in data or not data.split(b"pid ", 1)[1].count(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            raise AssertionError("hold request closed early: %r" % data)
        data += chunk
    return s, int(data.split(b"pid ", 1)[1].split(b"\n", 1)[0])


def block_one_bucket(srv, per_bucket=2):
    """Holds children until every child of one bucket is held.  Returns
    that bucket and the held sockets (to be closed by the caller)."""
    buckets_of = srv.child_buckets()
    held, counts = [], {}
    while len(held) < 4 * per_bucket:
        s, pid = hold_child(srv.ports[0], HOLD_MS)
        held.append(s)
        b = buckets_of.get(pid)
        if b is None:
            buckets_of = srv.child_buckets()
            b = buckets_of[pid]
        counts[b] = counts.get(b, 0) + 1
        if counts[b] == per_bucket:
            return b, held
    raise AssertionError("no bucket filled: %s" % counts)


def wait_children(srv, n):
    """Waits for n children that finished starting and wait in accept()."""
    return len(srv.wait_ready(n, idle=True)) >= n


def wait_counted_idle(srv, per_bucket):
    """Waits for a publish in which every child is idle both as the
    scoreboard says and as the program's counts say: the children counted
    themselves before waiting in accept(), and the cycle saw each of them
    past its start.  (A child that finishes starting while the parent
    reads the two figures is idle in one and not yet in the other.)"""
    return srv.wait_for(lambda: all(
        b["steering"]["idle"] == per_bucket
        and b["children"]["idle"] == per_bucket
        for b in status_json(srv)["buckets"]))


class IdleSteering(unittest.TestCase):

    def start(self, srv):
        srv.start()
        self.assertTrue(wait_children(srv, 8), srv.children())
        self.assertTrue(wait_counted_idle(srv, 2), status_json(srv))
        self.assertIn("PFB00046: ListenBucketSteering idle: eBPF program "
                      "attached to 1 Listen(s) of 4 bucket(s) each",
                      srv.error_log())

    def test_idle_steering_avoids_a_blocked_bucket(self):
        extra = FOUR_FULL + "ListenBucketSteering idle\n" + LOCATIONS
        # Reaching MaxRequestWorkers is this test's set-up.
        with Server(extra=extra, extra_modules=MODULES,
                    expect_log=("PFB00010",)) as srv:
            self.start(srv)
            blocked, held = block_one_bucket(srv)
            try:
                before = status_json(srv)
                # One client at a time: at most five children are held, so
                # the other buckets then always have an idle child when a
                # connection arrives, which is the case the program is for.
                # (With every bucket momentarily at zero it keeps the
                # hash's choice, which may be the blocked bucket; with two
                # clients and children slowed by ASan that happened.)
                load = Load("127.0.0.1", srv.ports[0], concurrency=1,
                            max_requests=80).start().wait(120)
                # Published once a cycle: wait until it has them all.
                after = srv.wait_for(lambda: self.published(srv, before, 80))
            finally:
                for s in held:
                    s.close()
            self.assertEqual(load.errors, {})
            slowest = max(load.latencies)
            print("idle steering: bucket %d blocked, 80 requests, slowest "
                  "%.3f s" % (blocked, slowest))
            self.assertTrue(after, "the 80 connections were never published")
            self.assertLess(slowest, WAITED_S, "a request waited behind the "
                            "blocked bucket")
            self.assertEqual(after["buckets"][blocked]["accepted"],
                             before["buckets"][blocked]["accepted"],
                             "the blocked bucket accepted a connection")
            moved = sum(b["steering"]["moved"] for b in after["buckets"]) - \
                sum(b["steering"]["moved"] for b in before["buckets"])
            self.assertGreater(moved, 0, "nothing was moved: was the hash's "
                               "bucket never the blocked one?")

    @staticmethod
    def settled_imbalance(srv):
        """accepted - (kept + moved) with everything published.  Each JSON
        request adds one until the next cycle publishes it, and a
        connection queued before the program was attached is accepted but
        never counted, so the smallest value seen over two publishing
        cycles is the settled one."""
        values, published = [], []
        while len(published) < 3:
            snap = status_json(srv)
            values.append(imbalance(snap))
            if not published or steered(snap) != published[-1]:
                published.append(steered(snap))
            time.sleep(0.2)     # between polls, not a wait for a state
        return min(values)

    @staticmethod
    def published(srv, before, count):
        snap = status_json(srv)
        return snap if steered(snap) - steered(before) >= count else None

    def test_hash_steering_waits_behind_a_blocked_bucket(self):
        """The control: the same scene without the program shows the
        delay that idle steering removes, so the test above can fail."""
        extra = FOUR_FULL + LOCATIONS
        with Server(extra=extra, extra_modules=MODULES,
                    expect_log=("PFB00010",)) as srv:
            srv.start()
            self.assertTrue(wait_children(srv, 8))
            blocked, held = block_one_bucket(srv)
            try:
                load = Load("127.0.0.1", srv.ports[0], concurrency=2,
                            max_requests=80, timeout=60).start().wait(120)
            finally:
                for s in held:
                    s.close()
            slowest = max(load.latencies)
            print("hash steering: bucket %d blocked, slowest %.3f s"
                  % (blocked, slowest))
            self.assertEqual(load.errors, {})
            self.assertGreater(slowest, WAITED_S)

    def test_status_counts_every_steered_connection(self):
        extra = FOUR_FULL + "ListenBucketSteering idle\n" + LOCATIONS
        with Server(extra=extra, extra_modules=MODULES,
                    expect_log=FULL_LOG) as srv:
            self.start(srv)
            before = self.settled_imbalance(srv)
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=600).start().wait(300)
            self.assertEqual(load.errors, {})
            seen = []

            def all_published():
                snap = status_json(srv)
                seen.append(imbalance(snap))
                return snap if seen[-1] == before else None
            # Every one of the 600 was steered: once published, accepted
            # minus kept + moved is back where it was before the load.
            snap = srv.wait_for(all_published, interval=0.2)
            self.assertTrue(snap, "accepted - (kept + moved) was %d before "
                            "the load, %s since" % (before, seen[-10:]))
            self.assertEqual(snap["steering"], "idle")
            self.assertEqual(snap["steering_wanted"], "idle")
            accepted = sum(b["accepted"] for b in snap["buckets"])
            self.assertGreaterEqual(accepted, 601)
            with urllib.request.urlopen(srv.url("/bucket-status?prometheus"),
                                        timeout=30) as r:
                prom = r.read().decode()
            self.assertIn('steering="idle"', prom)
            self.assertIn('httpd_bucket_steered_connections_total{bucket="0"',
                          prom)
            with urllib.request.urlopen(srv.url("/bucket-status?auto"),
                                        timeout=30) as r:
                self.assertIn("BucketSteering: idle\n", r.read().decode())
            with urllib.request.urlopen(srv.url("/bucket-status"),
                                        timeout=30) as r:
                page = r.read().decode()
            check_html(page)
            self.assertIn(">Steering idle</th>", page)
            self.assertIn("<b>Moved</b>", page)

    def test_idle_counts_match_children_after_kills_and_restarts(self):
        """A child killed while counted idle is not advertised afterwards,
        and a graceful restart keeps the counts true."""
        extra = FOUR_FULL + "ListenBucketSteering idle\n" + LOCATIONS
        with Server(extra=extra, extra_modules=MODULES,
                    expect_log=FULL_LOG + ("PFB00035",)) as srv:
            self.start(srv)

            def counts_true(snap=None):
                snap = snap or status_json(srv)
                return all(b["steering"]["idle"] == b["children"]["idle"]
                           for b in snap["buckets"]), snap

            def one_child_in(b):
                snap = status_json(srv)
                return snap if snap["buckets"][b]["children"]["total"] == 1 \
                    else None

            ok, snap = counts_true()
            self.assertTrue(ok, snap["buckets"])
            live = set(srv.children())
            for b in (0, 1, 2):
                victim = [pid for pid, pb in srv.child_buckets().items()
                          if pb == b and pid in live][0]
                srv.kill_child(victim)
                # The first figures published after the parent reaped it
                # (the bucket shows one child) must already be true: the
                # drift correction, which needs two cycles, cannot be what
                # fixed them.  Those figures themselves, not a later
                # publish, in which the replacement may be starting.
                snap = srv.wait_for(lambda: one_child_in(b))
                self.assertTrue(snap, status_json(srv))
                ok, snap = counts_true(snap)
                self.assertTrue(ok, [(x["steering"], x["children"])
                                     for x in snap["buckets"]])
            restarts_under_load(self, srv, concurrency=4)
            self.assertTrue(srv.wait_for(lambda: counts_true()[0]),
                            counts_true()[1])
            self.assertEqual(srv.log_count("PFB00046"), 4)
            self.assertNotIn("PFB00043", srv.error_log())


class CpuSteering(unittest.TestCase):

    def test_connections_follow_the_cpu_they_came_in_on(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs two CPUs in the affinity mask, have %s"
                          % cpus)
        extra = ("ListenBuckets 2\nStartServers 4\nListenBucketSteering cpu\n"
                 "BucketCPUAffinity on\n" + LOCATIONS)
        with Server(extra=extra, extra_modules=MODULES) as srv:
            srv.start()
            ready = srv.wait_ready(4, idle=True)
            self.assertGreaterEqual(len(ready), 4)
            self.assertIn("PFB00044: ListenBucketSteering cpu: %d CPU(s) of "
                          "the affinity mask feed 2 bucket(s) per Listen"
                          % len(cpus), srv.error_log())
            # The bucket-to-CPU map of prefork_steering_rules.h: the lower
            # half of the mask feeds bucket 0, the upper half bucket 1.  A
            # child pins itself while starting, so only those that
            # finished.
            half = len(cpus) // 2
            buckets_of = srv.child_buckets()
            for pid in ready:
                b = buckets_of[pid]
                want = set(cpus[:half]) if b == 0 else set(cpus[half:])
                self.assertEqual(os.sched_getaffinity(pid), want,
                                 "child %d of bucket %d" % (pid, b))
            runs = []
            for cpu in (cpus[0], cpus[-1], cpus[0]):
                out = subprocess.run(
                    [sys.executable, "-c", PINNED_CLIENT, str(cpu),
                     str(srv.ports[0]), "50"],
                    capture_output=True, text=True, timeout=60, check=True)
                runs.append(json.loads(out.stdout))
            for i, cpu in enumerate((cpus[-1], cpus[0])):
                bucket = 1 if cpu == cpus[-1] else 0
                delta = [runs[i + 1]["buckets"][b]["accepted"]
                         - runs[i]["buckets"][b]["accepted"] for b in (0, 1)]
                print("cpu steering: 51 connections from CPU %d -> per-bucket "
                      "accepted %s" % (cpu, delta))
                self.assertEqual(delta[bucket], 51)
                self.assertEqual(delta[1 - bucket], 0)
            self.assertEqual(runs[0]["steering"], "cpu")
            self.assertTrue(runs[0]["cpu_affinity"])


def in_accept(pid):
    """Whether child `pid` is blocked in accept(): past the point where it
    counted itself idle (pf_steer_accept_begin)."""
    try:
        with open("/proc/%d/wchan" % pid) as f:
            return f.read().strip() == "inet_csk_accept"
    except OSError:
        return False


def pid_from(cpu, port, query="/pfb-test?hold=0"):
    """Makes one request from a socket opened on CPU `cpu` (the kernel
    runs the SYN's path, and the steering program, on the sender's CPU
    over loopback); returns the pid of the child that answered."""
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
    finally:
        os.sched_setaffinity(0, mask)
    with s:
        s.sendall(b"GET %s HTTP/1.0\r\nHost: t\r\n\r\n" % query.encode())
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            raise AssertionError("no answer in 30 s to a connection from "
                                 "CPU %d: it waits behind a held child"
                                 % cpu) from None
    for line in data.split(b"\n"):
        if line.startswith(b"pid "):
            return int(line.split()[1])
    raise AssertionError("no pid in the answer: %r" % data[:300])


class LocalSteering(unittest.TestCase):
    """ListenBucketSteering local: a connection stays on the bucket of the
    CPU that received it while that bucket has an idle child, and borrows
    another bucket's child when it has none."""

    POOL = ("ListenBuckets 2\nStartServers 4\nMinSpareServers 4\n"
            "MaxSpareServers 8\nMaxRequestWorkers 4\nServerLimit 4\n"
            "ListenBucketSteering local\nBucketCPUAffinity on\n")

    def cpu_of_each_bucket(self, srv, ready):
        """A CPU that feeds each bucket and no other, from the children's
        pinning (the layout the program reads pins them)."""
        buckets_of = srv.child_buckets()
        pinned = {}
        for pid in ready:
            pinned.setdefault(buckets_of[pid], set()).update(
                os.sched_getaffinity(pid))
        if len(pinned) < 2:
            return None
        own = [pinned[b] - pinned[1 - b] for b in (0, 1)]
        if not own[0] or not own[1]:
            return None
        return min(own[0]), min(own[1])

    def wait_all_in_accept(self, srv):
        self.assertTrue(srv.wait_for(lambda: len(srv.children()) == 4 and all(
            in_accept(pid) for pid in srv.children())), srv.children())

    def test_connections_stay_home_and_borrow_when_home_is_busy(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("needs two CPUs in the affinity mask, have %s"
                          % sorted(os.sched_getaffinity(0)))
        extra = self.POOL + LOCATIONS
        # With every slot held in one bucket, the MPM wants one more child
        # and has no slot for it (PFB00010).
        with Server(extra=extra, extra_modules=MODULES,
                    expect_log=FULL_LOG) as srv:
            srv.start()
            ready = srv.wait_ready(4, idle=True)
            self.assertGreaterEqual(len(ready), 4)
            # A connection queued before the program was attached (the
            # harness probes the port as soon as it listens) was taken
            # with no count taken for it: the parent's drift correction
            # puts that right within two cycles.  Wait for true counts.
            self.assertTrue(wait_counted_idle(srv, 2), status_json(srv))
            self.assertIn("PFB00160: ListenBucketSteering local: %d CPU(s) "
                          "of the affinity mask on "
                          % len(os.sched_getaffinity(0)), srv.error_log())
            cpus = self.cpu_of_each_bucket(srv, ready)
            if cpus is None:
                self.skipTest("no two CPUs feed different buckets here")
            buckets_of = srv.child_buckets()
            # Home: every connection from a bucket's CPU, made while all
            # children wait in accept(), lands in that bucket.
            for bucket, cpu in enumerate(cpus):
                for _ in range(5):
                    self.wait_all_in_accept(srv)
                    pid = pid_from(cpu, srv.ports[0])
                    self.assertEqual(buckets_of[pid], bucket,
                                     "a connection from CPU %d went to "
                                     "bucket %d" % (cpu, buckets_of[pid]))
            # Busy home: hold both children of bucket 0 with connections
            # from its own CPU (they stay home while it has an idle
            # child), then the next connection from that CPU borrows a
            # child of bucket 1.
            held, socks = [], []
            try:
                for _ in range(2):
                    self.wait_all_in_accept_but(srv, held)
                    sock, pid = self.hold_from(cpus[0], srv.ports[0])
                    socks.append(sock)
                    held.append(pid)
                    self.assertEqual(buckets_of[pid], 0)
                self.wait_all_in_accept_but(srv, held)
                pid = pid_from(cpus[0], srv.ports[0])
                self.assertEqual(buckets_of[pid], 1,
                                 "with bucket 0's children held, a "
                                 "connection from CPU %d went to bucket %d"
                                 % (cpus[0], buckets_of[pid]))
            finally:
                for sock in socks:
                    sock.close()
            # The status page names the mode and counts the borrowed one.
            self.assertTrue(srv.wait_for(
                lambda: status_json(srv)["buckets"][1]["steering"]["moved"]
                >= 1), status_json(srv))
            snap = status_json(srv)
            self.assertEqual(snap["steering"], "local")
            self.assertEqual(snap["steering_wanted"], "local")
            self.assertGreaterEqual(snap["buckets"][0]["steering"]["kept"],
                                    7)

    def test_counts_stay_true_under_load_and_graceful_restarts(self):
        """Four buckets on the CPUs here (a CPU owns several when there
        are fewer CPUs), load that borrows, three graceful restarts: the
        idle counts the program reads come back to the children's."""
        extra = FOUR_FULL + "ListenBucketSteering local\n" + LOCATIONS
        with Server(extra=extra, extra_modules=MODULES,
                    expect_log=FULL_LOG + ("PFB00035",)) as srv:
            srv.start()
            self.assertTrue(wait_children(srv, 8), srv.children())
            self.assertTrue(wait_counted_idle(srv, 2), status_json(srv))
            restarts_under_load(self, srv, concurrency=6)

            def counts_true():
                snap = status_json(srv)
                return all(b["steering"]["idle"] == b["children"]["idle"]
                           for b in snap["buckets"]), snap

            self.assertTrue(srv.wait_for(lambda: counts_true()[0]),
                            counts_true()[1])
            snap = status_json(srv)
            self.assertEqual(snap["steering"], "local")
            self.assertGreater(sum(b["steering"]["kept"]
                                   for b in snap["buckets"]), 0)
            self.assertEqual(srv.log_count("PFB00160"), 4)
            self.assertNotIn("PFB00043", srv.error_log())

    def wait_all_in_accept_but(self, srv, busy):
        self.assertTrue(srv.wait_for(lambda: len(srv.children()) == 4 and all(
            in_accept(pid) for pid in srv.children() if pid not in busy)),
            srv.children())

    @staticmethod
    def hold_from(cpu, port):
        mask = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
        try:
            # Long enough for the steps below on a loaded machine; the
            # server's stop ends the holds.
            return hold_child(port, 4 * HOLD_MS)
        finally:
            os.sched_setaffinity(0, mask)


class SteeringFallback(unittest.TestCase):

    def check_fallback(self, mode, step, refuse="all"):
        extra = FOUR_FULL + "ListenBucketSteering %s\n" % mode + LOCATIONS
        # Started as admins start it (-k start): the fallback's one line
        # must reach the error log of a daemon.
        with Server(extra=extra, extra_modules=MODULES,
                    env={"LD_PRELOAD": NOBPF_SO, "PFB_NOBPF": refuse},
                    daemon=True,
                    expect_log=FULL_LOG + ("PFB00043",)) as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=200).start().wait(300)
            self.assertEqual(load.errors, {})
            # The restart sets steering up again before its children.
            srv.restart_gracefully()
            log = srv.error_log()
            lines = [l for l in log.splitlines() if "PFB00043" in l]
            self.assertEqual(len(lines), 1, lines)
            self.assertIn("ListenBucketSteering %s unavailable: %s failed;"
                          % (mode, step), lines[0])
            self.assertIn("Operation not permitted", lines[0])
            self.assertIn("falling back to hash steering", lines[0])
            snap = status_json(srv)
            self.assertEqual(snap["steering"], "hash")
            self.assertEqual(snap["steering_wanted"], mode)

    def test_idle_falls_back_to_hash_when_bpf_is_refused(self):
        self.check_fallback("idle", "bpf(BPF_MAP_CREATE) of the mmap-able "
                            "idle counts")

    def test_cpu_falls_back_to_hash_when_attaching_is_refused(self):
        self.check_fallback("cpu", "setsockopt(SO_ATTACH_REUSEPORT_EBPF)",
                            refuse="attach")

    def test_local_falls_back_to_hash_when_bpf_is_refused(self):
        self.check_fallback("local", "bpf(BPF_MAP_CREATE) of the mmap-able "
                            "idle counts")

    def test_local_falls_back_to_hash_when_attaching_is_refused(self):
        self.check_fallback("local", "setsockopt(SO_ATTACH_REUSEPORT_EBPF)",
                            refuse="attach")

    def test_nothing_to_steer_with_one_bucket(self):
        extra = "ListenBucketSteering idle\nBucketCPUAffinity on\n" + \
            LOCATIONS
        with Server(extra=extra, extra_modules=MODULES) as srv:
            srv.start()
            self.assertIn("PFB00042: ListenBucketSteering idle, "
                          "BucketCPUAffinity on: nothing to steer with 1 "
                          "bucket(s) per Listen (mode single)",
                          srv.error_log())
            self.assertEqual(status_json(srv)["steering"], "hash")


SO_ATTACH_REUSEPORT_CBPF = 51
SO_DETACH_REUSEPORT_BPF = 68


class Outsider:
    """A root process's socket that joined a Listen's reuseport group (the
    kernel lets a process of the sockets' owner, root, join).  It takes
    every connection the kernel gives it and closes it at once, so a
    client it took sees its request cut."""

    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(128)
        self.sock.setblocking(False)
        self.taken = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._take, daemon=True)
        self.thread.start()

    def _take(self):
        while not self.done.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            while ready:
                try:
                    conn, _ = self.sock.accept()
                except BlockingIOError:
                    break
                conn.close()
                self.taken += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(30)
        self.sock.close()


def requests(port, count):
    """Makes count requests one after the other; returns how many were
    served and how many were cut (taken by an outsider)."""
    served = cut = 0
    for _ in range(count):
        data = b""
        with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
            try:
                c.sendall(b"GET /index.html HTTP/1.0\r\nHost: t\r\n\r\n")
                while True:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except (ConnectionResetError, BrokenPipeError):
                pass
        if data.startswith(b"HTTP/1.1 200"):
            served += 1
        else:
            cut += 1
    return served, cut


def clean_batch(srv, outsider, count=100):
    """True when count requests in a row are all served and the outsider
    takes none of them."""
    before = outsider.taken
    served, cut = requests(srv.ports[0], count)
    return served == count and cut == 0 and outsider.taken == before


def child_bucket_socket(srv):
    """A copy of the bucket socket a child holds (pidfd_getfd): what the
    child itself, or a program it runs, can call setsockopt() on."""
    inodes = listening_inodes(srv.ports[0])
    for pid in srv.children():
        try:
            held = process_socket_fds(pid)
        except OSError:
            continue
        for inode, fd in held.items():
            if inode in inodes:
                return socket.socket(fileno=pidfd_getfd(pid, fd))
    raise AssertionError("no child holds a bucket socket")


def attach_classic_return(sock, position):
    """SO_ATTACH_REUSEPORT_CBPF of "return position" on the socket's
    group: every new connection goes to that position of the group."""
    insns = ctypes.create_string_buffer(
        struct.pack("HBBI", 0x06, 0, 0, position))      # BPF_RET | BPF_K
    fprog = struct.pack("HxxxxxxP", 1, ctypes.addressof(insns))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, fprog)


class OwnSocketsOnly(unittest.TestCase):
    """Steering selects only the MPM's own sockets, through the socket
    map, in every mode and after any restart; and the parent puts its
    program back every cycle when something on a child's socket changed
    it (issue 21, findings 2 and 4)."""

    def test_hash_gives_an_outsider_nothing(self):
        extra = "ListenBuckets 4\nStartServers 4\nMaxRequestWorkers 16\n"
        with Server(extra=extra) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(4))
            with Outsider(srv.ports[0]) as outsider:
                served, _ = requests(srv.ports[0], 100)
            print("hash steering with an outsider: %d served, outsider took "
                  "%d" % (served, outsider.taken))
            self.assertEqual(outsider.taken, 0)
            self.assertEqual(served, 100)
            self.assertIn("PFB00101: ListenBucketSteering hash: eBPF program "
                          "attached to 1 Listen(s) of 4 bucket(s) each",
                          srv.error_log())

    def test_cpu_gives_an_outsider_nothing_after_a_restart_adds_buckets(self):
        """The outsider joins while 2 buckets run; a full restart to 4
        adds 2 duplicates after it in the group.  Positions in the group
        (what a classic program returns) then name the outsider; bucket
        numbers in the map do not."""
        extra = ("ListenBuckets %d\nStartServers 4\nMaxRequestWorkers 16\n"
                 "ListenBucketSteering cpu\n")
        with Server(extra=extra % 2) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(4))
            with Outsider(srv.ports[0]) as outsider:
                srv.write_conf(extra % 4)
                srv.signal(signal.SIGHUP)
                self.assertTrue(srv.wait_log("PFB00017", count=2),
                                "the full restart did not finish")
                self.assertEqual(srv.log_count("PFB00044: ListenBucketSteering"
                                               " cpu"), 2)
                self.assertEqual(len(listening_inodes(srv.ports[0])), 5)
                self.assertTrue(srv.wait_ready(4))
                mask = os.sched_getaffinity(0)
                taken, served = [], 0
                try:
                    for cpu in sorted(mask):
                        # A loopback SYN is received on the sending CPU.
                        os.sched_setaffinity(0, {cpu})
                        before = outsider.taken
                        ok, _ = requests(srv.ports[0], 60)
                        served += ok
                        taken.append(outsider.taken - before)
                finally:
                    os.sched_setaffinity(0, mask)
            print("cpu steering after 2 -> 4 buckets with an outsider: %d "
                  "served, outsider took %s per CPU" % (served, taken))
            self.assertEqual(sum(taken), 0)
            self.assertEqual(served, 60 * len(mask))

    def check_put_back(self, steering, attack):
        extra = ("ListenBuckets 4\nStartServers 4\nMaxRequestWorkers 16\n"
                 + steering)
        with Server(extra=extra) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(4))
            with Outsider(srv.ports[0]) as outsider:
                self.assertTrue(clean_batch(srv, outsider),
                                "the outsider took connections before")
                with child_bucket_socket(srv) as sock:
                    attack(sock)
                # The parent's next maintenance cycle puts its program
                # back: from then on the outsider gets nothing again.
                restored = srv.wait_for(
                    lambda: clean_batch(srv, outsider), interval=0.01)
                print("%s after the attack: the outsider took %d before the "
                      "parent's program was back"
                      % (steering.strip() or "hash", outsider.taken))
                self.assertTrue(restored, "the steering never came back: "
                                "the outsider took %d" % outsider.taken)

    def test_a_program_attached_on_a_childs_socket_is_replaced(self):
        # "return 4": the group's fifth socket, the outsider.
        for steering in ("", "ListenBucketSteering idle\n"):
            with self.subTest(steering=steering.strip() or "hash"):
                self.check_put_back(
                    steering, lambda sock: attach_classic_return(sock, 4))

    def test_a_detach_on_a_childs_socket_is_undone(self):
        self.check_put_back(
            "ListenBucketSteering idle\n",
            lambda sock: sock.setsockopt(socket.SOL_SOCKET,
                                         SO_DETACH_REUSEPORT_BPF, 0))


class BuildWithoutPrograms(unittest.TestCase):
    """The MPM built without clang, libbpf or bpftool (make
    check-fallback-build's build-nobpf/): hash serves, and idle, cpu or
    local stop start-up with a message that names the directive, the value
    and what the build lacked."""

    def test_idle_cpu_and_local_are_refused_at_start(self):
        self.assertTrue(os.path.exists(NOBPF_MPM_SO),
                        "build it: make check-fallback-build")
        for mode in ("idle", "cpu", "local", "IDLE"):
            with self.subTest(mode=mode):
                with Server(mpm=NOBPF_MPM_SO, extra="ListenBuckets 2\n"
                            "ListenBucketSteering %s\n" % mode) as srv:
                    rc = srv.start(expect_failure=True)
                    out = srv.startup_output
                    self.assertNotEqual(rc, 0)
                    # What it lacked is configure's finding; by hand
                    # (make nobpf-mpm) it names all three.
                    self.assertRegex(out, r"ListenBucketSteering: '%s' needs "
                                     r"the MPM's BPF programs, and this build "
                                     r"has none: it was made without \S.*; "
                                     r"use hash" % mode)
                    self.assertEqual(srv.group_processes(), [])

    def test_hash_serves_with_the_kernels_own_hash(self):
        self.assertTrue(os.path.exists(NOBPF_MPM_SO),
                        "build it: make check-fallback-build")
        with Server(mpm=NOBPF_MPM_SO, extra="ListenBuckets 2\n"
                    "ListenBucketSteering hash\n") as srv:
            srv.start()
            self.assertEqual(requests(srv.ports[0], 20), (20, 0))
            self.assertIn("PFB00100: ListenBucketSteering hash: the kernel's "
                          "own hash, with no program (this build has no BPF "
                          "programs)", srv.error_log())
            self.assertNotIn("PFB00101", srv.error_log())
