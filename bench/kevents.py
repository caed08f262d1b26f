# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Kernel events per connection, from tracepoints (build/kevents, the
programs of bench/kevents/): around one measured run, the server's
system calls, accepts, wake-ups, voluntary and involuntary switches and
page faults (its tasks: the cgroup's at the start and all they fork), and
the NET_RX softirq time on the server's CPUs, with the share spent on
the packets RPS steers there from the rig's veth.  The counts hold on a
busy machine: only the server's own tasks and its packets count.

  with KernelEvents(cgroup_tasks, cpus, prefix, log) as ke:
      ...load...
  ke.result   # {"syscalls": ..., "netrx_ns_ours": ...} or {"error": why}
"""

import json
import os
import select
import signal
import subprocess

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
KEVENTS = os.path.join(TOP, "build", "kevents")
TRACEFS = "/sys/kernel/tracing"


def unavailable():
    """Why the counter cannot run here, or None."""
    if not os.path.exists(KEVENTS):
        return "build/kevents is not built (clang, libbpf and bpftool: " \
               "make bench-build)"
    if os.geteuid() != 0:
        return "needs root (BPF tracepoint programs)"
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        # tracefs is where libbpf finds each tracepoint's id.
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS],
                       capture_output=True, timeout=30)
        if not os.path.isdir(os.path.join(TRACEFS, "events")):
            return "no tracefs at %s" % TRACEFS
    return None


class KernelEvents:
    """build/kevents around a run: counting from __enter__ (once it says
    ready) to __exit__; the counts in .result."""

    def __init__(self, tasks_file, cpus, prefix=(), log=None):
        self.command = list(prefix) + [
            KEVENTS, "--tasks", tasks_file,
            "--cpus", ",".join(str(c) for c in cpus)]
        self.log = log
        self.proc = None
        self.result = {}

    def __enter__(self):
        if self.log:
            self.log.write("$ %s\n" % " ".join(self.command))
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
            self.result = {"error": (line + err).strip()[-300:]
                           or "kevents did not start"}
            self.proc = None
        return self

    def __exit__(self, *exc):
        if not self.proc:
            return False
        self.proc.send_signal(signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        try:
            self.result = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.result = {"error": (err or "no output").strip()[-300:]}
        if self.log:
            self.log.write("%s\n" % json.dumps(self.result))
        return False


def per_connection(counts, connections, requests=None):
    """The figures of the kernel-event table: per connection (accepted by
    the server), per accept, per request."""
    if not counts or "error" in counts or not connections:
        return {}
    requests = requests or connections
    accepts = counts.get("accepts") or 0
    return {
        "syscalls_per_request": counts["syscalls"] / float(requests),
        "wakeups_per_accept": counts["wakeups"] / float(accepts)
        if accepts else None,
        "voluntary_per_request": counts["switches_voluntary"]
        / float(requests),
        "involuntary_per_request": counts["switches_involuntary"]
        / float(requests),
        "faults_per_request": (counts["faults_user"]
                               + counts["faults_kernel"]) / float(requests),
        "netrx_us_per_connection": counts["netrx_ns_ours"] / 1e3
        / float(connections),
        "netrx_packets_per_connection": counts["netrx_packets_ours"]
        / float(connections),
    }


def summarize_rounds(rounds):
    """One entry of the kernel-event table from a configuration's rounds
    at one pool size: each figure's median over the rounds that counted,
    NET_RX's range too, and the rounds' validity."""
    if isinstance(rounds, dict):
        rounds = [rounds]       # a folder from before rounds
    counted = [r for r in rounds if r.get("per_connection")]
    if not counted:
        return {"error": (rounds[0].get("error") if rounds else None)
                or "no round counted"}
    # A round whose rate was not kept (saturated, or the generator late)
    # counted another load: left out while a valid one is there.
    good = [r for r in counted if not r.get("invalid")] or counted
    keys = set().union(*(r["per_connection"] for r in good))
    summary = {"per_connection": {}, "rounds": len(good)}
    for key in keys:
        values = sorted(r["per_connection"][key] for r in good
                        if r["per_connection"].get(key) is not None)
        summary["per_connection"][key] = _median(values)
    netrx = sorted(r["per_connection"]["netrx_us_per_connection"]
                   for r in good)
    summary["netrx_range"] = (netrx[0], netrx[-1])
    for key in ("reuse_median", "cold_share", "rate", "foreign_cpus",
                "concurrency"):
        values = sorted(r[key] for r in good if r.get(key) is not None)
        summary[key] = _median(values)
    summary["invalid"] = sorted({why for r in good
                                 for why in r.get("invalid", [])})
    summary["rounds_left_out"] = len(counted) - len(good)
    return summary


def _median(values):
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else \
        (values[mid - 1] + values[mid]) / 2.0
