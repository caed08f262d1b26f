#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Open-loop HTTP load at a fixed rate, free of coordinated omission.

Debian has no wrk2, so this is the suite's fixed-rate generator.  Request i
is due at start + i / rate whether or not earlier ones have finished, each
on a new connection (Connection: close); its latency is measured from the
time it was *due*, not from when it could be sent, so a stalled server is
charged for every request it made wait (Gil Tene's coordinated omission).
A schedule of (seconds, rate) phases gives on/off bursts.

  python3 openloop.py --url http://127.0.0.1:8080/index.html --rate 1000 \
      --duration 5
  python3 openloop.py --url ... --schedule 1:2000,1:0,1:2000,1:0

Prints one JSON object: sent, ok, errors by kind, achieved rate, latency
percentiles in ms (p50, p90, p99, p99.9, max), a CDF, and how late the
generator itself sent (send_lag_p99, send_lag_max, ms): a generator that
falls behind charges its own lag to the server, so the suite reports it.
One process does a few thousand requests a second; the suite runs several
side by side for higher rates and merges their --latencies files.
"""

import argparse
import array
import errno
import json
import select
import socket
import sys
import time
import urllib.parse

PERCENTILES = (50, 75, 90, 95, 99, 99.9, 99.99)


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1,
            max(0, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def summarize(latencies, errors, sent, elapsed, lags=()):
    lat = sorted(latencies)
    result = {"sent": sent, "ok": len(lat), "errors": errors,
              "rate": len(lat) / elapsed if elapsed > 0 else 0.0}
    lags = sorted(lags)
    result["send_lag_p99"] = percentile(lags, 99) * 1000.0 if lags else 0.0
    result["send_lag_max"] = lags[-1] * 1000.0 if lags else 0.0
    for p in PERCENTILES:
        result["p%s" % p] = percentile(lat, p) * 1000.0
    result["max"] = (lat[-1] * 1000.0) if lat else float("nan")
    # A compact CDF: 200 points, (latency ms, fraction).
    step = max(1, len(lat) // 200)
    result["cdf"] = [(lat[i] * 1000.0, (i + 1) / len(lat))
                     for i in range(0, len(lat), step)]
    return result


class Request:
    """One connection: connect, send, read to EOF (Connection: close)."""
    __slots__ = ("sock", "due", "started", "head", "sending")

    def __init__(self, sock, due, started):
        self.sock, self.due, self.started = sock, due, started
        self.head = b""
        self.sending = True


def count(errors, kind):
    errors[kind] = errors.get(kind, 0) + 1


def errno_kind(err):
    if err == errno.ECONNREFUSED:
        return "refused"
    if err == errno.ECONNRESET:
        return "reset"
    return errno.errorcode.get(err, "errno_%d" % err)


def due_times(schedule, start):
    """Every request's due time, phase after phase."""
    phase_start = start
    for seconds, rate in schedule:
        for i in range(int(seconds * rate)):
            yield phase_start + i / rate
        phase_start += seconds


class Engine:
    """Non-blocking sockets on one epoll: a few system calls and little
    Python per request, so that one process keeps a schedule of several
    thousand requests a second (asyncio's streams managed about 2000 on
    the 2-CPU development machine)."""

    def __init__(self, url, timeout, max_outstanding, latencies):
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port or 80
        path = parts.path + ("?" + parts.query if parts.query else "")
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        self.family, self.addr = info[0], info[4]
        self.request = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close"
                        "\r\n\r\n" % (path, host)).encode()
        self.timeout, self.max_outstanding = timeout, max_outstanding
        self.latencies, self.errors, self.lags = latencies, {}, []
        self.open = {}
        self.sent = 0
        self.poller = select.epoll()

    def start(self, due, now):
        self.lags.append(max(0.0, now - due))
        if len(self.open) >= self.max_outstanding:
            # Beyond the generator's own limit: count it, do not hide it.
            count(self.errors, "generator_limit")
            return
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        sock.setblocking(False)
        err = sock.connect_ex(self.addr)
        self.sent += 1
        if err not in (0, errno.EINPROGRESS):
            count(self.errors, errno_kind(err))
            sock.close()
            return
        self.open[sock.fileno()] = Request(sock, due, now)
        self.poller.register(sock.fileno(), select.EPOLLOUT)

    def finish(self, fd, kind=None):
        req = self.open.pop(fd)
        self.poller.unregister(fd)
        req.sock.close()
        if kind:
            count(self.errors, kind)

    def ready(self, fd, events):
        req = self.open[fd]
        try:
            if req.sending:
                err = req.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    return self.finish(fd, errno_kind(err))
                req.sock.send(self.request)
                req.sending = False
                self.poller.modify(fd, select.EPOLLIN)
                return None
            data = req.sock.recv(65536)
        except BlockingIOError:
            return None
        except OSError as e:
            return self.finish(fd, errno_kind(e.errno or 0))
        if data:
            if len(req.head) < 16:
                req.head += data[:16]
            return None
        status = req.head.split(b" ", 2)[1] if b" " in req.head else b""
        if status == b"200":
            self.latencies.append(time.monotonic() - req.due)
            return self.finish(fd)
        return self.finish(fd, "status_%s" % status.decode(errors="replace")
                           if status else "empty")

    def expire(self, now):
        for fd in [fd for fd, req in self.open.items()
                   if now - req.started > self.timeout]:
            self.finish(fd, "timeout")

    def poll(self, wait):
        for fd, events in self.poller.poll(max(0.0, wait)):
            if fd in self.open:
                self.ready(fd, events)


def run(url, schedule, timeout, max_outstanding, latencies):
    engine = Engine(url, timeout, max_outstanding, latencies)
    start = time.monotonic()
    end = start + sum(seconds for seconds, _ in schedule)
    dues = due_times(schedule, start)
    due = next(dues, None)
    next_expiry = start + 0.1
    while True:
        now = time.monotonic()
        while due is not None and due <= now:
            engine.start(due, now)
            due = next(dues, None)
        if now >= next_expiry:
            engine.expire(now)
            next_expiry = now + 0.1
        if due is None and (not engine.open or now > end + timeout + 1):
            break
        wait = 0.05 if due is None else min(0.05, due - now)
        engine.poll(wait)
    for fd in list(engine.open):
        engine.finish(fd, "timeout")
    return summarize(latencies, engine.errors, engine.sent,
                     time.monotonic() - start, engine.lags)


def parse_schedule(text):
    phases = []
    for item in text.split(","):
        seconds, rate = item.split(":")
        phases.append((float(seconds), float(rate)))
    return phases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--rate", type=float, default=500.0,
                        help="requests per second")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--schedule", help="SECONDS:RATE,... (bursts)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--max-outstanding", type=int, default=4000)
    parser.add_argument("--latencies", metavar="FILE",
                        help="also write every latency (seconds, native "
                        "doubles) here, for merging several generators")
    args = parser.parse_args()
    host = urllib.parse.urlsplit(args.url).hostname
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("openloop: only loopback targets are allowed here",
              file=sys.stderr)
        return 2
    schedule = parse_schedule(args.schedule) if args.schedule else \
        [(args.duration, args.rate)]
    latencies = []
    result = run(args.url, schedule, args.timeout, args.max_outstanding,
                 latencies)
    if args.latencies:
        with open(args.latencies, "wb") as f:
            array.array("d", latencies).tofile(f)
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
