# Licensed under the Apache License, Version 2.0; see LICENSE.
"""httpd's promise at close: no response is lost to a reset.

A server that closes a connection while the client is still sending
answers the client's next bytes with RST.  A client uploading a body gets
EPIPE or ECONNRESET on its next send and, like most clients, gives up
without reading the answer the server sent it (a 413, a 401); a stack
other than Linux's also drops whatever it had received and not yet read.
So after a response on a connection it closes, httpd's
ap_lingering_close() shuts the socket down for writing and reads and
discards what the client still sends, until the client closes, stays
silent for 2 s, or 30 s have passed since its first bytes; and a child
that stops (graceful stop, graceful restart, MaxConnectionsPerChild, idle
reaping) finishes that first.

Each test here is a client that needs the promise, and checks it whole:
every byte it sends is taken (no EPIPE, no ECONNRESET), it reads the
whole answer and then a clean end of file, and its socket saw no reset.
Debian's stock prefork keeps the promise in every case below.

- An upload to a URL whose LimitRequestBody answers 413 at once, before
  the body: the client uploads at its own pace, then reads.
- A pipelining client whose first request says `Connection: close`: it
  writes its second request with the first and more after it has the
  first answer, then reads.
- Uploads that are still going when the server is stopped gracefully
  (20 clients), restarted gracefully, when each child may serve one
  connection (MaxConnectionsPerChild 1), and while the parent retires
  idle children.  Each client writes the head and its first 64 KiB at
  once, so bytes wait unread when the child closes and every lingering
  close of this MPM's before it lingered too: what these tests add is
  that the lingering outlives the child's 2 s bound at exit.
"""

import os
import select
import socket
import ssl
import subprocess
import threading
import time
import unittest

from pfbtest import (Server, Scoreboard, STOCK_PREFORK, DEADLINE, MODULES,
                     read_response)

# The answer comes at once: the body's announced length is over the
# limit, so httpd answers 413 before it reads any of it, and closes.
LIMITED = ("<Location /upload>\n    LimitRequestBody 1024\n</Location>\n")
BODY = 2 * 1024 * 1024
FIRST = 64 * 1024
CHUNK = 32 * 1024
# 32 KiB every 60 ms: the upload lasts about 3.7 s, well past the 2 s
# this MPM's child waited for its lingering sockets at exit, and each
# pause is far below httpd's 2 s of silence.
PAUSE = 0.06
HEAD = ("POST /upload HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/octet-stream\r\n"
        "Content-Length: %d\r\n\r\n" % BODY).encode()
CLOSE_REQUEST = (b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n"
                 b"Connection: close\r\n\r\n")
NEXT_REQUEST = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n"
# A pool that serves 20 clients at once under either prefork: stock's
# children linger in their own thread, one connection each.
POOL = ("StartServers 24\nMinSpareServers 1\nMaxSpareServers 32\n"
        "MaxRequestWorkers 32\nServerLimit 32\n")
# Lines a stop or a restart may log at warn (the parent repeats SIGTERM
# to children that are still closing; a full pool at start).
STOP_LOG = ("AH00045", "PFB00051", "AH00161", "PFB00010")


def tcp_state(s):
    """The socket's TCP state (TCP_INFO's first byte): 7 is TCP_CLOSE,
    where a reset leaves a connection the client had not closed."""
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


TCP_CLOSE = 7


class Client:
    """One connection that must get its whole answer and no reset: what
    it sent, what it read, and the first error it met."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), DEADLINE)
        self.sock.settimeout(DEADLINE)
        self.sent = 0
        self.answer = b""
        self.error = None
        self.reset = False

    def send(self, data):
        if self.error:
            return
        try:
            self.sock.sendall(data)
            self.sent += len(data)
        except OSError as e:
            self.error = "send after %d bytes: %s" % (self.sent, e)

    def wait_answered(self):
        """Until the server's first answer bytes are here (not read)."""
        ready, _, _ = select.select([self.sock], [], [], DEADLINE)
        return bool(ready)

    def read_to_end(self):
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.answer += chunk
        except OSError as e:
            self.error = self.error or "read: %s" % e
        # A reset that came after our last send and after the server's
        # FIN leaves the error on the socket and TCP_CLOSE as its state.
        pending = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        self.reset = bool(pending) or tcp_state(self.sock) == TCP_CLOSE
        self.sock.close()

    def problems(self, status, sent):
        """What broke the promise, or []."""
        found = []
        if self.error:
            found.append(self.error)
        if self.reset:
            found.append("the connection was reset")
        if self.sent != sent:
            found.append("sent %d of %d bytes" % (self.sent, sent))
        if not self.answer.startswith(b"HTTP/1.1 %d " % status):
            found.append("answer begins %r" % self.answer[:40])
        elif not whole_answer(self.answer):
            found.append("answer cut short: %d bytes" % len(self.answer))
        return found


def whole_answer(data):
    """The first answer in data is whole: as long as its Content-Length,
    or, without one (httpd's error pages end the connection), its HTML
    complete."""
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.rstrip().endswith(b"</html>")


