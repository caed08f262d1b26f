# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Writes the load suite's report.md and gnuplot charts from its results.

  python3 test/load/report.py bench-results/suite-.../results.json

Charts (PNG, when gnuplot is installed): throughput per configuration for
each scenario, latency CDFs for each scenario, and accepted connections per
bucket for the bucketed configurations.
"""

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

METRICS = ("rps", "p50", "p90", "p99", "p99.9")


def median(values):
    values = [v for v in values if v is not None and not
              (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else float("nan")


def fmt(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return "%.*f" % (digits, v)


def cpu_us_per_request(run):
    """Server CPU microseconds per request served: the server's CPU seconds
    (its process group, reaped children included) over the requests."""
    if not run.get("requests") or run.get("server_cpu_s") is None:
        return None
    return round(run["server_cpu_s"] * 1e6 / run["requests"], 1)


def children_at_end(run):
    """The pool as the load left it: the server's children, and the
    status module's count where it answers."""
    d = run.get("distribution", {})
    return run.get("children_end"), d.get("status_children")


def child_jain(run):
    """Jain over children: the status module's (every child, idle ones
    too) where it answers, else the access log's (children that served)."""
    d = run.get("distribution", {})
    if d.get("status_child_jain") is not None:
        return d["status_child_jain"]
    return d.get("child_jain")


def runs_of(doc, scenario, config):
    return [r for r in doc["runs"] if r["scenario"] == scenario
            and r["config"] == config and "skipped" not in r]


def scenario_table(doc, scenario):
    lines = ["| configuration | req/s median (min–max) | p50 | p90 | p99 | "
             "p99.9 ms | errors | server CPU s | loadgen CPU s | ctx sw. | "
             "Jain buckets | Jain children | req/s ÷ stock | p99 ÷ stock | "
             "CPU µs/req | children at end |",
             "|---" * 16 + "|"]
    base = runs_of(doc, scenario, doc["baseline"])
    base_rps = median([r["rps"] for r in base]) if base else float("nan")
    base_p99 = median([r.get("p99") for r in base]) if base else float("nan")
    for key, label in doc["configs"].items():
        runs = runs_of(doc, scenario, key)
        skipped = [r for r in doc["runs"] if r["scenario"] == scenario
                   and r["config"] == key and "skipped" in r]
        if skipped:
            lines.append("| %s | skipped: %s |%s" % (
                label, skipped[0]["skipped"], " |" * 14))
            continue
        if not runs:
            continue
        rps = [r["rps"] for r in runs]
        errors = {}
        for r in runs:
            for k, v in r["errors"].items():
                if v:
                    errors[k] = errors.get(k, 0) + v
        dist = [r.get("distribution", {}) for r in runs]
        m = {k: median([r.get(k) for r in runs]) for k in METRICS}
        lines.append(
            "| %s | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
            " %s | %s | %s | %s | %s |" % (
                label, fmt(m["rps"]), fmt(min(rps)), fmt(max(rps)),
                fmt(m["p50"]), fmt(m["p90"]), fmt(m["p99"]),
                fmt(m["p99.9"]),
                ", ".join("%s %d" % kv for kv in sorted(errors.items()))
                or "0",
                fmt(median([r.get("server_cpu_s") for r in runs]), 2),
                fmt(median([r.get("loadgen_cpu_s") for r in runs]), 2),
                fmt(median([r.get("ctx_switches") for r in runs]), 0),
                fmt(median([d.get("bucket_jain") for d in dist]), 4),
                fmt(median([d.get("child_jain") for d in dist]), 4),
                fmt(m["rps"] / base_rps, 3) if base_rps else "n/a",
                fmt(m["p99"] / base_p99, 3) if base_p99 else "n/a",
                fmt(median([cpu_us_per_request(r) for r in runs]), 0),
                fmt(median([r.get("children_end") for r in runs]), 0)))
    return lines


