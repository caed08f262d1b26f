# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The pool curve's report (poolcurve.py): server CPU per request and
tails for each build and pool, at each rate and idle policy, with 95 %
intervals and each pool's per-pair ratio to the smallest; the growth per
child against the model's prediction (the folder's prediction.json,
written before the run); the counts of each session's counted window."""

import json
import math
import os

import idlepolicy
import pack
import stats

SATURATED = "achieved "
# What follows from a saturated server at a fixed rate: its accept queue
# overflows, and the requests it owes pile up until the generator's own
# limit of outstanding requests (openloop --max-outstanding) is reached.
WITH_SATURATION = ("ListenOverflows", "generator generator_limit")


def only_saturated(reasons):
    """Whether a run's only faults are the server's at that rate: it
    completed under 97 % of it, and at most what follows from that."""
    return any(why.startswith(SATURATED) for why in reasons) and all(
        why.startswith((SATURATED,) + WITH_SATURATION) for why in reasons)


def cpu_us(run):
    """The rig's server CPU per request (µs): the server CPU's busy time
    less others' time there, over the requests served."""
    if run.get("server_cpus_s") is None or not run.get("requests"):
        return None
    return run["server_cpus_s"] * 1e6 / run["requests"]


def report_builds(doc):
    """The builds of the report's tables: each build, then, where the
    folder has them (poolcurve.py --after-graceful), each build's runs
    right after a graceful restart, as a variant of its own."""
    s = doc["settings"]
    return list(s["builds"]) + ([b + "+graceful" for b in s["builds"]]
                                if s.get("after_graceful") else [])


def cell_runs(doc, build, pool, rate, policy):
    """{pair: run} of one cell: each pair's latest attempt that is valid
    or saturated (saturation is the server's result); host or generator
    faults are left out."""
    found = {}
    for r in doc["runs"]:
        if r["config"] != build or r["pool"] != pool or r["rate"] != rate \
                or r.get("idle_policy") != policy:
            continue
        if r.get("invalid") and not only_saturated(r["invalid"]):
            continue
        old = found.get(r["pair"])
        if old is None or r["attempt"] > old["attempt"]:
            found[r["pair"]] = r
    return found


def verdict(result, unit=1.0):
    """'no difference detected' where the interval holds `unit`, else
    which way the difference goes."""
    if result is None:
        return ""
    _, low, high, _ = result
    if low <= unit <= high:
        return "no difference detected"
    return "higher" if low > unit else "lower"


def ci_text(values, digits):
    values = [v for v in values if v is not None]
    return stats.fmt_ci(stats.median_ci(values), digits) if values else "–"


def pair_ratios(runs, base, get):
    out = []
    for pair, run in runs.items():
        b = base.get(pair)
        if b is None or b.get("invalid") or run.get("invalid"):
            continue
        x, y = get(run), get(b)
        if x is not None and y:
            out.append(x / y)
    return out


def pair_slopes(doc, build, rate, policy, pools):
    """Per pair, the least-squares slope of server CPU µs per request
    against the pool (valid runs, at least two pools), in ns per child."""
    by_pair = {}
    for pool in pools:
        for pair, run in cell_runs(doc, build, pool, rate, policy).items():
            if not run.get("invalid") and cpu_us(run) is not None:
                by_pair.setdefault(pair, []).append((pool, cpu_us(run)))
    slopes = []
    for points in by_pair.values():
        if len(points) < 2:
            continue
        n = float(len(points))
        mx = sum(p for p, _ in points) / n
        my = sum(c for _, c in points) / n
        sxx = sum((p - mx) ** 2 for p, _ in points)
        if sxx > 0:
            slopes.append(1e3 * sum((p - mx) * (c - my) for p, c in points)
                          / sxx)
    return slopes


def load_prediction(doc):
    """The model's prediction the run names (poolcurve.py --prediction, a
    prediction.json written before the run), or None."""
    path = doc["settings"].get("prediction")
    if not path:
        return None
    # Folders made before the results moved name docs/bench/.
    if path.startswith("docs/bench/"):
        path = "bench/results/" + path[len("docs/bench/"):]
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(top, path)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _fmt(value, digits):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "%.*f" % (digits, value)


