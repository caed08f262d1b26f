# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The idle policy in report.md (report.py calls these): one view of the
runs per policy, so that every table compares configurations under the
same policy; what the policy was (driver, governor, states, haltpoll
parameters); the per-pair effect of polling on each configuration's
server CPU per request; and the counters beside every run (halts, polls,
IPIs, voluntary switches, retransmissions, softnet drops, steal)."""

import math

import idlepolicy
import stats


def policies(doc):
    """The idle policies the runs were made under, default first."""
    found = {r.get("idle_policy", "default") for r in doc["runs"]
             if "skipped" not in r}
    return sorted(found, key=lambda p: (p != "default", p))


def policy_views(doc):
    """[(policy or None, doc with that policy's runs)]: one view when the
    runs have one policy, else one per policy (skipped runs in each)."""
    found = policies(doc)
    if len(found) <= 1:
        return [(None, doc)]
    return [(p, dict(doc, runs=[r for r in doc["runs"] if "skipped" in r
                                or r.get("idle_policy", "default") == p]))
            for p in found]


def heading(policy, doc=None):
    return "" if policy is None else " — idle: %s" % idlepolicy.label(
        policy, (doc or {}).get("idle"))


def _valid(doc, scenario, key, policy):
    return [r for r in doc["runs"] if r["scenario"] == scenario
            and r["config"] == key and "skipped" not in r
            and not r.get("invalid")
            and r.get("idle_policy", "default") == policy]


def cpu_us(run):
    if run.get("server_cpus_s") is not None and run.get("requests"):
        return run["server_cpus_s"] * 1e6 / run["requests"]
    if run.get("server_cpu_s") is not None and run.get("requests"):
        return run["server_cpu_s"] * 1e6 / run["requests"]
    return None


def policy_ratio(doc, scenario, key, get):
    """get(poll run) / get(default run) of the same pair: median [CI],
    and the verdict."""
    base = {r["pair"]: get(r) for r in _valid(doc, scenario, key, "default")}
    ratios = []
    for r in _valid(doc, scenario, key, "poll"):
        b, v = base.get(r["pair"]), get(r)
        if b and v is not None:
            ratios.append(v / b)
    if not ratios:
        return "–"
    result = stats.median_ci(ratios)
    text = stats.fmt_ci(result, 2)
    if len(ratios) > 1 and result[1] <= 1.0 <= result[2]:
        text += ", no difference detected"
    return text


def _fmt(value, digits):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "%.*f" % (digits, value)


def _median(values):
    values = [v for v in values if v is not None]
    return stats.median_ci(values)[0] if values else None


def describe_lines(doc):
    idle = doc.get("idle")
    if not idle:
        return []
    states = ", ".join("%s (exit latency %s µs%s)" % (
        s["name"], s["latency_us"], ", disabled" if s.get("disable") else "")
        for s in idle.get("states", []))
    params = ", ".join("%s %s" % kv for kv in
                       idle.get("guest_haltpoll", {}).items()) or "none"
    not_run = doc.get("idle_policies_not_run", {})
    ok, why = idlepolicy.holdable(idle)
    if ok:
        held = (" `poll` holds /dev/cpu_dma_latency at 0 for the run (the "
                "file kept open with a 0 written), so the governor picks "
                "no state with an exit latency above 0 and idle CPUs poll.")
    elif "poll" in not_run:
        held = ""
    else:
        held = " The idle policy cannot be held on this host: %s." % why
    not_run = "".join(" Not run: %s (%s)." % kv for kv in sorted(
        not_run.items()))
    return ["", "## Idle policy", "",
            "cpuidle driver `%s`, governor `%s`; states: %s; guest "
            "haltpoll parameters: %s; PM QoS CPU latency at the start: %s "
            "µs; the host's halt polling: %s. Policies run: %s.%s%s" % (
                idle.get("driver"), idle.get("governor"), states or "none",
                params, idle.get("cpu_dma_latency_us"),
                idle.get("host_halt_poll"),
                ", ".join("%s (%s)" % (p, idlepolicy.label(p, idle))
                          for p in policies(doc)), not_run, held)]


BESIDE = (("halts/req", "halts_per_request", 2),
          ("polls/req", "polls_per_request", 2),
          ("IPIs/req (call + resched)", "ipis_per_request", 2),
          ("TLB shootdowns/req", "tlb_per_request", 3))


def beside_section(doc):
    """The counters beside every timed run, medians per configuration,
    scenario and policy."""
    scenarios = []
    for r in doc["runs"]:
        if "skipped" not in r and r.get("idle") and \
                r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    if not scenarios:
        return []
    head = ["scenario", "configuration", "idle policy", "valid runs"] + \
        [c[0] for c in BESIDE] + ["voluntary switches/req",
                                  "retransmits/req", "softnet drops",
                                  "steal s"]
    lines = ["", "## Beside every run: halts, IPIs, switches", "",
             "Medians over the valid runs, on the server's CPUs: entries "
             "into a halting idle state and into POLL (cpuidle), "
             "function-call and rescheduling IPIs and TLB shootdowns "
             "(/proc/interrupts), the server's voluntary context switches "
             "(its processes' sleeps), TCP retransmissions (nstat), softnet "
             "drops (/proc/net/softnet_stat) and steal (/proc/stat), per "
             "request served.", "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for scenario in scenarios:
        for key in doc["configs"]:
            for policy in policies(doc):
                runs = _valid(doc, scenario, key, policy)
                if not runs:
                    continue
                row = [scenario, doc["configs"][key],
                       idlepolicy.label(policy, doc.get("idle")),
                       str(len(runs))]
                row += [_fmt(_median([r["idle"].get(k) for r in runs]), d)
                        for _, k, d in BESIDE]
                row += [_fmt(_median([r.get("ctx_voluntary", 0)
                                      / float(r["requests"])
                                      for r in runs if r.get("requests")]),
                             2),
                        _fmt(_median([r.get("kernel", {}).get(
                            "nstat", {}).get("TcpRetransSegs", 0)
                            / float(r["requests"]) for r in runs
                            if r.get("requests")]), 4),
                        _fmt(_median([r["idle"].get("softnet_dropped")
                                      for r in runs]), 0),
                        _fmt(_median([r["idle"].get("steal_s")
                                      for r in runs]), 3)]
                lines.append("| " + " | ".join(row) + " |")
    return lines


def effect_section(doc):
    """What polling did to each configuration's server CPU per request
    and p99, per pair."""
    if set(policies(doc)) < {"default", "poll"}:
        return []
    timed = [s for s in dict.fromkeys(r["scenario"] for r in doc["runs"]
                                       if "skipped" not in r)
             if s.startswith(("rate", "fixed", "open", "capacity",
                              "static", "pool"))]
    if not timed:
        return []
    # A folder from a host where poll could not be held, made before
    # such a host's runs dropped poll (idlepolicy.plan), holds runs named
    # poll that did not poll.
    ok, why = idlepolicy.holdable(doc["idle"]) if doc.get("idle") \
        else (True, None)
    title = "What polling changed (per pair: poll ÷ default)" if ok else \
        "Runs named poll did not poll here (%s); per pair: poll ÷ " \
        "default" % why
    lines = ["", "## " + title, "",
             "| scenario | configuration | server CPU µs/req | p99 | req/s "
             "|", "|---|---|---|---|---|"]
    for scenario in timed:
        for key in doc["configs"]:
            if not _valid(doc, scenario, key, "default"):
                continue
            lines.append("| %s | %s | %s | %s | %s |" % (
                scenario, doc["configs"][key],
                policy_ratio(doc, scenario, key, cpu_us),
                policy_ratio(doc, scenario, key, lambda r: r.get("p99")),
                policy_ratio(doc, scenario, key, lambda r: r.get("rps"))))
    return lines
