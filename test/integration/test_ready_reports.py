# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Ready reports are never lost (the ready channel of
server/mpm/prefork/prefork_children.c).

Each child reports ready to the parent once, after child_init; a child
that reported and then exits with APEXIT_CHILDFATAL is replaced, where
httpd would stop the whole server.  A report lost when many children
start at once would turn that child's exit into a stop.  Here 400
children start at once, each holds a connection until the test lets them
go, and all 400 then exit with APEXIT_CHILDFATAL: the server must run on.
"""

import os
import re
import unittest

from pfbtest import Server
from pfbtest.procs import start_time
from test_hostile import HOSTILE_LOAD, LOCATIONS, Attack, get


def uptime_ticks():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK")


def all_older_than(pids, seconds):
    """Every process of `pids` has lived `seconds`: a child that leaves
    sooner counts as one that dies at start, and the parent paces its
    replacements."""
    now = uptime_ticks()
    ticks = seconds * os.sysconf("SC_CLK_TCK")
    return all(start_time(p) is not None and now - start_time(p) > ticks
               for p in pids)

CHILDREN = 400


class ReadyReports(unittest.TestCase):

    def test_400_children_starting_at_once_all_report(self):
        conf = ("StartServers %d\nServerLimit %d\nMaxRequestWorkers %d\n"
                "MinSpareServers 1\nMaxSpareServers %d\n"
                % (CHILDREN, CHILDREN, CHILDREN, CHILDREN)) + LOCATIONS
        # Every child busy holding a connection: maintenance wants more
        # than MaxRequestWorkers allows (PFB00010).  Each exit is logged
        # (PFB00068).
        with Server(extra=conf, extra_modules=HOSTILE_LOAD,
                    expect_log=("PFB00068", "PFB00010")) as srv:
            srv.start(timeout=180)
            self.assertEqual(len(srv.wait_ready(CHILDREN, timeout=180)),
                             CHILDREN)
            attacks = []
            try:
                # One connection per child: each holds its child until
                # the stop file, so the next one goes to another child.
                for _ in range(CHILDREN):
                    attack = Attack(srv, "hold=1&then=fatal")
                    attack.__enter__()
                    attacks.append(attack)
                pids = {a.pid for a in attacks}
                self.assertEqual(len(pids), CHILDREN)
                self.assertTrue(srv.wait_for(
                    lambda: all_older_than(pids, 1.5)))
            finally:
                # All of them leave at once.
                for attack in attacks:
                    with open(attack.stop_file, "w"):
                        pass
                for attack in attacks:
                    attack.wait()
            self.assertTrue(srv.wait_for(
                lambda: srv.log_count("PFB00068") >= CHILDREN
                or srv.proc.poll() is not None, timeout=180))
            self.assertIsNone(srv.proc.poll(), "the server stopped")
            log = srv.error_log()
            self.assertNotIn("AH00050", log)
            exited = set(int(p) for p in re.findall(
                r"PFB00068: child pid (\d+) ", log))
            self.assertEqual(exited, pids)
            self.assertTrue(srv.wait_ready(1))
            for _ in range(20):
                self.assertEqual(get(srv, "/index.html")[0], 200)


if __name__ == "__main__":
    unittest.main()