def curve_table(doc, rate, policy):
    s = doc["settings"]
    pools = sorted(s["pools"])
    lines = ["", "### %d req/s, idle: %s" % (
        rate, idlepolicy.label(policy, doc.get("idle"))), "",
        "| build | children | pairs (valid / saturated) | server CPU µs/req "
        "[95 %% CI] | × %d children, per pair [CI] | verdict | p99 ms [CI] | "
        "p99.9 ms (median) | achieved req/s (median) |" % pools[0],
        "|---|---|---|---|---|---|---|---|---|"]
    for build in report_builds(doc):
        base = cell_runs(doc, build, pools[0], rate, policy)
        for pool in pools:
            runs = cell_runs(doc, build, pool, rate, policy)
            valid = [r for r in runs.values() if not r.get("invalid")]
            saturated = len(runs) - len(valid)
            ratios = pair_ratios(runs, base, cpu_us) if pool != pools[0] \
                else []
            result = stats.median_ci(ratios) if ratios else None
            lines.append("| %s | %d | %d / %d | %s | %s | %s | %s | %s | %s |"
                         % (doc["configs"].get(build, build), pool,
                            len(valid), saturated,
                            ci_text([cpu_us(r) for r in valid], 1),
                            stats.fmt_ci(result, 2) if result else "–",
                            verdict(result) if len(ratios) > 1 else "",
                            ci_text([r.get("p99") for r in valid], 2),
                            _fmt(median([r.get("p99.9") for r in valid]), 2),
                            _fmt(median([r.get("rps") for r in
                                         runs.values()]), 0)))
    return lines


def median(values):
    values = [v for v in values if v is not None]
    return stats.median_ci(values)[0] if values else None


def slope_table(doc):
    s = doc["settings"]
    pools = sorted(s["pools"])
    prediction = load_prediction(doc)
    lines = ["", "## Growth per child against the model", "",
             "Per pair, the least-squares slope of server CPU µs per "
             "request against the pool over the pools with a valid run, in "
             "ns per child; median [95 %% CI] over the pairs.%s" % (
                 " The model's prediction (%s, made at commit %s, before "
                 "the run) is the per-entry cost c of the listener's wait "
                 "queue, per build." % (
                     doc["settings"]["prediction"].replace(".json", ".md"),
                     prediction.get("commit", "?")[:7]) if prediction else
                 " (No prediction named.)"), "",
             "| build | rate | idle policy | ns per child [CI] | pairs | "
             "predicted ns per child | against the prediction |",
             "|---|---|---|---|---|---|---|"]
    for build in report_builds(doc):
        for rate in s["rates"]:
            for policy in s["policies"]:
                slopes = pair_slopes(doc, build, rate, policy, pools)
                pred = (prediction or {}).get("slope_ns", {}).get(build)
                lines.append("| %s | %d | %s | %s | %d | %s | %s |" % (
                    doc["configs"].get(build, build), rate,
                    idlepolicy.label(policy, doc.get("idle")),
                    ci_text(slopes, 0), len(slopes),
                    "%s to %s" % tuple(pred) if pred else "–",
                    against_prediction(slopes, pred)))
    return lines


def against_prediction(slopes, pred):
    """Where the measured growth's interval lies against the predicted
    range: overlapping it (the model is not falsified), or clear of it,
    below or above."""
    if not pred or len(slopes) < 2:
        return ""
    _, low, high, _ = stats.median_ci(slopes)
    if high < pred[0]:
        return "below the prediction"
    if low > pred[1]:
        return "above the prediction"
    return "overlaps the prediction"


def summary_table(doc):
    """One row per build and larger pool: per (rate, policy), the per-pair
    ratio of server CPU per request against the smallest pool, its
    interval and verdict, or how many pairs saturated."""
    s = doc["settings"]
    pools = sorted(s["pools"])
    cells = [(rate, policy) for rate in s["rates"] for policy in
             s["policies"]]
    lines = ["", "## Summary: server CPU per request against %d children"
             % pools[0], "",
             "Per pair, server CPU µs per request at the pool over the same "
             "build's at %d children, same rate and idle policy; median "
             "[95 %% CI] (valid pairs), then the verdict; \"saturated\" "
             "where every pair completed under 97 %% of the rate." % pools[0],
             "", "| build | children | " + " | ".join(
                 "%d req/s, %s" % (rate,
                                   idlepolicy.label(policy, doc.get("idle")))
                 for rate, policy in cells) + " |",
             "|---|---|" + "---|" * len(cells)]
    for build in s["builds"]:
        for pool in pools[1:]:
            row = [doc["configs"].get(build, build), str(pool)]
            for rate, policy in cells:
                base = cell_runs(doc, build, pools[0], rate, policy)
                runs = cell_runs(doc, build, pool, rate, policy)
                valid = {k: r for k, r in runs.items()
                         if not r.get("invalid")}
                ratios = pair_ratios(valid, base, cpu_us)
                if runs and not valid:
                    row.append("saturated (%d of %d pairs)"
                               % (len(runs), len(runs)))
                elif len(ratios) > 1:
                    result = stats.median_ci(ratios)
                    row.append("%s, %s (%d pairs%s)" % (
                        stats.fmt_ci(result, 2), verdict(result),
                        len(ratios), ", %d saturated" % (len(runs) -
                                                         len(valid))
                        if len(runs) > len(valid) else ""))
                else:
                    row.append("–")
            lines.append("| " + " | ".join(row) + " |")
    return lines


