#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The load-test suite: a scenario matrix over this MPM, Debian's stock
prefork and event MPMs and nginx, run interleaved, with a report.

  python3 test/load/suite.py --quick          # CI smoke test, < 2 minutes
  python3 test/load/suite.py --full           # < 15 minutes on 2 cores
  python3 test/load/suite.py --profile=bigbox --server-cpus 0-31 \
      --client-cpus 32-63                     # a many-core host
  python3 test/load/suite.py --list           # configurations, scenarios

Every scenario runs each configuration in turn (A B C ... A B C ...), each
run on a freshly started server, for the profile's number of pairs, and
reports medians, min/max and the ratio of medians to Debian's stock
prefork.  Everything goes to one folder (--out, default
bench-results/suite-<time>): results.json, results.csv, report.md and
gnuplot charts.  Traffic goes to 127.0.0.1 only; every run is bounded by
timeouts and every server is stopped on every path.
"""

import argparse
import collections
import csv
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
# test/, for pfbtest (the one bootstrap, see test/pfbtest/__init__.py).
sys.path.insert(0, os.path.dirname(HERE))

from pfbtest import (Server, STOCK_PREFORK, STOCK_EVENT, MPM_SO,  # noqa
                     STATUS_SO, TEST_HANDLER_SO, STAT_PGRP, free_port,
                     live_pids, exit_on_sigterm)
import report  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "sim"))
import bucketsim  # noqa: E402

WRK_SCRIPT = os.path.join(HERE, "wrk_report.lua")
OPENLOOP = os.path.join(HERE, "openloop.py")

PROFILES = {
    "quick": {"pairs": 1, "seconds": 2, "fault_seconds": 6, "workers": 32,
              "connections": 32, "open_rate": 800, "slow_clients": 8,
              "scenarios": ["static-close", "hetero", "graceful"]},
    "full": {"pairs": 3, "seconds": 3, "fault_seconds": 6, "workers": 32,
             "connections": 32, "open_rate": 1500, "slow_clients": 16,
             "fault_pairs": 2,
             "scenarios": ["static-close", "static-keepalive", "fourports",
                           "hetero", "openloop", "bursts", "slowloris",
                           "graceful", "kills"]},
    # A many-core, two-socket host: pin the server and the load generator
    # apart (--server-cpus / --client-cpus, or numactl), thousands of
    # connections and children.
    "bigbox": {"pairs": 5, "seconds": 20, "fault_seconds": 20,
               "workers": 4096, "connections": 2000, "open_rate": 50000,
               "slow_clients": 512, "fault_pairs": 3,
               "scenarios": ["static-close", "static-keepalive", "fourports",
                             "hetero", "openloop", "bursts", "slowloris",
                             "graceful", "kills"]},
}

CONFIG_ORDER = ["pfb-1", "pfb-ratio1", "pfb-N", "pfb-N-cpu", "pfb-N-idle",
                "stock", "stock-ratio1", "event", "nginx"]
BASELINE = "stock"


def configs(args):
    n = args.buckets
    return {
        "pfb-1": {"label": "this MPM, 1 bucket", "kind": "apache",
                  "mpm": MPM_SO, "extra": ""},
        "pfb-ratio1": {"label": "this MPM, ListenCoresBucketsRatio 1",
                       "kind": "apache", "mpm": MPM_SO,
                       "extra": "ListenCoresBucketsRatio 1\n"},
        "pfb-N": {"label": "this MPM, ListenBuckets %d" % n,
                  "kind": "apache", "mpm": MPM_SO,
                  "extra": "ListenBuckets %d\n" % n},
        "pfb-N-cpu": {"label": "this MPM, ListenBuckets %d, steering cpu "
                      "+ BucketCPUAffinity" % n,
                      "kind": "apache", "mpm": MPM_SO,
                      "extra": "ListenBuckets %d\nListenBucketSteering cpu\n"
                               "BucketCPUAffinity on\n" % n},
        "pfb-N-idle": {"label": "this MPM, ListenBuckets %d, steering idle"
                       % n, "kind": "apache", "mpm": MPM_SO,
                       "extra": "ListenBuckets %d\nListenBucketSteering "
                                "idle\n" % n},
        "stock": {"label": "stock prefork", "kind": "apache",
                  "mpm": STOCK_PREFORK, "extra": ""},
        "stock-ratio1": {"label": "stock prefork, ListenCoresBucketsRatio 1",
                         "kind": "apache", "mpm": STOCK_PREFORK,
                         "extra": "ListenCoresBucketsRatio 1\n"},
        "event": {"label": "stock event", "kind": "apache",
                  "mpm": STOCK_EVENT, "extra": ""},
        "nginx": {"label": "nginx, reuseport", "kind": "nginx"},
    }


# ---------------------------------------------------------------------------
# Servers

def prefork_tuning(workers):
    # The whole pool from the start: short runs measure the steady state,
    # not the spawn ramp.
    return ("StartServers %d\nMinSpareServers %d\nMaxSpareServers %d\n"
            "MaxRequestWorkers %d\nServerLimit %d\n"
            % (workers, max(1, workers // 4), workers, workers, workers))


EVENT_THREADS = 8


def event_children(workers):
    return max(2, int(math.ceil(workers / float(EVENT_THREADS))))


def event_tuning(workers):
    per_child = EVENT_THREADS
    children = event_children(workers)
    return ("ThreadsPerChild %d\nStartServers %d\nMinSpareThreads %d\n"
            "MaxSpareThreads %d\nServerLimit %d\nMaxRequestWorkers %d\n"
            % (per_child, children, per_child, workers, children * 2,
               children * per_child))


APACHE_COMMON = ("KeepAliveTimeout 5\nLogLevel warn\n"
                 "<Location /pfb-test>\n    SetHandler pfb-test\n"
                 "</Location>\n<Location /bucket-status>\n"
                 "    SetHandler bucket-status\n</Location>\n")


def apache_server(cfg, args, ports, workers):
    tuning = event_tuning(workers) if cfg["mpm"] == STOCK_EVENT \
        else prefork_tuning(workers)
    modules = ("LoadModule bucket_status_module %s\n"
               "LoadModule pfb_test_handler_module %s\n"
               % (STATUS_SO, TEST_HANDLER_SO))
    # The suite records unexpected log lines in each run's result (and the
    # smoke test fails on them) rather than stopping at the first.
    srv = Server(extra=tuning + APACHE_COMMON + cfg["extra"], ports=ports,
                 mpm=cfg["mpm"], extra_modules=modules, check_log=False,
                 expect_log=EXPECTED_LOG)
    if args.server_cpus:
        srv.wrapper = ["taskset", "-c", args.server_cpus]
    return srv


class NginxServer:
    """Debian's nginx with `listen ... reuseport` and a worker per CPU."""

    def __init__(self, ports, args):
        self.nports = ports
        self.args = args
        self.root = tempfile.mkdtemp(prefix="pfb-nginx-")
        os.chmod(self.root, 0o755)
        os.mkdir(os.path.join(self.root, "htdocs"))
        with open(os.path.join(self.root, "htdocs", "index.html"), "w") as f:
            f.write("hello from prefork buckets\n")
        self.proc = None
        self.ports = []
        self.probe_connections = 0

    def start(self):
        self.ports = [free_port() for _ in range(self.nports)]
        listens = "".join("        listen 127.0.0.1:%d reuseport;\n" % p
                          for p in self.ports)
        conf = os.path.join(self.root, "nginx.conf")
        with open(conf, "w") as f:
            f.write("worker_processes %d;\npid %s/nginx.pid;\n"
                    "error_log %s/error.log warn;\nuser www-data;\n"
                    "events { worker_connections 8192; }\n"
                    "http {\n    log_format pidlog '$remote_addr $pid $status "
                    "$request_time \"$request\"';\n"
                    "    access_log %s/access.log pidlog;\n"
                    "    keepalive_timeout 5;\n    server {\n%s"
                    "        root %s/htdocs;\n    }\n}\n"
                    % (len(os.sched_getaffinity(0)), self.root, self.root,
                       self.root, listens, self.root))
        command = ["nginx", "-c", conf, "-p", self.root, "-g", "daemon off;"]
        if self.args.server_cpus:
            command = ["taskset", "-c", self.args.server_cpus] + command
        self.proc = subprocess.Popen(command, start_new_session=True,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.ports[0]),
                                              1):
                    self.probe_connections += 1
                    return 0
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not come up")

    def wait_ready(self, count, timeout=60):
        """Waits for nginx's workers (one per CPU)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.children()) >= len(os.sched_getaffinity(0)):
                return self.children()
            time.sleep(0.05)
        return self.children()

    def wait_access_log(self, count, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline and \
                len(self.access_log_lines()) < count:
            time.sleep(0.05)

    def unexpected_log_lines(self):
        """nginx's error log: warn and above (see error_log above)."""
        try:
            with open(os.path.join(self.root, "error.log")) as f:
                return [l for l in f.read().splitlines() if l.strip()]
        except OSError:
            return []

    def children(self):
        return [p for p in group_pids(self.proc.pid) if p != self.proc.pid]

    def graceful(self):
        os.kill(self.proc.pid, signal.SIGHUP)

    def access_log_lines(self):
        try:
            with open(os.path.join(self.root, "access.log")) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def url(self, path="/", port_index=0):
        return "http://127.0.0.1:%d%s" % (self.ports[port_index], path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(timeout=10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
        self.log_problems = self.unexpected_log_lines()
        shutil.rmtree(self.root, ignore_errors=True)
        return False


def make_server(cfg, args, ports, workers):
    if cfg["kind"] == "nginx":
        return NginxServer(ports, args)
    return apache_server(cfg, args, ports, workers)


def start_server(srv, workers):
    """Starts a server and waits for its whole pool: short runs measure
    the steady state, not children still starting."""
    srv.start()
    if isinstance(srv, NginxServer):
        srv.wait_ready(workers)
    elif srv.mpm == STOCK_EVENT:
        # One scoreboard row per process is read: event's children.
        srv.wait_ready(event_children(workers))
    else:
        srv.wait_ready(workers, idle=True)


# Warnings a scenario provokes by design, by configuration kind: the pool
# is sized to the load, so MaxRequestWorkers is reached (ours: PFB00010,
# stock prefork: AH00161, event: AH00484 and its early AH10159), and
# faults kill children.
EXPECTED_LOG = ("PFB00010", "AH00161", "AH00484", "AH10159", "PFB00035")


# ---------------------------------------------------------------------------
# Measuring processes

def group_pids(pgid):
    return live_pids(STAT_PGRP, pgid)


def server_usage(pgid):
    """(CPU seconds, context switches) of a server's process group: live
    processes, plus what reaped children left in the parent's counters."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu, switches = 0, 0
    for pid in group_pids(pgid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu += int(fields[11]) + int(fields[12])
            if pid == pgid:
                cpu += int(fields[13]) + int(fields[14])
            # Every thread's switches: the event MPM and nginx are not
            # single-threaded like prefork.
            for task in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches",
                                            "nonvoluntary_ctxt_switches")):
                            switches += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return cpu / float(ticks), switches


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------
# Load generators

def client_prefix(args):
    return ["taskset", "-c", args.client_cpus] if args.client_cpus else []


def run_wrk(args, url, connections, seconds, close=True, exp_ms=None,
            log=None):
    env = dict(os.environ)
    env["WRK_CLOSE"] = "1" if close else "0"
    if exp_ms:
        env["WRK_EXP_MS"] = str(exp_ms)
    command = client_prefix(args) + [
        "wrk", "-t", str(args.wrk_threads or
                         max(1, min(4, len(os.sched_getaffinity(0))))),
        "-c", str(connections), "-d", "%ds" % seconds, "--latency",
        "-s", WRK_SCRIPT, url]
    out = subprocess.run(["timeout", str(seconds + 60)] + command, env=env,
                         capture_output=True, text=True).stdout
    if log:
        log.write("$ %s%s%s\n%s\n" % (
            "WRK_CLOSE=%s " % env["WRK_CLOSE"],
            "WRK_EXP_MS=%s " % exp_ms if exp_ms else "",
            " ".join(command), out))
    m = re.search(r"^WRK_JSON (.*)$", out, re.M)
    if not m:
        return {"requests": 0, "rps": 0.0, "errors": {"no_output": 1}}
    result = json.loads(m.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        result["errors"]["non2xx"] = int(non2xx.group(1))
    return result


def merge_wrk(results):
    merged = {"requests": sum(r["requests"] for r in results),
              "rps": sum(r["rps"] for r in results), "errors": {}}
    for r in results:
        for k, v in r["errors"].items():
            merged["errors"][k] = merged["errors"].get(k, 0) + v
    for p in ("p50", "p75", "p90", "p99", "p99.9", "p99.99", "max"):
        merged[p] = max(r.get(p, float("nan")) for r in results)
    merged["cdf"] = results[0].get("cdf", [])
    return merged


def run_openloop(args, url, schedule, log=None):
    command = client_prefix(args) + [sys.executable, OPENLOOP, "--url", url,
                                     "--schedule", schedule]
    total = sum(float(p.split(":")[0]) for p in schedule.split(","))
    out = subprocess.run(["timeout", str(total + 60)] + command,
                         capture_output=True, text=True).stdout
    if log:
        log.write("$ %s\n%s\n" % (" ".join(command), out[:2000]))
    try:
        result = json.loads(out)
    except ValueError:
        return {"requests": 0, "rps": 0.0, "errors": {"no_output": 1}}
    result["requests"] = result["ok"]
    result["rps"] = result["rate"]
    return result


class SlowClients:
    """Slowloris-style clients, bounded: each opens a connection and sends
    one header line a second, never finishing the request, until stopped."""

    def __init__(self, port, count):
        self.port = port
        self.count = count
        self.stop_event = threading.Event()
        self.threads = []
        self.held = 0
        self.lock = threading.Lock()

    def _client(self):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), 5)
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n")
            with self.lock:
                self.held += 1
            while not self.stop_event.wait(1.0):
                s.sendall(b"X-Slow: 1\r\n")
            s.close()
        except OSError:
            return

    def __enter__(self):
        for _ in range(self.count):
            t = threading.Thread(target=self._client, daemon=True)
            t.start()
            self.threads.append(t)
        # Every slow client holds its connection before the load starts.
        deadline = time.time() + 30
        while self.held < self.count and time.time() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(5)
        return False


# ---------------------------------------------------------------------------
# Scenarios: each returns the load result of one run on a started server.

def with_faults(srv, seconds, action, period=1.0):
    """Calls action(srv) every period seconds for `seconds`, in a thread."""
    stop = threading.Event()
    count = [0]

    def loop():
        while not stop.wait(period):
            try:
                action(srv)
                count[0] += 1
            except (OSError, IndexError):
                pass
    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def finish():
        stop.set()
        t.join(5)
        return count[0]
    return finish


def kill_random_child(srv):
    kids = srv.children()
    os.kill(random.choice(kids), signal.SIGKILL)


def scenario_run(name, srv, cfg, args, prof, log):
    conns = prof["connections"]
    secs = prof["seconds"]
    if name == "static-close":
        return run_wrk(args, srv.url("/index.html"), conns, secs, log=log)
    if name == "static-keepalive":
        return run_wrk(args, srv.url("/index.html"), conns, secs,
                       close=False, log=log)
    if name == "fourports":
        results = [None] * 4

        def one(i):
            results[i] = run_wrk(args, srv.url("/index.html", i),
                                 max(1, conns // 4), secs, log=log)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(secs + 90)
        return merge_wrk([r for r in results if r])
    if name == "hetero":
        return run_wrk(args, srv.url("/pfb-test"), int(prof["workers"] * 1.5),
                       secs, exp_ms=10, log=log)
    if name == "openloop":
        return run_openloop(args, srv.url("/index.html"),
                            "%d:%d" % (secs, prof["open_rate"]), log=log)
    if name == "bursts":
        on = "1:%d" % (prof["open_rate"] * 2)
        return run_openloop(args, srv.url("/index.html"),
                            ",".join([on, "1:0"] * max(1, secs - 1)),
                            log=log)
    if name == "slowloris":
        with SlowClients(srv.ports[0], prof["slow_clients"]):
            return run_wrk(args, srv.url("/index.html"), conns, secs,
                           log=log)
    if name in ("graceful", "kills"):
        fault = (lambda s: s.graceful()) if name == "graceful" \
            else kill_random_child
        finish = with_faults(srv, prof["fault_seconds"], fault,
                             2.0 if name == "graceful" else 1.0)
        result = run_wrk(args, srv.url("/index.html"), conns,
                         prof["fault_seconds"], log=log)
        result["faults"] = finish()
        return result
    raise ValueError(name)


def scenario_skips(name, cfg):
    """Why a configuration cannot run a scenario, or None."""
    if cfg["kind"] == "nginx" and name == "hetero":
        return "nginx has no test handler for service times"
    return None


# ---------------------------------------------------------------------------
# Distribution of connections

def jain(values):
    values = [v for v in values]
    if not values or sum(values) == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def distribution(srv, cfg):
    """Per-bucket (status module) and per-child (access log pid) counts."""
    result = {}
    if cfg["kind"] == "apache":
        try:
            import urllib.request
            with urllib.request.urlopen(srv.url("/bucket-status?json"),
                                        timeout=10) as r:
                doc = json.load(r)
            if doc.get("available"):
                result["buckets"] = [b["accepted"] for b in doc["buckets"]]
                result["bucket_jain"] = doc["balance"]["buckets"]["jain"]
        except (OSError, ValueError):
            pass
    per_child = collections.Counter()
    for line in srv.access_log_lines():
        fields = line.split()
        if len(fields) > 2:
            per_child[fields[1]] += 1
    if per_child:
        result["children"] = sorted(per_child.values(), reverse=True)
        result["child_jain"] = jain(list(per_child.values()))
    return result


# ---------------------------------------------------------------------------
# Host

def host_info():
    def cmd(command):
        try:
            out = subprocess.run(command, capture_output=True, text=True,
                                 timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "n/a"

    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return "n/a"
    sockets = "n/a"
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^Socket\(s\):\s+(\d+)", lscpu, re.M)
    if m:
        sockets = int(m.group(1))
    model = re.search(r"^Model name:\s+(.*)$", lscpu, re.M)
    nodes = len([d for d in os.listdir("/sys/devices/system/node")
                 if re.fullmatch(r"node\d+", d)]) \
        if os.path.isdir("/sys/devices/system/node") else "n/a"
    reuseport = "no"
    try:
        a, b = socket.socket(), socket.socket()
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", a.getsockname()[1]))
        reuseport = "yes"
        a.close()
        b.close()
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model.group(1) if model else "n/a",
        "sockets": sockets, "numa_nodes": nodes,
        "kernel": os.uname().release,
        "so_reuseport": reuseport,
        "tcp_migrate_req": read("/proc/sys/net/ipv4/tcp_migrate_req"),
        "somaxconn": read("/proc/sys/net/core/somaxconn"),
        "apache2": cmd(["/usr/sbin/apache2", "-v"]),
        "nginx": cmd(["nginx", "-v"]),
        "wrk": cmd(["wrk", "-v"]),
        "ab": cmd(["ab", "-V"]),
        "gcc": cmd(["gcc", "--version"]),
        "python": sys.version.split()[0],
    }


# ---------------------------------------------------------------------------
# Syscalls per request (sampled strace -c -f run)

def syscalls_per_request(cfg, args, prof, out_dir, log):
    requests = 1000
    with make_server(cfg, args, 1, prof["workers"]) as srv:
        start_server(srv, prof["workers"])
        trace = os.path.join(out_dir, "strace-%s.txt" % cfg["key"])
        pids = [srv.proc.pid] + srv.children()
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-o", trace]
            + sum((["-p", str(p)] for p in pids), []),
            stderr=subprocess.DEVNULL)
        wait_traced(pids)
        command = ["ab", "-q", "-n", str(requests), "-c", "4",
                   srv.url("/index.html")]
        subprocess.run(["timeout", "120"] + command, capture_output=True)
        log.write("$ strace -c -f ... ; %s\n" % " ".join(command))
        tracer.send_signal(signal.SIGINT)
        try:
            tracer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tracer.kill()
    calls = {}
    try:
        with open(trace) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5 and fields[-1].isidentifier() and \
                        fields[3].isdigit() and fields[-1] != "total":
                    calls[fields[-1]] = int(fields[3])
    except OSError:
        return {}
    total = sum(calls.values())
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
    return {"per_request": round(total / float(requests), 1),
            "top": {k: round(v / float(requests), 2) for k, v in top}}


# ---------------------------------------------------------------------------

def wait_traced(pids, timeout=30):
    """Waits until strace is attached to every pid (TracerPid set)."""
    def traced(pid):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("TracerPid:"):
                        return int(line.split()[1]) != 0
        except OSError:
            return True         # gone: nothing left to wait for
        return False
    deadline = time.time() + timeout
    while time.time() < deadline and not all(traced(p) for p in pids):
        time.sleep(0.05)


def one_run(name, key, cfg, args, prof, log):
    ports = 4 if name == "fourports" else 1
    with make_server(cfg, args, ports, prof["workers"]) as srv:
        start_server(srv, prof["workers"])
        cpu0, ctx0 = server_usage(srv.proc.pid)
        gen0 = children_cpu()
        started = time.time()
        result = scenario_run(name, srv, cfg, args, prof, log)
        elapsed = time.time() - started
        cpu1, ctx1 = server_usage(srv.proc.pid)
        result["server_cpu_s"] = round(cpu1 - cpu0, 2)
        result["loadgen_cpu_s"] = round(children_cpu() - gen0, 2)
        result["ctx_switches"] = ctx1 - ctx0
        result["elapsed_s"] = round(elapsed, 2)
        # The server logs a request after its response is out.
        srv.wait_access_log(result.get("requests", 0), timeout=30)
        result["distribution"] = distribution(srv, cfg)
    # Read at the stop, so that what stopping logs is counted too.
    result["log_problems"] = srv.log_problems[:20]
    return result


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="profile",
                      const="quick")
    size.add_argument("--full", action="store_const", dest="profile",
                      const="full")
    size.add_argument("--profile", choices=sorted(PROFILES))
    parser.add_argument("--configs", help="comma-separated subset of %s"
                        % ",".join(CONFIG_ORDER))
    parser.add_argument("--scenarios", help="comma-separated subset")
    parser.add_argument("--pairs", type=int, help="override the profile")
    parser.add_argument("--seconds", type=int, help="override the profile")
    parser.add_argument("--buckets", type=int, default=4,
                        help="N for the ListenBuckets N configuration")
    parser.add_argument("--server-cpus", help="taskset CPU list for servers")
    parser.add_argument("--client-cpus",
                        help="taskset CPU list for load generators")
    parser.add_argument("--workers", type=int,
                        help="MaxRequestWorkers (= StartServers); hetero "
                        "runs 1.5 clients per worker")
    parser.add_argument("--connections", type=int,
                        help="wrk connections for the static scenarios")
    parser.add_argument("--wrk-threads", type=int,
                        help="wrk threads (default: CPUs, at most 4); with "
                        "cpu steering on loopback, connections come in on "
                        "the CPUs the generator runs on")
    parser.add_argument("--no-strace", action="store_true",
                        help="skip the sampled strace -c -f runs")
    parser.add_argument("--out")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    exit_on_sigterm()
    prof = dict(PROFILES[args.profile or "quick"])
    all_configs = configs(args)
    if args.list:
        for key in CONFIG_ORDER:
            print("%-13s %s" % (key, all_configs[key]["label"]))
        print("scenarios: %s" % ", ".join(PROFILES["full"]["scenarios"]))
        return 0
    if args.pairs:
        prof["pairs"] = prof["fault_pairs"] = args.pairs
    if args.seconds:
        prof["seconds"] = args.seconds
    if args.workers:
        prof["workers"] = args.workers
    if args.connections:
        prof["connections"] = args.connections
    keys = args.configs.split(",") if args.configs else CONFIG_ORDER
    scenarios = args.scenarios.split(",") if args.scenarios \
        else prof["scenarios"]
    for key in keys:
        all_configs[key]["key"] = key
    out_dir = args.out or os.path.join(
        TOP, "bench-results", "suite-%s" % time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    for so in (MPM_SO, STATUS_SO, TEST_HANDLER_SO):
        if not os.path.exists(so):
            print("missing %s: run make first" % so)
            return 2
    started = time.time()
    doc = {"host": host_info(), "profile": args.profile or "quick",
           "settings": prof, "configs": {k: all_configs[k]["label"]
                                         for k in keys},
           "baseline": BASELINE, "runs": [], "syscalls": {},
           "buckets": args.buckets,
           "command": " ".join([os.path.basename(sys.argv[0])]
                               + sys.argv[1:])}
    print("host: %s" % json.dumps(doc["host"]))
    with open(os.path.join(out_dir, "raw.log"), "w") as log:
        # One discarded run first: the first server after a while pays for
        # a cold page cache and a fork storm, which is not a configuration's
        # doing.
        warm = dict(prof, seconds=1)
        one_run("static-close", keys[0], all_configs[keys[0]], args, warm,
                log)
        for name in scenarios:
            pairs = prof.get("fault_pairs", prof["pairs"]) \
                if name in ("graceful", "kills") else prof["pairs"]
            for pair in range(pairs):
                for key in keys:
                    cfg = all_configs[key]
                    why = scenario_skips(name, cfg)
                    if why:
                        if pair == 0:
                            doc["runs"].append({"scenario": name,
                                                "config": key, "pair": 0,
                                                "skipped": why})
                        continue
                    log.write("\n### %s pair %d %s\n" % (name, pair + 1, key))
                    result = one_run(name, key, cfg, args, prof, log)
                    result.update({"scenario": name, "config": key,
                                   "pair": pair + 1})
                    doc["runs"].append(result)
                    print("%-16s pair %d  %-40s rps %8.1f  p99 %7.1f ms  "
                          "errors %s" % (name, pair + 1, cfg["label"],
                                         result.get("rps", 0.0),
                                         result.get("p99", float("nan")),
                                         sum(result["errors"].values())))
                    sys.stdout.flush()
        if not args.no_strace and args.profile != "quick":
            for key in keys:
                doc["syscalls"][key] = syscalls_per_request(
                    all_configs[key], args, prof, out_dir, log)
                print("syscalls/request %-13s %s" % (key,
                                                     doc["syscalls"][key]))
    doc["elapsed_s"] = round(time.time() - started, 1)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    write_csv(doc, os.path.join(out_dir, "results.csv"))
    report.write_report(doc, out_dir)
    if "hetero" in scenarios:
        write_sim_report(doc, prof, keys, out_dir)
    print("\nreport: %s (%.0f s)" % (os.path.join(out_dir, "report.md"),
                                      doc["elapsed_s"]))
    return 0


def write_sim_report(doc, prof, keys, out_dir):
    """The scale model, checked against this run's hetero medians."""
    measured = {}
    for case, key in (("single", "pfb-1"), ("hash", "pfb-ratio1"),
                      ("idle", "pfb-N-idle")):
        runs = [r for r in doc["runs"] if r["scenario"] == "hetero"
                and r["config"] == key and "skipped" not in r]
        if runs and key in keys:
            measured[case] = {m: statistics.median(r[m] for r in runs)
                              for m in ("rps", "p50", "p90", "p99")}
    measured["buckets"] = doc["host"]["cpus_usable"]
    if "idle" in measured:
        measured["idle_buckets"] = doc.get("buckets", 4)
    path = bucketsim.write_report(measured, prof["workers"],
                                  int(prof["workers"] * 1.5),
                                  doc["host"]["cpus_usable"],
                                  os.path.join(out_dir, "sim-report.md"))
    print("model: %s" % path)


def write_csv(doc, path):
    fields = ["scenario", "config", "pair", "rps", "p50", "p90", "p99",
              "p99.9", "max", "errors", "server_cpu_s", "loadgen_cpu_s",
              "ctx_switches", "bucket_jain", "child_jain", "faults"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for r in doc["runs"]:
            if "skipped" in r:
                continue
            d = r.get("distribution", {})
            w.writerow([r["scenario"], r["config"], r["pair"],
                        round(r.get("rps", 0.0), 1), r.get("p50"),
                        r.get("p90"), r.get("p99"), r.get("p99.9"),
                        r.get("max"), json.dumps(r["errors"]),
                        r.get("server_cpu_s"), r.get("loadgen_cpu_s"),
                        r.get("ctx_switches"), d.get("bucket_jain"),
                        d.get("child_jain"), r.get("faults")])


if __name__ == "__main__":
    sys.exit(main())
