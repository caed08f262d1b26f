#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Renders the Grafana dashboard's panels with gnuplot from a real run.

Grafana is not in Debian 12, so this stands in for a screenshot: it starts
this MPM with mod_bucket_status (4 buckets, idle steering, MaxRequestWorkers
8), has Debian's Prometheus scrape /bucket-status?prometheus= every second
and Debian's prometheus-apache-exporter (for the dashboard's apache_exporter
row), drives the server through four phases of load (light, overload,
moderate, none) with the test handler's sleeping requests, then evaluates
each time series panel's own queries from contrib/grafana/prefork-buckets.json
over the run (Prometheus's query_range; $job, $instance and $apache_job =
all, $__rate_interval = 5s) and draws them.

  python3 tools/render-dashboard.py [--out docs/dashboard.png] [--quick]

Takes about 3 minutes (--quick: 1).  Writes the PNG, and the series it drew
as JSON beside it in build/.  Not part of CI.  Run as root (apache2 binds,
then drops to www-data); needs prometheus, prometheus-apache-exporter and
gnuplot-nox.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "test"))        # for pfbtest
from pfbtest import (STATUS_LOAD, STATUS_LOCATION, Server,  # noqa: E402
                     free_port, get_url, wait_for)

EXPORTER = os.environ.get("APACHE_EXPORTER",
                          "/usr/bin/prometheus-apache-exporter")

DASHBOARD = os.path.join(TOP, "contrib", "grafana", "prefork-buckets.json")
SCRAPE_INTERVAL = "1s"
RATE_INTERVAL = "5s"

# httpd's own KeepAliveTimeout (the harness's base configuration sets 30):
# the picture shows how keep-alive scrapes hold children under it.
SERVER_CONF = STATUS_LOCATION + """\
KeepAliveTimeout 5
ListenBuckets 4
ListenBucketSteering idle
StartServers 4
MinSpareServers 4
MaxSpareServers 8
ServerLimit 8
MaxRequestWorkers 8
ListenBacklog 511
<Location /work>
    SetHandler pfb-test
</Location>
"""

# (seconds, clients, handler sleep in ms): light load, overload (more
# clients than MaxRequestWorkers, so connections queue), moderate, none.
PHASES = ((40, 4, 20), (50, 24, 40), (40, 8, 20), (25, 0, 0))
QUICK_PHASES = ((15, 4, 20), (20, 24, 40), (15, 8, 20), (10, 0, 0))


class Clients:
    """Closed-loop clients, one new connection per request."""

    def __init__(self, port):
        self.port = port
        self.wanted = 0
        self.sleep_ms = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads = []
        self.requests = 0
        self.errors = 0

    def set(self, clients, sleep_ms):
        with self.lock:
            self.wanted = clients
            self.sleep_ms = sleep_ms
        while len(self.threads) < clients:
            t = threading.Thread(target=self.run, args=(len(self.threads),),
                                 daemon=True)
            self.threads.append(t)
            t.start()

    def run(self, index):
        while not self.done.is_set():
            with self.lock:
                active = index < self.wanted
                url = "http://127.0.0.1:%d/work?sleep=%d" % (self.port,
                                                            self.sleep_ms)
            if not active:
                time.sleep(0.1)
                continue
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    resp.read()
                with self.lock:
                    self.requests += 1
            except OSError:
                with self.lock:
                    self.errors += 1

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(35)


def start_exporter(workdir, target_port):
    """prometheus-apache-exporter on mod_status's ?auto; (proc, port)."""
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [EXPORTER, "--scrape_uri=http://127.0.0.1:%d/server-status?auto"
             % target_port, "--telemetry.address=127.0.0.1:%d" % port],
            stdout=open(os.path.join(workdir, "exporter.log"), "w"),
            stderr=subprocess.STDOUT, start_new_session=True)

        def ready():
            if proc.poll() is not None:
                return "exited"
            try:
                return get_url("http://127.0.0.1:%d/metrics" % port,
                               2)[0] == 200
            except OSError:
                return False

        if wait_for(ready, 30, 0.2) is True:
            return proc, port
        proc.kill()
        proc.wait(10)
    raise RuntimeError("prometheus-apache-exporter did not start: see %s"
                       % workdir)