def gnuplot(script, out_dir):
    if not shutil.which("gnuplot"):
        return False
    subprocess.run(["gnuplot"], input=script, text=True, cwd=out_dir,
                   capture_output=True, timeout=60)
    return True


def chart_throughput(doc, scenario, out_dir):
    data = os.path.join(out_dir, "throughput-%s.dat" % scenario)
    rows = []
    for key, label in doc["configs"].items():
        runs = runs_of(doc, scenario, key)
        if runs:
            rps = [r["rps"] for r in runs]
            rows.append('"%s" %f %f %f' % (label.replace('"', "'"),
                                          median(rps), min(rps), max(rps)))
    if not rows:
        return None
    with open(data, "w") as f:
        f.write("\n".join(rows) + "\n")
    png = "throughput-%s.png" % scenario
    gnuplot("""set terminal png size 900,420
set output '%s'
set title 'Requests/s, %s (median, bars: min-max)'
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
set xtics rotate by -25 font ',8'
set grid ytics
plot '%s' using 0:2:xtic(1) with boxes notitle, '' using 0:2:3:4 with yerrorbars notitle lc rgb 'black'
""" % (png, scenario, os.path.basename(data)), out_dir)
    return png if os.path.exists(os.path.join(out_dir, png)) else None


def chart_cdf(doc, scenario, out_dir):
    plots = []
    for i, (key, label) in enumerate(doc["configs"].items()):
        runs = runs_of(doc, scenario, key)
        if not runs or not runs[0].get("cdf"):
            continue
        data = "cdf-%s-%s.dat" % (scenario, key)
        with open(os.path.join(out_dir, data), "w") as f:
            for latency, fraction in runs[0]["cdf"]:
                f.write("%f %f\n" % (latency, fraction))
        plots.append("'%s' using 1:2 with lines lw 2 title '%s'"
                     % (data, label.replace("'", "")))
    if not plots:
        return None
    png = "latency-cdf-%s.png" % scenario
    gnuplot("""set terminal png size 900,480
set output '%s'
set title 'Latency CDF, %s (first pair)'
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of requests'
set logscale x
set key bottom right font ',8'
set grid
plot %s
""" % (png, scenario, ", ".join(plots)), out_dir)
    return png if os.path.exists(os.path.join(out_dir, png)) else None


def chart_balance(doc, scenario, out_dir):
    plots, data_files = [], []
    for key, label in doc["configs"].items():
        runs = runs_of(doc, scenario, key)
        if not runs:
            continue
        buckets = runs[0].get("distribution", {}).get("buckets")
        if not buckets or len(buckets) < 2:
            continue
        total = float(sum(buckets)) or 1.0
        data = "balance-%s-%s.dat" % (scenario, key)
        with open(os.path.join(out_dir, data), "w") as f:
            for b, count in enumerate(buckets):
                f.write("%d %f\n" % (b, 100.0 * count / total))
        data_files.append(data)
        plots.append("'%s' using 1:2 with linespoints lw 2 title '%s'"
                     % (data, label.replace("'", "")))
    if not plots:
        return None
    png = "balance-%s.png" % scenario
    gnuplot("""set terminal png size 900,420
set output '%s'
set title 'Share of accepted connections per bucket, %s (first pair)'
set xlabel 'bucket'
set ylabel '%% of connections'
set yrange [0:*]
set xtics 1
set grid
set key font ',8'
plot %s
""" % (png, scenario, ", ".join(plots)), out_dir)
    return png if os.path.exists(os.path.join(out_dir, png)) else None


STEERING_ROWS = (("single bucket (one shared queue)", "pfb-1"),
                 ("hash (the kernel's, no program)", "pfb-N"),
                 ("cpu (classic BPF) + BucketCPUAffinity", "pfb-N-cpu"),
                 ("idle (eBPF)", "pfb-N-idle"))