COUNT_COLUMNS = (("system calls/req", "syscalls_per_request", 2),
                 ("wake-ups/accept", "wakeups_per_accept", 2),
                 ("sleeps/req", "voluntary_per_request", 2),
                 ("page faults/req", "faults_per_request", 2),
                 ("NET_RX µs/connection", "netrx_us_per_connection", 1))


def counts_table(doc):
    s = doc["settings"]
    lines = ["", "## Counts per request (each session's counted window)", "",
             "The kernel-event counter (build/kevents: tracepoints) around "
             "%d s at %d req/s after the timed runs, under the default idle "
             "policy; medians over the sessions [min, max]. Beside them, "
             "from the timed runs at %d req/s: halts and IPIs per request "
             "on the server CPU, per idle policy; and the reuse distance "
             "(median requests since the serving child's previous one)." % (
                 s["count_seconds"], s["warm_rate"], s["warm_rate"]), "",
             "| build | children | sessions | " + " | ".join(
                 c[0] for c in COUNT_COLUMNS) + " | halts/req (default) | "
             "IPIs/req (default / poll) | reuse distance |",
             "|---" * (len(COUNT_COLUMNS) + 6) + "|"]
    for build in s["builds"]:
        for pool in sorted(s["pools"]):
            windows = [x["counted"] for x in doc.get("sessions", [])
                       if x["build"] == build and x["pool"] == pool
                       and x.get("counted", {}).get("per_connection")
                       and not x["counted"].get("invalid")]
            row = [doc["configs"].get(build, build), str(pool),
                   str(len(windows))]
            for _, key, digits in COUNT_COLUMNS:
                values = sorted(w["per_connection"].get(key) for w in windows
                                if w["per_connection"].get(key) is not None)
                row.append("%s [%s, %s]" % (
                    _fmt(median(values), digits), _fmt(values[0], digits),
                    _fmt(values[-1], digits)) if values else "–")
            timed = {p: list(cell_runs(doc, build, pool, s["warm_rate"],
                                       p).values())
                     for p in s["policies"]}
            row.append(_fmt(median([r.get("idle", {}).get(
                "halts_per_request") for r in timed.get("default", [])]), 2))
            row.append(" / ".join(_fmt(median([r.get("idle", {}).get(
                "ipis_per_request") for r in timed.get(p, [])]), 2)
                for p in s["policies"]))
            row.append(_fmt(median([r.get("reuse_median")
                                    for rs in timed.values() for r in rs]),
                            0))
            lines.append("| " + " | ".join(row) + " |")
    lines += netrx_growth(doc)
    return lines


def netrx_growth(doc):
    """NET_RX µs per connection of the counted windows, largest pool less
    smallest, per child, per pair."""
    s = doc["settings"]
    pools = sorted(s["pools"])
    parts = []
    for build in s["builds"]:
        per = {}
        for x in doc.get("sessions", []):
            c = x.get("counted", {})
            if x["build"] == build and c.get("per_connection") and \
                    not c.get("invalid"):
                per.setdefault(x["pair"], {})[x["pool"]] = \
                    c["per_connection"]["netrx_us_per_connection"]
        slopes = [(v[pools[-1]] - v[pools[0]]) * 1e3
                  / (pools[-1] - pools[0]) for v in per.values()
                  if pools[0] in v and pools[-1] in v]
        if slopes:
            result = stats.median_ci(slopes)
            parts.append("%s %s ns%s" % (build, stats.fmt_ci(result, 0),
                                         ", no growth detected"
                                         if len(slopes) > 1 and result[1]
                                         <= 0 <= result[2] else ""))
    if not parts:
        return []
    return ["", "NET_RX µs per connection, %d children less %d, per child, "
            "per pair: %s." % (pools[-1], pools[0], "; ".join(parts))]


