# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Where a stalled closed loop waits: a short trace of scheduler, idle,
IPI, softirq and packet tracepoints on both CPUs while wrk runs, in the
kernel's ring buffer (stall.py trace), and its analysis, which is pure
and unit-tested.

From the trace it finds, per CPU, every idle period (power:cpu_idle entry
to exit) and what woke it: the first interrupt taken in the period (an
interrupt that wakes a halted vCPU is served before the idle state's exit
is traced), or none (a polling CPU sees need_resched without one).  It
finds the periods in which both CPUs were idle at once, when nothing ran
at all, and what ended each: an IPI that had been sent before the period
began and was still on its way (the hypervisor delivering it to a halted
vCPU), a timer, or something else.  And for each IPI sent, how long it
took to reach its target's handler, apart for targets that were idle
when it was sent."""

import re

EVENTS = ("power:cpu_idle", "ipi:ipi_send_cpu",
          "irq_vectors:call_function_single_entry",
          "irq_vectors:call_function_entry",
          "irq_vectors:reschedule_entry", "irq_vectors:local_timer_entry",
          "irq:irq_handler_entry", "irq:softirq_entry", "net:netif_rx",
          "net:netif_receive_skb", "sched:sched_switch",
          "timer:timer_expire_entry", "timer:hrtimer_expire_entry")
# ftrace's text: "comm-pid [cpu] flags seconds: event: fields".
LINE = re.compile(r"^\s*(.*?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+"
                  r"(\w+):\s*(.*)$")
# An instance of our own, so that nobody else's tracing is touched.
INSTANCE = "/sys/kernel/tracing/instances/pfb-stall"
BUFFER_KB = 32768
IDLE_EXIT = 4294967295
WAKERS = ("irq_vectors:call_function_single_entry",
          "irq_vectors:call_function_entry", "irq_vectors:reschedule_entry",
          "irq_vectors:local_timer_entry", "irq:irq_handler_entry")


def parse(text):
    """ftrace's trace lines -> [(time s, cpu, "subsystem:event", fields)],
    in order."""
    full = {e.split(":")[1]: e for e in EVENTS}
    events = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m and m.group(5) in full:
            events.append((float(m.group(4)), int(m.group(3)),
                           full[m.group(5)], m.group(6)))
    events.sort(key=lambda e: e[0])
    return events


def record(seconds, base=INSTANCE):
    """The kernel's own ring buffer, in a tracing instance of ours, for
    `seconds`: no process drains it meanwhile (a tracer that did would
    wake on one of the two CPUs it watches).  The instance's text, or
    raises OSError."""
    import os
    import time
    if not os.path.isdir(base):
        os.mkdir(base)
    try:
        def put(name, value):
            with open(os.path.join(base, name), "w") as f:
                f.write(value)
        put("tracing_on", "0")
        put("trace_clock", "mono")
        put("buffer_size_kb", str(BUFFER_KB))
        put("trace", "")
        for event in EVENTS:
            put(os.path.join("events", event.replace(":", "/"), "enable"),
                "1")
        put("tracing_on", "1")
        time.sleep(seconds)
        put("tracing_on", "0")
        with open(os.path.join(base, "trace")) as f:
            return f.read()
    finally:
        os.rmdir(base)


def _field(fields, name):
    m = re.search(r"\b%s=(\S+)" % name, fields)
    return m.group(1) if m else None


def idle_periods(events, cpus):
    """{cpu: [[start, end, waker]]}: each idle period and the first
    interrupt taken inside it (None: none was)."""
    periods = {c: [] for c in cpus}
    since = {}
    for t, cpu, name, fields in events:
        if cpu not in periods:
            continue
        if name == "power:cpu_idle":
            state = int(_field(fields, "state") or IDLE_EXIT)
            if state != IDLE_EXIT:
                since.setdefault(cpu, [t, None])
            elif cpu in since:
                start, waker = since.pop(cpu)
                periods[cpu].append([start, t, waker])
        elif name in WAKERS and cpu in since and since[cpu][1] is None:
            since[cpu][1] = name.split(":")[1].replace("_entry", "")
    return periods


def both_idle(periods, cpus):
    """[(start, end)] where every CPU of cpus was idle at once."""
    spans = None
    for cpu in cpus:
        mine = [(s, e) for s, e, _ in periods[cpu]]
        if spans is None:
            spans = mine
            continue
        out = []
        i = j = 0
        while i < len(spans) and j < len(mine):
            s = max(spans[i][0], mine[j][0])
            e = min(spans[i][1], mine[j][1])
            if s < e:
                out.append((s, e))
            if spans[i][1] < mine[j][1]:
                i += 1
            else:
                j += 1
        spans = out
    return spans or []


def ipi_delays(events, periods):
    """[(delay s, target was idle when sent)] for each ipi_send_cpu whose
    target took a call-function or reschedule interrupt after it."""
    pending = {}
    out = []
    for t, cpu, name, fields in events:
        if name == "ipi:ipi_send_cpu":
            target = _field(fields, "cpu")
            if target is not None:
                pending.setdefault(int(target), []).append(t)
        elif name in ("irq_vectors:call_function_single_entry",
                      "irq_vectors:call_function_entry",
                      "irq_vectors:reschedule_entry") and pending.get(cpu):
            for sent in pending.pop(cpu):
                out.append((t - sent, _idle_at(periods.get(cpu, []), sent)))
    return out


def _idle_at(spans, t):
    return any(s <= t < e for s, e, _ in spans)


def ended_by(events, span, cpus):
    """What ended a both-idle span: the first interrupt on any CPU inside
    it, and whether an IPI to that CPU was sent before the span began
    (still in flight)."""
    start, end = span
    first = None
    for t, cpu, name, fields in events:
        if t < start:
            continue
        if t > end + 1e-6:
            break
        if cpu in cpus and name in WAKERS:
            first = (t, cpu, name.split(":")[1].replace("_entry", ""))
            break
    if first is None:
        return "no interrupt (a polling CPU, or the trace's edge)"
    in_flight = any(name == "ipi:ipi_send_cpu" and t < start
                    and t > start - 0.01
                    and _field(fields, "cpu") == str(first[1])
                    for t, cpu, name, fields in events)
    if first[2] == "local_timer":
        return "timer %s" % timer_function(events, first[0], first[1])
    if in_flight:
        return "%s sent before both went idle" % first[2]
    return first[2]


def timer_function(events, t, cpu):
    """The first timer a tick that started at t on cpu ran (its function,
    e.g. tcp_delack_timer), or 'tick' when it ran none."""
    for when, c, name, fields in events:
        if when < t or c != cpu:
            continue
        if when > t + 0.0005:
            break
        if name in ("timer:timer_expire_entry",
                    "timer:hrtimer_expire_entry"):
            fn = _field(fields, "function")
            if fn and not fn.startswith(("tick_nohz", "tick_sched")):
                return fn.split("+")[0]
    return "tick"


def summarize(events, cpus):
    """The trace's figures: per CPU idle share, idle periods and wakers;
    both-idle time and what ended it; IPI delivery delays."""
    if not events:
        return {"error": "no events"}
    t0, t1 = events[0][0], events[-1][0]
    span = max(1e-9, t1 - t0)
    periods = idle_periods(events, cpus)
    out = {"seconds": round(span, 4), "cpus": {}}
    for cpu in cpus:
        ps = periods[cpu]
        wakers = {}
        for _, _, w in ps:
            wakers[w or "none"] = wakers.get(w or "none", 0) + 1
        lengths = sorted(e - s for s, e, _ in ps)
        out["cpus"][cpu] = {
            "idle_share": round(sum(lengths) / span, 4),
            "idle_periods": len(ps),
            "median_idle_us": round(1e6 * lengths[len(lengths) // 2], 1)
            if lengths else None,
            "wakers": wakers}
    spans = both_idle(periods, cpus)
    enders = {}
    for s in spans:
        why = ended_by(events, s, cpus)
        enders[why] = enders.get(why, 0) + 1
    lengths = sorted(e - s for s, e in spans)
    out["both_idle"] = {
        "share": round(sum(lengths) / span, 4), "spans": len(spans),
        "median_us": round(1e6 * lengths[len(lengths) // 2], 1)
        if lengths else None,
        "p90_us": round(1e6 * lengths[int(0.9 * (len(lengths) - 1))], 1)
        if lengths else None,
        "ended_by": enders}
    delays = ipi_delays(events, periods)
    for label, want in (("to_idle", True), ("to_busy", False)):
        ds = sorted(d for d, idle in delays if idle is want)
        out["ipi_delay_" + label] = {
            "count": len(ds),
            "median_us": round(1e6 * ds[len(ds) // 2], 1) if ds else None,
            "p90_us": round(1e6 * ds[int(0.9 * (len(ds) - 1))], 1)
            if ds else None}
    return out