def start_prometheus(workdir, target_port, exporter_port):
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: %s\n  evaluation_interval: %s\n"
                "scrape_configs:\n"
                "  - job_name: apache-buckets\n"
                "    metrics_path: /bucket-status\n"
                "    params: {prometheus: [\"\"]}\n"
                "    static_configs: [{targets: [\"127.0.0.1:%d\"]}]\n"
                "  - job_name: apache\n"
                "    static_configs: [{targets: [\"127.0.0.1:%d\"]}]\n"
                % (SCRAPE_INTERVAL, SCRAPE_INTERVAL, target_port,
                   exporter_port))
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            ["prometheus", "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % port,
             "--log.level=warn"],
            stdout=open(os.path.join(workdir, "prometheus.log"), "w"),
            stderr=subprocess.STDOUT, start_new_session=True)

        def ready():
            if proc.poll() is not None:
                return "exited"
            try:
                return get_url("http://127.0.0.1:%d/-/ready" % port,
                               2)[0] == 200
            except OSError:
                return False

        state = wait_for(ready, 30, 0.2)
        if state is True:
            return proc, port
        proc.kill()
        proc.wait(10)
    raise RuntimeError("prometheus did not start: see %s" % workdir)


def query_range(port, expr, start, end):
    params = urllib.parse.urlencode({"query": expr, "start": start,
                                     "end": end, "step": "1"})
    url = "http://127.0.0.1:%d/api/v1/query_range?%s" % (port, params)
    with urllib.request.urlopen(url, timeout=60) as resp:
        answer = json.load(resp)
    if answer.get("status") != "success":
        raise RuntimeError("%s: %s" % (expr, answer))
    return answer["data"]["result"]


def legend(fmt, labels):
    text = fmt
    for key, value in labels.items():
        text = text.replace("{{%s}}" % key, value)
    return text


def panel_series(prom_port, panel, start, end):
    """[(title, [(t, v), ...]), ...] for one panel, its queries as Grafana
    would send them for instance=All."""
    out = []
    for target in panel["targets"]:
        expr = target["expr"]
        for variable in ("$instance", "$apache_job", "$job"):
            expr = expr.replace(variable, ".*")
        expr = expr.replace("$__rate_interval", RATE_INTERVAL)
        # Grafana's overrides for this target: a dashed line on the right
        # axis (the backlog beside the queue depths).
        props = {p["id"]: p["value"]
                 for o in panel["fieldConfig"].get("overrides", [])
                 if o["matcher"] == {"id": "byFrameRefID",
                                     "options": target["refId"]}
                 for p in o["properties"]}
        dashed = "custom.lineStyle" in props, \
            props.get("custom.axisPlacement") == "right"
        for result in query_range(prom_port, expr, start, end):
            points = [(float(t) - start, float(v))
                      for t, v in result["values"] if v not in ("NaN",)]
            out.append((legend(target.get("legendFormat", ""),
                               result["metric"]), points, dashed))
    return out