class Uploader(Client):
    """POSTs BODY to /upload: the head and the first FIRST bytes at once,
    or the head alone (head_only); then, once told to go on, the rest
    at its own pace; then reads."""

    def __init__(self, port, head_only=False, pause=PAUSE):
        Client.__init__(self, port)
        self.pause = pause
        self.send(HEAD if head_only else HEAD + b"x" * FIRST)
        self.go_on = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        self.go_on.wait(DEADLINE)
        chunk = b"x" * CHUNK
        while self.sent < len(HEAD) + BODY and not self.error:
            time.sleep(self.pause)
            self.send(chunk[:len(HEAD) + BODY - self.sent])
        self.read_to_end()

    def problems_413(self):
        return self.problems(413, len(HEAD) + BODY)


def uploads(port, count, head_only=False, pause=PAUSE):
    """`count` uploaders, each answered (its 413 here, unread)."""
    clients = [Uploader(port, head_only, pause) for _ in range(count)]
    for c in clients:
        c.thread.start()
    for c in clients:
        if not c.wait_answered():
            raise AssertionError("no answer to an upload in %d s" % DEADLINE)
    return clients


def finish(test, clients):
    """Lets the uploads go on to their end; fails on any broken promise."""
    for c in clients:
        c.go_on.set()
    for c in clients:
        c.thread.join(DEADLINE + 10)
    broken = ["client %d: %s" % (i, "; ".join(c.problems_413()))
              for i, c in enumerate(clients) if c.problems_413()]
    test.assertEqual(broken, [], "%d of %d clients lost their answer or "
                     "were reset" % (len(broken), len(clients)))


class LingerPromise(unittest.TestCase):

    def slow_upload(self, mpm):
        with Server(extra=LIMITED, mpm=mpm) as srv:
            srv.start()
            # The head alone: the 413 comes before any of the body, and
            # every body byte arrives after the child has answered.
            finish(self, uploads(srv.ports[0], 1, head_only=True))
            self.assertTrue(srv.wait_access_log(1))
            self.assertIn(" 413 ", srv.access_log_lines()[0])

    def test_slow_upload_to_an_early_413_reads_the_whole_answer(self):
        self.slow_upload(None)

    def test_stock_prefork_keeps_the_promise_to_a_slow_upload(self):
        self.slow_upload(STOCK_PREFORK)

    def pipelined_after_close(self, mpm):
        with Server(mpm=mpm) as srv:
            srv.start()
            client = Client(srv.ports[0])
            # The second request rides with the first: httpd has read it
            # into its input filters when it closes after the first.
            client.send(CLOSE_REQUEST + NEXT_REQUEST)
            self.assertTrue(client.wait_answered())
            # A pipelining client writes its whole batch before it reads.
            for _ in range(10):
                client.send(NEXT_REQUEST)
            client.read_to_end()
            sent = len(CLOSE_REQUEST) + 11 * len(NEXT_REQUEST)
            self.assertEqual(client.problems(200, sent), [])
            self.assertEqual(client.answer.count(b"HTTP/1.1 "), 1,
                             "only the first request is answered")

    def test_pipelining_client_after_connection_close_gets_every_byte(self):
        self.pipelined_after_close(None)

    def test_stock_prefork_keeps_the_promise_to_a_pipelining_client(self):
        self.pipelined_after_close(STOCK_PREFORK)


