#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every query of the Grafana dashboard and of the alert rules names only
metrics that really exist.

The httpd_bucket_* names come from /bucket-status?prometheus of a running
server (this MPM, 2 buckets, idle steering so the steering families
appear), asked for as Prometheus asks (?prometheus=); the apache_* names of
the dashboard's apache_exporter row from Debian's prometheus-apache-exporter
scraping the same server's /server-status?auto; the recording rules' names
from the rules file.  The dashboard must also have the panels
docs/monitoring.md promises, filter every query by its job and instance
variables, never add up series of different instances, and use only the
data source variable it declares; mark restarts and firing bucket alerts,
show the firing alerts in a panel, repeat the per-bucket panels per server
so that legends name no address twice, and filter the apache_exporter row
by the same instance.  Ends with 'dashboard: N passed, N failed'.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import STATUS_LOAD, STATUS_LOCATION, TOP, Server  # noqa: E402
from pfbtest.metrics import exported_metric_names  # noqa: E402
from pfbtest.tally import report  # noqa: E402
import test_monitoring  # noqa: E402

DASHBOARD = os.path.join(TOP, "contrib", "grafana", "prefork-buckets.json")
ALERTS = os.path.join(TOP, "contrib", "prometheus", "bucket-alerts.yml")

# PromQL words that are not metric names.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "atan2", "inf", "nan", "start", "end",
}
# Series that Prometheus itself makes for every target.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                  "ALERTS"}

# Panel title -> a metric it must query (docs/monitoring.md's list).
REQUIRED_PANELS = {
    "Connections per bucket": "httpd_bucket_accepted_connections_total",
    "Balance: Jain's index": "httpd_bucket_accepted_connections_total",
    "Balance: max / mean": "httpd_bucket_accepted_connections_total",
    "Accept-queue depth and backlog": "httpd_bucket_backlog",
    "Accept queue: depth / backlog": "httpd_bucket_queue_depth",
    "Children by state": "httpd_bucket_children",
    "Idle children per bucket": "httpd_bucket_children",
    "Steering: kept / moved": "httpd_bucket_steered_connections_total",
    "Requests per second (apache_exporter)": "apache_accesses_total",
    "Firing bucket alerts": "ALERTS",
    "Busy children / MaxRequestWorkers": "httpd_bucket_max_request_workers",
}
AGGREGATIONS = r"\b(sum|count|max|min|avg|stddev|topk|bottomk|quantile)\b"
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
    for note in dashboard.get("annotations", {}).get("list", []):
        if note.get("expr"):
            queries.append(("annotation '%s'" % note.get("name"), note["expr"]))
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
    """(where, expr) for every alert and recording rule; the file is YAML,
    read without a YAML library: each expr is a block scalar or a one-line
    value."""
    queries = []
    lines = open(path).read().splitlines()
    alert = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*- (alert|record):\s*(\S+)", line)
        if m:
            alert = "%s %s" % m.groups()
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
                queries.append((alert, "\n".join(body)))
                continue
            queries.append((alert, value))
        i += 1
    return queries


def recorded_names(path):
    """Names the rules file records (level:metric:operation)."""
    return set(re.findall(r"^\s*- record:\s*(\S+)", open(path).read(), re.M))


