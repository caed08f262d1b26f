# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The rig's sections of report.md (report.py calls them): every
configuration side by side (peak, CPU per request and tails at the fixed
rates, with 95 % intervals and per-pair ratios to stock prefork), the
kernel events per connection, and how busy the host was."""

import math
import re

import kevents
import stats

RIG_ORDER = ("stock", "stock-ratio1", "stock-src", "stock-src-onelistener",
             "pfb-shipped", "pfb-1", "pfb-N-idle", "pfb-N-local", "event",
             "event-tuned", "nginx", "nginx-tuned", "anchor-epoll",
             "anchor-blocking", "anchor-blocking-linger", "pfb-floor")


def _valid(doc, scenario, key):
    return [r for r in doc["runs"] if r["scenario"] == scenario
            and r["config"] == key and "skipped" not in r
            and not r.get("invalid")]


def _all(doc, scenario, key):
    return [r for r in doc["runs"] if r["scenario"] == scenario
            and r["config"] == key and "skipped" not in r]


def server_cpu_us(run):
    """The rig's server CPU per request: what the server's CPUs did,
    softirq included, less others' time there (suite.one_run)."""
    if not run.get("requests") or run.get("server_cpus_s") is None:
        return None
    return run["server_cpus_s"] * 1e6 / run["requests"]


def ci(values, digits):
    return stats.fmt_ci(stats.median_ci(values), digits) if values else "–"


def ratio_cell(doc, scenario, key, get, digits=2):
    """Per-pair ratio to stock prefork with its interval, and "no
    difference detected" where the interval holds 1."""
    runs = _valid(doc, scenario, key)
    base = _valid(doc, scenario, doc.get("baseline", "stock"))
    ratios = stats.paired_ratios(runs, base, get)
    if not ratios:
        return "–"
    result = stats.median_ci(ratios)
    text = stats.fmt_ci(result, digits)
    if len(ratios) > 1 and result[1] <= 1.0 <= result[2]:
        text += ", no difference detected"
    return text


def counted(doc, key, scenarios):
    """'valid/all' per scenario."""
    return " / ".join("%d/%d" % (len(_valid(doc, s, key)),
                                 len(_all(doc, s, key))) for s in scenarios)


def fixed_names(doc):
    """The fixed-rate scenarios of a run: fixedNN (a share of the slowest
    peak) and rateN (N req/s), in the order of their rates."""
    names = {r["scenario"] for r in doc["runs"]
             if re.fullmatch(r"(fixed|rate)\d+", r["scenario"])}
    return sorted(names, key=lambda n: (n.startswith("rate"),
                                        int(re.sub(r"\D", "", n))))


def rate_label(doc, name):
    """'1000 req/s' for rate1000, '50 % of the slowest peak' for fixed50."""
    if name.startswith("rate"):
        return "%s req/s" % name[4:]
    return "%s %% of the slowest peak" % name[5:]


