#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A real Prometheus scrapes /bucket-status?prometheus= of running servers
and answers every query of the dashboard and of the rules.

  python3 test/package/test_prometheus.py

Debian's prometheus (with contrib/prometheus/bucket-alerts.yml as its rule
file, every rule evaluated each second) scrapes, every second, as
docs/monitoring.md configures it:

  buckets    this MPM, 2 buckets, idle steering, MaxRequestWorkers 8, with
             Debian's prometheus-apache-exporter on its /server-status?auto
             (the dashboard's apache_exporter row; its target carries the
             server's instance label, as docs/monitoring.md says);
  fallback   README's recommended lines where idle steering cannot run
             (bpf(2) refused by the LD_PRELOAD shim, as without CAP_BPF):
             one bucket for every Listen;
  switched   Debian's prefork with mod_bucket_status kept, as after
             switching back.

The buckets server gets light load, then more clients than
MaxRequestWorkers.  Then, through Prometheus's query API:

  - every target query of the dashboard's panels, its annotations' and its
    variables' series (with $job, $instance and $apache_job as all and
    $__rate_interval 5s) is valid and has data, but for the firing-alerts
    table, which must be valid and empty;
  - every recording rule has data;
  - every alert's expression (without its for:) is valid, and holds what
    the servers show: HttpdBucketNearMaxRequestWorkers for buckets under
    overload, HttpdBucketSteeringFallback for fallback (on a host with
    more than one usable CPU, where the ratio asked for buckets) with its
    mode_reason, and none for switched (HttpdBucketDataUnavailable stays
    quiet beside another MPM); the others valid.

Ends with 'prometheus: N passed, N failed'.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import (NOBPF_SO, STATUS_LOAD, STATUS_LOCATION,  # noqa: E402
                     STOCK_PREFORK, TOP, Server, free_port, get_url, wait_for)
from pfbtest.tally import report  # noqa: E402

EXPORTER = os.environ.get("APACHE_EXPORTER",
                          "/usr/bin/prometheus-apache-exporter")
PROMETHEUS = os.environ.get("PROMETHEUS", "prometheus")
DASHBOARD = os.path.join(TOP, "contrib", "grafana", "prefork-buckets.json")
RULES = os.path.join(TOP, "contrib", "prometheus", "bucket-alerts.yml")
RATE_INTERVAL = "5s"
MAX_WORKERS = 8

BUCKETS_CONF = STATUS_LOCATION + """\
ExtendedStatus On
ListenBuckets 2
ListenBucketSteering idle
StartServers 2
MinSpareServers 2
MaxSpareServers 4
ServerLimit %d
MaxRequestWorkers %d
<Location /work>
    SetHandler pfb-test
</Location>
""" % (MAX_WORKERS, MAX_WORKERS)
# README's recommended lines.
FALLBACK_CONF = STATUS_LOCATION + """\
<IfDirective ListenBucketSteering>
    ListenCoresBucketsRatio 1
    ListenBucketSteering    idle
</IfDirective>
"""

results = {}


def check(label, ok, detail=""):
    results[label] = bool(ok)
    print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                       (": " + detail) if detail and not ok else ""),
          flush=True)
    return bool(ok)


def several_cpus():
    return len(os.sched_getaffinity(0)) > 1


class Clients:
    """Closed-loop clients of /work?sleep=MS, one connection a request."""

    def __init__(self, port):
        self.port = port
        self.wanted, self.sleep_ms = 0, 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads = []
        self.served = 0

    def set(self, clients, sleep_ms):
        with self.lock:
            self.wanted, self.sleep_ms = clients, sleep_ms
        while len(self.threads) < clients:
            t = threading.Thread(target=self.run, args=(len(self.threads),),
                                 daemon=True)
            self.threads.append(t)
            t.start()

    def run(self, index):
        while not self.done.is_set():
            with self.lock:
                active = index < self.wanted
                sleep_ms = self.sleep_ms
            if not active:
                self.done.wait(0.05)
                continue
            try:
                status, _ = get_url("http://127.0.0.1:%d/work?sleep=%d"
                                    % (self.port, sleep_ms), 30)
            except OSError:
                continue
            if status == 200:
                with self.lock:
                    self.served += 1

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(35)