def steering_section(doc):
    """ListenBucketSteering side by side, with the ratios its acceptance
    criteria name: idle p99 against one bucket and against hash on the
    heterogeneous scenario, idle throughput against hash on static."""
    if not any(r["config"] in ("pfb-N-cpu", "pfb-N-idle")
               and r["scenario"] in ("hetero", "static-close",
                                     "static-keepalive")
               for r in doc["runs"]):
        return []
    lines = ["", "## ListenBucketSteering", ""]
    for scenario in ("hetero", "static-close", "static-keepalive"):
        if not runs_of(doc, scenario, "pfb-N-idle"):
            continue
        lines += ["### %s" % scenario, "",
                  "| steering | req/s | p50 ms | p99 ms | p99.9 ms | runs |",
                  "|---|---|---|---|---|---|"]
        med = {}
        for label, key in STEERING_ROWS:
            runs = runs_of(doc, scenario, key)
            if not runs:
                continue
            med[key] = {m: median([r.get(m) for r in runs])
                        for m in ("rps", "p50", "p99", "p99.9")}
            lines.append("| %s | %s | %s | %s | %s | %d |" % (
                label, fmt(med[key]["rps"], 0), fmt(med[key]["p50"], 2),
                fmt(med[key]["p99"], 2), fmt(med[key]["p99.9"], 2),
                len(runs)))
        ratios = []
        if "pfb-N-idle" in med and "pfb-1" in med:
            ratios.append("idle p99 / single-bucket p99 = %.3f"
                          % (med["pfb-N-idle"]["p99"] / med["pfb-1"]["p99"]))
        if "pfb-N-idle" in med and "pfb-N" in med:
            ratios.append("idle p99 / hash p99 = %.3f"
                          % (med["pfb-N-idle"]["p99"] / med["pfb-N"]["p99"]))
            ratios.append("idle req/s / hash req/s = %.3f"
                          % (med["pfb-N-idle"]["rps"] / med["pfb-N"]["rps"]))
        if "pfb-N-cpu" in med and "pfb-N" in med:
            ratios.append("cpu req/s / hash req/s = %.3f"
                          % (med["pfb-N-cpu"]["rps"] / med["pfb-N"]["rps"]))
        lines += ["", "Ratios of medians: " + "; ".join(ratios) + ".", ""]
    return lines


def med(runs, get):
    return median([get(r) for r in runs])


def config_rows(doc, scenario, order=None):
    """(key, label, runs) for each configuration that ran a scenario, in
    the given order (else the run's)."""
    keys = [k for k in (order or doc["configs"]) if k in doc["configs"]]
    return [(k, doc["configs"][k], runs_of(doc, scenario, k)) for k in keys
            if runs_of(doc, scenario, k)]


def pool_cell(runs):
    kids = med(runs, lambda r: children_at_end(r)[0])
    status = med(runs, lambda r: children_at_end(r)[1])
    if isinstance(status, float) and math.isnan(status):
        return fmt(kids, 0)
    return "%s (status %s)" % (fmt(kids, 0), fmt(status, 0))


# Issue 14's row order.
TABLE_ORDER = ("stock", "pfb-shipped", "pfb-1", "pfb-single",
               "pfb-per-listen", "pfb-N", "pfb-N-idle", "pfb-N-cpu", "event",
               "nginx", "stock-ratio1", "pfb-ratio1")


def static_table(doc, scenario):
    base = runs_of(doc, scenario, doc["baseline"])
    base_rps = med(base, lambda r: r["rps"]) if base else float("nan")
    lines = ["| %s | req/s | × stock prefork | p99 ms | p99.9 ms | server "
             "CPU µs/req | children at end | Jain over children | errors |"
             % scenario, "|---" * 9 + "|"]
    for key, label, runs in config_rows(doc, scenario, TABLE_ORDER):
        rps = med(runs, lambda r: r["rps"])
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt(rps, 0), fmt(rps / base_rps, 2),
            fmt(med(runs, lambda r: r.get("p99")), 2),
            fmt(med(runs, lambda r: r.get("p99.9")), 2),
            fmt(med(runs, cpu_us_per_request), 0), pool_cell(runs),
            fmt(med(runs, child_jain), 3), error_cell(runs)))
    return lines


