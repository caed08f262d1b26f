# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Hot children first: under a steady load below saturation, the
connections go to the children that served a moment ago, not around the
whole pool.

A prefork child's first requests cost it copy-on-write faults, its
pools' first allocations and cold caches.  Children blocked in accept()
are woken first in, first out (the kernel adds each exclusive waiter at
the tail of the listener's queue and wakes the head), and httpd's accept
mutex hands off in the same order: each connection then goes to the child
that has waited longest, and every child of a large pool pays its first
requests again and again.  The measure is each request's reuse distance:
how many requests ago its child last served one (the access log's order
and pids).  Waking the child that waited longest gives about the pool's
size; waking a recently idle one, about the number of connections at
once.

Each test runs a pool of 128 children (none started or retired during
the load) under four clients that each send a request, read the answer
and pause: the accept queue is empty most of the time, as at half of the
peak rate.  The median distance must stay within twice the concurrency
and at most 5 % of requests may go to a child that waited through more
than 64 others' requests.
"""

import threading
import time
import unittest

from pfbtest import Server, DEADLINE, http_get

POOL = 128
# MinSpareServers at least the bucket count, or a bucket could be left
# with one idle child (PFB00091).
POOL_CONF = ("StartServers %d\nMinSpareServers 2\nMaxSpareServers %d\n"
             "MaxRequestWorkers %d\nServerLimit %d\n"
             % (POOL, POOL, POOL, POOL))
CLIENTS = 4
REQUESTS = 2000
PAUSE = 0.002
COLD = 64


def reuse_distances(lines):
    """For each request whose child had served before: how many requests
    ago that was (access-log order; the pid is the second field)."""
    last, dist = {}, []
    for i, line in enumerate(lines):
        pid = line.split()[1]
        if pid in last:
            dist.append(i - last[pid])
        last[pid] = i
    return dist


def steady_load(ports, requests):
    """CLIENTS threads, each a request on a new connection, then a pause,
    over the ports in turn; returns the failures."""
    failures = []
    lock = threading.Lock()
    count = [0]

    def client(index):
        while True:
            with lock:
                if count[0] >= requests:
                    return
                count[0] += 1
                n = count[0]
            port = ports[(n + index) % len(ports)]
            try:
                status, _ = http_get("127.0.0.1", port, timeout=DEADLINE)
                if status != 200:
                    failures.append(status)
            except OSError as e:
                failures.append(str(e))
            time.sleep(PAUSE)
    threads = [threading.Thread(target=client, args=(i,))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


class WarmChildren(unittest.TestCase):

    def measure(self, extra="", ports=1):
        with Server(extra=POOL_CONF + extra, ports=ports) as srv:
            srv.start()
            self.assertEqual(len(srv.wait_ready(POOL, idle=True)), POOL)
            self.assertEqual(steady_load(srv.ports, REQUESTS), [])
            self.assertTrue(srv.wait_access_log(REQUESTS))
            lines = srv.access_log_lines()
            # The pool stayed as it was: every child was there to be woken.
            self.assertEqual(len(srv.children()), POOL)
        # The second half: every child that will serve has served once.
        dist = sorted(reuse_distances(lines)[len(lines) // 2:])
        self.assertGreater(len(dist), REQUESTS // 4)
        median = dist[len(dist) // 2]
        cold = sum(1 for d in dist if d > COLD) / float(len(dist))
        self.assertLessEqual(
            median, 2 * CLIENTS,
            "median reuse distance %d with %d clients and %d children: "
            "connections go around the pool" % (median, CLIENTS, POOL))
        self.assertLessEqual(
            cold, 0.05, "%.0f %% of requests went to a child that had "
            "waited through more than %d others" % (100 * cold, COLD))

    def test_one_listen(self):
        """One Listen: no lock between the children."""
        self.measure()

    def test_two_listens_in_one_bucket(self):
        """Two Listens, one bucket: httpd's accept mutex and poll."""
        self.measure(ports=2)

    def test_two_buckets(self):
        """Two buckets (SO_REUSEPORT): the order holds in each."""
        self.measure(extra="ListenBuckets 2\n")


if __name__ == "__main__":
    unittest.main()
