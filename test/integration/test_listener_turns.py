# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A child that polls several Listens under the accept mutex takes its
ready listeners in turn (pick_ready_listener in prefork.c).

The pollset reports ready sockets in the same order each time, so a child
that always took the first one would serve one Listen's queue to the end
while the others' connections waited.  Here the only child is held while
every Listen's queue fills, then let go: the order it serves them in is
the order it picks listeners in, with no timing involved.
"""

import os
import socket
import subprocess
import unittest

from pfbtest import Server, listen_sockets, read_response

# Connections queued on each Listen while the only child is held.
PER_PORT = 6
# The only child, which must poll all four Listens.
ONE_CHILD = ("ListenBuckets 0\nStartServers 1\nServerLimit 1\n"
             "MaxRequestWorkers 1\nMinSpareServers 1\nMaxSpareServers 2\n")
# The only child held with connections queued is MaxRequestWorkers reached
# with more children wanted: the MPM logs PFB00010 when a maintenance cycle
# falls while the child is held.
FULL_LOG = ("PFB00010",)
# How long a state may take to appear: far more than it needs, and short
# enough to keep a failing run bounded.
WAIT_S = 20


def accept_queue(port):
    """Connections waiting in the port's accept queue (one socket per
    Listen under ListenBuckets 0: its Recv-Q in `ss -ltn`)."""
    lines = listen_sockets(port)
    if len(lines) != 1:
        raise AssertionError("port %d: %d listening sockets: %s"
                             % (port, len(lines), lines))
    return int(lines[0].split()[1])


def accepted_by_a_process(port, client):
    """Whether the server side of the connection from `client` to `port`
    has left the accept queue: its socket then belongs to a process."""
    out = subprocess.run(["ss", "-tnpH", "state", "established",
                          "( sport = :%d and dport = :%d )" % (port, client)],
                         capture_output=True, text=True, timeout=30).stdout
    return "pid=" in out


def served_ports(path):
    """(local port, status, request line) per logged request, in the
    order the child served them."""
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l]
    except OSError:
        return []
    result = []
    for line in lines:
        port, status, request = line.split(" ", 2)
        result.append((int(port), int(status), request.strip('"')))
    return result


def connect_with(port, data):
    """A connection to port that has sent data; the caller closes it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    s.settimeout(WAIT_S)
    s.sendall(data)
    return s


class ListenerTurns(unittest.TestCase):

    def test_one_child_serves_every_listen_in_turn(self):
        with Server(ports=4, extra=ONE_CHILD, expect_log=FULL_LOG) as srv:
            port_log = os.path.join(srv.root, "logs", "port_log")
            srv.extra += ('CustomLog "%s" "%%{local}p %%>s \\"%%r\\"" '
                          'env=!pfb_probe\n' % port_log)
            clients = []
            try:
                srv.start()
                self.assertEqual(len(srv.wait_ready(1)), 1, srv.children())
                self.assertTrue(srv.wait_for(
                    lambda: all(accept_queue(p) == 0 for p in srv.ports),
                    WAIT_S), "the harness's probes were never served")
                first = srv.ports[0]
                blocker = connect_with(
                    first, b"GET /index.html?blocker HTTP/1.0\r\nHost: t\r\n")
                clients.append(blocker)
                client_port = blocker.getsockname()[1]
                self.assertTrue(srv.wait_for(
                    lambda: accepted_by_a_process(first, client_port),
                    WAIT_S), "the child never accepted the held request")
                # Port by port: the first port's queue fills first, so a
                # child that took the first ready socket each time would
                # serve it to the end before any other.  Each client closes
                # its sending side at once: the child's lingering close
                # then ends without waiting for it.
                for index, port in enumerate(srv.ports):
                    for n in range(PER_PORT):
                        s = connect_with(
                            port, b"GET /index.html?port=%d&n=%d HTTP/1.0\r\n"
                            b"Host: t\r\nConnection: close\r\n\r\n"
                            % (index, n))
                        s.shutdown(socket.SHUT_WR)
                        clients.append(s)
                self.assertTrue(srv.wait_for(
                    lambda: all(accept_queue(p) == PER_PORT
                                for p in srv.ports), WAIT_S),
                    "queues: %s" % [accept_queue(p) for p in srv.ports])
                blocker.sendall(b"\r\n")
                blocker.shutdown(socket.SHUT_WR)
                for s in clients:
                    status, _ = read_response(s)
                    self.assertEqual(status, 200)
                self.assertTrue(srv.wait_for(
                    lambda: len(served_ports(port_log))
                    >= 1 + 4 * PER_PORT, WAIT_S), served_ports(port_log))
            finally:
                for s in clients:
                    s.close()
            served = served_ports(port_log)
            self.assertEqual(len(served), 1 + 4 * PER_PORT, served)
            self.assertEqual(served[0], (first, 200,
                                         "GET /index.html?blocker HTTP/1.0"))
            # Listen numbers (0 to 3, in Listen order) served after the
            # held request, in the order the child served them.
            after = [srv.ports.index(port) for port, _, _ in served[1:]]
            # Every port's queue served whole, on its own port.
            for index, port in enumerate(srv.ports):
                self.assertEqual(
                    sorted(r for p, _, r in served[1:] if p == port),
                    sorted("GET /index.html?port=%d&n=%d HTTP/1.0"
                           % (index, n) for n in range(PER_PORT)), served)
            # The child goes round the Listens: one of each in the first
            # four, starting after the one it served last, and the same
            # round again until the queues are empty.
            self.assertEqual(len(set(after[:4])), 4, after)
            self.assertNotEqual(after[0], 0, after)
            self.assertEqual(after[4:], after[:-4], after)


if __name__ == "__main__":
    unittest.main()