def selector_problems(expr):
    """How a dashboard query breaks the dashboard's rules: each selector of
    a bucket metric filters by $job and $instance, each apache_* one by
    $apache_job, and each aggregation keeps the instance label."""
    problems = []
    for m in re.finditer(r"\b((?:httpd_bucket|apache)_\w+)(\{[^}]*\})?", expr):
        name, matchers = m.group(1), m.group(2) or ""
        wanted = ('job=~"$apache_job"', 'instance=~"$instance"') \
            if name.startswith("apache_") \
            else ('job=~"$job"', 'instance=~"$instance"')
        missing = [w for w in wanted if w not in matchers]
        if missing:
            problems.append("%s without %s" % (name, ", ".join(missing)))
    for m in re.finditer(AGGREGATIONS + r"\s*(by|without)?\s*(\([^)]*\))?",
                         expr):
        how, labels = m.group(2), m.group(3) or ""
        if how != "by" or "instance" not in labels:
            problems.append("%s%s adds up instances"
                            % (m.group(1), " %s %s" % (how, labels)
                               if how else ""))
    return problems


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
        text = f.read()
        dashboard = json.loads(text)
    # The log's verdict is a check of its own, read once the server
    # stopped, so that lines of its shutdown count too.
    server = Server(extra_modules=STATUS_LOAD,
                    extra=STATUS_LOCATION + "ListenBuckets 2\n"
                    "ListenBucketSteering idle\n", check_log=False)
    with server:
        server.start()
        for _ in range(10):
            server.get("/")
        status, exposition = server.get("/bucket-status?prometheus=")
        _, info = server.get("/bucket-status?json")
        apache_families, _, _ = test_monitoring.run_exporter(server)
    bad_log = server.log_problems
    check("scrape_as_prometheus_does", status == 200,
          "/bucket-status?prometheus= gave %d" % status)
    check("server_log_clean", not bad_log, "\n".join(bad_log))
    check("apache_exporter_exports", "apache_up" in apache_families,
          sorted(apache_families))
    exported = exported_metric_names(exposition)
    exported |= set(apache_families) | recorded_names(ALERTS)
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
    # The one data source is the variable the dashboard declares: an
    # import-time input (__inputs, ${DS_...}) nothing fills is a dead end.
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    used = set(re.findall(r"\$\{?(\w+)", text)) - {"__rate_interval"}
    check("dashboard_uses_only_declared_variables",
          "__inputs" not in dashboard and used <= variables,
          "__inputs %s, undeclared %s" % (dashboard.get("__inputs"),
                                           sorted(used - variables)))
    check("dashboard_has_job_variable", "job" in variables)
    for where, expr in queries:
        if where.startswith("panel"):
            problems = selector_problems(expr)
            check("%s keeps to job, instance and per-instance sums" % where,
                  not problems, "; ".join(problems) + " in %r" % expr)
    for where, expr in queries + alert_queries(ALERTS):
        names = metric_names(expr)
        unknown = sorted(names - exported - PROMETHEUS_OWN)
        check("%s names exported metrics" % where, names and not unknown,
              "unknown %s in %r" % (unknown, expr))

    notes = {n.get("name"): n.get("expr", "")
             for n in dashboard.get("annotations", {}).get("list", [])}
    check("restarts_annotated",
          any("httpd_bucket_generation" in e and "changes(" in e
              for e in notes.values()), sorted(notes))
    check("firing_alerts_annotated",
          any(e.startswith("ALERTS{") and 'alertstate="firing"' in e
              for e in notes.values()), sorted(notes))
    # The per-bucket panels follow a row repeated per server, so their
    # legends leave the server out and name the listener once.
    repeated, in_row, doubled = False, [], []
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            repeated = panel.get("repeat") == "instance"
            continue
        for target in panel.get("targets", []):
            fmt = target.get("legendFormat", "")
            if "{{instance}}" in fmt and "{{listener}}" in fmt:
                doubled.append(panel.get("title"))
        if panel.get("type") == "timeseries" \
                and "apache_exporter" not in panel.get("title", ""):
            in_row.append((panel.get("title"), repeated))
    check("legends_name_no_address_twice", not doubled, doubled)
    check("time_series_repeat_per_instance",
          in_row and all(r for _, r in in_row),
          [t for t, r in in_row if not r])
    titles = {}
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            titles.setdefault(panel.get("title"), set()).update(
                metric_names(target.get("expr", "")))
    for title, metric in REQUIRED_PANELS.items():
        check("panel '%s' queries %s" % (title, metric),
              metric in titles.get(title, set()),
              "panels: %s" % sorted(titles))
    return report("dashboard", results)


if __name__ == "__main__":
    sys.exit(main())
