# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Hostile children, third round: the bucket socket's guard.

What a child can still do to the listening socket it holds, and what
must hold whatever it does: the filter refuses setsockopt() with the high
bits of its arguments set, on every route, and every setsockopt() on the
child's own bucket descriptor; an option that every accepted connection
inherits, set through a copy of the descriptor, is put back by the parent
(SO_LINGER {1, 0} and IP_TTL 1 among them: slow readers of a large file
then get all of it); a socket whose filters are locked is replaced and
stops costing requests; a graceful stop still drains; with
ChildSyscallFilter off the parent's checks still repair; and mod_cgid's
daemon and the scripts it starts hold no bucket socket and run under the
filter.

Each attack comes from test/modules/mod_pfb_hostile.c in a real child, or,
where a child of this kernel cannot make the call itself, from the test
through the parent's own descriptor (pidfd_getfd), as such a child would.
"""

import errno
import os
import re
import signal
import socket
import struct
import threading
import time
import unittest

from pfbtest import Server, MODULES, STATUS_LOAD
from pfbtest.sockets import listening_inodes, process_socket_fds
from test_hostile import (FOUR_BUCKETS, HOSTILE_LOAD, LOCATIONS,
                          attach_drop_filter, bucket_sockets,
                          every_bucket_served, get, hostile_sockets,
                          requests_per_bucket)

SO_LOCK_FILTER = 44
SO_GET_FILTER = 26
SO_MAX_PACING_RATE = 47
IP_MINTTL = 21
TCP_WINDOW_CLAMP = 10
TCP_CORK = 3
TCP_USER_TIMEOUT = 18
TCP_DEFER_ACCEPT = 9
# Children's accept() fails at once on a socket the parent replaced (its
# old one stops listening), and they leave and are replaced.
ACCEPT_FAILED = "AH02179"

# The hostile module's opt= names: the level and option each sets, and the
# name the parent's log gives it.
OPTIONS = {
    "linger": (socket.SOL_SOCKET, socket.SO_LINGER, "SO_LINGER"),
    "ttl": (socket.IPPROTO_IP, socket.IP_TTL, "IP_TTL"),
    "tos": (socket.IPPROTO_IP, socket.IP_TOS, "IP_TOS"),
    "minttl": (socket.IPPROTO_IP, IP_MINTTL, "IP_MINTTL"),
    "sndbuf": (socket.SOL_SOCKET, socket.SO_SNDBUF, "SO_SNDBUF"),
    "rcvbuf": (socket.SOL_SOCKET, socket.SO_RCVBUF, "SO_RCVBUF"),
    "keepalive": (socket.SOL_SOCKET, socket.SO_KEEPALIVE, "SO_KEEPALIVE"),
    "priority": (socket.SOL_SOCKET, socket.SO_PRIORITY, "SO_PRIORITY"),
    "dontroute": (socket.SOL_SOCKET, socket.SO_DONTROUTE, "SO_DONTROUTE"),
    "rcvlowat": (socket.SOL_SOCKET, socket.SO_RCVLOWAT, "SO_RCVLOWAT"),
    "pacing": (socket.SOL_SOCKET, SO_MAX_PACING_RATE, "SO_MAX_PACING_RATE"),
    "maxseg": (socket.IPPROTO_TCP, socket.TCP_MAXSEG, "TCP_MAXSEG"),
    "nodelay": (socket.IPPROTO_TCP, socket.TCP_NODELAY, "TCP_NODELAY"),
    "cork": (socket.IPPROTO_TCP, TCP_CORK, "TCP_CORK"),
    "keepidle": (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, "TCP_KEEPIDLE"),
    "defer": (socket.IPPROTO_TCP, TCP_DEFER_ACCEPT, "TCP_DEFER_ACCEPT"),
    "clamp": (socket.IPPROTO_TCP, TCP_WINDOW_CLAMP, "TCP_WINDOW_CLAMP"),
    "usertimeout": (socket.IPPROTO_TCP, TCP_USER_TIMEOUT,
                    "TCP_USER_TIMEOUT"),
    "congestion": (socket.IPPROTO_TCP, socket.TCP_CONGESTION,
                   "TCP_CONGESTION"),
}


def option_state(srv):
    """Every OPTIONS value of every bucket socket of the first port, read
    through the parent's own descriptors."""
    state = []
    for s in bucket_sockets(srv):
        with s:
            values = {}
            for name, (level, opt, _) in OPTIONS.items():
                size = 16 if name in ("linger", "congestion") else 8 \
                    if name == "pacing" else 4
                values[name] = s.getsockopt(level, opt, size)
            state.append(values)
    return state


