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

It holds too the rig's kernel-event pass: each configuration at one rate,
with each pool size of the profile's for the prefork servers and the
blocking anchor, in shuffled rounds; suite.py runs it after the scenarios
(--kevent-rounds, --kevent-pools, --kevent-rate), and with --append adds
rounds to a folder's earlier ones.

  kernel_event_pass(doc, keys, all_configs, args, prof, log, out_dir)

The counter and its figures need only the standard library, so the
reports (report_rig.py, sim/contention.py) import this file without the
suite; the pass imports the suite's modules (servers.py, runner.py ...,
pfbtest from test/) when it runs, from suite.py, which puts them on the
path.
"""

import json
import os
import random
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


def kernel_event_pass(doc, keys, all_configs, args, prof, log, out_dir):
    """Kernel events per connection (KernelEvents) for each configuration at
    --kevent-rate, else the fixed50 rate, else the profile's kevent_rate:
    with each pool size of the profile's kevent_pools for the prefork
    servers and the blocking anchor (whose cost may grow with the pool),
    with the first for the others; each on a fresh server warmed up at
    the same rate, with the reuse distance from its access log.  Counts
    are the same from round to round; NET_RX time is a duration, so the
    pass runs kevent_rounds rounds, each in an order shuffled anew, and
    keeps every round (summarize_rounds gives the medians)."""
    # The suite's modules: only the pass needs them (see the top).
    from runner import scenario_skips, save_progress
    from pfbtest import STOCK_EVENT
    why = unavailable()
    if why:
        doc["unavailable"]["kevents"] = why
        print("kernel events: not run: %s" % why)
        return
    rate = args.kevent_rate or doc.get("open_rates", {}).get("fixed50") \
        or prof["kevent_rate"]
    earlier = doc.get("kevents") or {}
    if earlier and (earlier.get("rate") != rate or earlier.get("seconds")
                    != prof["kevent_seconds"]):
        raise ValueError("--append: the folder's kernel-event pass ran at "
                         "%s req/s for %s s, this one at %s for %s"
                         % (earlier.get("rate"), earlier.get("seconds"),
                            rate, prof["kevent_seconds"]))
    done = earlier.get("rounds", 0)
    doc["kevents"] = {"rate": rate, "seconds": prof["kevent_seconds"],
                      "rounds": done + prof.get("kevent_rounds", 1),
                      "configs": earlier.get("configs", {})}
    cases = []
    for key in keys:
        cfg = dict(all_configs[key], key=key)
        if scenario_skips("static-close", cfg, args):
            continue
        pooled = (cfg["kind"] == "apache" and cfg.get("mpm") != STOCK_EVENT) \
            or cfg.get("binary") == "anchor_blocking"
        cases += [(key, cfg, pool) for pool in (
            prof["kevent_pools"] if pooled else prof["kevent_pools"][:1])]
    for round_no in range(done, doc["kevents"]["rounds"]):
        order = list(cases)
        random.Random("%s/kevents/%d" % (args.seed, round_no)).shuffle(order)
        for key, cfg, pool in order:
            one = kernel_event_run(key, cfg, pool, rate, args, prof, log,
                                   out_dir if round_no == 0 else None)
            doc["kevents"]["configs"].setdefault(key, {}).setdefault(
                str(pool), []).append(one)
            save_progress(doc, out_dir)
            print("kevents %-13s %4d children: %s" % (
                key, pool, one.get("error") or ", ".join(
                    "%s %.2f" % (k, v) for k, v in
                    sorted(one["per_connection"].items()) if v is not None)))


def kernel_event_run(key, cfg, pool, rate, args, prof, log, out_dir=None):
    """One server with `pool` children (prefork) at `rate`: its kernel
    events, counted from tracepoints around an open-loop run.  With
    out_dir, the server's configuration goes to its configs/."""
    # The suite's modules, as in kernel_event_pass.
    import cgroupcpu
    import idlepolicy
    import rig
    import stats
    import validity
    from servers import make_server, start_server, server_cpus, target, \
        save_config
    from generators import run_openloop
    from measures import reuse_distance, thread_counts, thread_delta
    from runner import server_plan
    pool_prof = dict(prof, workers=pool, start=pool)
    plan = server_plan("kevents", pool_prof, args, {})
    secs = prof["kevent_seconds"]
    log.write("\n### kevents %s, %d children, %d req/s\n" % (key, pool, rate))
    tag = "%s-kevents-%d" % (key, pool)
    with cgroupcpu.ServerCgroup(tag) as cgroup, \
            cgroupcpu.ServerCgroup(tag + "-gen") as gen_cgroup:
        with make_server(cfg, args, plan, cgroup) as srv:
            start_server(srv, cfg, plan)
            if out_dir:
                save_config(srv, key, "kevents-%d" % pool, out_dir)
            args.generator_wrapper = gen_cgroup.wrapper()
            url = target(srv, cfg, {})
            run_openloop(args, url, "%d:%d" % (max(1, prof.get("warmup", 1)),
                                               rate), log=log)
            if not cfg.get("path"):
                srv.wait_access_log(1, timeout=30)
            logged = len(srv.access_log_lines())
            kids = srv.children()
            threads0 = thread_counts(kids)
            host0 = args.rig.sample([cgroup.path, gen_cgroup.path])
            # The counter on the generator's CPUs, in its cgroup: what it
            # spends is not the host's other work.
            with KernelEvents(
                    os.path.join(cgroup.path or "", "tasks"),
                    server_cpus(args), gen_cgroup.wrapper()
                    + ["taskset", "-c", args.client_cpus], log) as ke:
                idle0 = idlepolicy.Snapshot(server_cpus(args))
                result = run_openloop(args, url, "%d:%d" % (secs, rate),
                                      log=log)
                idle = idlepolicy.delta(idle0, idlepolicy.Snapshot(
                    server_cpus(args)))
            host = rig.foreign(host0, args.rig.sample(
                [cgroup.path, gen_cgroup.path]), server_cpus(args))
            threads1 = thread_counts(kids)
            args.generator_wrapper = None
            if not cfg.get("path"):
                srv.wait_access_log(logged + result.get("requests", 0),
                                    timeout=30)
            # The reuse distance of the measured requests only.
            lines = srv.access_log_lines()[logged:]
    one = {"requests": result.get("requests", 0),
           "offered_rate": result.get("offered_rate"),
           "rate": result.get("rps"), "errors": result.get("errors", {}),
           "send_lag_p99": result.get("send_lag_p99"),
           "counts": ke.result, "log_problems": srv.log_problems[:20],
           "foreign_cpus": host["foreign_cpus"], "idle_policy": "default",
           "idle": dict(idle, **idlepolicy.per_request(
               idle, result.get("requests", 0)))}
    one.update(reuse_distance(lines))
    # Little's law: connections in the server at once, on average.
    mean_s = stats.hist_mean_ms(result.get("hist") or {}) / 1e3
    if result.get("rps") and mean_s == mean_s:
        one["concurrency"] = round(result["rps"] * mean_s, 2)
    one["invalid"] = validity.judge_run("kevents", dict(
        result, generator="openloop"), args.max_lag_ms, 1.0)
    if "error" in ke.result:
        one["error"] = ke.result["error"]
    one["per_connection"] = per_connection(
        ke.result, ke.result.get("accepts") or one["requests"],
        one["requests"])
    # Per thread, from /proc: the children alive throughout (the pool is
    # fixed), their main threads against their lingering threads.
    one["per_connection"].update(thread_delta(
        threads0, threads1, one["requests"],
        ke.result.get("accepts") or one["requests"]))
    return one

