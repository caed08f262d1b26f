# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Writes the load suite's report.md and gnuplot charts from its results.

  python3 bench/report.py bench-results/suite-.../results.json
  python3 bench/report.py bench/results/DIR/NAME.results.json.gz
      # -> bench/results/DIR/NAME.report.md

Every run's percentiles are taken again from its latency histogram
(latency/*.hist.gz, see stats.py) where the folder has it, loose or in
its raw.tar.xz (pack.py), so a published folder's report can be rebuilt,
and runs merged, from the raw latencies; a packed folder is packed again
after (its chart data goes back into the archive).  Runs marked invalid
(their generator failed) are listed and left out of every median and
ratio; medians come with distribution-free 95 % confidence intervals
(stats.py), and ratios to the baseline are taken per pair.

Charts (PNG, when gnuplot is installed): throughput per configuration for
each scenario, latency CDFs for each scenario, and accepted connections per
bucket for the bucketed configurations.
"""

import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack  # noqa: E402
import report_idle  # noqa: E402
import report_rig  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "sim"))
import bucketsim  # noqa: E402
import stats  # noqa: E402
import validity  # noqa: E402

METRICS = ("rps", "p50", "p90", "p99", "p99.9")
PERCENTILE_KEYS = ("p50", "p90", "p99", "p99.9", "p99.99", "max")


def mark_invalid(doc):
    """Runs published before the suite marked them: the same rules."""
    bound = doc.get("max_lag_ms", validity.MAX_LAG_MS)
    foreign = doc.get("max_foreign_cpu", validity.MAX_FOREIGN_CPU)
    for r in doc["runs"]:
        if "skipped" not in r and "invalid" not in r:
            r["invalid"] = validity.judge_run(r["scenario"], r, bound,
                                              foreign)


def load(path):
    """results.json, or a published results.json.gz."""
    with pack.open_text(path) as f:
        return json.load(f)


def refresh_percentiles(doc, out_dir):
    """Each run's percentiles from its published latency file."""
    for r in doc["runs"]:
        path = r.get("latency_file")
        if not path or not pack.exists(os.path.join(out_dir, path)):
            continue
        summary = stats.hist_summary(stats.read_hist(
            os.path.join(out_dir, path)))
        for k in PERCENTILE_KEYS:
            r[k] = summary.get(k, r.get(k))


def pooled_percentiles(doc, out_dir, scenario, config):
    """Percentiles over every valid run's requests together, or None."""
    hists = []
    for r in runs_of(doc, scenario, config):
        path = r.get("latency_file")
        if path and pack.exists(os.path.join(out_dir, path)):
            hists.append(stats.read_hist(os.path.join(out_dir, path)))
    return stats.hist_summary(stats.merge_hists(hists)) if hists else None


def median(values):
    values = [v for v in values if v is not None and not
              (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else float("nan")


def fmt(v, digits=1):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return "%.*f" % (digits, v)


def cpu_us_per_request(run):
    """Server CPU microseconds per request served: on the rig, what the
    server's CPUs did (softirq included) less others' time there; else
    the server's CPU seconds (its cgroup, or its process group with
    reaped children) over the requests."""
    if run.get("server_cpus_s") is not None:
        return round(report_rig.server_cpu_us(run), 1)
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
    """The valid runs of a configuration in a scenario."""
    return [r for r in doc["runs"] if r["scenario"] == scenario
            and r["config"] == config and "skipped" not in r
            and not r.get("invalid")]


def invalid_runs(doc, scenario=None):
    return [r for r in doc["runs"] if r.get("invalid") and
            (scenario is None or r["scenario"] == scenario)]


def per_request(run, key):
    if not run.get("requests") or run.get(key) is None:
        return None
    return run[key] / float(run["requests"])


def ctx_per_request(run):
    return per_request(run, "ctx_switches")


def ctx_cell(runs):
    """Context switches per request: all (voluntary, the sleeps)."""
    total = median([ctx_per_request(r) for r in runs])
    vol = median([per_request(r, "ctx_voluntary") for r in runs])
    if isinstance(vol, float) and math.isnan(vol):
        return fmt(total, 2)
    return "%s (%s)" % (fmt(total, 2), fmt(vol, 2))


def ci_cell(runs, get, digits=1, scale=1.0):
    return stats.fmt_ci(stats.median_ci([get(r) for r in runs]), digits,
                        scale)


def ratio_cell(doc, scenario, runs, get, digits=2):
    """Per-pair ratio to the baseline's run of the same pair, with its
    interval; n/a when the baseline has no valid run in those pairs."""
    base = runs_of(doc, scenario, doc["baseline"])
    ratios = stats.paired_ratios(runs, base, get)
    return stats.fmt_ci(stats.median_ci(ratios), digits) if ratios \
        else "n/a"


def kernel_sum(runs, table, key):
    """Median over runs of one kernel counter (nstat or CPU time)."""
    return median([r.get("kernel", {}).get(table, {}).get(key)
                   for r in runs])


def scenario_table(doc, scenario, out_dir=None):
    """Two tables per scenario: the figures with their intervals, then
    what the kernel and the generator saw."""
    lines = ["| configuration | runs | req/s median [95 % CI] | × stock "
             "prefork (per pair) | p50 ms | p99 ms [CI] | p99.9 ms | server "
             "CPU µs/req [CI] | context switches/req (voluntary) | children "
             "at end |", "|---" * 10 + "|"]
    details = ["| configuration | errors | ListenOverflows | ListenDrops | "
               "server CPUs softirq s | server CPUs idle s | generator CPU s "
               "| generator lag p99 ms | p99 / p99.9 ms, all runs' requests "
               "| minor faults/req | served by a cold child | Jain buckets | "
               "Jain children |", "|---" * 13 + "|"]
    for key, label in doc["configs"].items():
        runs = runs_of(doc, scenario, key)
        skipped = [r for r in doc["runs"] if r["scenario"] == scenario
                   and r["config"] == key and "skipped" in r]
        bad = [r for r in invalid_runs(doc, scenario) if r["config"] == key]
        if skipped:
            lines.append("| %s | skipped: %s |%s" % (
                label, skipped[0]["skipped"], " |" * 8))
            continue
        if not runs and not bad:
            continue
        count = "%d" % len(runs) + (" (+%d invalid)" % len(bad) if bad
                                    else "")
        if not runs:
            lines.append("| %s | %s | no valid run |%s" % (label, count,
                                                           " |" * 7))
            continue
        dist = [r.get("distribution", {}) for r in runs]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, count, ci_cell(runs, lambda r: r["rps"], 0),
            ratio_cell(doc, scenario, runs, lambda r: r["rps"]),
            fmt(median([r.get("p50") for r in runs]), 2),
            ci_cell(runs, lambda r: r.get("p99"), 2),
            fmt(median([r.get("p99.9") for r in runs]), 2),
            ci_cell(runs, cpu_us_per_request, 0), ctx_cell(runs),
            pool_cell(runs)))
        pooled = pooled_percentiles(doc, out_dir, scenario, key) \
            if out_dir else None
        details.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                       "%s | %s | %s |" % (
                           label, error_cell(runs),
                           fmt(kernel_sum(runs, "nstat",
                                          "TcpExtListenOverflows"), 0),
                           fmt(kernel_sum(runs, "nstat",
                                          "TcpExtListenDrops"), 0),
                           fmt(kernel_sum(runs, "cpu_server", "softirq"), 2),
                           fmt(kernel_sum(runs, "cpu_server", "idle"), 2),
                           fmt(median([r.get("loadgen_cpu_s")
                                       for r in runs]), 2),
                           fmt(median([r.get("send_lag_p99")
                                       for r in runs]), 2),
                           "%s / %s" % (fmt(pooled["p99"], 2),
                                        fmt(pooled["p99.9"], 2))
                           if pooled else "n/a",
                           fmt(median([per_request(r, "minor_faults")
                                       for r in runs]), 2),
                           fmt(median([d.get("cold_share") for d in dist]),
                               2),
                           fmt(median([d.get("bucket_jain") for d in dist]),
                               4),
                           fmt(median([d.get("child_jain") for d in dist]),
                               4)))
    return lines + [""] + details


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
                 ("idle (eBPF)", "pfb-N-idle"),
                 ("local (eBPF) + BucketCPUAffinity", "pfb-N-local"))


def steering_section(doc):
    """ListenBucketSteering side by side, with the ratios its acceptance
    criteria name: idle p99 against one bucket and against hash on the
    heterogeneous scenario, idle throughput against hash on static."""
    if not any(r["config"] in ("pfb-N-cpu", "pfb-N-idle", "pfb-N-local")
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


# The first 16-CPU table's row order.
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
    """The first 16-CPU table and its companions, when this run has them."""
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
             "bench/php/mixed.php: 70 %% of requests ~1 ms of CPU, 30 %% "
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


# The anchors profile's differences: (what it isolates, the more costly
# configuration, the cheaper one).
DIFFERENCES = (
    ("a process per connection", "anchor-blocking", "anchor-epoll"),
    ("httpd's lingering close (blocking)", "anchor-blocking-linger",
     "anchor-blocking"),
    ("httpd's core (this MPM's floor)", "pfb-floor", "anchor-blocking"),
    ("configuration (Debian's defaults, the file, the log, ExtendedStatus)",
     "pfb-1", "pfb-floor"),
    ("this MPM before the lingering-close change", "pfb-1-before", "pfb-1"),
    ("serving away from the receiving CPU (the model's cross cost)",
     "pfb-N-cpu-away", "pfb-N-cpu"),
    ("nginx as shipped against tuned", "nginx", "nginx-tuned"),
    ("this MPM against nginx tuned", "pfb-1", "nginx-tuned"),
)


def paired_differences(doc, scenario, a, b, get):
    """get(run of a) - get(run of b), per pair."""
    base = {r["pair"]: get(r) for r in runs_of(doc, scenario, b)}
    diffs = []
    for r in runs_of(doc, scenario, a):
        x, y = get(r), base.get(r["pair"])
        if x is not None and y is not None:
            diffs.append(x - y)
    return diffs


def before_after_section(doc):
    """Each configuration beside the same one run on an earlier build
    (--mpm-before: KEY-before), as per-pair ratios, after over before."""
    keys = [k for k in doc["configs"] if k + "-before" in doc["configs"]]
    scenarios = []
    for r in doc["runs"]:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    rows = []
    for scenario in scenarios:
        for key in keys:
            after = runs_of(doc, scenario, key)
            before = runs_of(doc, scenario, key + "-before")
            if not after or not before:
                continue
            for what, get in (("req/s", lambda r: r.get("rps")),
                              ("server CPU µs/req", cpu_us_per_request)):
                ci = stats.median_ci(stats.paired_ratios(after, before, get))
                if ci is None:
                    continue
                if ci[3] < stats.LEVEL:
                    verdict = "too few pairs to judge"
                elif ci[1] <= 1.0 <= ci[2]:
                    verdict = "no difference detected"
                else:
                    verdict = "higher after" if ci[1] > 1.0 else "lower after"
                rows.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    scenario, doc["configs"][key], what,
                    stats.fmt_ci(stats.median_ci([get(r) for r in after]),
                                 1),
                    stats.fmt_ci(stats.median_ci([get(r) for r in before]),
                                 1),
                    stats.fmt_ci(ci, 3), verdict))
    if not rows:
        return []
    return ["", "## This build against the earlier one", "",
            "Each configuration beside the same configuration on the build "
            "given with `--mpm-before`, in the same pairs: the ratio after "
            "over before is taken per pair, and its median carries the "
            "interval. Where the interval holds 1: no difference detected.",
            "", "| scenario | configuration | figure | after [CI] | before "
            "[CI] | after / before, per pair [CI] | verdict |",
            "|---" * 7 + "|"] + rows


def anchors_section(doc):
    """Server CPU per request at the fixed rate, peak throughput and the
    per-request counts, side by side, and the differences they isolate."""
    keys = [k for k in doc["configs"] if k.startswith("anchor-")
            or k in ("pfb-floor", "pfb-1-before")]
    if not keys or not any(runs_of(doc, s, k) for k in keys
                           for s in ("rate", "static-close")):
        return []
    rate = doc["settings"].get("open_rate")
    lines = ["", "## Anchors, floors and servers side by side", "",
             "Server CPU per request from each server's own cgroup at %s "
             "req/s offered in open loop (scenario `rate`, below every "
             "server's saturation), peak closed-loop req/s (`static-close`, "
             "a connection per request) and keep-alive req/s "
             "(`keepalive100`, 100 requests per connection); generator on "
             "CPUs %s, servers on %s. Medians [95 %% CI] over valid runs." % (
                 rate, ",".join(map(str, doc.get("client_cpus", []))),
                 ",".join(map(str, doc.get("server_cpus", [])))), "",
             "| configuration | CPU µs/req at %s req/s | context switches/req "
             "(voluntary) | p99 ms at that rate | peak req/s, close | req/s, keep-alive "
             "100 | system calls/req | poll per accept |" % rate,
             "|---" * 8 + "|"]
    for key, label in doc["configs"].items():
        at_rate = runs_of(doc, "rate", key)
        peak = runs_of(doc, "static-close", key)
        keep = runs_of(doc, "keepalive100", key)
        if not (at_rate or peak or keep):
            continue
        sc = doc.get("syscalls", {}).get(key, {})
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, ci_cell(at_rate, cpu_us_per_request, 1),
            ctx_cell(at_rate),
            fmt(median([r.get("p99") for r in at_rate]), 2),
            ci_cell(peak, lambda r: r["rps"], 0),
            ci_cell(keep, lambda r: r["rps"], 0),
            sc.get("per_request", "n/a"),
            fmt(sc.get("poll_per_accept"), 2)))
    lines += ["", "Differences of server CPU µs per request at the fixed "
              "rate, per pair (median [95 % CI]):", ""]
    for what, a, b in DIFFERENCES:
        diffs = paired_differences(doc, "rate", a, b, cpu_us_per_request)
        if diffs:
            lines.append("- %s: %s − %s = %s µs" % (
                what, a, b, stats.fmt_ci(stats.median_ci(diffs), 1)))
    return lines


def crossnode_section(doc):
    """The model's cross-node cost: server CPU per request with every
    connection served away from the CPU that received it, minus served
    on it (per pair), in the rps scenario."""
    diffs = paired_differences(doc, "rps", "pfb-N-cpu-away", "pfb-N-cpu",
                               cpu_us_per_request)
    if not diffs:
        return []
    p99 = paired_differences(doc, "rps", "pfb-N-cpu-away", "pfb-N-cpu",
                             lambda r: r.get("p99"))
    return ["", "## Cost of serving away from the receiving CPU", "",
            "Server CPU per request with cpu steering's children pinned "
            "half the CPU list away from their bucket's CPU, minus with "
            "them on it, per pair: %s µs (the model's cross cost: "
            "`bench/sim/twosocket.py --x-away-us`); p99 difference %s "
            "ms." % (stats.fmt_ci(stats.median_ci(diffs), 1),
                     stats.fmt_ci(stats.median_ci(p99), 2))]


def pool_section(doc):
    """Requests/s and CPU per request against the pool's size."""
    sizes = sorted({int(r["scenario"][4:]) for r in doc["runs"]
                    if re.fullmatch(r"pool\d+", r["scenario"])})
    if not sizes:
        return []
    lines = ["", "## Cost against the pool's size (static close, %s "
             "connections)" % doc["settings"].get("connections"), "",
             "req/s median [95 % CI], server CPU µs per request and the "
             "share of requests served by a cold child (one that had waited "
             "through more than 64 others' requests since its last) for "
             "each pool; the last column is the largest pool's req/s over "
             "the smallest's, per pair.", "",
             "| configuration | " + " | ".join(
                 "%d children: req/s, CPU µs/req, cold" % n for n in sizes)
             + " | %d ÷ %d |" % (sizes[-1], sizes[0]),
             "|---" * (len(sizes) + 2) + "|"]
    for key, label in doc["configs"].items():
        cells = []
        for n in sizes:
            runs = runs_of(doc, "pool%d" % n, key)
            cells.append("%s, %s, %s" % (
                ci_cell(runs, lambda r: r["rps"], 0),
                fmt(median([cpu_us_per_request(r) for r in runs]), 0),
                fmt(median([r.get("distribution", {}).get("cold_share")
                            for r in runs]), 2)) if runs else "n/a")
        if all(c == "n/a" for c in cells):
            continue
        big = runs_of(doc, "pool%d" % sizes[-1], key)
        small = runs_of(doc, "pool%d" % sizes[0], key)
        ratios = stats.paired_ratios(big, small, lambda r: r["rps"])
        lines.append("| %s | %s | %s |" % (
            label, " | ".join(cells),
            stats.fmt_ci(stats.median_ci(ratios), 2) if ratios else "n/a"))
    return lines


def invalid_section(doc):
    bad = invalid_runs(doc)
    if not bad:
        return []
    lines = ["", "## Invalid runs (left out of every median and ratio)", "",
             "| scenario | configuration | pair | why |", "|---|---|---|---|"]
    for r in bad:
        lines.append("| %s | %s | %s | %s |" % (
            r["scenario"], doc["configs"].get(r["config"], r["config"]),
            r.get("pair"), "; ".join(r["invalid"])))
    return lines


def host_state_lines(doc):
    state = doc.get("host_state")
    if not state:
        return []
    lines = ["", "## Host state", "", "| | |", "|---|---|"]
    for k, v in state.items():
        if isinstance(v, dict):
            v = "; ".join("%s: %s" % kv for kv in v.items())
        lines.append("| %s | %s |" % (k, str(v).replace("|", "/")))
    return lines


def write_report(doc, out_dir, name="report.md"):
    mark_invalid(doc)
    refresh_percentiles(doc, out_dir)
    host = doc["host"]
    lines = ["# Load-test report", "",
             "Command: `%s` (profile %s, %s pairs, %s s runs after %s s of "
             "warm-up each); took %s s. Project commit %s; run order seed "
             "%s; httpd configurations with %s." % (
                 doc.get("command", "suite.py"), doc["profile"],
                 doc["settings"]["pairs"], doc["settings"]["seconds"],
                 doc["settings"].get("warmup", 0), doc.get("elapsed_s", "?"),
                 doc.get("host_state", {}).get("commit", "n/a"),
                 doc.get("seed", "n/a"),
                 "Debian's apache2.conf defaults" if doc.get("conf_base",
                                                            "bare")
                 == "debian" else "the harness's bare configuration"), "",
             "Each pair runs every configuration once, in an order shuffled "
             "for the pair, each on a freshly started, warmed-up server. "
             "Medians carry distribution-free 95 % confidence intervals "
             "(with fewer than 6 runs, min–max and its lower coverage in "
             "parentheses); ratios to Debian's stock prefork are taken per "
             "pair. Runs whose generator failed are listed at the end and "
             "left out. On a small, shared machine only the ratios within "
             "one run mean anything.", "", "## Host", "",
             "| | |", "|---|---|"]
    for k, v in host.items():
        lines.append("| %s | %s |" % (k, v))
    charts = []
    scenarios = []
    for r in doc["runs"]:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    lines += report_idle.describe_lines(doc)
    # One view per idle policy: every table compares configurations run
    # under the same one (charts from the first).
    for policy, view in report_idle.policy_views(doc):
        for scenario in scenarios:
            lines += ["", "## %s%s" % (scenario,
                                       report_idle.heading(policy, doc)), ""]
            lines += scenario_table(view, scenario, out_dir)
            # A published folder's NAME.report.md adds no chart beside the
            # published ones.
            for chart in (chart_throughput(view, scenario, out_dir),
                          chart_cdf(view, scenario, out_dir),
                          chart_balance(view, scenario, out_dir)) \
                    if name == "report.md" and policy in (None, "default") \
                    else ():
                if chart:
                    charts.append(chart)
                    lines += ["", "![%s](%s)" % (chart, chart)]
        for section in (report_rig.rig_section, before_after_section,
                        anchors_section, pool_section, crossnode_section,
                        steering_section, profile_16cpu_section, php_section,
                        rps_section):
            part = section(view)
            heads = [i for i, line in enumerate(part)
                     if line.startswith("## ")]
            if heads and policy is not None:
                part[heads[0]] += report_idle.heading(policy, doc)
            lines += part
    lines += report_idle.effect_section(doc)
    lines += report_idle.beside_section(doc)
    lines += report_rig.kevents_section(doc)
    if doc.get("syscalls"):
        lines += ["", "## System calls per request (sampled `strace -c -f`, "
                  "1000 requests, ab -c 4)", "",
                  "| configuration | calls/request | poll per accept | "
                  "most frequent |", "|---|---|---|---|"]
        for key, s in doc["syscalls"].items():
            lines.append("| %s | %s | %s | %s |" % (
                doc["configs"].get(key, key), s.get("per_request", "n/a"),
                fmt(s.get("poll_per_accept"), 2),
                ", ".join("%s %.2f" % kv for kv in s.get("top", {}).items())))
    lines += invalid_section(doc)
    lines += host_state_lines(doc)
    if not charts and name == "report.md":
        lines += ["", "(no charts: install gnuplot-nox)"]
    lines += ["", "Raw data: results.json, results.csv, every request's "
              "latency in latency/*.hist.gz (report.py rebuilds this report "
              "from them), the servers' configurations in configs/; "
              "commands and tool output: raw.log.", ""]
    with open(os.path.join(out_dir, name), "w") as f:
        f.write("\n".join(lines))
    pack.keep_shape(out_dir)
    return os.path.join(out_dir, name)


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
    workers = prof.get("hetero_workers") or prof["workers"]
    path = bucketsim.write_report(measured, workers, int(workers * 1.5),
                                  doc["host"]["cpus_usable"],
                                  os.path.join(out_dir, "sim-report.md"))
    print("model: %s" % path)


def write_csv(doc, path):
    fields = ["scenario", "config", "pair", "position", "invalid", "rps",
              "p50", "p90", "p99", "p99.9", "max", "errors", "server_cpu_s",
              "loadgen_cpu_s", "ctx_switches", "bucket_jain", "child_jain",
              "faults", "cpu_us_per_request", "children_end",
              "status_children", "status_child_jain", "rss_kb", "pss_kb",
              "rps_local_share", "listen_overflows", "listen_drops",
              "server_softirq_s", "server_idle_s", "send_lag_p99",
              "latency_file"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for r in doc["runs"]:
            if "skipped" in r:
                continue
            d = r.get("distribution", {})
            k = r.get("kernel", {})
            w.writerow([r["scenario"], r["config"], r["pair"],
                        r.get("position"), "; ".join(r.get("invalid", [])),
                        round(r.get("rps", 0.0), 1), r.get("p50"),
                        r.get("p90"), r.get("p99"), r.get("p99.9"),
                        r.get("max"), json.dumps(r["errors"]),
                        r.get("server_cpu_s"), r.get("loadgen_cpu_s"),
                        r.get("ctx_switches"), d.get("bucket_jain"),
                        d.get("child_jain"), r.get("faults"),
                        cpu_us_per_request(r),
                        r.get("children_end"), d.get("status_children"),
                        d.get("status_child_jain"),
                        r.get("memory", {}).get("rss_kb"),
                        r.get("memory", {}).get("pss_kb"),
                        r.get("rps_local_share"),
                        k.get("nstat", {}).get("TcpExtListenOverflows"),
                        k.get("nstat", {}).get("TcpExtListenDrops"),
                        k.get("cpu_server", {}).get("softirq"),
                        k.get("cpu_server", {}).get("idle"),
                        r.get("send_lag_p99"), r.get("latency_file")])


if __name__ == "__main__":
    path = sys.argv[1]
    # A published X.results.json.gz gets X.report.md beside it.
    out_name = os.path.basename(path).replace(".results.json.gz",
                                              ".report.md") \
        if path.endswith(".results.json.gz") else "report.md"
    print(write_report(load(path), os.path.dirname(path) or ".", out_name))