class LingerAtExit(unittest.TestCase):
    """A child that leaves finishes its lingering closes first, bounded
    as httpd bounds them (30 s from a client's first bytes)."""

    def graceful_stop(self, mpm):
        with Server(extra=LIMITED + POOL, mpm=mpm,
                    expect_log=STOP_LOG) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(24))
            clients = uploads(srv.ports[0], 20)
            self.assertTrue(srv.wait_access_log(20))
            rc, out = srv.control("graceful-stop")
            self.assertEqual(rc, 0, out)
            finish(self, clients)
            self.assertTrue(srv.wait_exit(), "the server did not stop")

    def test_graceful_stop_while_20_clients_linger_loses_no_answer(self):
        self.graceful_stop(None)

    def test_stock_prefork_graceful_stop_loses_no_answer(self):
        self.graceful_stop(STOCK_PREFORK)

    def test_stop_does_not_wait_for_lingering_closes(self):
        """A stop (SIGTERM), unlike a graceful one, leaves at once, as
        httpd's child dies in its lingering close: the parent has no child
        left to signal again (PFB00051) while a client still uploads."""
        with Server(extra=LIMITED + TWO) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(2))
            # 32 KiB every 0.5 s: the upload would outlast the 30 s cap.
            clients = uploads(srv.ports[0], 1, pause=0.5)
            self.assertTrue(srv.wait_access_log(1))
            clients[0].go_on.set()
            self.assertEqual(srv.stop(), 0)
            self.assertTrue(srv.wait_exit(), "the server did not stop")
            self.assertEqual(srv.log_count("PFB00051"), 0,
                             "a child waited for its lingering close")
            clients[0].thread.join(DEADLINE)

    def graceful_restart(self, mpm):
        with Server(extra=LIMITED + POOL, mpm=mpm,
                    expect_log=STOP_LOG) as srv:
            srv.start()
            self.assertTrue(srv.wait_ready(24))
            clients = uploads(srv.ports[0], 4)
            self.assertTrue(srv.wait_access_log(4))
            srv.restart_gracefully()
            finish(self, clients)

    def test_graceful_restart_while_clients_linger_loses_no_answer(self):
        self.graceful_restart(None)

    def test_stock_prefork_graceful_restart_loses_no_answer(self):
        self.graceful_restart(STOCK_PREFORK)

    def max_connections_per_child_1(self, mpm):
        with Server(extra=LIMITED + POOL + "MaxConnectionsPerChild 1\n",
                    mpm=mpm, expect_log=STOP_LOG) as srv:
            srv.start()
            # Each look at the scoreboard costs a child its life here.
            self.assertTrue(srv.wait_ready(4))
            clients = uploads(srv.ports[0], 3)
            self.assertTrue(srv.wait_access_log(3))
            finish(self, clients)

    def test_max_connections_per_child_1_loses_no_answer(self):
        self.max_connections_per_child_1(None)

    def test_stock_prefork_max_connections_per_child_1_loses_no_answer(self):
        self.max_connections_per_child_1(STOCK_PREFORK)

    def idle_children_retired(self, mpm):
        pool = ("StartServers 12\nMinSpareServers 1\nMaxSpareServers 2\n"
                "MaxRequestWorkers 12\nServerLimit 12\n")
        with Server(extra=LIMITED + pool, mpm=mpm,
                    expect_log=STOP_LOG) as srv:
            srv.start()
            # Retiring may begin before all twelve have started.
            self.assertTrue(srv.wait_ready(8))
            clients = uploads(srv.ports[0], 4, pause=0.2)
            self.assertTrue(srv.wait_access_log(4))
            before = len(srv.children())
            for c in clients:
                c.go_on.set()
            # Children were retired while the clients lingered.
            self.assertTrue(srv.wait_for(
                lambda: len(srv.children()) <= before - 2
                or not any(c.thread.is_alive() for c in clients)))
            self.assertLessEqual(len(srv.children()), before - 2,
                                 "no child was retired during the uploads")
            finish(self, clients)

    def test_idle_children_retired_meanwhile_lose_no_answer(self):
        """Twelve children, at most two idle: the parent retires one a
        second while four uploads linger, for 13 s.  A child that holds
        a lingering connection is not idle for that purpose."""
        self.idle_children_retired(None)

    def test_stock_prefork_retires_no_child_that_lingers(self):
        """Stock prefork's child lingers in its main thread, busy."""
        self.idle_children_retired(STOCK_PREFORK)

TLS_MODULES = ("LoadModule socache_shmcb_module %s\n"
               "LoadModule ssl_module %s\n"
               % (os.path.join(MODULES, "mod_socache_shmcb.so"),
                  os.path.join(MODULES, "mod_ssl.so")))
TLS = ("SSLSessionCache shmcb:{root}/ssl_scache(512000)\n"
       "SSLEngine on\nSSLCertificateFile {root}/cert.pem\n"
       "SSLCertificateKeyFile {root}/key.pem\n")
# Two children: one that stops serving after a close is soon all of them.
TWO = ("StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\n"
       "MaxRequestWorkers 4\nServerLimit 4\n")


@unittest.skipUnless(os.path.exists(os.path.join(MODULES, "mod_ssl.so")),
                     "needs mod_ssl.so")
class LingerOverTls(unittest.TestCase):
    """The close looks at what the client sent through the connection's
    input filters, mod_ssl's among them, and must do it while the TLS
    layer is alive: mod_ssl ends it as the connection's end passes its
    output filter."""

    def test_children_keep_serving_tls_connections_they_close(self):
        with Server(extra=TWO, extra_modules=TLS_MODULES) as srv:
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                 srv.root + "/key.pem", "-out", srv.root + "/cert.pem",
                 "-days", "2", "-subj", "/CN=localhost", "-addext",
                 "basicConstraints=critical,CA:FALSE"],
                check=True, capture_output=True, timeout=DEADLINE)
            srv.extra += TLS.format(root=srv.root)
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE

            def get(path, timeout=DEADLINE):
                raw = socket.create_connection(("127.0.0.1", srv.ports[0]),
                                               timeout)
                with ctx.wrap_socket(raw) as s:
                    s.settimeout(timeout)
                    s.sendall(CLOSE_REQUEST.replace(b"/index.html",
                                                    path.encode()))
                    return read_response(s)

            def scoreboard(timeout=30):
                srv.probe_connections += 1
                status, body = get("/pfb-scoreboard", timeout)
                self.assertEqual(status, 200)
                return Scoreboard(body.decode())

            # The harness reads the scoreboard over the one Listen.
            srv.scoreboard = scoreboard
            srv.start()
            for i in range(10):
                status, _ = get("/index.html")
                self.assertEqual(status, 200, "request %d" % i)


if __name__ == "__main__":
    unittest.main()