def error_cell(runs):
    errors = {}
    for r in runs:
        for k, v in r["errors"].items():
            if v:
                errors[k] = errors.get(k, 0) + v
    return ", ".join("%s %d" % kv for kv in sorted(errors.items())) or "0"


def hetero_table(doc):
    one = runs_of(doc, "hetero", "pfb-1")
    one_p99 = med(one, lambda r: r.get("p99")) if one else float("nan")
    lines = ["| hetero (exponential 10 ms) | req/s | p50 | p99 | p99.9 ms | "
             "p99 ÷ one bucket | children at end | Jain over children |",
             "|---" * 8 + "|"]
    for key, label, runs in config_rows(doc, "hetero", TABLE_ORDER):
        p99 = med(runs, lambda r: r.get("p99"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt(med(runs, lambda r: r["rps"]), 0),
            fmt(med(runs, lambda r: r.get("p50")), 2), fmt(p99, 2),
            fmt(med(runs, lambda r: r.get("p99.9")), 2),
            fmt(p99 / one_p99, 3), pool_cell(runs),
            fmt(med(runs, child_jain), 3)))
    return lines


def openloop_table(doc):
    """Tails at an equal offered rate: each openNN scenario's rate is NN %
    of stock event's closed-loop static-close req/s in the same run."""
    names = sorted({r["scenario"] for r in doc["runs"]
                    if re.fullmatch(r"open\d+", r["scenario"])},
                   key=lambda n: int(n[4:]))
    if not names:
        return []
    rates = doc.get("open_rates", {})
    lines = ["", "| open loop | offered req/s | achieved | p50 | p99 | "
             "p99.9 ms | errors | generator lag p99 ms |", "|---" * 8 + "|"]
    for n in names:
        for key, label, runs in config_rows(doc, n, TABLE_ORDER):
            lines.append("| %s, %s %% of event | %s | %s | %s | %s | %s | "
                         "%s | %s |" % (
                             label, n[4:], rates.get(n, "?"),
                             fmt(med(runs, lambda r: r["rps"]), 0),
                             fmt(med(runs, lambda r: r.get("p50")), 2),
                             fmt(med(runs, lambda r: r.get("p99")), 2),
                             fmt(med(runs, lambda r: r.get("p99.9")), 2),
                             error_cell(runs),
                             fmt(max(r.get("send_lag_p99", 0)
                                     for r in runs), 2)))
    lines += ["", "Latency counts from when each request was due (no "
              "coordinated omission). The last column is how late the "
              "generator itself sent (99th percentile, worst of its "
              "processes); that lag is charged to the server too, so where "
              "it is not small against p99 the generator was short of CPU."]
    return lines


def profile_16cpu_section(doc):
    """The table of issue 14 and its companions, when this run has them."""
    if not any(r["scenario"] in ("static-close", "hetero", "fourports")
               or re.fullmatch(r"open\d+", r["scenario"])
               for r in doc["runs"]) or doc["profile"] != "16cpu":
        return []
    st = doc["settings"]
    lines = ["", "## Summary (profile 16cpu)", "",
             "Scaled by %g to %d server CPUs: MaxRequestWorkers %s, "
             "StartServers %s, %s connections, wrk -t%s; hetero %s children "
             "and %d clients; %s buckets. Medians of %s interleaved pairs. "
             "Children at end: the server's children when the load "
             "stopped (and the status module's count); Jain over children "
             "from the status module where it answers (idle children "
             "included), else from the access log." % (
                 st.get("scale", 1), len(doc.get("server_cpus", [])),
                 st["workers"], st.get("start", st["workers"]),
                 st["connections"], st.get("wrk_threads", "?"),
                 st.get("hetero_workers", st["workers"]),
                 int(st.get("hetero_workers", st["workers"]) * 1.5),
                 doc.get("buckets"), st["pairs"]), ""]
    for scenario in ("static-close", "fourports"):
        if any(r["scenario"] == scenario for r in doc["runs"]):
            lines += static_table(doc, scenario) + [""]
    if runs_of(doc, "hetero", "pfb-1") or \
            any(r["scenario"] == "hetero" for r in doc["runs"]):
        lines += hetero_table(doc)
    lines += openloop_table(doc)
    return lines


