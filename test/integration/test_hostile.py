# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Hostile children, second round: what a child running hostile code can
do to the status readers, to the bucket socket it must hold, and to the
parent's respawning, and what must hold whatever it does.

Each attack comes from test/modules/mod_pfb_hostile.c in a real child.
The attacks that last (a segment rewritten in a loop, siblings killed in
a loop) run until the test creates a stop file, so the test decides when
they end by state, never by time.
"""

import errno
import json
import os
import re
import signal
import socket
import threading
import time
import unittest

from pfbtest import Server, Load, HOSTILE_SO, STATUS_LOAD, is_alive
from pfbtest.sockets import (listening_inodes, pidfd_getfd,
                             process_socket_fds)

HOSTILE_LOAD = "LoadModule pfb_hostile_module %s\n" % HOSTILE_SO
LOCATIONS = ("<Location /hostile>\n    SetHandler pfb-hostile\n</Location>\n"
             "<Location /bucket-status>\n    SetHandler bucket-status\n"
             "</Location>\n")
FOUR_BUCKETS = ("ListenBuckets 4\nStartServers 8\nMinSpareServers 4\n"
                "MaxSpareServers 12\nMaxRequestWorkers 24\nServerLimit 24\n")
# A ?auto line: "Name: value", the name a word, the value without
# control characters.
AUTO_LINE = re.compile(r"^[A-Za-z][A-Za-z0-9_ ]*:( [^\x00-\x1f\x7f]*)?$")


def get(srv, path, timeout=30):
    """One HTTP/1.0 request, read to the end: (status, body).  Pages made
    large by an attack come without a Content-Length."""
    with socket.create_connection(("127.0.0.1", srv.ports[0]),
                                  timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n"
                   % path).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("no answer to %s" % path)
    return int(head.split()[1]), body


class Attack:
    """A lasting attack in one child: started by a request whose answer
    begins with "running pid P", ended by the stop file."""

    def __init__(self, srv, query):
        self.srv = srv
        self.stop_file = os.path.join(srv.root, "stop-%d" % id(self))
        self.query = "%s&stop=%s" % (query, self.stop_file)
        self.pid = None
        self.summary = None
        self.error = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            with socket.create_connection(("127.0.0.1", self.srv.ports[0]),
                                          timeout=90) as s:
                s.sendall(("GET /hostile?%s HTTP/1.0\r\nHost: t\r\n\r\n"
                           % self.query).encode())
                data = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                    m = re.search(rb"running pid (\d+)", data)
                    if m and self.pid is None:
                        self.pid = int(m.group(1))
                        self.started.set()
                self.summary = data.decode(errors="replace")
        except OSError as e:
            self.error = e
        finally:
            self.started.set()

    def __enter__(self):
        self.thread.start()
        if not self.started.wait(60) or self.pid is None:
            raise AssertionError("attack %s did not start: %s"
                                 % (self.query, self.error or self.summary))
        return self

    def __exit__(self, *exc):
        with open(self.stop_file, "w"):
            pass
        self.thread.join(90)
        return False

    def count(self, word):
        m = re.search(r"%s (\d+)" % word, self.summary or "")
        return int(m.group(1)) if m else None


def auto_lines(body, path=""):
    """The lines of a ?auto answer; mod_status's begins with the server's
    name on a line of its own."""
    lines = body.decode("utf-8").splitlines()
    if path.startswith("/server-status") and lines:
        lines = lines[1:]
    return lines


class StatusReaders(unittest.TestCase):
    """Children serving /bucket-status and /server-status read a segment
    that a hostile child rewrites while they read."""

    def test_status_pages_survive_a_count_flip(self):
        """The header's bucket count flips between 1 and every record
        while 1000 status pages are read: each is answered, whole."""
        with Server(extra=FOUR_BUCKETS + LOCATIONS,
                    extra_modules=STATUS_LOAD + HOSTILE_LOAD) as srv:
            srv.start()
            srv.wait_ready(8)
            paths = ("/bucket-status?json", "/bucket-status?auto",
                     "/server-status?auto", "/bucket-status?prometheus",
                     "/bucket-status")
            with Attack(srv, "segment=flip") as attack:
                for i in range(1000):
                    path = paths[i % len(paths)]
                    status, body = get(srv, path)
                    self.assertEqual(status, 200, path)
                    if path == "/bucket-status?json":
                        json.loads(body.decode("utf-8"))
                    elif path.endswith("?auto"):
                        for line in auto_lines(body, path):
                            self.assertRegex(line, AUTO_LINE, path)
            self.assertGreater(attack.count("rounds"), 0, attack.summary)
            self.assertTrue(is_alive(srv.proc.pid))

    def test_control_characters_in_listener_names(self):
        """Listener names with newlines and escape sequences: ?auto on
        both pages keeps one figure a line and no injected line."""
        with Server(extra=FOUR_BUCKETS + LOCATIONS,
                    extra_modules=STATUS_LOAD + HOSTILE_LOAD) as srv:
            srv.start()
            srv.wait_ready(8)
            with Attack(srv, "segment=ctrl"):
                for _ in range(20):
                    for path in ("/bucket-status?auto",
                                 "/server-status?auto"):
                        status, body = get(srv, path)
                        self.assertEqual(status, 200)
                        lines = auto_lines(body, path)
                        for line in lines:
                            self.assertRegex(line, AUTO_LINE, path)
                        names = [l.split(":", 1)[0] for l in lines]
                        self.assertLessEqual(names.count("Total Accesses"),
                                             1, path)
                        self.assertEqual(names.count("BucketCount"), 1, path)
                        self.assertIn("BucketCount: 4", lines, path)
                    status, body = get(srv, "/bucket-status?json")
                    self.assertEqual(status, 200)
                    board = json.loads(body.decode("utf-8"))
                    for b in board["buckets"]:
                        self.assertNotRegex(b["listener"],
                                            r"[\x00-\x1f\x7f]")

    def test_oversized_header_under_a_large_server_limit(self):
        """Every count in the header at its largest, every slot a live
        child: the reader's work is bounded by this process's ServerLimit,
        not by the header, and each page comes within a bound."""
        limit = 4000
        extra = ("ListenBuckets 2\nStartServers 4\nMinSpareServers 2\n"
                 "MaxSpareServers 8\nMaxRequestWorkers 16\n"
                 "ServerLimit %d\n" % limit + LOCATIONS)
        with Server(extra=extra,
                    extra_modules=STATUS_LOAD + HOSTILE_LOAD) as srv:
            srv.start()
            srv.wait_ready(4)
            slowest = 0.0
            with Attack(srv, "segment=huge"):
                for i in range(10):
                    path = ("/bucket-status?json", "/bucket-status?auto",
                            "/server-status?auto")[i % 3]
                    started = time.monotonic()
                    status, body = get(srv, path, timeout=60)
                    slowest = max(slowest, time.monotonic() - started)
                    self.assertEqual(status, 200, path)
                    if path.endswith("json"):
                        board = json.loads(body.decode("utf-8"))
                        self.assertLessEqual(len(board["buckets"]), limit)
                        for b in board["buckets"]:
                            self.assertGreaterEqual(b["accepted"], 0)
                    else:
                        for line in auto_lines(body, path):
                            self.assertRegex(line, AUTO_LINE, path)
            print("slowest status page under the attack: %.0f ms"
                  % (slowest * 1000))
            # Reading every slot for every bucket took seconds here; one
            # pass over each takes milliseconds.  The bound leaves room
            # for a loaded machine and for ASan.
            self.assertLess(slowest, 5.0)


if __name__ == "__main__":
    unittest.main()
