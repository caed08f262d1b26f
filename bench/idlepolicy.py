# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The guest's idle policy as a variable of a run, and the counters that
show what it did.

On a virtual machine an idle vCPU halts, and the next interrupt or wake-up
for it goes through the hypervisor: tens of µs, where a CPU that polls
sees it in a few.  A process per connection is woken for every connection
and pays that more than an event loop does, so a comparison that does not
hold the policy fixed compares hypervisors as much as servers.  The suite
therefore records the policy with every run and runs timed profiles under
two of them:

  default   nothing held: the cpuidle driver and governor decide (on the
            development VM, `haltpoll` with guest_halt_poll_ns 0: halt at
            once);
  poll      /dev/cpu_dma_latency held at 0 for the run (a PM QoS request
            kept by keeping the file open with a 0 written): the governor
            may pick no state with an exit latency above 0, so an idle CPU
            polls.

A host with no cpuidle state for that latency to bar (current_driver
`none`: the idle loop then waits the architecture's way) cannot hold
`poll`: holdable() says so and why, suite.py leaves poll out there
(plan()) where poolcurve.py and stall.py refuse it (unavailable()), and
describe() and each run's record carry the verdict.

Per run, on the server's CPUs: the busy time (the elapsed time less the
idle time the tick accounts, in ns: see delta() for why not cpuidle's
residency), each cpuidle state's entries and residency, the interrupts of
/proc/interrupts (function-call and rescheduling IPIs, TLB shootdowns,
timer ticks), the softnet counters (drops, squeezes, packets RPS brought)
and the steal time of /proc/stat.
"""

import os
import re
import struct
import time

# sysfs's root; PFB_SYSFS names another (a fake tree a test builds), so
# that the decisions below can be checked for a host unlike this one.
SYSFS = "/sys"
DMA_LATENCY = "/dev/cpu_dma_latency"
POLICIES = ("default", "poll")
LABELS = {"default": "idle as configured",
          "poll": "cpu_dma_latency held at 0 (polls)"}
# The /proc/interrupts rows kept per run: IPIs, shootdowns, the tick.
IRQ_ROWS = ("CAL", "RES", "TLB", "LOC", "IWI", "NMI")
# /proc/net/softnet_stat's columns kept (0-based; see net/core/net-procfs.c).
SOFTNET_COLUMNS = {"processed": 0, "dropped": 1, "time_squeeze": 2,
                   "received_rps": 9, "flow_limit": 10}


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def parse_policies(text):
    """'default,poll' -> ['default', 'poll'], refusing unknown names."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    for name in names:
        if name not in POLICIES:
            raise ValueError("unknown idle policy %r (known: %s)"
                             % (name, ", ".join(POLICIES)))
    if len(set(names)) != len(names):
        raise ValueError("an idle policy is named twice: %s" % text)
    return names or ["default"]


def sysfs_root(root=None):
    return root or os.environ.get("PFB_SYSFS") or SYSFS


def cpu_dir(root=None):
    return os.path.join(sysfs_root(root), "devices", "system", "cpu")


def describe(root=None):
    """What decides how an idle vCPU waits, for the run's record: the
    cpuidle driver and governor, each state's name, exit latency and
    whether it is disabled (CPU 0's), the guest haltpoll parameters, the
    PM QoS latency in force now, whether the host's own halt polling
    is visible (it is not, from a guest), and whether the poll policy can
    be held here (holdable())."""
    base = os.path.join(cpu_dir(root), "cpuidle")
    states = []
    cpu0 = os.path.join(cpu_dir(root), "cpu0", "cpuidle")
    for name in sorted(os.listdir(cpu0)) if os.path.isdir(cpu0) else []:
        if re.fullmatch(r"state\d+", name):
            d = os.path.join(cpu0, name)
            states.append({"state": name, "name": _read(d + "/name"),
                           "latency_us": _int(_read(d + "/latency")),
                           "disable": _int(_read(d + "/disable"))})
    params = {}
    haltpoll = os.path.join(sysfs_root(root), "module", "haltpoll",
                            "parameters")
    if os.path.isdir(haltpoll):
        for name in sorted(os.listdir(haltpoll)):
            params[name] = _read(os.path.join(haltpoll, name))
    idle = {"driver": _read(base + "/current_driver", "none"),
            "governor": _read(base + "/current_governor",
                              _read(base + "/current_governor_ro", "none")),
            "states": states, "guest_haltpoll": params,
            "cpu_dma_latency_us": current_latency(),
            "host_halt_poll": "not visible from the guest"}
    idle["poll_holdable"], why = holdable(idle)
    if why:
        idle["poll_not_holdable"] = why
    return idle