def sessions_lines(doc):
    sessions = doc.get("sessions", [])
    if not sessions:
        return []
    by_pool = {}
    for x in sessions:
        by_pool.setdefault(x["pool"], []).append(x)
    lines = ["", "## Sessions", "",
             "| children | sessions | start s (max) | warm-up s (max) | "
             "least requests per child after warm-up (min) | session s "
             "(max) |", "|---|---|---|---|---|---|"]
    for pool in sorted(by_pool):
        xs = by_pool[pool]
        lines.append("| %d | %d | %s | %s | %s | %s |" % (
            pool, len(xs), _fmt(max(x.get("start_s", 0) for x in xs), 1),
            _fmt(max(x["warmup"]["seconds"] for x in xs), 1),
            min(x["warmup"]["least_per_child"] for x in xs),
            _fmt(max(x["took_s"] for x in xs), 1)))
    problems = [(x["id"], line) for x in sessions
                for line in x.get("log_problems", [])]
    if problems:
        lines += ["", "Error-log lines: " + "; ".join(
            "%s: %s" % p for p in problems[:20])]
    return lines


def invalid_lines(doc):
    bad = [r for r in doc["runs"] if r.get("invalid")
           and not only_saturated(r["invalid"])]
    lines = ["", "## Invalid runs (left out; their sessions ran again)", ""]
    if not bad:
        return lines + ["None."]
    lines += ["| session | rate | idle policy | why |", "|---|---|---|---|"]
    for r in bad:
        lines.append("| %s | %d | %s | %s |" % (
            r["session"], r["rate"], r.get("idle_policy"),
            "; ".join(r["invalid"])))
    return lines


def write(doc, out_dir):
    """report.md in out_dir."""
    doc["_out_dir"] = out_dir
    s = doc["settings"]
    inv = doc.get("invocations", [])
    took = sum(i.get("elapsed_s", 0) for i in inv)
    commits = {}
    for x in doc.get("sessions", []):
        c = (x.get("commit") or doc["host_state"]["commit"])[:7]
        commits[c] = commits.get(c, 0) + 1
    lines = ["# The pool curve", "",
             "Planned at commit %s; sessions ran at %s (a later commit "
             "differs from the plan's only in files no run executes: "
             "poolcurve.py's NOT_MEASURED). %d invocations of `poolcurve.py "
             "run` (%.0f s in all, each inside a quiet stretch of the shared "
             "machine); seed %s. Builds: %s. Pools %s children (StartServers = "
             "MaxRequestWorkers = ServerLimit, no retirement); open loop at "
             "%s req/s, %d s a run, under idle policies %s; %d pairs. Each "
             "session (one server) warmed up at %d req/s until every child "
             "had served %d requests%s. Server on CPU %s with its receive "
             "softirq (the rig), the generator on CPU %s." % (
                 doc["host_state"]["commit"], ", ".join(
                     "%s (%d sessions)" % kv for kv in commits.items()),
                 len(inv), took, doc["seed"],
                 ", ".join("`%s` (%s)" % (b, doc["configs"].get(b, b))
                           for b in s["builds"]),
                 ", ".join(map(str, s["pools"])),
                 " and ".join(map(str, s["rates"])), s["seconds"],
                 " and ".join(s["policies"]), s["pairs"], s["warm_rate"],
                 s["warm_requests"],
                 "; then, with the build's \"+graceful\" variant, each "
                 "(rate, policy) once more, each run right after a graceful "
                 "restart of its own whose new children all waited in "
                 "accept()" if s.get("after_graceful") else "",
                 ",".join(map(str, doc["server_cpus"])),
                 ",".join(map(str, doc["client_cpus"])))]
    lines += ["", "Server CPU µs/request: the server CPU's busy time (the "
              "elapsed time less the tick's idle time; softirq included) "
              "less what other processes ran there, over the requests "
              "served. A run that completed under 97 % of its rate is "
              "counted as saturated (the server's result at that rate) and "
              "left out of the medians; runs during which others took over "
              "5 % of a CPU, or whose generator failed, are invalid and "
              "their session ran again. Ratios are per pair against the "
              "same build's smallest pool at the same rate and policy; "
              "\"no difference detected\" where the interval holds 1."]
    lines += summary_table(doc)
    lines += ["", "## Server CPU per request against the pool"]
    for rate in s["rates"]:
        for policy in s["policies"]:
            lines += curve_table(doc, rate, policy)
    lines += slope_table(doc)
    lines += counts_table(doc)
    lines += sessions_lines(doc)
    lines += invalid_lines(doc)
    lines += ["", "## Builds", "", "| build | module | sha256 |",
              "|---|---|---|"]
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for key, b in doc.get("builds", {}).items():
        module = b.get("module") or "n/a"
        if module.startswith(top + os.sep):
            module = os.path.relpath(module, top)
        lines.append("| %s | %s | %s |" % (key, module, b.get("sha256")))
    lines += ["", "Raw data: results.json (every run, every session, the "
              "plan), latency/*.hist.gz, configs/, raw.log.", ""]
    doc.pop("_out_dir", None)
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    pack.keep_shape(out_dir)
    return path
