#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The pool curve on the rig: what a pool of 64 to 4096 children costs
each request, at fixed rates, under both idle policies.

  python3 bench/poolcurve.py run --out DIR --budget-s 540
      # the next sessions of DIR's plan that fit in 540 s; run it again
      # (each time inside /work/coord/quiet on the shared machine) until
      # it says the plan is done
  python3 bench/poolcurve.py report DIR     # DIR/report.md again
  python3 bench/poolcurve.py warmth --build stock --pool 512
      # faults and CPU per request, rotation by rotation through a fresh
      # pool: how much warm-up a pool needs

A session is one server: a build (Debian's prefork, httpd 2.4.62's
prefork built here with and without the upstream patch, this MPM with
one bucket) with a fixed pool (StartServers = MaxRequestWorkers =
ServerLimit = the pool; MaxSpareServers the pool, so none retires).  It
starts, serves a warm-up at the lower rate until every child has served
--warm-requests requests (a child's first requests pay its copy-on-write
faults and first allocations; `warmth` measures how many), then serves
each (rate, idle policy) once, in an order shuffled for the session, each
run --seconds long, open loop (build/openloop), judged as the suite
judges runs (validity.py); last, a counted window at the lower rate under
the kernel-event counter (kevents.py: system calls, wake-ups, sleeps,
faults and NET_RX time per connection), apart from the timed runs because
tracepoints cost CPU.  A pair is one session of every (build, pool), in
an order shuffled for the pair.  The plan (plan.json: every session, seeded
by --seed) is written once; each `run` carries on from where the last one
stopped, so a campaign is many short quiet stretches writing one folder,
and every run records how long it waited for a quiet host and what others
took.  Sessions whose runs were invalid for any reason but saturation
(the server's own result at that rate) are run again, up to --attempts
times.  The folder holds one commit's measurements: `run` refuses a tree with
changes, or one whose commit differs from the plan's in any file a run
executes (NOT_MEASURED lists what may differ: documents, the claims
check, the report); each session records the commit it ran at.

With --after-graceful each session then serves each (rate, idle policy)
once more, each run right after a graceful restart of its own (`-k
graceful`'s signal) whose new children all wait in accept(): a pool that
has served nothing since its fork, as admins' servers are after every
reload.  These runs are reported as the build's "+graceful" variant.
"""

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(TOP, "test"))

from pfbtest import exit_on_sigterm  # noqa: E402
import cgroupcpu  # noqa: E402
import hoststate  # noqa: E402
import idlepolicy  # noqa: E402
import kevents  # noqa: E402
import pack  # noqa: E402
import report_pool  # noqa: E402
import rig  # noqa: E402
import validity  # noqa: E402
from generators import run_openloop, client_cpus  # noqa: E402
from measures import host_info, keep_latencies, reuse_distance  # noqa: E402
from profiles import configs  # noqa: E402
from runner import measure, server_plan, save_progress  # noqa: E402
from servers import (make_server, start_server, server_cpus,  # noqa: E402
                     target, save_config)

BUILDS = ("stock", "stock-src", "stock-src-onelistener", "pfb-1")
POOLS = (64, 512, 2048, 4096)
RATES = (1000, 2500)
# Seconds a session costs beyond its runs, and per child (start, warm-up
# rotation, stop), for --budget-s; refined from the folder's own sessions.
SESSION_FIXED_S = 12.0
SESSION_PER_CHILD_S = 0.012
# A graceful restart's cost per child (fork of the new one, exit of the
# old), for the estimate of an --after-graceful session.
GRACEFUL_PER_CHILD_S = 0.01
AFTER_GRACEFUL = "+graceful"


def plan_sessions(seed, pairs, builds, pools, rates, policies, first=1):
    """Every session of the campaign, pair after pair: in each pair every
    (build, pool) once in a shuffled order, and in each session every
    (rate, policy) once in a shuffled order; seeded, so the plan is the
    same wherever it is made."""
    sessions = []
    for pair in range(first, first + pairs):
        cells = [(b, n) for b in builds for n in pools]
        random.Random("%s/pool/%d" % (seed, pair)).shuffle(cells)
        for build, pool in cells:
            order = [[r, p] for r in rates for p in policies]
            random.Random("%s/pool/%d/%s/%d" % (seed, pair, build, pool)) \
                .shuffle(order)
            sessions.append({"id": "p%d-%s-%d" % (pair, build, pool),
                             "pair": pair, "build": build, "pool": pool,
                             "order": order, "attempt": 1})
    return sessions


def session_estimate(doc, pool, runs, seconds):
    """Seconds a session of `pool` children will take: the folder's own
    sessions of that pool where there are some, else a bound from the
    fixed and per-child costs."""
    took = [s["took_s"] for s in doc.get("sessions", [])
            if s["pool"] == pool and s.get("took_s")]
    if took:
        return max(took)
    settings = doc["settings"]
    warm = pool * settings["warm_requests"] / float(settings["warm_rate"])
    estimate = SESSION_FIXED_S + SESSION_PER_CHILD_S * pool + \
        1.5 * warm + runs * (seconds + 2.0)
    if settings.get("after_graceful"):
        estimate += runs * (seconds + 2.0 + GRACEFUL_PER_CHILD_S * pool
                            + 5.0)
    return estimate


def needs_again(doc, session):
    """Whether a session's runs hold a reason to run it again: any run
    invalid for something other than saturating at its rate."""
    for r in doc["runs"]:
        if r.get("session") == session["id"] and r.get("invalid") and \
                not report_pool.only_saturated(r["invalid"]):
            return True
    return False


def pending(doc, max_attempts):
    """The sessions still to run: the plan's not yet run, then a new
    attempt of each run one whose runs need it."""
    done = {s["id"] for s in doc.get("sessions", [])}
    todo = [s for s in doc["plan"] if s["id"] not in done]
    if todo:
        return todo
    again = []
    for s in doc["plan"]:
        latest = max(x["attempt"] for x in doc["plan"] if x["pair"] ==
                     s["pair"] and x["build"] == s["build"]
                     and x["pool"] == s["pool"])
        if s["attempt"] == latest and s["attempt"] < max_attempts and \
                needs_again(doc, s):
            again.append(dict(s, id="%s-a%d" % (s["id"].split("-a")[0],
                                                 s["attempt"] + 1),
                              attempt=s["attempt"] + 1))
    doc["plan"] += again
    return again


def served_per_child(srv):
    """Requests per current child, from the access log's %P."""
    counts = collections.Counter()
    for line in srv.access_log_lines():
        fields = line.split()
        if len(fields) > 2 and fields[1].isdigit():
            counts[int(fields[1])] += 1
    return [counts.get(pid, 0) for pid in srv.children()]


def warm_up(srv, cfg, args, size, need, rate, log):
    """Loads the server at `rate` in one-second rounds until every child
    has served `need` requests (a FIFO queue of accept() waiters rotates
    through the whole pool below saturation), for at most twice the time
    that takes at the rate.  Returns what it did."""
    started = time.time()
    cap = max(5.0, 2.0 * need * size / float(rate))
    url = target(srv, cfg, {})
    requests = 0
    while True:
        result = run_openloop(args, url, "1:%d" % rate, log=log)
        requests += result.get("requests", 0)
        srv.wait_access_log(requests, timeout=30)
        counts = served_per_child(srv)
        low = min(counts) if counts else 0
        if low >= need or time.time() - started >= cap:
            break
    took = round(time.time() - started, 1)
    log.write("# warm-up: %d requests, every child at least %d, in %s s\n"
              % (requests, low, took))
    return {"seconds": took, "requests": requests, "least_per_child": low,
            "children": len(counts), "reached": low >= need}


def timed_run(srv, cfg, cgroups, args, rate, policy, seconds, log):
    """One timed run on the session's server: quiet wait, the policy
    held, `seconds` at `rate`."""
    quiet = rig.wait_quiet(args.rig, args.quiet_wait, args.max_foreign_cpu,
                           log)
    url = target(srv, cfg, {})
    logged = len(srv.access_log_lines())
    with idlepolicy.Hold(policy) as hold:
        args.generator_wrapper = cgroups[1].wrapper()
        result = measure(srv, cgroups, args, log, lambda: run_openloop(
            args, url, "%d:%d" % (seconds, rate), log=log))
    result["idle_policy"] = policy
    result.update(hold.record())
    result["rig"]["quiet_wait"] = quiet
    srv.wait_access_log(logged + result.get("requests", 0), timeout=30)
    result.update(reuse_distance(srv.access_log_lines()[logged:]))
    return result

# accept() and accept4() on x86_64 and aarch64 (/proc/PID/syscall's first
# field while a process is in a system call).
ACCEPT_SYSCALLS = {"x86_64": ("43", "288"), "aarch64": ("202", "242")}


def in_accept(pid):
    """Whether a process sleeps in accept(): waits on its listener's queue."""
    calls = ACCEPT_SYSCALLS.get(os.uname().machine, ())
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] in calls
    except (OSError, IndexError):
        return False


def restart_gracefully(srv, pool, log, timeout=300):
    """The graceful restart's signal, then a wait, without a request (one
    would warm a child), until the server's children are `pool` new ones,
    each waiting in accept(), and none of the old generation is left.
    Returns what it saw."""
    old = set(srv.children())
    started = time.time()
    srv.graceful()
    while True:
        kids = set(srv.children())
        new = kids - old
        waiting = sum(1 for pid in new if in_accept(pid))
        if len(new) >= pool and not kids & old and waiting >= pool:
            break
        if time.time() - started > timeout:
            raise RuntimeError("graceful restart: %d of %d new children "
                               "waiting, %d old left after %d s"
                               % (waiting, pool, len(kids & old), timeout))
        time.sleep(0.05)
    took = round(time.time() - started, 1)
    log.write("# graceful restart: %d new children waiting in %s s\n"
              % (waiting, took))
    return {"seconds": took, "children": len(new), "waiting": waiting}


def counted_window(srv, cfg, cgroups, args, rate, seconds, log):
    """The kernel events of `seconds` at `rate` (default policy)."""
    why = kevents.unavailable()
    if why:
        return {"error": why}
    url = target(srv, cfg, {})
    with kevents.KernelEvents(
            os.path.join(cgroups[0].path or "", "tasks"), server_cpus(args),
            cgroups[1].wrapper() + ["taskset", "-c", args.client_cpus],
            log) as ke:
        args.generator_wrapper = cgroups[1].wrapper()
        result = run_openloop(args, url, "%d:%d" % (seconds, rate), log=log)
        args.generator_wrapper = None
    one = {"requests": result.get("requests", 0), "rate": result.get("rps"),
           "counts": ke.result, "send_lag_p99": result.get("send_lag_p99"),
           "invalid": validity.judge_run("kevents", dict(
               result, generator="openloop"), args.max_lag_ms, 1.0)}
    one["per_connection"] = kevents.per_connection(
        ke.result, ke.result.get("accepts") or one["requests"],
        one["requests"])
    if "error" in ke.result:
        one["error"] = ke.result["error"]
    return one


def record_run(doc, session, result, config, rate, policy, position,
               args, out_dir):
    """A timed run's result, judged, kept in doc and printed; `config` is
    the build, or its "+graceful" variant."""
    pool = session["pool"]
    result.update({"scenario": "rate%d" % rate, "rate": rate,
                   "config": config, "pool": pool,
                   "pair": session["pair"], "session": session["id"],
                   "attempt": session["attempt"], "position": position})
    keep_latencies(result, "pool%d-rate%d" % (pool, rate),
                   "%s-%s-a%d" % (config, policy, session["attempt"]),
                   session["pair"], out_dir)
    result["invalid"] = validity.judge_run(
        "rate%d" % rate, result, args.max_lag_ms, args.max_foreign_cpu)
    doc["runs"].append(result)
    print("%-26s %-16s %4d req/s %-7s cpu %6s us/req  p99 %7.2f ms%s"
          % (session["id"], config, rate, policy,
             "%.1f" % report_pool.cpu_us(result)
             if report_pool.cpu_us(result) else "-",
             result.get("p99") or float("nan"),
             "  INVALID: " + "; ".join(result["invalid"])
             if result["invalid"] else ""))
    sys.stdout.flush()


def after_graceful_runs(doc, session, srv, cfg, cgroups, args, log,
                        out_dir):
    """Each (rate, policy) of the session once more, in the same order,
    each right after a graceful restart of its own."""
    settings = doc["settings"]
    restarts = []
    for position, (rate, policy) in enumerate(session["order"]):
        restarts.append(restart_gracefully(srv, session["pool"], log))
        result = timed_run(srv, cfg, cgroups, args, rate, policy,
                           settings["seconds"], log)
        result["graceful_restart"] = restarts[-1]
        record_run(doc, session, result, session["build"] + AFTER_GRACEFUL,
                   rate, policy, position, args, out_dir)
    return restarts


def run_session(doc, session, all_configs, args, log, out_dir):
    """One server: start, warm up, the session's timed runs in its order,
    the counted window, stop."""
    cfg = dict(all_configs[session["build"]], key=session["build"])
    pool = session["pool"]
    settings = doc["settings"]
    prof = {"workers": pool, "start": pool, "seconds": settings["seconds"]}
    plan = server_plan("pool%d" % pool, prof, args, {})
    record = {"id": session["id"], "pair": session["pair"],
              "commit": doc["invocations"][-1].get("commit"),
              "build": session["build"], "pool": pool,
              "attempt": session["attempt"],
              "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}
    began = time.time()
    log.write("\n### session %s\n" % session["id"])
    rig.wait_quiet(args.rig, args.quiet_wait, args.max_foreign_cpu, log)
    tag = "pool-%s" % session["id"]
    with cgroupcpu.ServerCgroup(tag) as cgroup, \
            cgroupcpu.ServerCgroup(tag + "-gen") as gen_cgroup:
        with make_server(cfg, args, plan, cgroup) as srv:
            t0 = time.time()
            start_server(srv, cfg, plan)
            record["start_s"] = round(time.time() - t0, 1)
            if session["pair"] == 1 and session["attempt"] == 1:
                save_config(srv, session["build"], "pool%d" % pool, out_dir)
            args.generator_wrapper = gen_cgroup.wrapper()
            record["warmup"] = warm_up(
                srv, cfg, args, pool, settings["warm_requests"],
                settings["warm_rate"], log)
            args.generator_wrapper = None
            for position, (rate, policy) in enumerate(session["order"]):
                result = timed_run(srv, cfg, (cgroup, gen_cgroup), args,
                                   rate, policy, settings["seconds"], log)
                record_run(doc, session, result, session["build"], rate,
                           policy, position, args, out_dir)
            record["counted"] = counted_window(
                srv, cfg, (cgroup, gen_cgroup), args, settings["warm_rate"],
                settings["count_seconds"], log)
            if settings.get("after_graceful"):
                record["graceful"] = after_graceful_runs(
                    doc, session, srv, cfg, (cgroup, gen_cgroup), args, log,
                    out_dir)
            record["children_end"] = len(srv.children())
    record["log_problems"] = srv.log_problems[:20]
    record["took_s"] = round(time.time() - began, 1)
    doc.setdefault("sessions", []).append(record)
    save_progress(doc, out_dir)


def new_folder(args, out_dir):
    """The folder's results.json with its plan, settings and host."""
    args.seed = args.seed or str(int(time.time()))
    settings = {"pairs": args.pairs, "seconds": args.seconds,
                "warm_requests": args.warm_requests,
                "warm_rate": args.warm_rate or min(args.rates),
                "after_graceful": args.after_graceful,
                "count_seconds": args.count_seconds,
                "builds": args.builds, "pools": args.pools,
                "rates": args.rates, "policies": args.policies,
                "max_lag_ms": args.max_lag_ms,
                "max_foreign_cpu": args.max_foreign_cpu,
                "quiet_wait": args.quiet_wait, "attempts": args.attempts,
                "prediction": args.prediction}
    return {"kind": "poolcurve", "host": host_info(),
            "host_state": hoststate.host_state(),
            "idle": idlepolicy.describe(), "seed": args.seed,
            "settings": settings, "server_cpus": server_cpus(args),
            "client_cpus": client_cpus(args),
            "configs": dict(
                {k: configs(args)[k]["label"] for k in args.builds},
                **{k + AFTER_GRACEFUL: configs(args)[k]["label"]
                   + ", right after a graceful restart"
                   for k in args.builds if args.after_graceful}),
            "builds": hoststate.build_identities(
                {k: configs(args)[k] for k in args.builds}),
            "plan": plan_sessions(args.seed, args.pairs, args.builds,
                                  args.pools, args.rates, args.policies),
            "runs": [], "sessions": [], "invocations": []}


# What may differ between the commit a folder was planned at and the one
# a later stretch runs at: what no run executes, and the report, whose
# reading of saturation also decides which sessions run again.
NOT_MEASURED = ("docs", "README.md", "CONTRIBUTING.md", "bench/README.md",
                "bench/results", "tools/check", "bench/report_pool.py")


def same_measurement(planned, commit, allow_dirty=False):
    """Why a tree at `commit` may not add to a folder planned at
    `planned`, or None: it has changes, or it differs from the plan's
    commit in a file that a run executes (anything outside
    NOT_MEASURED)."""
    if commit.endswith("-dirty") and not allow_dirty:
        return "the tree has changes"
    planned, commit = planned.replace("-dirty", ""), \
        commit.replace("-dirty", "")
    if planned == commit:
        return None
    out = subprocess.run(["git", "diff", "--name-only", planned, commit],
                         capture_output=True, text=True, cwd=TOP)
    if out.returncode:
        return "git diff failed: %s" % out.stderr.strip()[:200]
    changed = [f for f in out.stdout.split()
               if not any(f == p or f.startswith(p + "/")
                          for p in NOT_MEASURED)]
    if changed:
        return "files a run executes differ: %s" % ", ".join(changed[:8])
    return None


def cmd_run(args):
    why = rig.unavailable() or idlepolicy.unavailable(args.policies)
    if why:
        print("poolcurve: %s" % why)
        return 2
    out_dir = args.out
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "results.json")
    commit = hoststate.commit()
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
        args.seed = doc["seed"]
        for key in ("pairs", "seconds", "warm_requests", "count_seconds",
                    "builds", "pools", "rates", "policies", "max_lag_ms",
                    "max_foreign_cpu", "quiet_wait", "attempts"):
            setattr(args, key, doc["settings"][key])
        args.warm_rate = doc["settings"]["warm_rate"]
        args.after_graceful = doc["settings"].get("after_graceful", False)
    else:
        doc = new_folder(args, out_dir)
    made = doc["host_state"]["commit"]
    why = same_measurement(made, commit, args.allow_dirty)
    if why:
        print("poolcurve: %s was planned at %s; this tree is at %s: %s"
              % (out_dir, made, commit, why))
        return 2
    all_configs = configs(args)
    for key in args.builds:
        if not os.path.exists(all_configs[key].get("mpm") or ""):
            print("poolcurve: %s is not built (%s)" % (key, all_configs[key]
                                                       .get("needs", "make")))
            return 2
    exit_on_sigterm()
    started = time.time()
    doc["invocations"].append({
        "commit": commit,
        "command": " ".join(["poolcurve.py"] + sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "load_average": hoststate.host_state()["load_average"],
        "host_at_start": rig.host_load()})
    save_progress(doc, out_dir)
    ran = 0
    pack.take_out(os.path.join(out_dir, "raw.log"))
    with open(os.path.join(out_dir, "raw.log"), "a") as log, \
            rig.Rig(server_cpus(args), client_cpus(args), log) as r:
        args.rig = r
        doc["rig"] = r.describe()
        while True:
            todo = pending(doc, args.attempts)
            if not todo:
                break
            session = todo[0]
            need = session_estimate(doc, session["pool"],
                                    len(session["order"]), args.seconds)
            left = args.budget_s - (time.time() - started)
            if need > left and (ran or need > args.budget_s):
                if not ran:
                    print("poolcurve: a session of %d children needs about "
                          "%.0f s, over --budget-s %.0f"
                          % (session["pool"], need, args.budget_s))
                break
            run_session(doc, session, all_configs, args, log, out_dir)
            ran += 1
        args.rig = None
    doc["invocations"][-1]["sessions"] = ran
    doc["invocations"][-1]["elapsed_s"] = round(time.time() - started, 1)
    save_progress(doc, out_dir)
    report_pool.write(doc, out_dir)
    left = len(pending(doc, args.attempts))
    save_progress(doc, out_dir)
    print("poolcurve: %d sessions in %.0f s; %s" % (
        ran, time.time() - started,
        "%d to go: run it again" % left if left else "the plan is done"))
    if not left:
        # The campaign is over: the folder takes its published shape.
        pack.pack(out_dir)
    return 0


def cmd_report(args):
    path = os.path.join(args.folder, "results.json")
    opener = open
    if not os.path.exists(path):
        import gzip
        path += ".gz"
        opener = gzip.open
    with opener(path, "rt") as f:
        doc = json.load(f)
    print(report_pool.write(doc, args.folder))
    return 0


def cmd_warmth(args):
    """Faults and server CPU per request through the first rotations of
    a fresh pool at a rate below saturation (each child serves once per
    rotation: the accept queue's waiters are woken first in, first out)."""
    why = rig.unavailable()
    if why:
        print("poolcurve: %s" % why)
        return 2
    cfg = dict(configs(args)[args.build], key=args.build)
    prof = {"workers": args.pool, "start": args.pool, "seconds": 1}
    rotation_s = max(1, int(round(args.pool / float(args.rate))))
    with open(os.devnull, "w") as log, \
            rig.Rig(server_cpus(args), client_cpus(args), log) as r:
        args.rig = r
        plan = server_plan("pool%d" % args.pool, prof, args, {})
        with cgroupcpu.ServerCgroup("warmth") as cgroup, \
                cgroupcpu.ServerCgroup("warmth-gen") as gen_cgroup:
            with make_server(cfg, args, plan, cgroup) as srv:
                start_server(srv, cfg, plan)
                url = target(srv, cfg, {})
                print("%s, %d children, %d req/s, %d s a rotation"
                      % (args.build, args.pool, args.rate, rotation_s))
                print("rotation  requests  least/child  faults/req  "
                      "server CPU us/req  others' CPU")
                for rotation in range(1, args.rotations + 1):
                    args.generator_wrapper = gen_cgroup.wrapper()
                    res = measure(srv, (cgroup, gen_cgroup), args, log,
                                  lambda: run_openloop(
                                      args, url, "%d:%d" % (rotation_s,
                                                            args.rate)))
                    srv.wait_access_log(sum(served_per_child(srv)) + 1, 5)
                    counts = served_per_child(srv)
                    print("%8d  %8d  %11d  %10.2f  %17s  %.3f" % (
                        rotation, res.get("requests", 0), min(counts),
                        res["minor_faults"] / float(max(1, res.get(
                            "requests", 0))),
                        "%.1f" % report_pool.cpu_us(res)
                        if report_pool.cpu_us(res) else "-",
                        res["rig"]["foreign_cpus"]))
                    sys.stdout.flush()
        args.rig = None
    return 0


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the next sessions of --out's plan")
    run.add_argument("--out", required=True)
    run.add_argument("--budget-s", type=float, default=540,
                     help="start no session that would end after this many "
                     "seconds (default 540)")
    run.add_argument("--pairs", type=int, default=6)
    run.add_argument("--seconds", type=int, default=5,
                     help="each timed run (default 5)")
    run.add_argument("--warm-requests", type=int, default=5,
                     help="requests every child serves before the timed "
                     "runs (default 5; `warmth` shows why)")
    run.add_argument("--warm-rate", type=int,
                     help="the warm-up's rate (default the lowest of "
                     "--rates)")
    run.add_argument("--after-graceful", action="store_true",
                     help="each (rate, policy) once more per session, each "
                     "right after a graceful restart (the build's "
                     "\"+graceful\" variant in the report)")
    run.add_argument("--count-seconds", type=int, default=2,
                     help="the counted window (default 2)")
    run.add_argument("--builds", type=lambda s: s.split(","),
                     default=list(BUILDS))
    run.add_argument("--pools", type=lambda s: [int(x) for x in
                                                s.split(",")],
                     default=list(POOLS))
    run.add_argument("--rates", type=lambda s: [int(x) for x in
                                                s.split(",")],
                     default=list(RATES))
    run.add_argument("--policies", type=idlepolicy.parse_policies,
                     default=list(idlepolicy.POLICIES))
    run.add_argument("--seed")
    run.add_argument("--attempts", type=int, default=3,
                     help="runs of a session at most, when its runs are "
                     "invalid for others' CPU or the generator")
    run.add_argument("--quiet-wait", type=float, default=120)
    run.add_argument("--prediction",
                     help="the model's prediction.json, written and "
                     "committed before the run (contention.py --pool), "
                     "relative to the tree's top; the report sets the "
                     "measured growth beside it")
    run.add_argument("--allow-dirty", action="store_true",
                     help="for a smoke run only: the folder then records "
                     "a -dirty commit")
    rep = sub.add_parser("report", help="DIR/report.md from its results")
    rep.add_argument("folder")
    warmth = sub.add_parser("warmth", help="faults and CPU per request "
                            "through a fresh pool's first rotations")
    warmth.add_argument("--build", default="stock", choices=BUILDS)
    warmth.add_argument("--pool", type=int, default=512)
    warmth.add_argument("--rate", type=int, default=1000)
    warmth.add_argument("--rotations", type=int, default=8)
    for p in (run, warmth):
        p.add_argument("--server-cpus", default="0")
        p.add_argument("--client-cpus", default="1")
        p.add_argument("--max-lag-ms", type=float,
                       default=validity.MAX_LAG_MS)
        p.add_argument("--max-foreign-cpu", type=float,
                       default=validity.MAX_FOREIGN_CPU)
    args = parser.parse_args()
    # What servers.py and runner.py read from the suite's arguments.
    args.buckets = 2
    args.mpm_before = None
    args.conf_base = "debian"
    args.rig = None
    args.generator_wrapper = None
    args.wrk_threads = None
    args.quiet_wait = getattr(args, "quiet_wait", 0)
    return args


def main():
    args = parse_args()
    return {"run": cmd_run, "report": cmd_report,
            "warmth": cmd_warmth}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