def holdable(idle):
    """(True, None) where holding /dev/cpu_dma_latency at 0 can change how
    an idle CPU waits, given describe()'s record; else (False, why).

    The latency only bars cpuidle states whose exit latency exceeds it.
    Without a cpuidle driver (current_driver missing or `none`) the idle
    loop takes the architecture's default wait and consults no such
    latency; with no state, or only states of exit latency 0, there is
    nothing to bar.  A run under `poll` there would be a `default` run
    under another name."""
    driver = idle.get("driver")
    if driver in (None, "", "none"):
        return False, ("cpuidle driver %s: no idle state for "
                       "/dev/cpu_dma_latency to bar, so holding it at 0 "
                       "changes nothing" % (driver or "missing"))
    states = idle.get("states") or []
    if not states:
        return False, ("cpuidle driver %s has no idle states: nothing for "
                       "/dev/cpu_dma_latency to bar" % driver)
    if all(s.get("latency_us") == 0 for s in states):
        return False, ("every idle state of cpuidle driver %s has exit "
                       "latency 0: /dev/cpu_dma_latency at 0 bars none"
                       % driver)
    return True, None


def plan(policies, idle):
    """(the policies to run, {policy: why it is not run}): `poll` is
    dropped where it cannot be held (holdable()), so that no run is
    called poll that did not poll."""
    ok, why = holdable(idle)
    if ok or "poll" not in policies:
        return list(policies), {}
    return [p for p in policies if p != "poll"], {"poll": why}


def label(policy, idle=None):
    """The policy's name in a report.  A folder made before poll was
    dropped where it cannot be held may hold poll runs from such a host
    (`idle`, its describe() record): they are named for what they were
    (the report's idle-policy section says why)."""
    if policy == "poll" and idle and not holdable(idle)[0]:
        return "poll requested, not held"
    return LABELS.get(policy, policy)


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def current_latency():
    """The PM QoS CPU latency in force (µs), as /dev/cpu_dma_latency reads
    (a native 32-bit integer); None where it cannot be read."""
    try:
        with open(DMA_LATENCY, "rb") as f:
            raw = f.read(4)
    except OSError:
        return None
    return struct.unpack("=i", raw)[0] if len(raw) == 4 else None


class Hold:
    """Holds /dev/cpu_dma_latency at `value` µs while the context lasts
    (policy 'poll': 0); policy 'default' holds nothing.  The request lasts
    as long as the file stays open, so a crash releases it too.  .held
    says what the kernel reported in force once the request was made;
    .holdable and .why_not whether poll could be held on this host
    (holdable()), for every run's record.  Refuses poll where it cannot
    be held, rather than run it as default under poll's name."""

    def __init__(self, policy, value=0):
        self.policy = policy
        self.value = value
        self.fd = None
        self.held = None
        self.holdable = None
        self.why_not = None

    def record(self):
        """The run's fields: the latency held, and whether poll could be
        held here (with the reason where not)."""
        fields = {"idle_held_us": self.held,
                  "idle_policy_holdable": self.holdable}
        if self.why_not:
            fields["idle_policy_not_holdable"] = self.why_not
        return fields

    def __enter__(self):
        self.holdable, self.why_not = holdable(describe())
        if self.policy == "poll" and not self.holdable:
            raise RuntimeError("idle policy poll cannot be held here: %s"
                               % self.why_not)
        if self.policy == "poll":
            self.fd = os.open(DMA_LATENCY, os.O_WRONLY)
            os.write(self.fd, struct.pack("=i", self.value))
            self.held = current_latency()
            if self.held is not None and self.held > self.value:
                os.close(self.fd)
                self.fd = None
                raise RuntimeError("cpu_dma_latency reads %d after writing "
                                   "%d" % (self.held, self.value))
        else:
            self.held = current_latency()
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        return False


