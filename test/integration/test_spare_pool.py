# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The spare pool under idle steering is the server's, as admins were told.

Under ListenBucketSteering idle a bucket whose children are all busy is
one the program routes around, so MinSpareServers bounds the idle children
of all buckets together: children held busy in some buckets fork nothing
while the others still hold MinSpareServers idle ones, and the server forks
when it falls short.  Under the per-bucket rule each held bucket would have
forked a child of its own at the next cycle.

Cycles are told apart by what the parent publishes once a cycle: the
program's count of steered connections (test_steering.steered()).
"""

import unittest

from pfbtest import Server, STATUS_LOAD
from test_steering import LOCATIONS, hold_child, status_json, steered, \
    wait_counted_idle

HOLD_MS = 60000
POOL = ("ListenBuckets 4\nStartServers 4\nMinSpareServers 1\n"
        "MaxSpareServers 2\nMaxRequestWorkers 16\nServerLimit 16\n"
        "ListenBucketSteering idle\n")


def two_cycles(srv):
    """Waits until the published count of steered connections has changed
    twice: the cycle that published the second change began after the
    first change was seen, so after anything done before this call.  Each
    poll is a connection of its own, so every cycle publishes a new count.
    Returns whether it happened."""
    seen = [steered(status_json(srv))]

    def changed_twice():
        now = steered(status_json(srv))
        if now != seen[-1]:
            seen.append(now)
        return len(seen) >= 3
    return srv.wait_for(changed_twice)


class SharedSparePool(unittest.TestCase):

    def test_idle_children_are_counted_across_buckets(self):
        with Server(extra=POOL + LOCATIONS, extra_modules=STATUS_LOAD) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(4, idle=True), srv.children())
            self.assertTrue(wait_counted_idle(srv, 1), status_json(srv))
            first = set(srv.children())
            held = []
            try:
                # Two children busy, in two buckets (the program sends the
                # second connection past the first's busy bucket); two
                # buckets keep an idle child, at least MinSpareServers 1.
                for _ in range(2):
                    held.append(hold_child(srv.ports[0], HOLD_MS))
                buckets = srv.child_buckets()
                busy = {buckets[pid] for _, pid in held}
                self.assertEqual(len(busy), 2, held)
                # A whole cycle that saw both children held (the status
                # requests are served by the idle children).
                self.assertTrue(two_cycles(srv), status_json(srv))
                self.assertEqual(set(srv.children()), first,
                                 "a child was forked while the server held "
                                 "MinSpareServers idle children: %s"
                                 % status_json(srv)["buckets"])
                # Every child held: short of MinSpareServers, the server
                # forks one.
                for _ in range(2):
                    held.append(hold_child(srv.ports[0], HOLD_MS))
                self.assertTrue(srv.wait_ready(1, idle=True),
                                "no child forked with every child busy")
                self.assertEqual(len(set(srv.children()) - first), 1,
                                 srv.children())
            finally:
                for s, _ in held:
                    s.close()


if __name__ == "__main__":
    unittest.main()
