# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The lingering close (server/mpm/prefork/conn/prefork_linger.c).

httpd promises that no response is lost to a reset: after a response on a
connection it closes, it shuts the socket down for writing and reads what
the client still sends before closing, since a socket closed with the
client's bytes unread, or before they arrive, answers with RST and may drop
the rest of the response.  httpd's prefork child blocks in those reads;
this MPM's child closes at once when nothing can be lost, and otherwise
leaves the reading to a thread of its own and goes back to accept().

The client here makes the case that needs the promise: its receive window
is tiny, so most of a 256 KiB response is still in the server's send queue
when the server is done with the request, and it sends more bytes (a
pipelined request) after its `Connection: close` request before it reads.
It must still get the whole response, from this MPM as from Debian's stock
prefork.  And this MPM's only child must serve another client meanwhile,
which stock prefork's cannot until it has given up lingering.
"""

import socket
import threading
import unittest

from pfbtest import Server, STOCK_PREFORK, DEADLINE, http_get
from pfbtest.sockets import process_socket_fds

BODY = 256 * 1024
# The server's send buffer holds the whole response (the kernel caps it at
# twice net.core.wmem_max, 425 984 bytes by default), so the child finishes
# the request however little the client reads.
ONE_CHILD = ("StartServers 1\nMinSpareServers 1\nMaxSpareServers 2\n"
             "MaxRequestWorkers 1\nServerLimit 1\nSendBufferSize 1048576\n")
# One child: a maintenance cycle that falls while it serves finds no idle
# child with the cap reached, and the MPM says so.
CAP_LOG = ("PFB00010", "AH00161")
REQUEST = (b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n"
           b"Connection: close\r\n\r\n")
PIPELINED = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n"


def write_big_file(srv):
    with open("%s/htdocs/big.bin" % srv.root, "wb") as f:
        f.write(b"x" * BODY)


def slow_reader(port):
    """A client with a tiny receive window that has sent the request."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(DEADLINE)
    s.connect(("127.0.0.1", port))
    s.sendall(REQUEST)
    return s


def read_all(s):
    """Everything until end of file; a reset raises ConnectionResetError."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def assert_whole_response(test, data):
    head, _, body = data.partition(b"\r\n\r\n")
    test.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:80])
    test.assertEqual(len(body), BODY, "the response was cut short")


def server_side_inode(server_port, client_port):
    """The inode of the server's socket of one loopback connection (0 once
    no process holds it), from /proc/net/tcp."""
    want_local = ":%04X" % server_port
    want_remote = ":%04X" % client_port
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            if fields[1].endswith(want_local) and \
                    fields[2].endswith(want_remote):
                return int(fields[9])
    return None


class Dribble:
    """Sends one byte every 0.2 s on a socket until stopped: a client that
    keeps sending after its request, which keeps httpd's lingering read
    going for up to 30 s."""

    def __init__(self, s):
        self.s = s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.2):
            try:
                self.s.send(b"x")
            except OSError:
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(DEADLINE)
        return False


class LingeringClose(unittest.TestCase):

    def pipelined_after_close(self, mpm):
        with Server(extra=ONE_CHILD, mpm=mpm, expect_log=CAP_LOG) as srv:
            write_big_file(srv)
            srv.start()
            self.assertTrue(srv.wait_ready(1, idle=True))
            with slow_reader(srv.ports[0]) as s:
                # Logged: the child has written the whole response into
                # its socket and gone on to close the connection.
                self.assertTrue(srv.wait_access_log(1))
                s.sendall(PIPELINED)
                assert_whole_response(self, read_all(s))

    def test_pipelined_bytes_after_close_request_lose_nothing(self):
        self.pipelined_after_close(None)

    def test_stock_prefork_keeps_the_same_promise(self):
        self.pipelined_after_close(STOCK_PREFORK)

    def test_child_serves_the_next_client_while_it_lingers(self):
        with Server(extra=ONE_CHILD, expect_log=CAP_LOG) as srv:
            write_big_file(srv)
            srv.start()
            self.assertTrue(srv.wait_ready(1, idle=True))
            child = srv.children()[0]
            with slow_reader(srv.ports[0]) as a:
                self.assertTrue(srv.wait_access_log(1))
                with Dribble(a):
                    status, _ = http_get("127.0.0.1", srv.ports[0],
                                         timeout=DEADLINE)
                    self.assertEqual(status, 200)
                    # The one child served this while A's socket was still
                    # its own, lingering: stock prefork's child reads A's
                    # bytes until it gives up (30 s), and only then serves.
                    inode = server_side_inode(srv.ports[0],
                                              a.getsockname()[1])
                    self.assertTrue(inode, "A's connection is gone")
                    self.assertIn(inode, process_socket_fds(child),
                                  "the child no longer holds A's socket")
                assert_whole_response(self, read_all(a))
            # A's close ends the lingering at once.
            self.assertTrue(srv.wait_for(
                lambda: inode not in process_socket_fds(child)))


if __name__ == "__main__":
    unittest.main()