def listening(s):
    return s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)


class Server4(Server):
    """Four buckets, the hostile module and the status module."""

    def __init__(self, extra="", expect_log=(), **kw):
        super().__init__(extra=FOUR_BUCKETS + LOCATIONS + extra,
                         extra_modules=STATUS_LOAD + HOSTILE_LOAD,
                         expect_log=expect_log, **kw)


def assert_spread(test, srv):
    per_bucket = requests_per_bucket(srv, 200)
    print("200 connections over the buckets: %s" % per_bucket)
    test.assertEqual(len(per_bucket), 4)
    # Hash over 4 buckets: about 50 each; 15 is five standard deviations
    # below.
    for count in per_bucket:
        test.assertGreaterEqual(count, 15, per_bucket)


class HighBits(unittest.TestCase):
    """setsockopt() with bits 32 to 63 of its int arguments set: the
    kernel reads the low 32 bits, and so must the filter."""

    def test_high_bits_do_not_get_past_the_filter(self):
        with Server4() as srv:
            srv.start()
            srv.wait_ready(8)
            # Through a copy: the options refused on every descriptor,
            # with the level and the option's high bits set; on the
            # child's own number, with the descriptor's high bits set.
            for query in ("sock=cbpf&via=dup&high=1",
                          "sock=detach&via=dup&high=1",
                          "sock=lock&via=dup&high=1",
                          "sock=rcvtimeo&high=1",
                          "sock=opt&opt=linger&high=1"):
                got = hostile_sockets(srv, query)
                self.assertEqual(got["sockets"], 1, query)
                self.assertEqual((got["ok"], got["errno"]), (0, errno.EPERM),
                                 query)
            assert_spread(self, srv)
            for s in bucket_sockets(srv):
                with s:
                    self.assertEqual(s.getsockopt(socket.SOL_SOCKET,
                                                  SO_GET_FILTER), 0)

    def test_no_option_can_be_set_on_the_bucket_descriptor(self):
        """The first line: the child's own bucket descriptor takes no
        setsockopt() at all (a copy is the parent's to check)."""
        with Server4() as srv:
            srv.start()
            srv.wait_ready(8)
            for query in ("sock=rcvtimeo", "sock=noreuseport",
                          "sock=opt&opt=linger", "sock=opt&opt=ttl",
                          "sock=opt&opt=sndbuf"):
                got = hostile_sockets(srv, query)
                self.assertEqual((got["sockets"], got["ok"], got["errno"]),
                                 (1, 0, errno.EPERM), query)
            self.assertNotIn("PFB00060", srv.error_log())