def rig_section(doc):
    """The rig's table of every configuration, when this run was on it:
    capacity (capacity.py), and at each fixed rate the server CPU per
    request and the tails; the closed-loop peak where the run had one."""
    if not doc.get("rig"):
        return []
    rig = doc["rig"]
    fixed = fixed_names(doc)
    rates = doc.get("open_rates", {})
    basis = doc.get("fixed_basis", {})
    has_peak = any(r["scenario"] == "static-close" for r in doc["runs"])
    has_cap = any(r["scenario"] == "capacity" for r in doc["runs"])
    keys = [k for k in RIG_ORDER if k in doc["configs"]] + \
        [k for k in doc["configs"] if k not in RIG_ORDER]
    notes = []
    for n in fixed:
        if n.startswith("fixed"):
            notes.append("`%s`: %s req/s offered (%s %% of %s's peak, %.0f%s)"
                         % (n, rates.get(n), n[5:],
                            basis.get(n, {}).get("config"),
                            basis.get(n, {}).get("peak", float("nan")),
                            ", from runs whose closed loop stalled: a "
                            "lower bound" if basis.get(n, {}).get("stalled")
                            else ""))
        else:
            notes.append("`%s`: %s req/s offered" % (n, n[4:]))
    lines = ["", "## The rig: every configuration on one server CPU", "",
             "Server and its receive softirq on CPU %s (network namespace "
             "%s, RPS on its end of the veth pair), generators on CPU %s "
             "(build/openloop at fixed rates%s). %s. Medians [95 %% CI] over "
             "the valid runs; ratios to stock prefork per pair, with \"no "
             "difference detected\" where the interval holds 1. Server CPU "
             "µs/request: the server CPU's busy time (the elapsed time less "
             "the tick's idle time, softirq included) less what other "
             "processes ran there, over the requests served.%s" % (
                 ",".join(map(str, rig["server_rps_cpus"])),
                 rig.get("server_ns"),
                 ",".join(map(str, rig["client_rps_cpus"])),
                 "; wrk in closed loop for the peak, %s connections"
                 % doc["settings"].get("connections") if has_peak else "",
                 "; ".join(notes) or "no fixed-rate scenario",
                 " Capacity: the highest rate of the ladder completed at "
                 "97 %% or more with p99 at most 10 ms, stepped on one "
                 "warmed server (capacity.py)." if has_cap else ""), ""]
    head = ["configuration"]
    if has_cap:
        head += ["capacity req/s", "× stock, capacity"]
    if has_peak:
        head += ["peak req/s", "× stock, peak", "server CPU µs/req, peak"]
    for n in fixed:
        head += ["CPU µs/req at %s" % rate_label(doc, n),
                 "× stock, CPU at %s" % rate_label(doc, n),
                 "p99 ms at %s" % rate_label(doc, n),
                 "p99.9 ms at %s" % rate_label(doc, n)]
    used = (["capacity"] if has_cap else []) + \
        (["static-close"] if has_peak else []) + fixed
    head.append("valid runs (%s)" % " / ".join(used))
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for key in keys:
        if not any(_all(doc, n, key) for n in used):
            continue
        row = [doc["configs"][key]]
        if has_cap:
            row += [ci([r["rps"] for r in _valid(doc, "capacity", key)], 0),
                    ratio_cell(doc, "capacity", key, lambda r: r["rps"])]
        if has_peak:
            peak = _valid(doc, "static-close", key)
            row += [ci([r["rps"] for r in peak], 0),
                    ratio_cell(doc, "static-close", key, lambda r: r["rps"]),
                    ci([server_cpu_us(r) for r in peak], 1)]
        for n in fixed:
            runs = _valid(doc, n, key)
            row += [ci([server_cpu_us(r) for r in runs], 1),
                    ratio_cell(doc, n, key, server_cpu_us),
                    ci([r.get("p99") for r in runs], 2),
                    ci([r.get("p99.9") for r in runs], 2)]
        row.append(counted(doc, key, used))
        lines.append("| " + " | ".join(row) + " |")
    if has_peak:
        lines += ["", "Where the server CPU was not saturated at the peak "
                  "(idle %s), the generator's CPU set the peak: a lower "
                  "bound." % peak_idle_note(doc, keys)]
    lines += host_busy_lines(doc)
    return lines


def peak_idle_note(doc, keys):
    """The configurations whose server CPU idled over 5 % at the peak."""
    idle = []
    for key in keys:
        shares = []
        for r in _valid(doc, "static-close", key):
            rig = r.get("rig", {})
            if rig.get("elapsed_s"):
                shares.append(1.0 - rig["server_cpus_busy_s"]
                              / (rig["elapsed_s"]
                                 * len(doc["rig"]["server_rps_cpus"])))
        if shares and stats.median_ci(shares)[0] > 0.05:
            idle.append("%s %.0f %%" % (key, 100 * stats.median_ci(shares)[0]))
    return ", ".join(idle) if idle else "none"


def host_busy_lines(doc):
    """How much the host's other processes took, over every run."""
    shares = [r["rig"]["foreign_cpus"] for r in doc["runs"]
              if r.get("rig", {}).get("foreign_cpus") is not None]
    waits = [r["rig"]["quiet_wait"][0] for r in doc["runs"]
             if r.get("rig", {}).get("quiet_wait")]
    if not shares:
        return []
    busy = [r for r in doc["runs"] if any(
        "other processes" in why for why in r.get("invalid", []))]
    return ["", "Other processes took a median %.1f %% of a CPU during the "
            "runs (max %.1f %%); %d of %d runs went over %.0f %% and are "
            "invalid. The runs waited %.0f s in all for a quiet host "
            "(longest %.0f s)." % (
                100 * stats.median_ci(shares)[0], 100 * max(shares),
                len(busy), len(shares),
                100 * doc.get("max_foreign_cpu", 0.05), sum(waits),
                max(waits) if waits else 0)]


KEVENT_COLUMNS = (
    ("system calls/req", "syscalls_per_request", 2),
    ("wake-ups/accept", "wakeups_per_accept", 2),
    ("voluntary switches/req", "voluntary_per_request", 2),
    ("involuntary/req", "involuntary_per_request", 3),
    ("page faults/req", "faults_per_request", 2),
    ("main threads' µs/req", "main_busy_us_per_request", 1),
    ("other threads' µs/req", "thread_busy_us_per_request", 1),
    ("other threads' wake-ups/connection", "thread_wakeups_per_connection",
     2),
)


def _fmt(value, digits):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "%.*f" % (digits, value)


