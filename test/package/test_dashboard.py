#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every query of the Grafana dashboard and of the alert rules names only
metrics that the status module really exports.

The exported names come from /bucket-status?prometheus of a running server
(this MPM, 2 buckets, idle steering so the steering families appear), asked
for as Prometheus asks (?prometheus=).  The dashboard must also have the
panels the README promises.  Ends with 'dashboard: N passed, N failed'.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pfbserver  # noqa: E402

DASHBOARD = os.path.join(pfbserver.TOP, "contrib", "grafana",
                         "prefork-buckets.json")
ALERTS = os.path.join(pfbserver.TOP, "contrib", "prometheus",
                      "bucket-alerts.yml")

# PromQL words that are not metric names.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "atan2", "inf", "nan", "start", "end",
}
# Series that Prometheus itself makes for every target.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

# Panel title -> a metric it must query (the README's list of panels).
REQUIRED_PANELS = {
    "Connections per bucket": "httpd_bucket_accepted_connections_total",
    "Balance: Jain's index": "httpd_bucket_balance_jain",
    "Balance: max / mean": "httpd_bucket_balance_max_over_mean",
    "Accept-queue depth": "httpd_bucket_queue_depth",
    "Children by state": "httpd_bucket_children",
    "Steering: kept / moved": "httpd_bucket_steered_connections_total",
}
STEERING_METRICS = {"httpd_bucket_steered_connections_total",
                    "httpd_bucket_steering_idle"}


def metric_names(expr):
    """Metric names in a PromQL expression: identifiers left once strings,
    label matchers, range and offset brackets, grouping clauses and
    function calls are taken out."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)"
                  r"\s*\([^)]*\)", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?",
                         expr):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def dashboard_queries(dashboard):
    """(where, expr) for every panel target and templating query."""
    queries = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    queries.append(("panel '%s' %s" % (panel.get("title"),
                                                       target.get("refId")),
                                    target["expr"]))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and query:
            m = re.match(r"\s*label_values\((.*),\s*\w+\)\s*$", query)
            queries.append(("variable '%s'" % var["name"],
                            m.group(1) if m else query))
    return queries


def alert_queries(path):
    """(where, expr) for every rule; the file is YAML, read without a YAML
    library: each expr is a block scalar or a one-line value."""
    queries = []
    lines = open(path).read().splitlines()
    alert = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*- alert:\s*(\S+)", line)
        if m:
            alert = m.group(1)
        m = re.match(r"(\s*)expr:\s*(.*)$", line)
        if m:
            indent, value = len(m.group(1)), m.group(2).strip()
            if value in ("|", ">", "|-", ">-"):
                body = []
                i += 1
                while i < len(lines) and (
                        not lines[i].strip()
                        or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    body.append(lines[i])
                    i += 1
                queries.append(("alert %s" % alert, "\n".join(body)))
                continue
            queries.append(("alert %s" % alert, value))
        i += 1
    return queries


def main():
    if os.geteuid() != 0:
        print("this test starts apache2 as root; run it as root")
        print("dashboard: 0 passed, 1 failed")
        return 1
    results = {}

    def check(label, ok, detail=""):
        results[label] = bool(ok)
        print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                           (": " + detail) if detail and not ok else ""))

    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    with pfbserver.Server(extra="ListenBuckets 2\n"
                                "ListenBucketSteering idle") as server:
        server.start()
        for _ in range(10):
            server.get("/")
        status, exposition = server.get("/bucket-status?prometheus=")
        _, info = server.get("/bucket-status?json")
        bad_log = server.unexpected_log_lines()
    check("scrape_as_prometheus_does", status == 200,
          "/bucket-status?prometheus= gave %d" % status)
    check("server_log_clean", not bad_log, "\n".join(bad_log))
    exported = pfbserver.exported_metric_names(exposition)
    steering = json.loads(info).get("steering")
    print("  exported: %s" % ", ".join(sorted(exported)))
    if steering != "idle":
        # The steering families appear only while idle steering is in
        # force; a kernel or privileges that refuse it leave them out.
        print("  idle steering not in force here (%s): its metrics are "
              "not checked" % steering)
        exported |= STEERING_METRICS

    queries = dashboard_queries(dashboard)
    check("dashboard_has_queries", len(queries) >= len(REQUIRED_PANELS))
    for where, expr in queries + alert_queries(ALERTS):
        names = metric_names(expr)
        unknown = sorted(names - exported - PROMETHEUS_OWN)
        check("%s names exported metrics" % where, names and not unknown,
              "unknown %s in %r" % (unknown, expr))

    titles = {}
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            titles.setdefault(panel.get("title"), set()).update(
                metric_names(target.get("expr", "")))
    for title, metric in REQUIRED_PANELS.items():
        check("panel '%s' queries %s" % (title, metric),
              metric in titles.get(title, set()),
              "panels: %s" % sorted(titles))
    return pfbserver.report("dashboard", results)


if __name__ == "__main__":
    sys.exit(main())