class InheritedOptions(unittest.TestCase):
    """An option a child sets on the listening socket it holds reaches
    every connection the socket accepts; the parent puts it back."""

    def test_every_inherited_option_a_child_sets_is_put_back(self):
        # The children's filter refuses most of these on every descriptor
        # (test_holders, test_seccomp): off, each reaches the socket, and
        # the parent's check, the second line, is what is tested.
        with Server4(extra="ChildSyscallFilter off\n",
                     expect_log=("PFB00060", "PFB00174",
                                 ACCEPT_FAILED)) as srv:
            srv.start()
            srv.wait_ready(8)
            healthy = option_state(srv)
            slowest = 0.0
            for name, (_, _, label) in OPTIONS.items():
                seen = srv.log_count(label)
                got = hostile_sockets(srv, "sock=opt&opt=%s&via=dup" % name)
                self.assertEqual((got["sockets"], got["ok"]), (1, 1),
                                 (name, got))
                started = time.monotonic()
                self.assertTrue(srv.wait_for(
                    lambda: srv.log_count(label) > seen), label)
                self.assertTrue(srv.wait_for(
                    lambda: option_state(srv) == healthy),
                    "%s: %s" % (name, option_state(srv)))
                slowest = max(slowest, time.monotonic() - started)
            print("slowest repair: %.1f s" % slowest)
            # Once a maintenance cycle (a second), with room for a loaded
            # machine: the point is that it happens, not how fast.
            self.assertLess(slowest, 10)
            self.assertTrue(srv.wait_for(lambda: every_bucket_served(srv, 4)))
            assert_spread(self, srv)
            log = srv.error_log()
            self.assertTrue(re.search(r"PFB00060: .*options connections "
                                      r"inherit changed: [^;]*SO_LINGER", log))
            # The first repair of a socket is in place; a socket put right
            # before is not trusted again and is replaced.
            lines = [l for l in log.splitlines() if "PFB00060" in l]
            self.assertIn("SO_LINGER", lines[0])
            self.assertNotIn("replaced", lines[0])
            for line in lines:
                if "put right before" in line:
                    self.assertIn("was replaced", line)
            # A buffer size set turns autotuning off for good: the socket
            # goes, and a new one takes its place.
            line = [l for l in log.splitlines() if "SO_SNDBUF" in l][0]
            self.assertIn("was replaced", line)

    def test_slow_readers_get_a_large_file_whole(self):
        """SO_LINGER {1, 0} on the listener turns every close into a
        reset, and a slow reader loses the end of a large file; IP_TTL 1
        keeps every answer from leaving the network.  Both set through a
        copy of the one socket, both put back, after which four slow
        readers of a 2 MiB file get it whole."""
        size = 2 * 1024 * 1024
        # IP_TTL is refused by the children's filter: off, the parent's
        # check is what is tested (a second repair replaces the socket).
        with Server(extra=LOCATIONS + "StartServers 4\n"
                    "ChildSyscallFilter off\n",
                    extra_modules=HOSTILE_LOAD,
                    expect_log=("PFB00060", "PFB00174",
                                ACCEPT_FAILED)) as srv:
            with open(os.path.join(srv.root, "htdocs", "big.bin"), "wb") as f:
                f.write(os.urandom(size))
            srv.start()
            srv.wait_ready(4)
            (healthy,) = option_state(srv)
            for name in ("linger", "ttl"):
                got = hostile_sockets(srv, "sock=opt&opt=%s&via=dup" % name)
                self.assertEqual((got["sockets"], got["ok"]), (1, 1), got)
            self.assertTrue(srv.wait_for(
                lambda: option_state(srv) == [healthy]), option_state(srv))
            self.assertTrue(srv.wait_log("SO_LINGER"))
            self.assertTrue(srv.wait_log("IP_TTL"))
            results = [None] * 4

            def read_slowly(i):
                results[i] = slow_read(srv.ports[0], "/big.bin")
            readers = [threading.Thread(target=read_slowly, args=(i,))
                       for i in range(4)]
            for t in readers:
                t.start()
            for t in readers:
                t.join(120)
            print("slow readers got %s bytes" % results)
            self.assertEqual(results, [size] * 4)