def kevents_section(doc):
    """Kernel events per connection from tracepoints (kevents.py)."""
    ke = doc.get("kevents")
    if not ke:
        why = doc.get("unavailable", {}).get("kevents")
        return ["", "## Kernel events per connection", "",
                "Not run: %s." % why] if why else []
    pools = sorted({int(p) for c in ke["configs"].values() for p in c})
    lines = ["", "## Kernel events per connection (tracepoints)", "",
             "%s rounds, each in a shuffled order, of one run per "
             "configuration and pool at %s req/s offered, %s s, after a "
             "warm-up at the same rate; medians over the rounds that kept "
             "their rate (NET_RX: [min, max]). Counted in the kernel by "
             "build/kevents (raw_syscalls, sched_wakeup, sched_switch, "
             "page_fault_user/kernel of the server's tasks; NET_RX softirq "
             "time on the server's CPU for the packets RPS brought there: "
             "where stock prefork's walk over every child's wait-queue "
             "entry on the listener is paid). Counts hold on a busy host; "
             "NET_RX µs are durations, which others' work stretches (cache, "
             "interrupts, a hypervisor's steal), so a run during which "
             "others took over 5 %% of a CPU says so. "
             "Reuse distance: requests since the serving child's previous "
             "one (access log `%%P`); cold: the share served by a child that "
             "had waited through more than 64 others' requests; "
             "connections at once: the achieved rate times the mean "
             "latency.  Per thread, from /proc (children alive throughout): "
             "the children's main threads' CPU µs per request, and their "
             "other threads' (the lingering thread) µs per request and "
             "wake-ups (sleeps) per connection; µs are durations, as "
             "NET_RX's." % (
                 ke.get("rounds", 1), ke.get("rate"), ke.get("seconds")), ""]
    head = ["configuration", "children"] + [c[0] for c in KEVENT_COLUMNS] \
        + ["NET_RX µs/connection", "packets/connection",
           "reuse distance (median)", "cold share",
           "connections at once (mean)", "achieved req/s"]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    keys = [k for k in RIG_ORDER if k in ke["configs"]] + \
        [k for k in ke["configs"] if k not in RIG_ORDER]
    for key in keys:
        for pool in pools:
            rounds = ke["configs"][key].get(str(pool))
            if not rounds:
                continue
            one = kevents.summarize_rounds(rounds)
            per = one.get("per_connection", {})
            if one.get("error"):
                lines.append("| %s | %d | error: %s |" % (
                    doc["configs"].get(key, key), pool, one["error"][:120]))
                continue
            busy = (one.get("foreign_cpus") or 0) > doc.get(
                "max_foreign_cpu", 0.05)
            row = [doc["configs"].get(key, key), str(pool)]
            row += [_fmt(per.get(k), d) for _, k, d in KEVENT_COLUMNS]
            row += ["%s [%s, %s]%s" % (
                _fmt(per.get("netrx_us_per_connection"), 1),
                _fmt(one["netrx_range"][0], 1), _fmt(one["netrx_range"][1], 1),
                " (busy host: %.0f %% of a CPU)" % (100 * one["foreign_cpus"])
                if busy else ""),
                    _fmt(per.get("netrx_packets_per_connection"), 2),
                    _fmt(one.get("reuse_median"), 0),
                    _fmt(one.get("cold_share"), 2),
                    _fmt(one.get("concurrency"), 2),
                    _fmt(one.get("rate"), 0) + (" (invalid: %s)" % "; ".join(
                        one["invalid"]) if one.get("invalid") else "")]
            lines.append("| " + " | ".join(row) + " |")
    growth = walk_growth(ke, pools)
    if growth:
        lines += ["", "NET_RX µs per connection, %d children − %d, per "
                  "child (the cost of one more wait-queue entry): %s." % (
                      pools[-1], pools[0], growth)]
    return lines


def walk_growth(ke, pools):
    """NET_RX µs per connection, largest pool less smallest, per child, in
    ns: per round (the two pools of a round ran in the same shuffled
    round), the median over the rounds and its interval, and "no growth
    detected" where the interval holds 0."""
    if len(pools) < 2:
        return ""
    parts = []
    for key, by_pool in ke["configs"].items():
        slopes = round_slopes(by_pool.get(str(pools[0])) or [],
                              by_pool.get(str(pools[-1])) or [],
                              pools[-1] - pools[0])
        if not slopes:
            continue
        med, low, high, cov = stats.median_ci(slopes)
        parts.append("%s %s ns%s" % (
            key, stats.fmt_ci((med, low, high, cov), 0),
            ", no growth detected" if len(slopes) > 1 and low <= 0 <= high
            else ""))
    return "; ".join(parts)


def round_slopes(lows, highs, children):
    """Per round: (NET_RX µs per connection with the larger pool - with
    the smaller) / the children between, in ns; rounds where either run
    did not count or did not keep its rate are left out."""
    slopes = []
    for lo, hi in zip(lows, highs):
        a = (lo.get("per_connection") or {}).get("netrx_us_per_connection")
        b = (hi.get("per_connection") or {}).get("netrx_us_per_connection")
        if a is None or b is None or lo.get("invalid") or hi.get("invalid"):
            continue
        slopes.append((b - a) * 1e3 / children)
    return slopes