def start_process(argv, log, ready_url, workdir):
    """Starts a daemon of ours on a port picked just before; returns the
    process once ready_url answers 200."""
    proc = subprocess.Popen(argv, stdout=open(os.path.join(workdir, log),
                                              "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)

    def ready():
        if proc.poll() is not None:
            return "exited"
        try:
            return get_url(ready_url, 2)[0] == 200
        except OSError:
            return False

    if wait_for(ready, 60, 0.2) is True:
        return proc
    proc.kill()
    proc.wait(10)
    return None


def stop_process(proc):
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Prometheus:
    def __init__(self, workdir, targets, exporter_port):
        self.workdir = workdir
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [RULES],
            "scrape_configs": [
                {"job_name": "apache-buckets",
                 "metrics_path": "/bucket-status",
                 "params": {"prometheus": [""]},
                 "static_configs": [{"targets": targets}]},
                {"job_name": "apache",
                 "static_configs": [{"targets": ["127.0.0.1:%d"
                                                 % exporter_port],
                                     "labels": {"instance": targets[0]}}]},
            ]}
        self.config = os.path.join(workdir, "prometheus.yml")
        with open(self.config, "w") as f:
            yaml.safe_dump(config, f)
        self.proc = self.port = None

    def start(self):
        for _ in range(5):
            port = free_port()
            proc = start_process(
                [PROMETHEUS, "--config.file=" + self.config,
                 "--storage.tsdb.path=" + os.path.join(self.workdir, "tsdb"),
                 "--web.listen-address=127.0.0.1:%d" % port,
                 "--log.level=warn"],
                "prometheus.log", "http://127.0.0.1:%d/-/ready" % port,
                self.workdir)
            if proc is not None:
                self.proc, self.port = proc, port
                return True
        return False

    def query(self, expr):
        """(ok, result or error) of an instant query now."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.port, urllib.parse.urlencode({"query": expr}))
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                answer = json.load(resp)
        except urllib.error.HTTPError as e:
            return False, e.read().decode(errors="replace")
        if answer.get("status") != "success":
            return False, str(answer)
        return True, answer["data"]["result"]

    def rules_evaluated(self):
        """Whether every rule group has been evaluated without error."""
        url = "http://127.0.0.1:%d/api/v1/rules" % self.port
        with urllib.request.urlopen(url, timeout=30) as resp:
            groups = json.load(resp)["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules and all(r.get("health") == "ok" for r in rules), rules

    def log(self):
        with open(os.path.join(self.workdir, "prometheus.log")) as f:
            return f.read()


def dashboard_queries():
    """(where, expr, must have data) of every query of the dashboard."""
    with open(DASHBOARD) as f:
        board = json.load(f)
    found = []

    def walk(node):
        if isinstance(node, dict):
            for t in node.get("targets", []) or []:
                if t.get("expr"):
                    found.append(("panel %r" % node.get("title"), t["expr"],
                                  "ALERTS" not in t["expr"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(board.get("panels", []))
    for a in board.get("annotations", {}).get("list", []):
        if a.get("expr"):
            # Restarts and firing alerts: none here, by design.
            found.append(("annotation %r" % a.get("name"), a["expr"], False))
    for v in board.get("templating", {}).get("list", []):
        m = re.fullmatch(r"label_values\((.*),\s*\w+\)",
                         v.get("definition") or "")
        if m:
            found.append(("variable %s" % v["name"], m.group(1), True))
    out = []
    for where, expr, data in found:
        for variable in ("$instance", "$apache_job", "$job"):
            expr = expr.replace(variable, ".*")
        out.append((where, expr.replace("$__rate_interval", RATE_INTERVAL),
                    data))
    return out


def rules():
    with open(RULES) as f:
        groups = yaml.safe_load(f)["groups"]
    return [r for g in groups for r in g["rules"]]


def run(workdir):
    buckets = Server(extra=BUCKETS_CONF, extra_modules=STATUS_LOAD,
                     expect_log=("PFB00010",))
    fallback = Server(extra=FALLBACK_CONF, extra_modules=STATUS_LOAD,
                      env={"LD_PRELOAD": NOBPF_SO},
                      expect_log=("PFB00150",) if several_cpus() else ())
    switched = Server(mpm=STOCK_PREFORK, extra=STATUS_LOCATION,
                      extra_modules=STATUS_LOAD)
    exporter = prom = None
    clients = None
    with buckets, fallback, switched:
        for srv in (buckets, fallback, switched):
            srv.start()
        targets = ["127.0.0.1:%d" % s.ports[0]
                   for s in (buckets, fallback, switched)]
        port = free_port()
        exporter = start_process(
            [EXPORTER, "--scrape_uri=" + buckets.url("/server-status?auto"),
             "--telemetry.address=127.0.0.1:%d" % port],
            "exporter.log", "http://127.0.0.1:%d/metrics" % port, workdir)
        if not check("prometheus-apache-exporter runs", exporter):
            return
        prom = Prometheus(workdir, targets, port)
        try:
            if not check("prometheus runs", prom.start(),
                         "see %s" % workdir):
                return
            check("prometheus scrapes the three servers and the exporter",
                  wait_for(lambda: len(prom.query("up == 1")[1]) == 4, 60,
                           0.5), str(prom.query("up")))
            clients = Clients(buckets.ports[0])
            # Light load: every bucket serves, rates have data.
            clients.set(3, 20)
            check("light load served",
                  wait_for(lambda: clients.served >= 100, 120, 0.2))
            # More clients than MaxRequestWorkers: every child busy.
            clients.set(3 * MAX_WORKERS, 300)
            near = "instance:httpd_bucket_workers_busy:ratio > 0.9"
            check("overload: the near-MaxRequestWorkers expression holds",
                  wait_for(lambda: [r for r in prom.query(near)[1]
                                    if r["metric"].get("instance")
                                    == targets[0]], 90, 0.5),
                  str(prom.query("instance:httpd_bucket_workers_busy:ratio")))
            check_queries(prom, targets)
            ok, detail = prom.rules_evaluated()
            check("every rule evaluated without error", ok,
                  str([(r.get("name"), r.get("lastError"))
                       for r in detail if r.get("health") != "ok"]))
        finally:
            if clients is not None:
                clients.stop()
            stop_process(prom.proc if prom else None)
            stop_process(exporter)
        log = prom.log() if prom and prom.proc else ""
        # Its own stop (SIGTERM, above) is logged at warn.
        bad = [line for line in log.splitlines()
               if re.search(r"level=(warn|error)", line)
               and "Received SIGTERM, exiting gracefully" not in line]
        check("prometheus logged no warning or error", not bad,
              "\n".join(bad[:10]))


def check_queries(prom, targets):
    buckets, fallback, switched = targets
    for where, expr, want_data in dashboard_queries():
        ok, result = prom.query(expr)
        check("dashboard %s: valid%s" % (where, ", with data" if want_data
                                         else ""),
              ok and (bool(result) if want_data else True),
              "%s -> %s" % (expr, result if not ok else "no data"))
    for rule in rules():
        if "record" in rule:
            ok, result = prom.query(rule["record"])
            check("recording rule %s has data" % rule["record"],
                  ok and result, "%s" % (result if not ok else "no data"))
            continue
        name, expr = rule["alert"], rule["expr"]
        ok, result = prom.query(expr)
        on = {r["metric"].get("instance") for r in result} if ok else set()
        check("alert %s: its expression is valid" % name, ok, str(result))
        if not ok:
            continue
        check("alert %s: quiet for the server that switched back" % name,
              switched not in on, str(result))
        if name == "HttpdBucketSteeringFallback":
            fell = [r["metric"] for r in result
                    if r["metric"].get("instance") == fallback]
            if several_cpus():
                check("alert %s: holds for README's lines without idle "
                      "steering" % name,
                      fell and fell[0].get("mode_reason")
                      == "idle-steering-unavailable", str(result))
            else:
                check("alert %s: quiet with one usable CPU (the ratio asks "
                      "for one socket per Listen)" % name, not fell,
                      str(result))
            check("alert %s: quiet where steering runs" % name,
                  buckets not in on, str(result))
        elif name == "HttpdBucketNearMaxRequestWorkers":
            check("alert %s: holds for the overloaded server" % name,
                  buckets in on, str(result))
        elif name == "HttpdBucketDataUnavailable":
            check("alert %s: quiet for every server here" % name, not on,
                  str(result))


def main():
    for tool in (PROMETHEUS, EXPORTER):
        if shutil.which(tool) is None:
            print("%s is missing: apt-get install prometheus "
                  "prometheus-apache-exporter" % tool)
            print("prometheus: 0 passed, 1 failed")
            return 1
    workdir = tempfile.mkdtemp(prefix="pfb-prometheus-")
    try:
        run(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return report("prometheus", results)


if __name__ == "__main__":
    sys.exit(main())
