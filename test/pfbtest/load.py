# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A small load generator: closed loop, one thread per connection, counting
every failure by kind.  Used where a test needs exact counts; the
benchmarks use wrk and ab.  Also the single requests the tests make: on a
raw socket to httpd (http_get), or through urllib to any HTTP server
(get_url)."""

import socket
import threading
import time
import urllib.error
import urllib.request


def http_get(host, port, path="/index.html", timeout=30, keepalive=False):
    """One HTTP/1.1 request on a new connection; returns (status, body)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        conn = "keep-alive" if keepalive else "close"
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n"
                   "Connection: %s\r\n\r\n" % (path, conn)).encode())
        return read_response(s)


def get_url(url, timeout=10):
    """(status, body as text) of one GET through urllib, for answers that
    may come chunked (prometheus-apache-exporter's, Prometheus's) or that
    a test reads as a client would; HTTP errors are statuses, a failure to
    connect raises OSError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def read_response(s):
    """Reads one response; returns (status, body).  The body ends at its
    Content-Length, or, in a response that closes the connection without
    one (a large scoreboard), at the end of the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before headers")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1])
    length = None
    closing = False
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
        elif line.lower().replace(" ", "") == "connection:close":
            closing = True
    if length is None and closing:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return status, body
            body += chunk
    if length is not None:
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed in body")
            body += chunk
    return status, body


class Load:
    """Closed-loop load from `concurrency` threads until stop(), or until
    max_requests were sent."""

    def __init__(self, host, ports, concurrency=8, path="/index.html",
                 max_requests=None, timeout=10):
        self.host = host
        self.ports = ports if isinstance(ports, list) else [ports]
        self.concurrency = concurrency
        self.path = path
        self.timeout = timeout
        self.max_requests = max_requests
        self.lock = threading.Lock()
        self.ok = 0
        self.errors = {}
        self.latencies = []
        self.stopping = threading.Event()
        self.threads = []
        self.sent = 0

    def _note_error(self, kind):
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def _worker(self, index):
        port_index = index
        while not self.stopping.is_set():
            with self.lock:
                if self.max_requests is not None and \
                        self.sent >= self.max_requests:
                    return
                self.sent += 1
            port = self.ports[port_index % len(self.ports)]
            port_index += 1
            started = time.monotonic()
            try:
                status, _ = http_get(self.host, port, self.path,
                                     timeout=self.timeout)
            except ConnectionResetError:
                self._note_error("reset")
                continue
            except socket.timeout:
                self._note_error("timeout")
                continue
            except ConnectionRefusedError:
                self._note_error("refused")
                continue
            except (ConnectionError, OSError) as e:
                self._note_error(type(e).__name__)
                continue
            elapsed = time.monotonic() - started
            if status != 200:
                self._note_error("status_%d" % status)
                continue
            with self.lock:
                self.ok += 1
                self.latencies.append(elapsed)

    def start(self):
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def wait(self, timeout=120):
        """Waits for max_requests to be done (or timeout seconds)."""
        deadline = time.time() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.time()))
        return self

    def wait_served(self, count, timeout=60):
        """Waits until `count` more requests than now succeeded: a sign the
        server is serving, used to pace faults under load.  Returns
        whether they did."""
        target = self.ok + count
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.ok >= target:
                return True
            time.sleep(0.02)
        return self.ok >= target

    def stop(self):
        self.stopping.set()
        return self.wait(self.timeout + 5)

    def failures(self):
        return sum(self.errors.values())