def php_section(doc):
    if not any(r["scenario"] == "php" for r in doc["runs"]):
        if "php" in doc.get("unavailable", {}):
            return ["", "## php", "", "Not run: %s." %
                    doc["unavailable"]["php"]]
        return []
    st = dict(doc.get("php", {}))
    lines = ["", "## php (mod_php, mixed cost)", "",
             "test/load/php/mixed.php: 70 %% of requests ~1 ms of CPU, 30 %% "
             "0.2 ms of CPU and a 5–30 ms wait. %s clients (Connection: "
             "close) after a %s s warm-up; StartServers %s, Min/MaxSpare"
             "Servers %s/%s, MaxRequestWorkers %s. Memory: the children's "
             "total RSS and PSS (/proc/PID/smaps_rollup) when the load "
             "stopped; PSS shares each page among the processes mapping "
             "it, so it does not count the parent's shared pages once per "
             "child." % (st.get("clients"), st.get("php_warmup"),
                         st.get("php_start"), st.get("php_min_spare"),
                         st.get("php_max_spare"), st.get("php_workers")), "",
             "| php | req/s | p50 | p99 | p99.9 ms | errors | children at "
             "end | RSS MB | PSS MB | RSS MB / child | PSS MB / child | "
             "CPU µs/req |", "|---" * 12 + "|"]
    for key, label, runs in config_rows(doc, "php", TABLE_ORDER):
        rss = med(runs, lambda r: r.get("memory", {}).get("rss_kb"))
        pss = med(runs, lambda r: r.get("memory", {}).get("pss_kb"))
        kids = med(runs, lambda r: r.get("children_end"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                     "%s | %s |" % (
                         label, fmt(med(runs, lambda r: r["rps"]), 0),
                         fmt(med(runs, lambda r: r.get("p50")), 2),
                         fmt(med(runs, lambda r: r.get("p99")), 2),
                         fmt(med(runs, lambda r: r.get("p99.9")), 2),
                         error_cell(runs), pool_cell(runs),
                         fmt(rss / 1024.0, 1), fmt(pss / 1024.0, 1),
                         fmt(rss / 1024.0 / kids, 1) if kids else "n/a",
                         fmt(pss / 1024.0 / kids, 1) if kids else "n/a",
                         fmt(med(runs, cpu_us_per_request), 0)))
    return lines


def share_cell(runs):
    """Median share of accepted connections per bucket, in percent."""
    shares = []
    for r in runs:
        b = r.get("distribution", {}).get("buckets")
        if b and sum(b):
            shares.append([100.0 * n / sum(b) for n in b])
    if not shares or len({len(s) for s in shares}) != 1:
        return "n/a"
    return " / ".join("%.0f" % median([s[i] for s in shares])
                      for i in range(len(shares[0])))


def rps_section(doc):
    names = [n for n in ("rps", "rps-half")
             if any(r["scenario"] == n for r in doc["runs"])
             or n in doc.get("unavailable", {})]
    lines = []
    for n in names:
        if n in doc.get("unavailable", {}):
            lines += ["", "## %s" % n, "", "Not run: %s." %
                      doc["unavailable"][n]]
            continue
        runs0 = [r for r in doc["runs"] if r["scenario"] == n
                 and "rps_cpus" in r]
        rps_cpus = runs0[0]["rps_cpus"] if runs0 else []
        lines += ["", "## %s: a veth pair and RPS (server CPUs %s, RPS "
                  "CPUs %s)" % (n, ",".join(map(str, doc.get(
                      "server_cpus", []))), ",".join(map(str, rps_cpus))),
                  "", "The load generator runs in a network namespace; the "
                  "server's side of the veth spreads flows over the RPS "
                  "CPUs, where each SYN is processed. Bucket j belongs to "
                  "the j-th server CPU. 'On RPS CPUs' buckets' is the share "
                  "of connections accepted in the buckets of the CPUs RPS "
                  "uses: where RPS covers only some CPUs, cpu steering "
                  "should put every connection there (each landed on the "
                  "bucket of the CPU that received it), hash and idle about "
                  "those CPUs' share of the buckets.", "",
                  "| %s | req/s | p50 | p99 | p99.9 ms | connections per "
                  "bucket %% | Jain buckets | on RPS CPUs' buckets %% | "
                  "errors |" % n, "|---" * 9 + "|"]
        for key, label, runs in config_rows(doc, n, TABLE_ORDER):
            local = med(runs, lambda r: r.get("rps_local_share"))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, fmt(med(runs, lambda r: r["rps"]), 0),
                fmt(med(runs, lambda r: r.get("p50")), 2),
                fmt(med(runs, lambda r: r.get("p99")), 2),
                fmt(med(runs, lambda r: r.get("p99.9")), 2),
                share_cell(runs),
                fmt(med(runs, lambda r: r.get("distribution", {}).get(
                    "bucket_jain")), 3),
                fmt(100.0 * local, 1), error_cell(runs)))
    return lines