def slow_read(port, path):
    """GET path with a small receive buffer, reading a little at a time;
    returns how many body bytes came before the end (or a reset)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(60)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.0\r\nHost: t\r\n\r\n" % path).encode())
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
            # About 200 kB/s: the server has handed the kernel all it has
            # and closed long before the end is read.
            time.sleep(0.02)
    except ConnectionResetError:
        pass
    finally:
        s.close()
    return len(data.partition(b"\r\n\r\n")[2])


def lock_filters(srv, index, drop_all):
    """Through the parent's own descriptor of bucket socket `index`, as a
    child of a kernel that allows it would: a filter that drops every
    handshake (or none), then SO_LOCK_FILTER.  Returns our copy of it."""
    sockets = bucket_sockets(srv)
    held = sockets.pop(index)
    for s in sockets:
        s.close()
    if drop_all:
        attach_drop_filter(held)
    held.setsockopt(socket.SOL_SOCKET, SO_LOCK_FILTER, 1)
    return held


class LockedFilter(unittest.TestCase):
    """A socket whose filters are locked keeps them for its life: no one,
    not even root, can remove them, or attach the parent's own at a
    graceful stop."""

    def test_a_locked_drop_all_filter_stops_costing_requests(self):
        with Server4(expect_log=("PFB00060", ACCEPT_FAILED)) as srv:
            srv.start()
            srv.wait_ready(8)
            held = lock_filters(srv, 1, drop_all=True)
            started = time.monotonic()
            with held:
                self.assertTrue(srv.wait_log("was replaced"))
                took = time.monotonic() - started
                print("locked filter replaced after %.1f s" % took)
                self.assertLess(took, 10)
                # The old socket listens no more, whoever holds it.
                self.assertEqual(listening(held), 0)
            self.assertTrue(re.search(r"PFB00060: .*socket filter attached, "
                                      r"socket filters locked", srv.error_log()))
            self.assertTrue(srv.wait_for(lambda: every_bucket_served(srv, 4)))
            for _ in range(40):
                self.assertEqual(get(srv, "/index.html", timeout=3)[0], 200)
            assert_spread(self, srv)
            for s in bucket_sockets(srv):
                with s:
                    self.assertEqual(s.getsockopt(socket.SOL_SOCKET,
                                                  SO_GET_FILTER), 0)
                    self.assertEqual(listening(s), 1)

    def test_a_graceful_stop_drains_with_a_locked_socket(self):
        """A socket locked just before a graceful stop takes no filter of
        the parent's: the others drain as usual, and the log names the
        one that could not refuse new handshakes (or, if a maintenance
        cycle came first, the socket was replaced)."""
        with Server4(expect_log=("PFB00060", "PFB00171",
                                 ACCEPT_FAILED)) as srv:
            srv.start()
            srv.wait_ready(8)
            with lock_filters(srv, 2, drop_all=False):
                srv.signal(signal.SIGWINCH)
                self.assertTrue(srv.wait_exit())
            log = srv.error_log()
            self.assertNotIn("PFB00040", log)
            self.assertIn("PFB00041", log)
            self.assertTrue("PFB00171" in log or "was replaced" in log, log)


class FilterOff(unittest.TestCase):
    """ChildSyscallFilter off: one warning on the console and in the
    log, children without the filter, and the parent's checks still
    repair what the filter would have refused."""

    def test_the_parent_still_guards_with_the_filter_off(self):
        with Server4(extra="ChildSyscallFilter off\n", daemon=True,
                     expect_log=("PFB00174", "PFB00060",
                                 ACCEPT_FAILED)) as srv:
            srv.start()
            pids = srv.wait_ready(8)
            self.assertIn("WARNING: ", srv.startup_output)
            self.assertIn("ChildSyscallFilter off", srv.startup_output)
            self.assertEqual(srv.log_count("PFB00174"), 1)
            self.assertNotIn("PFB00063", srv.error_log())
            for pid in pids:
                with open("/proc/%d/status" % pid) as f:
                    self.assertRegex(f.read(), r"(?m)^Seccomp:\s+0$")
            got = hostile_sockets(srv, "sock=lock")
            self.assertEqual((got["sockets"], got["ok"]), (1, 1), got)
            self.assertTrue(srv.wait_log("was replaced"))
            self.assertTrue(srv.wait_for(lambda: every_bucket_served(srv, 4)))
            assert_spread(self, srv)


CGI = r"""#!/usr/bin/python3
import os, re, socket
print("Content-Type: text/plain\n")
with open("/proc/self/status") as f:
    print(re.search(r"(?m)^Seccomp:.*$", f.read()).group(0))