def unavailable(policies, idle=None):
    """Why these policies cannot be held here, or None (`idle`: describe()'s
    record, read now if not given)."""
    if "poll" not in policies:
        return None
    ok, why = holdable(idle or describe())
    if not ok:
        return "policy poll cannot be held here: %s" % why
    if not os.access(DMA_LATENCY, os.W_OK):
        return "policy poll needs %s writable (root)" % DMA_LATENCY
    return None


def cpuidle_counts(cpus, root=None):
    """{cpu: {state name: [entries, residency µs]}} on the given CPUs
    (empty where the CPU has no cpuidle states)."""
    counts = {}
    for cpu in cpus:
        d = os.path.join(cpu_dir(root), "cpu%d" % cpu, "cpuidle")
        per = {}
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if not re.fullmatch(r"state\d+", name):
                continue
            sd = os.path.join(d, name)
            per[_read(sd + "/name") or name] = [
                _int(_read(sd + "/usage")) or 0,
                _int(_read(sd + "/time")) or 0]
        counts[cpu] = per
    return counts


def parse_interrupts(text, cpus):
    """/proc/interrupts -> {row: [count on each of cpus]} for IRQ_ROWS and
    the device interrupts (summed as 'devices')."""
    lines = text.splitlines()
    if not lines:
        return {}
    columns = [int(c[3:]) for c in lines[0].split()]
    where = [columns.index(c) for c in cpus if c in columns]
    rows = {"devices": [0] * len(where)}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        fields = rest.split()
        values = []
        for i in where:
            values.append(int(fields[i]) if i < len(fields)
                          and fields[i].isdigit() else 0)
        if name in IRQ_ROWS:
            rows[name] = values
        elif name.isdigit():
            rows["devices"] = [a + b for a, b in zip(rows["devices"], values)]
    return rows


def parse_softnet(text, cpus):
    """/proc/net/softnet_stat -> {column: sum over cpus} (rows carry their
    CPU in column 12 on kernels that print it, else they go in order)."""
    sums = {k: 0 for k in SOFTNET_COLUMNS}
    for row_no, line in enumerate(text.splitlines()):
        fields = [int(x, 16) for x in line.split()]
        cpu = fields[12] if len(fields) > 12 else row_no
        if cpu not in cpus:
            continue
        for key, col in SOFTNET_COLUMNS.items():
            if col < len(fields):
                sums[key] += fields[col]
    return sums


def tick_idle_ns(cpus):
    """{cpu: idle ns} from /proc/timer_list (root): the tick's own idle
    accounting, which stops while an interrupt and the softirqs at its exit
    run; None where the file cannot be read."""
    text = _read("/proc/timer_list")
    if text is None:
        return None
    found, cpu = {}, None
    for line in text.splitlines():
        m = re.match(r"cpu: (\d+)$", line)
        if m:
            cpu = int(m.group(1))
            continue
        m = re.match(r"\s+\.idle_sleeptime\s*:\s*(\d+) nsecs", line)
        if m and cpu in cpus:
            found[cpu] = int(m.group(1))
    return found if len(found) == len(cpus) else None


def steal_seconds(cpus):
    ticks = float(os.sysconf("SC_CLK_TCK"))
    total = 0
    for line in (_read("/proc/stat", "") or "").splitlines():
        m = re.match(r"cpu(\d+)\s+(.*)", line)
        if m and int(m.group(1)) in cpus:
            fields = m.group(2).split()
            total += int(fields[7]) if len(fields) > 7 else 0
    return total / ticks