def write_report(doc, out_dir):
    host = doc["host"]
    lines = ["# Load-test report", "",
             "Command: `%s` (profile %s, %s pairs, %s s runs); took %s s."
             % (doc.get("command", "suite.py"), doc["profile"],
                doc["settings"]["pairs"], doc["settings"]["seconds"],
                doc.get("elapsed_s", "?")), "",
             "Configurations ran interleaved (A B C ... A B C ...), each run "
             "on a freshly started server. Ratios compare medians with "
             "Debian's stock prefork. On a small, shared machine only the "
             "ratios within one run mean anything.", "", "## Host", "",
             "| | |", "|---|---|"]
    for k, v in host.items():
        lines.append("| %s | %s |" % (k, v))
    charts = []
    scenarios = []
    for r in doc["runs"]:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    for scenario in scenarios:
        lines += ["", "## %s" % scenario, ""]
        lines += scenario_table(doc, scenario)
        for chart in (chart_throughput(doc, scenario, out_dir),
                      chart_cdf(doc, scenario, out_dir),
                      chart_balance(doc, scenario, out_dir)):
            if chart:
                charts.append(chart)
                lines += ["", "![%s](%s)" % (chart, chart)]
    lines += steering_section(doc)
    lines += profile_16cpu_section(doc)
    lines += php_section(doc)
    lines += rps_section(doc)
    if doc.get("syscalls"):
        lines += ["", "## System calls per request (sampled `strace -c -f`, "
                  "1000 requests, ab -c 4)", "",
                  "| configuration | calls/request | most frequent |",
                  "|---|---|---|"]
        for key, s in doc["syscalls"].items():
            lines.append("| %s | %s | %s |" % (
                doc["configs"].get(key, key), s.get("per_request", "n/a"),
                ", ".join("%s %.2f" % kv for kv in s.get("top", {}).items())))
    if not charts:
        lines += ["", "(no charts: install gnuplot-nox)"]
    lines += ["", "Raw data: results.json, results.csv; commands and tool "
              "output: raw.log.", ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    return os.path.join(out_dir, "report.md")


if __name__ == "__main__":
    path = sys.argv[1]
    with open(path) as f:
        print(write_report(json.load(f), os.path.dirname(path)))