inodes = []
for fd in os.listdir("/proc/self/fd"):
    try:
        m = re.fullmatch(r"socket:\[(\d+)\]",
                         os.readlink("/proc/self/fd/" + fd))
    except OSError:
        continue
    if m:
        inodes.append(m.group(1))
print("sockets " + " ".join(inodes))
s = socket.socket()
try:
    s.setsockopt(socket.SOL_SOCKET, 68, 1)    # SO_DETACH_REUSEPORT_BPF
    print("detach 0")
except OSError as e:
    print("detach %d" % e.errno)
"""


class CgidDaemon(unittest.TestCase):
    """mod_cgid's daemon is forked by the parent, not by a child, and
    forks every CGI script: it must hold no bucket socket and run under
    the children's filter, or a child could have it start a program that
    it passes its socket to, outside the filter."""

    def server(self):
        cgid = ("LoadModule cgid_module %s\n"
                "<IfModule !alias_module>\n"
                "    LoadModule alias_module %s\n</IfModule>\n"
                % (os.path.join(MODULES, "mod_cgid.so"),
                   os.path.join(MODULES, "mod_alias.so")))
        srv = Server(extra=FOUR_BUCKETS, extra_modules=cgid,
                     expect_log=("AH01239",))
        os.mkdir(os.path.join(srv.root, "cgi-bin"))
        path = os.path.join(srv.root, "cgi-bin", "probe")
        with open(path, "w") as f:
            f.write(CGI)
        os.chmod(path, 0o755)
        srv.write_conf(FOUR_BUCKETS + 'ScriptAlias /cgi-bin/ "%s/cgi-bin/"\n'
                       % srv.root)
        return srv

    @staticmethod
    def daemons(srv):
        """Children of the parent that are none of its bucket children."""
        buckets = srv.child_buckets()
        return [p for p in srv.children() if p not in buckets]

    def check(self, srv):
        buckets = set(listening_inodes(srv.ports[0]))
        # An old daemon may still be on its way out.
        daemons = srv.wait_for(lambda: (lambda d: d if len(d) == 1 else None)(
            self.daemons(srv)))
        self.assertTrue(daemons, self.daemons(srv))
        daemon = daemons[0]
        self.assertFalse(set(process_socket_fds(daemon)) & buckets)
        with open("/proc/%d/status" % daemon) as f:
            self.assertRegex(f.read(), r"(?m)^Seccomp:\s+2$")
        status, body = get(srv, "/cgi-bin/probe")
        text = body.decode()
        self.assertEqual(status, 200, text)
        self.assertIn("Seccomp:\t2", text)
        self.assertIn("detach %d" % errno.EPERM, text)
        held = re.search(r"sockets ([\d ]*)", text).group(1).split()
        self.assertFalse({int(i) for i in held} & buckets, text)
        return daemon

    def test_the_cgid_daemon_and_its_scripts_hold_no_bucket_socket(self):
        with self.server() as srv:
            srv.start()
            srv.wait_ready(4)
            daemon = self.check(srv)
            # Killed, the parent forks another, later, from its own loop.
            os.kill(daemon, signal.SIGKILL)
            self.assertTrue(srv.wait_for(
                lambda: self.daemons(srv)
                and self.daemons(srv) != [daemon]))
            daemon = self.check(srv)
            # A graceful restart forks a new one at post_config.
            srv.restart_gracefully()
            self.assertTrue(srv.wait_for(
                lambda: self.daemons(srv)
                and self.daemons(srv) != [daemon]))
            self.check(srv)


if __name__ == "__main__":
    unittest.main()