def gnuplot_quote(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def draw(panels, header, out_png, workdir, phase_marks):
    rows = (len(panels) + 1) // 2
    script = [
        "set terminal pngcairo size 1500,%d font 'DejaVu Sans,10'"
        % (425 * rows),
        "set output %s" % gnuplot_quote(out_png),
        "set multiplot layout %d,2 title %s font ',13'"
        % (rows, gnuplot_quote(header)),
        "set grid lc rgb '#dddddd'",
        "set key bottom left horizontal font ',8' samplen 2",
        "set xlabel 'seconds'",
        "set border lc rgb '#666666'",
        "set termoption noenhanced",
    ]
    for index, (panel, series) in enumerate(panels):
        stacked = panel["fieldConfig"]["defaults"]["custom"]["stacking"][
            "mode"] == "normal"
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        ylabel = {"cps": "connections/s", "reqps": "requests/s",
                  "percentunit": "fraction"}.get(unit, "")
        script.append("set title %s font ',11'"
                      % gnuplot_quote(panel["title"]))
        script.append("set ylabel %s" % gnuplot_quote(ylabel))
        dmin = panel["fieldConfig"]["defaults"].get("min")
        dmax = panel["fieldConfig"]["defaults"].get("max")
        script.append("set yrange [%s:%s]" % (
            0 if dmin is None else dmin,
            "*" if dmax is None else dmax * 1.05))
        script.append("unset arrow")
        if any(right for _, _, (_, right) in series):
            script.append("set y2tics")
            script.append("set y2range [0:*]")
        else:
            script.append("unset y2tics")
        for mark in phase_marks:
            script.append("set arrow from %d, graph 0 to %d, graph 1 "
                          "nohead lc rgb '#bbbbbb' dt 2" % (mark, mark))
        if not series:
            script.append("set label 1 'no data' at graph 0.45, graph 0.5")
            script.append("plot [0:%d] NaN notitle" % phase_marks[-1])
            script.append("unset label 1")
            continue
        data = os.path.join(workdir, "panel%d.dat" % index)
        times = sorted({t for _, pts, _ in series for t, _ in pts})
        with open(data, "w") as f:
            if stacked:
                # Grafana's normal stacking: each series on top of the
                # previous ones.
                totals = {t: 0.0 for t in times}
                for _, pts, _ in series:
                    values = dict(pts)
                    for t in times:
                        low = totals[t]
                        totals[t] = low + values.get(t, 0.0)
                        f.write("%g %g %g\n" % (t, low, totals[t]))
                    f.write("\n\n")
            else:
                for _, pts, _ in series:
                    for t, v in pts:
                        f.write("%g %g\n" % (t, v))
                    f.write("\n\n")
        plots = []
        for i, (title, _, (dashed, right)) in enumerate(series):
            if stacked:
                plots.append("%s index %d using 1:2:3 with filledcurves "
                             "fs transparent solid 0.5 title %s"
                             % (gnuplot_quote(data), i, gnuplot_quote(title)))
            else:
                plots.append("%s index %d using 1:2 %swith lines lw 1.5 %s"
                             "title %s"
                             % (gnuplot_quote(data), i,
                                "axes x1y2 " if right else "",
                                "dt 2 lc rgb 'red' " if dashed else "",
                                gnuplot_quote(title)))
        script.append("plot [0:%d] " % phase_marks[-1] + ", ".join(plots))
    script.append("unset multiplot")
    path = os.path.join(workdir, "dashboard.gp")
    with open(path, "w") as f:
        f.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", path], check=True, timeout=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(TOP, "docs",
                                                      "dashboard.png"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    phases = QUICK_PHASES if args.quick else PHASES
    workdir = tempfile.mkdtemp(prefix="pfb-dash-")
    prom = exporter = None
    try:
        # Not a test: the log's lines are shown below, not judged.
        with Server(extra=SERVER_CONF, extra_modules=STATUS_LOAD,
                    check_log=False) as server:
            server.start()
            port = server.ports[0]
            exporter, exporter_port = start_exporter(workdir, port)
            prom, prom_port = start_prometheus(workdir, port,
                                               exporter_port)
            wait_for(lambda: query_range(
                prom_port, "httpd_bucket_data_available", time.time() - 5,
                time.time()), 30, 0.5)
            clients = Clients(port)
            start = time.time()
            marks = []
            try:
                for seconds, count, sleep_ms in phases:
                    print("phase: %d clients, %d ms requests, %d s"
                          % (count, sleep_ms, seconds), flush=True)
                    clients.set(count, sleep_ms)
                    time.sleep(seconds)     # the phase's length is the point
                    marks.append(round(time.time() - start))
            finally:
                clients.stop()
            end = time.time()
            time.sleep(2)                   # the last scrape lands
            _, info = server.get("/bucket-status?json")
            bad = server.unexpected_log_lines()
        info = json.loads(info)
        print("%d requests, %d errors; %s" % (clients.requests,
                                              clients.errors,
                                              "log clean" if not bad else bad))
        panels = [(p, panel_series(prom_port, p, start, end))
                  for p in dashboard["panels"] if p["type"] == "timeseries"]
        header = ("%s — this MPM, %d buckets (%s, steering %s), "
                  "MaxRequestWorkers 8; Prometheus scrape every %s; phases: "
                  "%s clients" % (dashboard["title"], info["bucket_count"],
                                  info["mode"], info["steering"],
                                  SCRAPE_INTERVAL,
                                  " / ".join(str(c) for _, c, _ in phases)))
        os.makedirs(os.path.dirname(os.path.abspath(args.out)),
                    exist_ok=True)
        draw(panels, header, os.path.abspath(args.out), workdir, marks)
        series_out = os.path.join(TOP, "build", "dashboard-series.json")
        os.makedirs(os.path.dirname(series_out), exist_ok=True)
        with open(series_out, "w") as f:
            json.dump({p["title"]: [(title, points) for title, points, _ in s]
                       for p, s in panels}, f)
        print("wrote %s (series in %s)" % (args.out, series_out))
    finally:
        for proc in (prom, exporter):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
