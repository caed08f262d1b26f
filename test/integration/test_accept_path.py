# Licensed under the Apache License, Version 2.0; see LICENSE.
"""What a waiting child puts on its listening socket's wait queue.

A child of a one-socket bucket blocks in accept(): the kernel wakes exactly
one such child per connection.  A child that also had the socket in an
epoll set (as stock prefork's children have, with one Listen too) would
add an entry to the socket's wait queue that every new connection walks,
once per child; on 16 CPUs with 256 children that walk took most of
stock prefork's CPU time (docs/benchmarks.md, "Why one bucket serves
four times stock prefork").  These tests pin down that this MPM's children register
nothing there: those of one-socket buckets only block in accept(), and
those polling several sockets under the accept mutex (the default with
several Listens: one bucket holds them all) use poll(2), which is on the wait queues only while the
mutex holder polls.  The control that shows the check sees
registrations is Debian's stock prefork, whose children keep every
Listen in an epoll set.
"""

import os
import re
import unittest

from pfbtest import Server, STOCK_PREFORK
from pfbtest.sockets import listening_inodes, process_socket_fds


def epoll_watched_fds(pid):
    """The descriptors of process `pid` that its epoll sets watch."""
    watched = set()
    base = "/proc/%d/fd" % pid
    for name in os.listdir(base):
        try:
            target = os.readlink(os.path.join(base, name))
            if "eventpoll" not in target:
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, name)) as f:
                info = f.read()
        except OSError:
            continue
        watched.update(int(fd) for fd in re.findall(r"tfd:\s*(\d+)", info))
    return watched


def watched_listeners(pid, ports):
    """The listening sockets (by inode) of `ports` that process `pid` holds
    and watches through an epoll set."""
    inodes = {}
    for port in ports:
        inodes.update(listening_inodes(port))
    held = process_socket_fds(pid)
    watched = epoll_watched_fds(pid)
    return sorted(inode for inode, fd in held.items()
                  if inode in inodes and fd in watched)


def serving_children(srv, wanted):
    """Pids of children that served a request, which they answer only
    after setting up their accept path: up to `wanted` of them."""
    pids = set()
    for _ in range(wanted * 8):
        pid = srv.scoreboard().served_by
        if pid is not None:
            pids.add(pid)
        if len(pids) >= wanted:
            break
    return sorted(pids)


SMALL_POOL = ("StartServers 4\nMinSpareServers 4\nMaxSpareServers 8\n"
              "MaxRequestWorkers 8\nServerLimit 8\n")


class AcceptWaitQueue(unittest.TestCase):

    def assert_no_registration(self, extra, ports):
        with Server(extra=SMALL_POOL + extra, ports=ports) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(4, idle=True))
            pids = serving_children(srv, 3)
            self.assertTrue(pids, "no child answered")
            for pid in pids:
                self.assertEqual(watched_listeners(pid, srv.ports), [],
                                 "child %d watches its listener through "
                                 "epoll" % pid)

    def test_one_listen_children_only_block_in_accept(self):
        self.assert_no_registration("", 1)

    def test_reuseport_bucket_children_only_block_in_accept(self):
        self.assert_no_registration("ListenBuckets 2\n", 1)

    def test_bucket_per_listen_children_only_block_in_accept(self):
        # ListenBuckets 1: a bucket per Listen.
        self.assert_no_registration("ListenBuckets 1\n", 2)

    def test_shared_poll_children_register_nothing_between_polls(self):
        # The default with several Listens: one bucket, polled under the
        # accept mutex with poll(2).
        self.assert_no_registration("", 2)
        self.assert_no_registration("ListenBuckets 0\n", 2)

    def test_stock_prefork_children_watch_every_listener(self):
        # The control: stock prefork's children keep both Listens in an
        # epoll set for their whole life.
        with Server(extra=SMALL_POOL, ports=2, mpm=STOCK_PREFORK) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(4, idle=True))
            pids = serving_children(srv, 2)
            self.assertTrue(pids, "no child answered")
            for pid in pids:
                self.assertEqual(len(watched_listeners(pid, srv.ports)), 2,
                                 "child %d" % pid)


if __name__ == "__main__":
    unittest.main()
