# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The rig's kernel-event pass (kevents.py): each configuration at one
rate, with each pool size of the profile's for the prefork servers and
the blocking anchor, in shuffled rounds; suite.py runs it after the
scenarios (--kevent-rounds, --kevent-pools, --kevent-rate), and with
--append adds rounds to a folder's earlier ones."""

import os
import random

import cgroupcpu
import idlepolicy
import kevents
import latency
import rig
import validity
from pfbtest import STOCK_EVENT
from servers import make_server, start_server, server_cpus, target, \
    save_config
from generators import run_openloop
from measures import reuse_distance, thread_counts, thread_delta
from runner import server_plan, scenario_skips, save_progress


def kernel_event_pass(doc, keys, all_configs, args, prof, log, out_dir):
    """Kernel events per connection (kevents.py) for each configuration at
    --kevent-rate, else the fixed50 rate, else the profile's kevent_rate:
    with each pool size of the profile's kevent_pools for the prefork
    servers and the blocking anchor (whose cost may grow with the pool),
    with the first for the others; each on a fresh server warmed up at
    the same rate, with the reuse distance from its access log.  Counts
    are the same from round to round; NET_RX time is a duration, so the
    pass runs kevent_rounds rounds, each in an order shuffled anew, and
    keeps every round (kevents.summarize_rounds gives the medians)."""
    why = kevents.unavailable()
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
            with kevents.KernelEvents(
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
    mean_s = latency.mean_ms(result.get("hist") or {}) / 1e3
    if result.get("rps") and mean_s == mean_s:
        one["concurrency"] = round(result["rps"] * mean_s, 2)
    one["invalid"] = validity.judge_run("kevents", dict(
        result, generator="openloop"), args.max_lag_ms, 1.0)
    if "error" in ke.result:
        one["error"] = ke.result["error"]
    one["per_connection"] = kevents.per_connection(
        ke.result, ke.result.get("accepts") or one["requests"],
        one["requests"])
    # Per thread, from /proc: the children alive throughout (the pool is
    # fixed), their main threads against their lingering threads.
    one["per_connection"].update(thread_delta(
        threads0, threads1, one["requests"],
        ke.result.get("accepts") or one["requests"]))
    return one