class Snapshot:
    """The counters of the server's CPUs at one moment."""

    def __init__(self, cpus):
        self.cpus = list(cpus)
        self.time = time.monotonic()
        self.idle = cpuidle_counts(self.cpus)
        self.tick_idle = tick_idle_ns(self.cpus)
        self.irqs = parse_interrupts(_read("/proc/interrupts", ""),
                                     self.cpus)
        self.softnet = parse_softnet(_read("/proc/net/softnet_stat", ""),
                                     self.cpus)
        self.steal = steal_seconds(self.cpus)


def delta(before, after):
    """What the server's CPUs did between two snapshots, summed over them:
    elapsed; busy and idle seconds from the tick's idle accounting
    (/proc/timer_list; else from cpuidle residency); the idle seconds
    cpuidle's residency gives, entries into each state (polls: POLL,
    halts: every other state); interrupts by row; softnet counters; steal.

    Residency is not the busy time's source because an interrupt that
    wakes a halted CPU, and the softirqs that run as it returns, are
    served inside the halt state's residency window (the state's enter
    returns after them), while the tick stops counting idle for them: on
    the development VM, about 2 µs per wake-up counted idle by cpuidle
    and busy by the tick, more where the softirq walks a wait queue."""
    elapsed = after.time - before.time
    entries, residency = {}, {}
    for cpu in before.cpus:
        b, a = before.idle.get(cpu, {}), after.idle.get(cpu, {})
        for name in a:
            entries[name] = entries.get(name, 0) + a[name][0] \
                - b.get(name, [0, 0])[0]
            residency[name] = residency.get(name, 0) + a[name][1] \
                - b.get(name, [0, 0])[1]
    cpuidle_s = sum(residency.values()) / 1e6 if residency else None
    tick_s = None
    if before.tick_idle is not None and after.tick_idle is not None:
        tick_s = sum(after.tick_idle[c] - before.tick_idle[c]
                     for c in before.cpus) / 1e9
    idle_s = tick_s if tick_s is not None else cpuidle_s
    ncpus = len(before.cpus)
    busy = max(0.0, elapsed * ncpus - idle_s) if idle_s is not None \
        else None
    irqs = {row: sum(a - b for a, b in zip(after.irqs.get(row, []),
                                           before.irqs.get(row, [])))
            for row in after.irqs}
    return {"elapsed_s": round(elapsed, 4),
            "busy_s": round(busy, 5) if busy is not None else None,
            "idle_s": round(idle_s, 5) if idle_s is not None else None,
            "idle_source": "tick" if tick_s is not None else "cpuidle",
            "idle_s_cpuidle": round(cpuidle_s, 5)
            if cpuidle_s is not None else None,
            "entries": entries,
            "residency_s": {k: round(v / 1e6, 5)
                            for k, v in residency.items()},
            "polls": sum(v for k, v in entries.items() if k == "POLL"),
            "halts": sum(v for k, v in entries.items() if k != "POLL"),
            "irqs": irqs,
            "softnet": {k: after.softnet[k] - before.softnet.get(k, 0)
                        for k in after.softnet},
            "steal_s": round(after.steal - before.steal, 4)}


def per_request(d, requests):
    """The figures beside a run: halts, IPIs (function call +
    rescheduling), TLB shootdowns per request; softnet drops and steal."""
    if not d or not requests:
        return {}
    irqs = d.get("irqs", {})
    return {"halts_per_request": d["halts"] / float(requests),
            "polls_per_request": d["polls"] / float(requests),
            "ipis_per_request": (irqs.get("CAL", 0) + irqs.get("RES", 0))
            / float(requests),
            "call_ipis_per_request": irqs.get("CAL", 0) / float(requests),
            "resched_ipis_per_request": irqs.get("RES", 0) / float(requests),
            "tlb_per_request": irqs.get("TLB", 0) / float(requests),
            "softnet_dropped": d["softnet"].get("dropped", 0),
            "steal_s": d["steal_s"]}
