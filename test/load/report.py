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


def runs_of(doc, scenario, config):
    return [r for r in doc["runs"] if r["scenario"] == scenario
            and r["config"] == config and "skipped" not in r]


def scenario_table(doc, scenario):
    lines = ["| configuration | req/s median (min–max) | p50 | p90 | p99 | "
             "p99.9 ms | errors | server CPU s | loadgen CPU s | ctx sw. | "
             "Jain buckets | Jain children | req/s ÷ stock | p99 ÷ stock |",
             "|---" * 14 + "|"]
    base = runs_of(doc, scenario, doc["baseline"])
    base_rps = median([r["rps"] for r in base]) if base else float("nan")
    base_p99 = median([r.get("p99") for r in base]) if base else float("nan")
    for key, label in doc["configs"].items():
        runs = runs_of(doc, scenario, key)
        skipped = [r for r in doc["runs"] if r["scenario"] == scenario
                   and r["config"] == key and "skipped" in r]
        if skipped:
            lines.append("| %s | skipped: %s |%s" % (
                label, skipped[0]["skipped"], " |" * 12))
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
            " %s | %s | %s |" % (
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
                fmt(m["p99"] / base_p99, 3) if base_p99 else "n/a"))
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
