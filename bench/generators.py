# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The load generators, as the suite runs them: wrk (closed loop, its
whole latency histogram through wrk_report.lua) and build/openloop (the
suite's open-loop generator in C, bench/openloop.c), each under
timeout, in the rig's or the rps scenarios' namespace where there is
one, on --client-cpus, in the run's generator cgroup where there is
one; and bounded slow clients."""

import json
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import netns
import stats

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
WRK_SCRIPT = os.path.join(HERE, "wrk_report.lua")
OPENLOOP = os.path.join(TOP, "build", "openloop")
# One openloop process keeps its schedule up to about this rate on the
# 2-CPU development machine, where a connection costs the generator's CPU
# about 30 µs (most of it the kernel's); higher rates are split over
# several processes whose latencies are merged.
OPENLOOP_RATE_PER_PROC = 20000


def client_cpus(args):
    """The CPUs the load generators run on: --client-cpus, or all usable
    here."""
    if args.client_cpus:
        return netns.cpu_list(args.client_cpus)
    return sorted(os.sched_getaffinity(0))


def client_prefix(args, where=None):
    """The load generator's command prefix: into the run's generator
    cgroup (the rig's), into the rps scenarios' namespace (`where`, a
    netns.VethPair) or the rig's, then onto --client-cpus."""
    prefix = list(getattr(args, "generator_wrapper", None) or [])
    if where:
        prefix += where.prefix()
    elif getattr(args, "rig", None) and not getattr(args, "rig_loopback",
                                                    False):
        # (stall.py's loopback path: the generator stays in the server's
        # namespace and connects to its 127.0.0.1.)
        prefix += args.rig.client_prefix()
    if args.client_cpus:
        prefix += ["taskset", "-c", args.client_cpus]
    return prefix


def run_wrk(args, url, connections, seconds, close=True, exp_ms=None,
            log=None, where=None):
    """One wrk run; the result carries wrk's summary and, under "hist",
    every request's latency (a histogram at 1 us, stats.py)."""
    env = dict(os.environ)
    # wrk_report.lua: Connection: close on every request (WRK_CLOSE=1);
    # WRK_EXP_MS asks the test handler for exponential service times.
    env["WRK_CLOSE"] = "1" if close else "0"
    if exp_ms:
        env["WRK_EXP_MS"] = str(exp_ms)
    fd, hist_path = tempfile.mkstemp(prefix="pfb-wrk-hist-")
    os.close(fd)
    env["WRK_HIST"] = hist_path
    command = client_prefix(args, where) + [
        # threads: --wrk-threads or the profile's, else CPUs, at most 4
        "wrk", "-t", str(min(connections, args.wrk_threads or
                             max(1, min(4, len(client_cpus(args)))))),
        "-c", str(connections),         # connections held open at once
        "-d", "%ds" % seconds,          # how long
        "--latency",                    # the latency distribution
        "-s", WRK_SCRIPT,               # WRK_JSON summary line, close
        url]
    try:
        out = subprocess.run(["timeout", str(seconds + 60)] + command,
                             env=env, capture_output=True, text=True).stdout
        hist = read_text_hist(hist_path)
    finally:
        os.unlink(hist_path)
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
    result["hist"] = hist
    result["generator"] = "wrk"
    return result


def read_text_hist(path):
    hist = {}
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2:
                    hist[int(float(fields[0]))] = hist.get(
                        int(float(fields[0])), 0) + int(float(fields[1]))
    except (OSError, ValueError):
        return {}
    return hist


def merge_wrk(results):
    merged = {"requests": sum(r["requests"] for r in results),
              "rps": sum(r["rps"] for r in results), "errors": {},
              "generator": "wrk"}
    for r in results:
        for k, v in r["errors"].items():
            merged["errors"][k] = merged["errors"].get(k, 0) + v
    for p in ("p50", "p75", "p90", "p99", "p99.9", "p99.99", "max"):
        merged[p] = max(r.get(p, float("nan")) for r in results)
    merged["cdf"] = results[0].get("cdf", [])
    merged["hist"] = stats.merge_hists(r.get("hist", {}) for r in results)
    return merged


def parse_schedule(text):
    """"SECONDS:RATE,..." -> [(seconds, rate), ...]."""
    phases = []
    for item in text.split(","):
        seconds, rate = item.split(":")
        phases.append((float(seconds), float(rate)))
    return phases


def run_openloop(args, url, schedule, log=None):
    """build/openloop at a fixed schedule; rates above
    OPENLOOP_RATE_PER_PROC are split over several processes, each with
    its share of every phase's rate, whose latencies are merged."""
    phases = parse_schedule(schedule)
    peak = max(rate for _, rate in phases)
    procs = max(1, int(math.ceil(peak / OPENLOOP_RATE_PER_PROC)))
    share = ",".join("%g:%g" % (sec, rate / procs) for sec, rate in phases)
    total = sum(sec for sec, _ in phases)
    if not os.path.exists(OPENLOOP):
        raise RuntimeError("missing %s: run make bench-build" % OPENLOOP)
    tmp = tempfile.mkdtemp(prefix="pfb-openloop-")
    running = []
    try:
        for i in range(procs):
            command = client_prefix(args) + [
                OPENLOOP, "--url", url,
                "--schedule", share,    # SECONDS:RATE phases, this share
                "--hist", os.path.join(tmp, "hist%d" % i)]  # µs counts
            running.append((command, subprocess.Popen(
                ["timeout", str(total + 60)] + command,
                stdout=subprocess.PIPE, text=True)))
        outs = [(command, p.communicate()[0]) for command, p in running]
        return merge_openloop(outs, tmp, log)
    finally:
        for _, p in running:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def merge_openloop(outs, tmp, log):
    """One result from several openloop processes: counts, rates and
    errors added, every latency in one histogram, the worst send lag."""
    hists, errors, result = [], {}, {"sent": 0, "ok": 0, "rate": 0.0,
                                     "offered_rate": 0.0}
    lag99 = lagmax = 0.0
    for i, (command, out) in enumerate(outs):
        if log:
            log.write("$ %s\n%s\n" % (" ".join(command), out[:2000]))
        try:
            one = json.loads(out)
        except ValueError:
            errors["no_output"] = errors.get("no_output", 0) + 1
            continue
        hists.append(read_text_hist(os.path.join(tmp, "hist%d" % i)))
        for k, v in one["errors"].items():
            errors[k] = errors.get(k, 0) + v
        for k in result:
            result[k] += one[k]
        lag99 = max(lag99, one["send_lag_p99"])
        lagmax = max(lagmax, one["send_lag_max"])
    hist = stats.merge_hists(hists)
    if not hist:
        return {"requests": 0, "rps": 0.0, "errors": errors or
                {"no_output": 1}}
    # rps: responses completed within the schedule, per second of it (a
    # server that falls behind completes fewer than were offered).
    result.update(requests=result["ok"], rps=result["rate"], errors=errors,
                  send_lag_p99=lag99, send_lag_max=lagmax,
                  generators=len(outs), generator="openloop", hist=hist)
    result.update(stats.hist_summary(hist))
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
